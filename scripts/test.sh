#!/usr/bin/env bash
# scripts/test.sh [-- CTEST_ARGS...]: set-up and build, then
# 1. the fuzz targets under ASan/UBSan (clang build in build-fuzz/): a replay of every seed and
#    regression once, DICOM included, each input in a process of its own (gating; always runs);
# 2. a short bounded libFuzzer exploration of each target (TESSERA_FUZZ_SECONDS per target,
#    default 30; reported, not gating; 0 skips this step only);
# 3. the LibTorch-only configuration (cmake --preset gpu-core in build-core/: no GDAL, ITK,
#    DCMTK, MPI or Qt; docs/gpu.md) built and its tests run, so it cannot rot (gating);
# 4. the whole test suite (unit, MPI-labelled, GUI-labelled, end-to-end).
# The main ctest gets no arguments unless they follow `--` (e.g. `scripts/test.sh -- -R Tile`),
# so a caller cannot narrow the suite by accident; any other argument is an error.
ctest_args=()
if [ $# -gt 0 ]; then
  if [ "$1" != "--" ]; then
    echo "usage: scripts/test.sh [-- CTEST_ARGS...] (arguments for the main ctest go after --)" >&2
    exit 2
  fi
  shift
  ctest_args=("$@")
fi
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
tessera_setup
tessera_build
status=0

fuzz_seconds="${TESSERA_FUZZ_SECONDS:-30}"
echo "== fuzz: replay of every seed and regression under ASan/UBSan (build-fuzz/, clang)"
cd "$TESSERA_ROOT"
fuzz_cache=()  # 0 leaves the exploration's configured length alone
if [ "$fuzz_seconds" -gt 0 ]; then fuzz_cache=(-DTESSERA_FUZZ_SECONDS="$fuzz_seconds"); fi
cmake --preset fuzz "${fuzz_cache[@]}" >"$TESSERA_ROOT/build-fuzz.configure.log" 2>&1 || {
  tail -20 "$TESSERA_ROOT/build-fuzz.configure.log" >&2; echo "fuzz: configure failed" >&2; exit 1; }
cmake --build --preset fuzz -j "$JOBS" >"$TESSERA_ROOT/build-fuzz.build.log" 2>&1 || {
  tail -30 "$TESSERA_ROOT/build-fuzz.build.log" >&2; echo "fuzz: build failed" >&2; exit 1; }
# Gate: every seed and regression input once under ASan/UBSan.
ctest --preset fuzz || status=$?
if [ "$fuzz_seconds" -gt 0 ]; then
  echo "== fuzz: libFuzzer exploration, ${fuzz_seconds} s per target"
  # New inputs for the time given. Reported, not gating (see tests/fuzz/CMakeLists.txt).
  stamp="$TESSERA_ROOT/build-fuzz/explore.stamp"; touch "$stamp"
  if ! ctest --test-dir "$TESSERA_ROOT/build-fuzz" -L explore --output-on-failure >"$TESSERA_ROOT/build-fuzz.explore.log" 2>&1; then
    echo "fuzz: exploration found new inputs (not gating; add them to tests/fuzz/regressions/ once fixed):"
    # Reporting only: nothing here may end the script (set -e, pipefail).
    find "$TESSERA_ROOT/build-fuzz/tests/fuzz/findings" -type f -newer "$stamp" | sed 's/^/  /' || true
    { grep -E "SUMMARY|ERROR: libFuzzer|deadly signal" "$TESSERA_ROOT/build-fuzz.explore.log" || true; } | sort | uniq -c | sed 's/^/  /' || true
  else
    echo "fuzz: exploration found nothing new (log: build-fuzz.explore.log)"
  fi
else
  echo "fuzz: exploration skipped (TESSERA_FUZZ_SECONDS=0); the replay above still ran"
fi

echo "== LibTorch-only build (cmake --preset gpu-core, build-core/) and its tests"
core_log="$TESSERA_ROOT/build-core.log"
if cmake --preset gpu-core >"$core_log" 2>&1 && cmake --build --preset gpu-core -j "$JOBS" >>"$core_log" 2>&1; then
  grep -m1 "LibTorch-only build" "$core_log" || true
  ctest --preset gpu-core -j "$JOBS" || status=$?
else
  tail -30 "$core_log" >&2; echo "gpu-core: configure or build failed (log: build-core.log)" >&2; status=1
fi

# The main suite last, so its summary closes the log.
cd "$BUILD_DIR"
echo "== ctest${ctest_args[*]:+ (given: ${ctest_args[*]})}"
ctest --output-on-failure -j "$JOBS" "${ctest_args[@]}" || status=$?
exit $status
