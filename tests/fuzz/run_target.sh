#!/usr/bin/env bash
# run_target.sh FUZZER SECONDS CORPUS FINDINGS SEEDS [MORE_SEED_DIRS...]
# SECONDS 0 replays the seed folders once (no mutation, CORPUS untouched) and fails on any finding.
# Runs one libFuzzer target for SECONDS on CORPUS (kept and grown between runs) plus the
# seed folders, with bounded memory (-rss_limit_mb, -malloc_limit_mb) and time per input
# (-timeout). A crash, leak, timeout or out-of-memory input is saved under FINDINGS and
# fails the run (libFuzzer exits non-zero). Used by ctest -L fuzz and run_fuzz.sh.
# FUZZ_FLAGS adds libFuzzer flags, e.g. "-fork=1 -ignore_timeouts=1 -ignore_ooms=1" to go on
# after a slow or memory-hungry input (long runs; each is still saved under FINDINGS).
set -euo pipefail
fuzzer=$1 seconds=$2 corpus=$3 findings=$4
shift 4
mkdir -p "$corpus" "$findings"
seed_dirs=()
for dir in "$@"; do
  [[ -d $dir ]] && seed_dirs+=("$dir")
done
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$here/../sanitizers/lsan.supp}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:suppressions=$here/../sanitizers/ubsan.supp}"
if [[ $seconds == 0 ]]; then  # replay: every seed and regression once, nothing mutated
  exec "$fuzzer" -runs=0 -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=60 -max_len=65536 \
    -artifact_prefix="$findings/replay-" "${seed_dirs[@]}"
fi
exec "$fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=30 \
  -max_len=65536 -print_final_stats=1 -artifact_prefix="$findings/" ${FUZZ_FLAGS:-} "$corpus" "${seed_dirs[@]}"
