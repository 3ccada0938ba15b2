#!/usr/bin/env bash
# `tessera train --pp` under mpirun against one process: the same per-step losses for
#   - 2 ranks = one pipeline of 2 stages (1F1B, one tile per micro-batch);
#   - 4 ranks = 2 replicas × 2 stages, batch 2 per replica, 2 micro-batches, GPipe, against
#     one process with the global batch 4;
#   - 2 ranks with activation checkpointing (forwards recomputed before their backward);
# and a loss that does not split over micro-batches is refused before the run starts.
# One step equals one process within 1e-5 (tests/parallel/pipeline_test.cpp); over six steps
# the rounding of different convolution batch sizes grows, so the losses are compared at
# 1e-4 (SGD: Adam would amplify rounding-level gradients into whole steps). A dropped
# micro-batch or a gradient scaled twice moves the second step's loss by far more.
# Usage: pipeline_train.sh TESSERA MAKE_SAMPLE MPIEXEC
set -uo pipefail
T="$1"; GEN="$2"; MPIEXEC="$3"
W="$(mktemp -d /tmp/tessera-pptrain.XXXXXX)"
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL $*"; exit 1; }
mpi() { "$MPIEXEC" --allow-run-as-root --oversubscribe "$@"; }
"$GEN" --out "$W/s" --size 256 --only scene >/dev/null || fail "generator"
cat > "$W/train.yaml" <<YAML
model: {preset: unet-tiny, classes: 4, base_filters: 8, norm: group}
data:
  pairs: [{image: s/scene.tif, labels: s/scene_labels.tif}]
  holdout: {axis: x, fraction: 0.25}
train: {tile: 32, batch: 4, steps: 6, steps_per_epoch: 3, seed: 3, optimizer: sgd, learning_rate: 0.01,
        grad_clip: 2.0, accumulate: 2, loss: {kind: focal}, foreground_fraction: 0.3}
YAML
common=(--config "$W/train.yaml" --threads 1 --no-progress)
"$T" train "${common[@]}" --run-dir "$W/one" > "$W/one.log" 2>&1 || fail "one process: $(tail -2 "$W/one.log")"
mpi -np 2 "$T" train "${common[@]}" --run-dir "$W/pp2" --pp 2 > "$W/pp2.log" 2>&1 || fail "--pp 2: $(tail -2 "$W/pp2.log")"
mpi -np 4 "$T" train "${common[@]}" --run-dir "$W/dp2pp2" --pp 2 --batch 2 --micro-batches 2 --schedule gpipe \
  > "$W/dp2pp2.log" 2>&1 || fail "--pp 2 on 4 ranks: $(tail -2 "$W/dp2pp2.log")"
grep -q "data 2 × pipeline 2" "$W/dp2pp2.log" || fail "4 ranks with --pp 2 are not 2 × 2: $(head -1 "$W/dp2pp2.log")"
mpi -np 2 "$T" train "${common[@]}" --run-dir "$W/ckpt" --pp 2 --activation-checkpoint always > "$W/ckpt.log" 2>&1 ||
  fail "--activation-checkpoint always: $(tail -2 "$W/ckpt.log")"

/usr/bin/python3 - "$W/one" "$W/pp2" "$W/dp2pp2" "$W/ckpt" <<'PY' || exit 1
import json, sys
def losses(run):
    return [json.loads(l)["loss"] for l in open(run + "/metrics.jsonl") if '"loss"' in l]
ref = losses(sys.argv[1])
assert len(ref) == 6 and all(x is not None for x in ref), ref
for run in sys.argv[2:]:
    got = losses(run)
    assert len(got) == len(ref), (run, got)
    worst = max(abs(a - b) / abs(a) for a, b in zip(ref, got))
    print(f"{run.rsplit('/', 1)[1]}: worst relative loss difference {worst:.1e}")
    if worst > 1e-4:
        print("FAIL", run, ref, got)
        sys.exit(1)
PY

# Per-stage telemetry: each pipeline rank's last line names its stage and its step's figures.
/usr/bin/python3 - "$W/pp2/telemetry" <<'PY' || fail "per-stage telemetry"
import json, sys, glob
stages = {}
for path in sorted(glob.glob(sys.argv[1] + "/rank-*.jsonl")):
    last = [json.loads(l) for l in open(path)][-1]
    assert last["stage_step_s"] >= last["stage_compute_s"] > 0, last
    assert last["stage_peak_bytes"] > 0, last
    assert last["stage_bytes_sent"] > 0 and last["stage_bytes_received"] > 0, last
    stages[last["rank"]] = last["pipeline_stage"]
assert sorted(stages.values()) == [0, 1], stages
PY

sed 's/loss: {kind: focal}/loss: {kind: dice_ce}/' "$W/train.yaml" > "$W/dice.yaml"
if mpi -np 2 "$T" train --config "$W/dice.yaml" --threads 1 --no-progress --run-dir "$W/dice" --pp 2 > "$W/dice.log" 2>&1; then
  fail "dice_ce with --pp was accepted"
fi
grep -q "pipeline.loss.kind" "$W/dice.log" || fail "the refusal does not name the field: $(cat "$W/dice.log")"
[ ! -e "$W/dice" ] || fail "the refused run left a run directory"
echo "PASS"
