#!/usr/bin/env bash
# Set-up, build, the fuzz targets under ASan/UBSan (clang build in build-fuzz/): a replay of
# every seed and regression (gating), then a short bounded libFuzzer exploration of each
# (TESSERA_FUZZ_SECONDS per target, default 30, reported but not gating; 0 skips the fuzz
# build altogether), then the whole
# test suite (unit, MPI-labelled, GUI-labelled, end-to-end). Arguments go to the main ctest.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
tessera_setup
tessera_build
status=0

fuzz_seconds="${TESSERA_FUZZ_SECONDS:-30}"
if [ "$fuzz_seconds" -gt 0 ]; then
  echo "== fuzz: libFuzzer targets, ${fuzz_seconds} s each (build-fuzz/, clang)"
  cd "$TESSERA_ROOT"
  cmake --preset fuzz -DTESSERA_FUZZ_SECONDS="$fuzz_seconds" >"$TESSERA_ROOT/build-fuzz.configure.log" 2>&1 || {
    tail -20 "$TESSERA_ROOT/build-fuzz.configure.log" >&2; echo "fuzz: configure failed" >&2; exit 1; }
  cmake --build --preset fuzz -j "$JOBS" >"$TESSERA_ROOT/build-fuzz.build.log" 2>&1 || {
    tail -30 "$TESSERA_ROOT/build-fuzz.build.log" >&2; echo "fuzz: build failed" >&2; exit 1; }
  # Gate: every seed and regression input once under ASan/UBSan.
  ctest --preset fuzz || status=$?
  # Exploration: new inputs for the time given. Reported, not gating (see tests/fuzz/CMakeLists.txt).
  stamp="$TESSERA_ROOT/build-fuzz/explore.stamp"; touch "$stamp"
  if ! ctest --test-dir "$TESSERA_ROOT/build-fuzz" -L explore --output-on-failure >"$TESSERA_ROOT/build-fuzz.explore.log" 2>&1; then
    echo "fuzz: exploration found new inputs (not gating; add them to tests/fuzz/regressions/ once fixed):"
    # Reporting only: nothing here may end the script (set -e, pipefail).
    find "$TESSERA_ROOT/build-fuzz/tests/fuzz/findings" -type f -newer "$stamp" | sed 's/^/  /' || true
    { grep -E "SUMMARY|ERROR: libFuzzer|deadly signal" "$TESSERA_ROOT/build-fuzz.explore.log" || true; } | sort | uniq -c | sed 's/^/  /' || true
  else
    echo "fuzz: exploration found nothing new (log: build-fuzz.explore.log)"
  fi
fi

# The main suite last, so its summary closes the log.
cd "$BUILD_DIR"
echo "== ctest"
ctest --output-on-failure -j "$JOBS" "$@" || status=$?
exit $status
