#!/usr/bin/env bash
# Kill a training run mid-epoch with SIGKILL and `--resume auto` it. A resume is told apart
# from a restart (which, with the same seed, gives the same losses):
#   - the resumed process says it resumed from the checkpoint's step N and trains 40 − N steps;
#   - metrics.jsonl holds every step once, 1 … 40 in order (and every validation once): the
#     resumed run rewrote the killed run's lines past N, kept those up to N byte for byte,
#     and its own lines start at step N + 1 (its clock, elapsed_s, starts again there);
#   - its per-step losses equal an uninterrupted run's with the same seed (same threads);
#   - it validates at the same steps as the uninterrupted run (every epoch's end).
# With `dsn` the run is a Domain Separation Network (1 source + 1 target) trained by the same
# trainer: the same checks, and each step's four loss terms equal the uninterrupted run's too.
# With MPIEXEC and NP every run is `mpirun -np NP` (FLAGS added to each): the DSN's 2 domains in
# 2 domain groups (NP 2), or 2 groups x 2 replicas (NP 4 --dp 2), each group holding its own
# private encoder, its optimiser state and tile stream; the whole job is SIGKILLed (every rank)
# and resumed on the same layout; then resuming that checkpoint on one process (1 domain group)
# is refused in one line naming the checkpoint and both counts.
# Usage: resume.sh TESSERA MAKE_SAMPLE [dsn [MPIEXEC NP [FLAGS…]]]
set -uo pipefail
T="$1"; GEN="$2"; KIND="${3:-unet}"
LAUNCH=(); NP=1
if [ $# -ge 5 ]; then NP="$5"; LAUNCH=("$4" --allow-run-as-root --oversubscribe -np "$NP"); fi
EXTRA=("${@:6}")
W="$(mktemp -d /tmp/tessera-resume.XXXXXX)"
pid=
# Under mpirun the ranks are mpirun's children: SIGKILL them all (a lost job), then mpirun.
kill_job() { [ "$NP" -gt 1 ] && kill -9 $(pgrep -P "$pid") 2>/dev/null; kill -9 "$pid" 2>/dev/null; }
trap '[ -n "$pid" ] && kill_job; rm -rf "$W"' EXIT
"$GEN" --out "$W/s" --size 256 --only scene --targets 1 >/dev/null || { echo "FAIL generator"; exit 1; }
train='train: {tile: 32, batch: 2, accumulate: 2, steps: 40, steps_per_epoch: 10, seed: 3, checkpoint_every: 4,
        optimizer: adamw, schedule: cosine, warmup_steps: 5, grad_clip: 2.0, foreground_fraction: 0.3}'
if [ "$KIND" = dsn ]; then
  cat > "$W/train.yaml" <<YAML
model: {kind: dsn, preset: unet-tiny, classes: 4, base_filters: 8, levels: 3, norm: group, padding: same,
        dsn: {private_filters: 4, recon_filters: 4, classifier_hidden: 16}}
data:
  source: {pairs: [{image: s/scene.tif, labels: s/scene_labels.tif}]}
  targets: [{images: [s/scene_t1.tif]}]
  holdout: {axis: x, fraction: 0.25}
$train
YAML
else
  cat > "$W/train.yaml" <<YAML
model: {preset: unet-tiny, classes: 4, base_filters: 8}
data:
  pairs: [{image: s/scene.tif, labels: s/scene_labels.tif}]
  holdout: {axis: x, fraction: 0.25}
$train
YAML
fi
common=(--config "$W/train.yaml" --threads 1 --no-progress ${EXTRA[@]+"${EXTRA[@]}"})
${LAUNCH[@]+"${LAUNCH[@]}"} "$T" train "${common[@]}" --run-dir "$W/whole" > "$W/whole.log" 2>&1 ||
  { echo "FAIL uninterrupted run: $(tail -2 "$W/whole.log")"; exit 1; }

${LAUNCH[@]+"${LAUNCH[@]}"} "$T" train "${common[@]}" --run-dir "$W/killed" > "$W/killed.log" 2>&1 &
pid=$!
# Wait for step 23 (past the checkpoint of step 20, mid-epoch 3), then SIGKILL.
for _ in $(seq 1200); do
  n=$(grep -c '"loss"' "$W/killed/metrics.jsonl" 2>/dev/null)
  [ "${n:-0}" -ge 23 ] && break
  sleep 0.1
done
kill_job; wait $pid 2>/dev/null; pid=
cp "$W/killed/metrics.jsonl" "$W/before-resume.jsonl"
n=$(grep -c '"loss"' "$W/before-resume.jsonl")
echo "killed after $n steps"
[ "$n" -ge 5 ] && [ "$n" -lt 40 ] || { echo "FAIL the run was not killed between step 5 and 39 (at $n)"; exit 1; }

${LAUNCH[@]+"${LAUNCH[@]}"} "$T" train "${common[@]}" --run-dir "$W/killed" --resume auto > "$W/resumed.log" 2>&1 \
  || { echo "FAIL resume: $(tail -2 "$W/resumed.log")"; exit 1; }
/usr/bin/python3 - "$W/whole/metrics.jsonl" "$W/killed/metrics.jsonl" "$W/before-resume.jsonl" "$W/resumed.log" <<'PY'
import json, re, sys
whole_path, resumed_path, before_path, log_path = sys.argv[1:]
def rows(path):
    out = []
    for line in open(path):
        try: out.append((line, json.loads(line)))
        except ValueError:
            if path != before_path: raise  # only the killed run may end in a cut line
    return out
def fail(msg):
    print("FAIL " + msg); sys.exit(1)
whole, resumed, before, log = rows(whole_path), rows(resumed_path), rows(before_path), open(log_path).read()
steps = lambda rs: [j["step"] for _, j in rs if "loss" in j]
vals = lambda rs: [j["step"] for _, j in rs if "val_mean_dice" in j]
if steps(whole) != list(range(1, 41)): fail(f"uninterrupted run has step lines {steps(whole)}")
got = steps(resumed)
if got != list(range(1, 41)):
    fail(f"resumed metrics.jsonl: step lines {got} (want 1 … 40, each once, in order)")
if not vals(whole): fail("the uninterrupted run wrote no validation line")
if vals(resumed) != vals(whole): fail(f"validation lines at steps {vals(resumed)}, uninterrupted {vals(whole)}")

m = re.search(r"resumed from step (\d+) .*continuing at step (\d+) of 40", log)
if not m: fail(f"the resumed process does not say where it resumed: {log.strip()[:300]}")
N = int(m.group(1))
if int(m.group(2)) != N + 1 or N % 4 or not 4 <= N <= len(steps(before)):
    fail(f"resumed from step {N} (checkpoints every 4 steps; the killed run got to step {len(steps(before))})")
if not re.search(rf"trained {40 - N} steps", log): fail(f"the resumed process did not train {40 - N} steps: {log.strip()[-200:]}")
kept = [line for line, j in resumed if j["step"] <= N]
if kept != [line for line, j in before if j["step"] <= N]:
    fail(f"lines up to step {N} are not the killed run's, unchanged")
elapsed = {j["step"]: j["elapsed_s"] for _, j in resumed if "loss" in j}
if not elapsed[N + 1] < elapsed[N]:
    fail(f"step {N + 1} (elapsed {elapsed[N + 1]:.2f} s) was not the resumed process's first step (step {N}: {elapsed[N]:.2f} s)")

a = {j["step"]: j["loss"] for _, j in whole if "loss" in j}
b = {j["step"]: j["loss"] for _, j in resumed if "loss" in j}
diff = [s for s in a if a[s] != b[s]]
if diff: fail(f"losses differ at steps {diff[:5]}: {[(a[s], b[s]) for s in diff[:3]]}")
terms = lambda rs: {j["step"]: j.get("loss_terms") for _, j in rs if "loss" in j}
if terms(whole) != terms(resumed): fail("the loss terms of some step differ from the uninterrupted run's")
va = {j["step"]: j["val_mean_dice"] for _, j in whole if "val_mean_dice" in j}
vb = {j["step"]: j["val_mean_dice"] for _, j in resumed if "val_mean_dice" in j}
if va != vb: fail(f"validation Dice differs: {va} vs {vb}")
named = sorted({k for t in terms(whole).values() if t for k in t})
print(f"ok   resumed from step {N}, its first line step {N + 1}; steps 1 … 40 once each, "
      f"all 40 losses{' and terms (' + ', '.join(named) + ')' if named else ''} identical to the uninterrupted run "
      f"(last {b[40]:.6f}); validation Dice identical at steps {sorted(va)}")
PY
status=$?
[ "$NP" -gt 1 ] && [ $status -eq 0 ] || exit $status
# The checkpoint of 2 domain groups on one process (1 group): refused, one line, both counts.
out=$("$T" train --config "$W/train.yaml" --threads 1 --no-progress --run-dir "$W/killed" --resume auto 2>&1) &&
  { echo "FAIL resuming 2 domain groups' checkpoint on 1 process: accepted"; exit 1; }
err=$(echo "$out" | grep "tessera: error")
echo "$err" | grep -q "killed/checkpoints/last.pt: checkpoint written by 2 domain group(s), this run has 1" &&
  [ "$(echo "$err" | wc -l)" -eq 1 ] || { echo "FAIL resuming 2 domain groups' checkpoint on 1 process: $out"; exit 1; }
echo "ok   resuming it on 1 process is refused: $err"
