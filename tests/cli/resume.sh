#!/usr/bin/env bash
# Kill a training run mid-epoch with SIGKILL, `--resume` it, and its per-step losses after
# the resume point equal those of an uninterrupted run with the same seed (same threads).
# Usage: resume.sh TESSERA MAKE_SAMPLE
set -uo pipefail
T="$1"; GEN="$2"
W="$(mktemp -d /tmp/tessera-resume.XXXXXX)"
trap 'kill -9 $pid 2>/dev/null; rm -rf "$W"' EXIT
pid=
"$GEN" --out "$W/s" --size 256 --only scene >/dev/null || { echo "FAIL generator"; exit 1; }
cat > "$W/train.yaml" <<YAML
model: {preset: unet-tiny, classes: 4, base_filters: 8}
data:
  pairs: [{image: s/scene.tif, labels: s/scene_labels.tif}]
  holdout: {axis: x, fraction: 0.25}
train: {tile: 32, batch: 2, accumulate: 2, steps: 40, steps_per_epoch: 10, seed: 3, checkpoint_every: 4,
        optimizer: adamw, schedule: cosine, warmup_steps: 5, grad_clip: 2.0, foreground_fraction: 0.3}
YAML
common=(--config "$W/train.yaml" --threads 1 --no-progress)
"$T" train "${common[@]}" --run-dir "$W/whole" > "$W/whole.log" 2>&1 || { echo "FAIL uninterrupted run: $(tail -2 "$W/whole.log")"; exit 1; }

"$T" train "${common[@]}" --run-dir "$W/killed" > "$W/killed.log" 2>&1 &
pid=$!
# Wait for step 23 (past the checkpoint of step 20, mid-epoch 3), then SIGKILL.
for _ in $(seq 600); do
  n=$(grep -c '"loss"' "$W/killed/metrics.jsonl" 2>/dev/null)
  [ "${n:-0}" -ge 23 ] && break
  sleep 0.1
done
kill -9 $pid; wait $pid 2>/dev/null
n=$(grep -c '"loss"' "$W/killed/metrics.jsonl")
echo "killed after $n steps"
[ "$n" -lt 40 ] || { echo "FAIL the run finished before it could be killed"; exit 1; }

"$T" train "${common[@]}" --run-dir "$W/killed" --resume auto > "$W/resumed.log" 2>&1 \
  || { echo "FAIL resume: $(tail -2 "$W/resumed.log")"; exit 1; }
/usr/bin/python3 - "$W/whole/metrics.jsonl" "$W/killed/metrics.jsonl" <<'PY'
import json, sys
def losses(path):
    out = {}
    for line in open(path):
        j = json.loads(line)
        if "loss" in j: out[j["step"]] = j["loss"]
    return out
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert sorted(a) == list(range(1, 41)), f"uninterrupted run has steps {sorted(a)}"
assert sorted(b) == list(range(1, 41)), f"resumed run has steps {sorted(b)}"
diff = [s for s in a if a[s] != b[s]]
if diff:
    print(f"FAIL losses differ at steps {diff[:5]}: {[(a[s], b[s]) for s in diff[:3]]}"); sys.exit(1)
print(f"ok   resumed run: all 40 per-step losses identical to the uninterrupted run (last {b[40]:.6f})")
PY
