#!/usr/bin/env bash
# tests/fuzz/run_fuzz.sh [SECONDS] [NAME...]: builds the `fuzz` preset (clang, libFuzzer,
# ASan/UBSan) when needed, regenerates the seeds, then runs each fuzz target (raster, volume,
# config by default) for SECONDS (default 600), one after the other. The corpus grows in
# build-fuzz/tests/fuzz/corpus/NAME across runs; crashes, leaks, timeouts and out-of-memory
# inputs land in build-fuzz/tests/fuzz/findings/NAME/ and the log in .../logs/NAME.log.
# Exit status: 0 when no target found anything. JOBS (default 2) sets the build parallelism.
# A finding is replayed with: build-fuzz/tests/fuzz/fuzz_NAME FILE (or the replay build's
# build/tests/fuzz/fuzz_NAME FILE); keep it in tests/fuzz/regressions/NAME/ once fixed.
set -euo pipefail
seconds=${1:-600}
shift || true
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$root/build-fuzz
cd "$root"
if [[ ! -f $build/build.ninja ]]; then
  cmake --preset fuzz >"$root/build-fuzz.configure.log" 2>&1 || {
    tail -20 "$root/build-fuzz.configure.log" >&2
    exit 1
  }
fi
cmake --build "$build" -j "${JOBS:-2}" --target tessera_fuzz_targets
here=$build/tests/fuzz
"$here/tessera-fuzz-seeds" --out "$here/seeds" --import "$root/sample_data" >/dev/null
names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  for name in raster volume config; do
    [[ -x $here/fuzz_$name ]] && names+=("$name")
  done
fi
mkdir -p "$here/logs"
# Go on after slow or memory-hungry inputs (saved under findings/ all the same; see README.md).
# GDCM aborts on some damaged DICOM files, so crashes do not stop the run either: every new
# crash- or leak- input fails this script at the end.
export FUZZ_FLAGS="${FUZZ_FLAGS--fork=1 -ignore_timeouts=1 -ignore_ooms=1 -ignore_crashes=1}"
stamp=$(mktemp)
failed=()
for name in "${names[@]}"; do
  echo "== fuzz_$name: ${seconds} s (log: $here/logs/$name.log)"
  seed_dirs=("$here/seeds/$name")  # run_target.sh fails on a folder that is not there
  [[ -d $root/tests/fuzz/regressions/$name ]] && seed_dirs+=("$root/tests/fuzz/regressions/$name")
  if "$root/tests/fuzz/run_target.sh" "$here/fuzz_$name" "$seconds" "$here/corpus/$name" "$here/findings/$name" \
       "${seed_dirs[@]}" >"$here/logs/$name.log" 2>&1; then
    grep -E '^(stat::number_of_executed_units|Done)' "$here/logs/$name.log" || true
  else
    failed+=("$name")
    grep -E -m 3 'ERROR|SUMMARY|invariant failed|Test unit written' "$here/logs/$name.log" || tail -5 "$here/logs/$name.log"
  fi
done
for name in "${names[@]}"; do
  saved=$(find "$here/findings/$name" -type f -newer "$stamp" 2>/dev/null | wc -l)
  [[ $saved -gt 0 ]] && echo "fuzz_$name: $saved new inputs in $here/findings/$name (crash-, leak-, timeout-, oom-, slow-unit-)"
  if [[ -n $(find "$here/findings/$name" -type f -newer "$stamp" \( -name 'crash-*' -o -name 'leak-*' \) 2>/dev/null) ]] &&
     [[ " ${failed[*]-} " != *" $name "* ]]; then
    failed+=("$name")
  fi
done
rm -f "$stamp"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: findings in ${failed[*]} (see $here/findings/)" >&2
  exit 1
fi
echo "fuzz: no findings in ${names[*]}"
