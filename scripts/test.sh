#!/usr/bin/env bash
# Set-up, build, a short bounded libFuzzer run of each fuzz target (clang build in build-fuzz/,
# ctest label `fuzz`; TESSERA_FUZZ_SECONDS per target, default 30; 0 skips it), then the whole
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
  ctest --preset fuzz || status=$?
fi

# The main suite last, so its summary closes the log.
cd "$BUILD_DIR"
echo "== ctest"
ctest --output-on-failure -j "$JOBS" "$@" || status=$?
exit $status
