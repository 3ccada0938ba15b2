#!/usr/bin/env bash
# `tessera simulate` with activation checkpointing (issue 28):
#  - --seed-tables runs the seed's configurations as they trained: checkpoint `always`, and no
#    row "does not fit memory" (1434² on 1 … 6 V100s, 192 / 512 / 1024 on 6);
#  - with --activation-checkpoint except_last (torchgpipe's default) 1434² on one V100 does not
#    fit: the flag reaches the memory model;
#  - a checkpointed pipeline step is longer than the same step without (its recomputed
#    forwards) and holds less memory per stage;
#  - a bad value is a one-line error naming the flag; --seed-tables on a model that is not the seed's says which to give.
# Usage: simulate_checkpoint.sh TESSERA
set -uo pipefail
T="$1"
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
W="$(mktemp -d /tmp/tessera-simulate-ck.XXXXXX)"
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL $*"; exit 1; }
summit="$SRC/clusters/summit.yaml"

"$T" simulate --cluster "$summit" --model s0-small --seed-tables > "$W/always.txt" 2>&1 ||
  fail "seed tables: $(tail -2 "$W/always.txt")"
grep -q "checkpoint always" "$W/always.txt" || fail "seed tables header: $(head -1 "$W/always.txt")"
[ "$(grep -c "tile " "$W/always.txt")" -eq 9 ] || fail "seed tables rows: $(cat "$W/always.txt")"
if grep -q "does not fit" "$W/always.txt"; then fail "a seed configuration does not fit: $(cat "$W/always.txt")"; fi

"$T" simulate --cluster "$summit" --model s0-small --seed-tables --activation-checkpoint except_last > "$W/last.txt" 2>&1 ||
  fail "seed tables except_last: $(tail -2 "$W/last.txt")"
grep -q "tile 1434, K = 1: .*does not fit memory" "$W/last.txt" || fail "except_last: $(cat "$W/last.txt")"

# the seed's tiles are no valid input of another model: one line naming the flag and the way out
if "$T" simulate --cluster "$summit" --model unet-tiny --seed-tables > "$W/tiny.txt" 2>&1; then fail "seed tables ran unet-tiny"; fi
[ "$(grep -c "error" "$W/tiny.txt")" -eq 1 ] && grep -q -- "--seed-tables.*--model s0-small" "$W/tiny.txt" ||
  fail "seed tables on unet-tiny: $(cat "$W/tiny.txt")"

step() {  # step seconds and the first stage's GiB of a 2-stage, 4-micro-batch s0-small step at 512²
  "$T" simulate --cluster "$SRC/clusters/dgx1.yaml" --model s0-small --input-side 512 --tiles 4 --pp 2 --micro-batches 4 \
    --json "$@" 2> "$W/step.err" | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
print(j["step_seconds"], j["device_peak_bytes"][0])' || fail "simulate $*: $(cat "$W/step.err")"
}
read -r never_s never_b <<< "$(step)"
read -r always_s always_b <<< "$(step --activation-checkpoint always)"
/usr/bin/python3 -c "import sys; n, a, nb, ab = map(float, sys.argv[1:]); sys.exit(0 if a > n and ab < nb else 1)" \
  "$never_s" "$always_s" "$never_b" "$always_b" ||
  fail "checkpointing: step $never_s → $always_s s, stage 0 $never_b → $always_b bytes"

if "$T" simulate --cluster "$summit" --model s0-small --activation-checkpoint sometimes > "$W/bad.txt" 2>&1; then
  fail "a bad --activation-checkpoint was accepted"
fi
[ "$(grep -c . "$W/bad.txt")" -eq 1 ] && grep -q -- "--activation-checkpoint" "$W/bad.txt" ||
  fail "bad value error: $(cat "$W/bad.txt")"
echo "PASS"
