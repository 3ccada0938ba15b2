#!/usr/bin/env bash
# The planner's calibration through the CLI, and `tessera bench pipeline` under mpirun -np 2:
#  - `plan --calibrate` stores a per-layer memory fit and layer times (one entry per layer);
#  - `plan` reports that it uses it; a broken calibration file is a one-line error naming it,
#    and a calibration measured on other model options is not used;
#  - `bench pipeline --memory-cap` finds, for 1 rank / naive / memory-aware, a side whose
#    measured peak is within the cap while the next side it measured is over it;
#  - `plan --simulate` adds the simulator's step for the chosen layout; `bench simulate` reads
#    its calibrations (the data-parallel row's timed on train's micro-batch, channels-last, at
#    the bench's side), bench pipeline's report and train's metrics into one table.
# Usage: plan_cli.sh TESSERA MPIEXEC
set -uo pipefail
T="$1"; MPIEXEC="$2"
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
W="$(mktemp -d /tmp/tessera-plan.XXXXXX)"
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL $*"; exit 1; }
cal="$W/calibration.json"

"$T" plan --calibrate --model unet-tiny --threads 1 --calibration-tile 64 --calibration "$cal" > "$W/cal.log" 2>&1 ||
  fail "plan --calibrate: $(tail -2 "$W/cal.log")"
/usr/bin/python3 - "$cal" <<'PY' || fail "calibration file"
import json, sys
m = json.load(open(sys.argv[1]))["models"]["unet-tiny"]
mem = m["memory"]
assert m["device_flops"] > 0, m
assert len(mem["constant_bytes"]) == 38 and len(mem["bytes_per_element"]) == 38, mem
assert mem["sides"][0] < mem["sides"][1], mem["sides"]
assert len(m["time"]["seconds"]) == 38 and min(m["time"]["seconds"]) > 0, m["time"]
# The convolutions need memory beyond the model (oneDNN copies, workspaces): some positive extra.
assert max(mem["measured_extra_bytes"][1]) > 0, mem["measured_extra_bytes"]
PY

"$T" plan --model unet-tiny --image 3000x3000 --devices 8 --device-memory 0.3 --train --json --calibration "$cal" \
  > "$W/plan.json" 2> "$W/plan.err" || fail "plan with calibration: $(cat "$W/plan.err")"
/usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert "calibrated layer extras" in j["memory"]["source"], j["memory"]["source"]
assert "measured layer times" in j["time"]["source"], j["time"]["source"]
assert len(j["pipeline"]["balance"]) == j["pipeline"]["stages"]
' "$W/plan.json" || fail "plan does not use the calibration"

# --simulate: the chosen layout through the simulator on this machine's description, with the
# calibration's layer times; its step is the simulated schedule of that layout (dp replicas
# of the planned tile), and a layout the cluster cannot hold is refused naming the file.
"$T" plan --model unet-tiny --image 3000x3000 --devices 2 --device-memory 4 --train --json --calibration "$cal" \
  --simulate "$SRC/clusters/this-machine.yaml" > "$W/sim.json" 2> "$W/sim.err" || fail "plan --simulate: $(cat "$W/sim.err")"
grep -q "layer times: measured" "$W/sim.err" || fail "plan --simulate did not use the measured layer times: $(cat "$W/sim.err")"
/usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
s = j["simulation"]
assert s["cluster"] == "this-machine", s
b = s["breakdown"]
assert s["step_seconds"] > 0 and abs(sum(b.values()) - s["pass_seconds"]) <= 1e-9 * s["pass_seconds"], s
assert len(s["device_peak_bytes"]) == j["pipeline"]["stages"], s
# One replica computes its tiles one after another: compute is at least the planner s one-tile time.
assert b["compute"] >= 0.5 * j["time"]["stage_seconds"][0], (b, j["time"])
' "$W/sim.json" || fail "plan --simulate JSON: $(head -c 600 "$W/sim.json")"
if "$T" plan --model unet-tiny --image 3000x3000 --devices 64 --calibration "$cal" \
     --simulate "$SRC/clusters/this-machine.yaml" > /dev/null 2> "$W/sim64.err"; then
  fail "plan --simulate accepted 64 devices on a 2-device description"
fi
grep -q "simulate .*this-machine.yaml.*exceed" "$W/sim64.err" || fail "plan --simulate refusal: $(cat "$W/sim64.err")"

# `bench simulate`, the seam between three writers and one reader: its own calibration, bench
# pipeline's JSON report and train's metrics.jsonl feed the simulator. One M, one training
# run of few steps: every row has a measured and a simulated step (no bound asserted here:
# the 25 % figure is the benchmark's, README).
"$T" bench simulate --micro 2 --pipeline-steps 1 --train-steps 4 --repeats 1 --work-dir "$W/bench-sim" \
  --cluster "$SRC/clusters/this-machine.yaml" > "$W/bsim.log" 2>&1 || fail "bench simulate: $(tail -3 "$W/bsim.log")"
/usr/bin/python3 - "$W/bsim.log" <<'PY' || fail "bench simulate report: $(tail -14 "$W/bsim.log")"
import json, sys
line = [l for l in open(sys.argv[1]) if l.startswith('{"all_within"')][-1]
r = json.loads(line)
names = [x["layout"] for x in r["rows"]]
assert names == ["pipeline gpipe M=2", "pipeline 1f1b M=2", "train data parallel"], names
for x in r["rows"]:
    assert x["measured_s"] > 0 and x["simulated_s"] > 0, x
    assert abs(x["error"] - (x["simulated_s"] - x["measured_s"]) / x["measured_s"]) < 1e-9, x
assert r["input_side"] == 140 and r["ranks"] == 2, r
PY
# Each row priced from layers timed as its run runs them: bench pipeline's one tile a pass,
# contiguous; train's data-parallel row on train's micro-batch (batch 8 / 2 ranks),
# channels-last, at the bench's input side.
/usr/bin/python3 - "$W/bench-sim/simulate" <<'PY' || fail "bench simulate calibrations"
import json, os, sys
time = lambda f: json.load(open(os.path.join(sys.argv[1], f)))["models"]["unet-tiny"]["time"]
pipe, train = time("calibration.json"), time("calibration-train.json")
assert pipe["tiles"] == 1 and not pipe["channels_last"], {k: pipe[k] for k in ("side", "tiles", "channels_last")}
assert train["tiles"] == 4 and train["channels_last"] and train["side"] == 140, \
    {k: train[k] for k in ("side", "tiles", "channels_last")}
PY

# A calibration measured on other options (here the preset's 16 base filters) is not used for 8.
if "$T" plan --model unet-tiny --filters 8 --image 3000x3000 --calibration "$cal" > "$W/other.log" 2>&1; then
  fail "a calibration of other model options was used"
fi
grep -q "other options" "$W/other.log" || fail "the refusal does not say why: $(cat "$W/other.log")"

echo '{"models": {"unet-tiny": {"memory": {"constant_bytes": [1, 2]' > "$W/broken.json"
if "$T" plan --model unet-tiny --image 3000x3000 --calibration "$W/broken.json" > "$W/broken.log" 2>&1; then
  fail "a broken calibration file was accepted"
fi
grep -q "broken.json" "$W/broken.log" || fail "the error does not name the file: $(cat "$W/broken.log")"
[ "$(grep -c . "$W/broken.log")" -eq 1 ] || fail "not a one-line error: $(cat "$W/broken.log")"

"$MPIEXEC" --allow-run-as-root --oversubscribe -np 2 "$T" bench pipeline --model unet-tiny --tile 92 --batch 1 \
  --no-time --memory-cap 24 --max-side 400 --calibration "$cal" > "$W/bench.log" 2> "$W/bench.err" ||
  fail "bench pipeline: $(tail -3 "$W/bench.err")"
# The report is stdout's last JSON line; the probe lines go to stderr (a separate file, so
# the two streams cannot interleave inside a line).
grep '^{' "$W/bench.log" | tail -1 | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)
cap = r["memory_cap"]["cap_bytes"]
rows = r["memory_cap"]["layouts"]
assert [x["layout"] for x in rows] == ["1 rank", "naive", "memory"], rows
assert [x["ranks"] for x in rows] == [1, 2, 2], rows
for x in rows:
    assert x["largest_side"] > 0, x
    assert x["peak_bytes"] <= cap, x
    if x["over_side"]:
        assert x["over_side"] > x["largest_side"] and x["over_peak_bytes"] > cap, x
    assert sum(x["balance"]) == 38, x
m = r["memory"]["memory"]
assert len(m["measured_bytes"]) == 2 and min(m["measured_bytes"]) > 0, m
assert m["bound"] in ("1.25_mean", "1.10_optimum"), m
' || fail "bench pipeline report: $(tail -12 "$W/bench.log" | head -11)"
echo "PASS"
