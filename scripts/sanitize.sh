#!/usr/bin/env bash
# Set-up, then the Debug build with AddressSanitizer + UndefinedBehaviorSanitizer (preset
# debug-sanitize: build-debug/, no GUI), then every test but the gui label under the
# sanitizers: the unit tests and the cli label (ctest --preset debug-sanitize), the mpi label
# (ctest --preset debug-sanitize-mpi); the presets set ASAN/UBSAN/LSAN_OPTIONS. Ends with a
# summary: tests run, passed, failed, time, and every sanitizer report found.
#
# Every report fails its process with status 86 (halt_on_error, exitcode), so its test fails.
# ASan and leak reports also land in files under build-debug/sanitizer-reports/ (log_path),
# because the cli scripts keep a failing command's stderr in their own logs; UBSan's go to
# stderr, which ctest keeps in LastTest.log. Any report in either fails this script, even one
# from a command whose test expected it to fail. Suppressions: tests/sanitizers/ (third-party
# libraries only).
#
# Usage: scripts/sanitize.sh [--no-build] [ctest arguments...]
#   --no-build  run the tests on build-debug/ as it is (after a build of your own).
# The Debug build is a second build of the project (about an hour on 2 cores); the tests
# take about 50 minutes with 2 jobs.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
tessera_setup
BUILD_DIR="$TESSERA_ROOT/build-debug"
REPORTS="$BUILD_DIR/sanitizer-reports"  # the preset's log_path directory
build=1
if [ "${1:-}" = "--no-build" ]; then build=0; shift; fi

cd "$TESSERA_ROOT"
if [ "$build" -eq 1 ]; then
  echo "== configure (preset debug-sanitize)"
  mkdir -p "$BUILD_DIR"
  cmake --preset debug-sanitize >"$BUILD_DIR/configure.log" 2>&1 || {
    tail -30 "$BUILD_DIR/configure.log" >&2; echo "configure failed (log: $BUILD_DIR/configure.log)" >&2; exit 1; }
  echo "== build ($BUILD_DIR, $JOBS jobs)"
  cmake --build --preset debug-sanitize -j "$JOBS"
fi
[ -f "$BUILD_DIR/CTestTestfile.cmake" ] || { echo "no build in $BUILD_DIR: run without --no-build first" >&2; exit 1; }

rm -rf "$REPORTS"
status=0
# Two passes: the mpi label has its own preset (leak check off in the ranks: Open MPI's leaks
# cannot be attributed, tests/sanitizers/README.md). Each keeps its console log and LastTest.log.
for preset in debug-sanitize debug-sanitize-mpi; do
  echo "== ctest --preset $preset ($JOBS jobs)"
  rm -f "$BUILD_DIR/Testing/Temporary/LastTest.log"
  ctest --preset "$preset" -j "$JOBS" "$@" 2>&1 | tee "$BUILD_DIR/$preset.ctest.log" || status=$?
  cp "$BUILD_DIR/Testing/Temporary/LastTest.log" "$BUILD_DIR/$preset.LastTest.log" 2>/dev/null || true
done

# Summary from ctest's own lines: "NN% tests passed, F tests failed out of N", "Total Test time".
echo
echo "== summary (build-debug, ASan + UBSan)"
total=0; failed=0; seconds=0; failures=()
for preset in debug-sanitize debug-sanitize-mpi; do
  log="$BUILD_DIR/$preset.ctest.log"
  result=$(grep -E "tests passed, [0-9]+ tests? failed out of" "$log" | tail -1 || true)
  if [ -n "$result" ]; then
    f=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$result")
    n=$(sed -E 's/.* failed out of ([0-9]+).*/\1/' <<<"$result")
    t=$(grep -E "^Total Test time" "$log" | tail -1 | sed -E 's/.*= *([0-9.]+) sec.*/\1/')
    echo "$preset: $n run, $((n - f)) passed, $f failed, ${t:-?} s"
    total=$((total + n)); failed=$((failed + f)); seconds=$(awk -v a="$seconds" -v b="${t:-0}" 'BEGIN { print a + b }')
    mapfile -t -O "${#failures[@]}" failures < <(sed -n '/The following tests FAILED:/,$p' "$log" | grep -E "^\s+[0-9]+ - " || true)
  else
    echo "$preset: no tests ran (see $log)"
  fi
done
echo "tests: $total run, $((total - failed)) passed, $failed failed, ${seconds} s"
if [ "${#failures[@]}" -gt 0 ]; then
  echo "failed tests:"
  printf '%s\n' "${failures[@]}"
fi

# Reports: one file per process that reported (report.<executable>.<pid>).
reports=()
[ -d "$REPORTS" ] && mapfile -t reports < <(find "$REPORTS" -type f -size +0 | sort)
echo "sanitizer report files: ${#reports[@]}"
for f in "${reports[@]}"; do
  echo "-- ${f#"$TESSERA_ROOT"/}"
  # The kind (ERROR:, runtime error:), the summary, and the first frames in our sources.
  grep -E "ERROR: [A-Za-z]+Sanitizer|runtime error:|^SUMMARY:" "$f" | head -5 | sed 's/^/   /' || true
  # (Paths may be relative to the checkout: ccache's CCACHE_BASEDIR rewrites them.)
  grep -E "^ +#[0-9]+ .* ([^ ]*/)?(core|io|run|parallel|cli|plugins|sample_data|tests)/[^ ]+\.(cpp|hpp|h):[0-9]+" "$f" |
    grep -v " /usr/" | head -3 | sed 's/^ */   at /' || true
done
# UBSan, and tests whose ENVIRONMENT sets its own *SAN_OPTIONS (tests/fuzz), report on stderr
# instead: ctest keeps every test's output, passing or not, in LastTest.log.
inline=()
mapfile -t inline < <(cat "$BUILD_DIR"/debug-sanitize*.LastTest.log 2>/dev/null |
  grep -E "==[0-9]+==ERROR: [A-Za-z]+Sanitizer|: runtime error: " || true)
echo "sanitizer reports in test output: ${#inline[@]}"
for line in "${inline[@]}"; do echo "   $line"; done
if [ "$(( ${#reports[@]} + ${#inline[@]} ))" -gt 0 ]; then
  echo "the sanitizers reported: see above" >&2
  [ "$status" -ne 0 ] || status=1
fi
exit $status
