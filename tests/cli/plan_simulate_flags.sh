#!/usr/bin/env bash
# One meaning per flag in `tessera plan` and `tessera simulate`:
#  - --tile is the tile inset in both (the same --tile gives the same network input side);
#    --input-side is simulate's network input; refusals name a value that would do;
#  - simulate's defaults run for a model whose inputs are constrained (unet-small);
#  - simulate's header says the nodes the layout uses, not the cluster's total;
#  - plan --cluster FILE prices devices, memory and network from the cluster file, so plan and
#    plan --simulate on that file agree within the efficiency curve, and the report says why
#    they differ; without it the difference is explained too.
# Usage: plan_simulate_flags.sh TESSERA
set -uo pipefail
T="$1"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
SUMMIT="$ROOT/clusters/summit.yaml"
W="$(mktemp -d /tmp/tessera-plan-simulate.XXXXXX)"
trap 'rm -rf "$W"' EXIT
export HOME="$W"  # no ~/.cache/tessera/calibration.json: this machine's calibration stays out of the figures
failures=0; checks=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL $*"; }
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

sim() { $T simulate --cluster "$SUMMIT" "$@"; }

# 1. simulate's defaults run on unet-small (512 as an input side was refused before).
if sim --model unet-small --image 4096x4096 --dp 12 > "$W/sim.txt" 2> "$W/err.txt"; then
  pass "simulate unet-small with its defaults: $(grep 'tiles ' "$W/sim.txt" | xargs)"
else
  fail "simulate unet-small with its defaults: $(cat "$W/err.txt")"
fi
# 2. The header: dp 12 on 6 GPUs a node is 2 nodes of Summit's 4608.
if grep -q "summit (2 of its 4608 nodes" "$W/sim.txt"; then pass "header: $(head -1 "$W/sim.txt")"
else fail "header does not say the 2 nodes used: $(head -1 "$W/sim.txt")"; fi

# 3. A bad --input-side is refused naming a valid one, which then runs.
sim --model unet-small --input-side 512 > /dev/null 2> "$W/err.txt"; rc=$?
side=$(sed -n 's/.*: \([0-9]*\) or \([0-9]*\) would do.*/\2/p' "$W/err.txt")
if [ "$rc" -ne 0 ] && [ "$(wc -l < "$W/err.txt")" -eq 1 ] && [ -n "$side" ] &&
   sim --model unet-small --input-side "$side" > /dev/null 2>&1; then
  pass "--input-side 512 refused, names $side, which runs: $(cat "$W/err.txt")"
else
  fail "--input-side 512: exit $rc, suggestion '$side': $(cat "$W/err.txt")"
fi
sim --model unet-small --tile 100 > /dev/null 2> "$W/err.txt"; rc=$?
if [ "$rc" -ne 0 ] && grep -q -- "--tile 100 is not a multiple of" "$W/err.txt" && grep -q "would do" "$W/err.txt"; then
  pass "--tile 100 refused: $(cat "$W/err.txt")"
else fail "--tile 100: exit $rc: $(cat "$W/err.txt")"; fi
sim --model unet-small --tile 256 --input-side 300 > /dev/null 2> "$W/err.txt"; rc=$?
if [ "$rc" -ne 0 ] && grep -q -- "--tile .* and --input-side .* both given" "$W/err.txt"; then pass "--tile with --input-side refused"
else fail "--tile with --input-side: exit $rc: $(cat "$W/err.txt")"; fi

# 4. The same --tile means the same inset: plan's input side is simulate's.
$T plan --model unet-small --image 4096x4096 --devices 12 --tile 256 --json > "$W/plan.json" 2>/dev/null
plan_side=$(json "$W/plan.json" "d['tile']['input_side']")
sim_side=$(sim --model unet-small --image 4096x4096 --dp 12 --tile 256 | sed -n 's/.*input side \([0-9]*\).*/\1/p')
if [ -n "$plan_side" ] && [ "$plan_side" = "$sim_side" ]; then pass "--tile 256: input side $plan_side in plan and simulate"
else fail "--tile 256: plan input side '$plan_side', simulate '$sim_side'"; fi

# 5. plan --cluster: the V100's figures; the simulation of the same layout computes what the
#    plan's stage time gives at the efficiency the report states (the plan at the CPU default
#    figure was 58× off).
args=(plan --model unet-small --image 10000x10000 --devices 1200 --train --simulate "$SUMMIT")
$T "${args[@]}" --cluster "$SUMMIT" --json > "$W/cluster.json" 2> "$W/err.txt"
flops=$(json "$W/cluster.json" "d['time']['device_flops']" 2>/dev/null)
memory=$(json "$W/cluster.json" "d['device_memory_bytes']" 2>/dev/null)
# The device as the cluster file describes it (read here with PyYAML, not through Tessera).
read -r peak emax gib < <(python3 -c "import yaml,sys; d=yaml.safe_load(open(sys.argv[1]))['device']; print(float(d['fp32_flops']), d['efficiency']['max'], d['memory_gib'])" "$SUMMIT")
# simulated compute ÷ (planned stage seconds × e_max / the stated FLOP-weighted efficiency)
agree=$(json "$W/cluster.json" "round(d['simulation']['breakdown']['compute'] / (d['time']['stage_seconds'][0] * $emax / d['layer_efficiency']), 2)" 2>/dev/null)
if python3 -c "import sys; r=float(sys.argv[1]); sys.exit(0 if 0.8 <= r <= 1.25 else 1)" "${agree:-0}" &&
   python3 -c "import sys; sys.exit(0 if abs(float(sys.argv[1]) - float(sys.argv[2]) * float(sys.argv[3])) < 1e3 else 1)" "${flops:-0}" "$peak" "$emax" &&
   [ "$memory" = "$(python3 -c "import sys; print(int(float(sys.argv[1]) * 2**30))" "$gib")" ]; then
  pass "plan --cluster summit: $flops FLOP/s per device, $memory bytes; simulated compute / planned at the stated efficiency $agree"
else
  fail "plan --cluster summit: flops '$flops', memory '$memory', simulated / planned compute '$agree': $(cat "$W/err.txt")"
fi
$T "${args[@]}" --cluster "$SUMMIT" > "$W/cluster.txt" 2>/dev/null
if grep -q "machine .*summit.yaml: 6 × V100" "$W/cluster.txt" && grep -q "plan against simulation: .*sustained rate e_max $emax; .* FLOP-weighted at input" "$W/cluster.txt"; then
  pass "plan --cluster says the machine and why the figures differ: $(grep 'plan against' "$W/cluster.txt")"
else fail "plan --cluster text: $(cat "$W/cluster.txt" | head -20)"; fi
$T "${args[@]}" > "$W/plain.txt" 2>/dev/null
if grep -q -- "plan against simulation: .*--cluster .*summit.yaml prices the plan there too" "$W/plain.txt"; then
  pass "plan --simulate alone explains the difference: $(grep 'plan against' "$W/plain.txt")"
else fail "plan --simulate alone: $(grep -E 'step|simulat' "$W/plain.txt")"; fi

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
