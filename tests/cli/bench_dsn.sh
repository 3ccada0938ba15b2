#!/usr/bin/env bash
# `tessera bench dsn --targets 1,3` on a small tile (it launches mpirun -np 2 and -np 4 itself):
#  - the table has a row of numbers for 1 + 1 and for 1 + 3 domains;
#  - the one-process DSN of 1 + 3 domains (every private encoder, every domain's activations)
#    peaks at least 1.5x higher than the largest rank of the domain-parallel run, where each
#    rank builds and trains only its own domain. A worker that built every private encoder and
#    trained every domain on every rank, or measured outside the training, would not.
# Usage: bench_dsn.sh TESSERA MPIEXEC
set -uo pipefail
T="$1"; MPIEXEC="$2"
W="$(mktemp -d /tmp/tessera-bench-dsn.XXXXXX)"
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL $*"; exit 1; }

(cd "$W" && "$T" bench dsn --targets 1,3 --side 64 --steps 2 --json --mpirun "$MPIEXEC") > "$W/bench.log" 2> "$W/bench.err" ||
  fail "bench dsn: $(tail -3 "$W/bench.err")"
cat "$W/bench.log"
num='[0-9]+\.[0-9]+'
for row in "1 \+ 1 +2 " "1 \+ 3 +4 "; do
  grep -Eq "^${row} +${num}(–${num})? +[0-9]+(–[0-9]+)? +${num} +${num} +${num}\|${num}" "$W/bench.log" ||
    fail "no row of numbers for '${row}'"
done
grep -q '^flatness: ' "$W/bench.log" || fail "no flatness line"
# The memory claim (a rank holds much less than one process) is not checked under ASan
# (TESSERA_SANITIZED): its allocator and quarantine change every peak.
grep '^{' "$W/bench.log" | tail -1 | /usr/bin/python3 -c '
import json, os, sys
sanitized = bool(os.environ.get("TESSERA_SANITIZED"))
r = json.load(sys.stdin)
rows = {x["targets"]: x for x in r["rows"]}
assert sorted(rows) == [1, 3], rows
for n, x in rows.items():
    assert len(x["peak_bytes"]) == n + 1 and min(x["peak_bytes"]) > 0, x
three = rows[3]
assert sanitized or three["single_peak_bytes"] >= 1.5 * max(three["peak_bytes"]), three
print("1 + 3: one process %.1f MiB, largest rank %.1f MiB" % (three["single_peak_bytes"] / 2**20, max(three["peak_bytes"]) / 2**20))
' || fail "bench dsn report"
echo "PASS"
