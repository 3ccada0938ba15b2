#!/usr/bin/env bash
# run_target.sh FUZZER SECONDS CORPUS FINDINGS SEED_DIR [SEED_DIR...]
# Runs one libFuzzer target; used by ctest (fuzz.NAME.replay, fuzz.NAME) and run_fuzz.sh.
# Every SEED_DIR given must exist and hold at least one file: a missing or empty folder (seeds
# not generated, a regression folder misnamed) fails the run instead of quietly shrinking it.
#
# SECONDS 0, the replay (gating): every file of the seed folders once, each in a process of
# its own with a fresh scratch folder (TESSERA_FUZZ_SCRATCH, see fuzz_input.hpp), so no
# input's outcome depends on what an earlier one left in ITK's, GDCM's, DCMTK's or GDAL's
# process-wide state, and each failure reproduces alone as `FUZZER FILE`. Files run whole
# (no -max_len). Goes on after a failing input, then fails when any failed or none ran; the
# last line says how many ran. Nothing is mutated; CORPUS is left alone.
#
# SECONDS > 0, the exploration: mutates for SECONDS on CORPUS (kept and grown between runs)
# plus the seed folders, with bounded memory (-rss_limit_mb, -malloc_limit_mb) and time per
# input (-timeout). A crash, leak, timeout or out-of-memory input is saved under FINDINGS and
# fails the run (libFuzzer exits non-zero). FUZZ_FLAGS adds libFuzzer flags, e.g. "-fork=1
# -ignore_timeouts=1 -ignore_ooms=1" to go on after a slow or memory-hungry input (each is
# still saved under FINDINGS).
set -euo pipefail
if [[ $# -lt 5 ]]; then
  echo "usage: run_target.sh FUZZER SECONDS CORPUS FINDINGS SEED_DIR [SEED_DIR...]" >&2
  exit 2
fi
fuzzer=$1 seconds=$2 corpus=$3 findings=$4
shift 4
seed_dirs=("$@")
for dir in "${seed_dirs[@]}"; do
  if [[ ! -d $dir ]]; then
    echo "run_target.sh: seed folder $dir does not exist" >&2
    exit 2
  fi
  if [[ -z $(find "$dir" -type f -print -quit) ]]; then
    echo "run_target.sh: seed folder $dir holds no inputs" >&2
    exit 2
  fi
done
mkdir -p "$corpus" "$findings"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$here/../sanitizers/lsan.supp}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:suppressions=$here/../sanitizers/ubsan.supp}"

replay() {
  if [[ -n ${TESSERA_FUZZ_SKIP_DICOM:-} ]]; then
    echo "run_target.sh: TESSERA_FUZZ_SKIP_DICOM is set; the replay runs every input (unset it)" >&2
    exit 2
  fi
  local inputs=() failed=() input scratch status
  mapfile -d '' inputs < <(find "${seed_dirs[@]}" -type f -print0 | sort -z)
  local base=/dev/shm
  [[ -d $base && -w $base ]] || base=${TMPDIR:-/tmp}
  scratch_root=$(mktemp -d "$base/tessera-replay.XXXXXX")
  trap 'rm -rf "$scratch_root"' EXIT
  for input in "${inputs[@]}"; do
    scratch=$(mktemp -d "$scratch_root/input.XXXXXX")
    status=0
    TESSERA_FUZZ_SCRATCH=$scratch "$fuzzer" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=60 \
      -artifact_prefix="$findings/replay-" "$input" >"$scratch_root/log" 2>&1 || status=$?
    rm -rf "$scratch"
    if [[ $status -ne 0 ]]; then
      failed+=("$input")
      echo "FAILED (exit status $status): $input"
      tail -n 40 "$scratch_root/log" | sed 's/^/  | /'
    fi
  done
  echo "$(basename "$fuzzer"): replayed ${#inputs[@]} inputs from ${seed_dirs[*]}, each in its own process: ${#failed[@]} failed"
  if [[ ${#inputs[@]} -eq 0 ]]; then
    echo "run_target.sh: no inputs replayed" >&2
    exit 1
  fi
  if [[ ${#failed[@]} -gt 0 ]]; then
    printf '  failed: %s\n' "${failed[@]}"
    printf '  reproduce one alone: %s FILE\n' "$fuzzer"
    exit 1
  fi
}

if [[ $seconds == 0 ]]; then
  replay
  exit 0
fi
exec "$fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=30 \
  -max_len=65536 -print_final_stats=1 -artifact_prefix="$findings/" ${FUZZ_FLAGS:-} "$corpus" "${seed_dirs[@]}"
