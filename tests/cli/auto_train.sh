#!/usr/bin/env bash
# tessera train --auto (docs/new-dataset.md), on a generated MSD folder of 3 cases:
#   - the plan is applied: RUN/config.yaml holds the plan's network, optimiser and augmentations,
#     and names each choice with its reason in its head;
#   - a flag and a config-file key win over the plan (and the head says they did);
#   - --time-budget shapes the step (tile, levels, filters from a measured rate) and measures
#     steps (train.steps written with the measured figure);
#   - --fold all trains one run per fold and prints and writes the folds' summary;
#   - fewer than 5 cases: no validation cases held out (cli.auto_validation: 5 or more);
#   - bad --time-budget / --fold values are one line naming the flag, exit 1.
# Usage: auto_train.sh TESSERA MAKE_SAMPLE
set -uo pipefail
T="$1"; GEN="$2"
W="$(mktemp -d /tmp/tessera-auto-train.XXXXXX)"
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL $*"; exit 1; }
train() {  # NAME FLAGS...: in $W, log in $W/NAME.log
  local name="$1"; shift
  (cd "$W" && "$T" train --threads 2 --no-progress "$@" > "$name.log" 2>&1)
}
key() {  # FILE SECTION KEY: the value of SECTION.KEY in a resolved config
  python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))[sys.argv[2]][sys.argv[3]])' "$@"
}

"$GEN" --msd "$W/msd" --ct-size 32 --targets 2 > "$W/gen.log" 2>&1 || fail "generator: $(tail -2 "$W/gen.log")"

# The plan applied, one flag over it.
train plain --auto --dataset msd --run-dir run --device-memory 0.25 --steps 2 --steps-per-epoch 2 --batch 1 ||
  fail "train --auto: $(tail -3 "$W/plain.log")"
C="$W/run/config.yaml"
[ "$(key "$C" model norm)" = instance ] || fail "model.norm not the plan's instance: $(cat "$C")"
[ "$(key "$C" model padding)" = same ] || fail "model.padding not the plan's same"
[ "$(key "$C" model base_filters)" = 32 ] || fail "model.base_filters not the plan's 32"
[ "$(key "$C" train optimizer)" = sgd ] || fail "train.optimizer not the plan's sgd"
[ "$(key "$C" train augment_rotation)" = 30 ] || fail "train.augment_rotation not the plan's 30 (3-D)"
[ "$(key "$C" train foreground_fraction)" = 0.33 ] || fail "train.foreground_fraction not the plan's 0.33"
[ "$(key "$C" train batch)" = 1 ] || fail "--batch 1 did not win over the plan: $(key "$C" train batch)"
grep -q '^# auto: train.batch: .* \[overridden: given by a flag\]' "$C" || fail "the head does not say --batch won: $(head -40 "$C")"
grep -q '^# auto: model.norm: instance — statistics per sample' "$C" || fail "no reason for model.norm: $(head -40 "$C")"
grep -q '^# auto: train.tile: [0-9]* — the plan.s patch ' "$C" || fail "no reason for train.tile: $(head -40 "$C")"
grep -q '^# auto: train.augment_elastic: 0 — off: ' "$C" || fail "elastic not off without a long budget: $(head -40 "$C")"
grep -q '^train: auto: model.levels: [0-9]* — ' "$W/plain.log" || fail "stderr does not list the choices: $(head "$W/plain.log")"
[ "$(key "$C" train deep_supervision)" = True ] || fail "train.deep_supervision not the plan's true"
[ -s "$W/run/checkpoints/last.pt" ] || fail "no checkpoint"
# 3 cases, fewer than 5 folds: none held out, nothing decided at the end.
grep -q '^# auto: data.folds: 0 — 3 training cases, fewer than 5: none held out' "$C" || fail "no holdout line: $(grep 'data.folds' "$C")"
[ ! -e "$W/run/postprocessing.json" ] || fail "a run without validation cases decided post-processing"

# A config file's key wins over the plan; its dataset is relative to the file.
mkdir -p "$W/cfg"
cat > "$W/cfg/auto.yaml" <<YAML
run_dir: run-cfg
data: {dataset: ../msd}
train: {tile: 16, steps: 2, steps_per_epoch: 2, batch: 1}
YAML
train file --auto --config cfg/auto.yaml --device-memory 0.25 || fail "train --auto --config: $(tail -3 "$W/file.log")"
C="$W/cfg/run-cfg/config.yaml"
[ "$(key "$C" train tile)" = 16 ] || fail "the file's train.tile 16 did not win: $(key "$C" train tile)"
grep -q '^# auto: train.tile: .* \[overridden: given by the config file\]' "$C" || fail "the head does not say the file won"
[ "$(key "$C" model norm)" = instance ] || fail "the plan was not applied under a config file"

# --time-budget: steps from a measured step time.
train budget --auto --dataset msd --run-dir run-budget --device-memory 0.25 --batch 1 --steps-per-epoch 1000 \
  --time-budget 40s || fail "train --time-budget: $(tail -3 "$W/budget.log")"
C="$W/run-budget/config.yaml"
grep -q '^# auto: train.steps: [1-9][0-9]* — --time-budget 40 s: .* s per step, the median of 5 steps' "$C" ||
  fail "no measured steps: $(grep 'train.steps' "$C")"
[ "$(key "$C" train steps)" -ge 1 ] || fail "train.steps $(key "$C" train steps)"
# The budget shaped the step: the rate measured, the shape said, and the config holds it.
grep -q '^# auto: step_shape: [0-9]* tiles, [0-9]* levels, [0-9]* filters, batch 1 — --time-budget: at least 1000 steps.* GFLOP/s' "$C" ||
  fail "no step shape from the budget: $(grep 'step_shape' "$C")"
shape="$(sed -n 's/^# auto: step_shape: \([0-9]*\) tiles, \([0-9]*\) levels, \([0-9]*\) filters.*/\1 \2 \3/p' "$C")"
[ "$shape" = "$(key "$C" train tile) $(key "$C" model levels) $(key "$C" model base_filters)" ] ||
  fail "step_shape $shape is not the config's tile, levels, filters"

# Every fold, and its summary.
train folds --auto --dataset msd --run-dir run-folds --device-memory 0.25 --steps 2 --steps-per-epoch 2 --batch 1 \
  --fold all --folds 3 || fail "--fold all: $(tail -3 "$W/folds.log")"
grep -q '^mean over 3 folds: [0-9.]*$' "$W/folds.log" || fail "no folds summary: $(tail -8 "$W/folds.log")"
python3 - "$W/run-folds/folds.json" <<'PY' || exit 1
import json, sys
j = json.load(open(sys.argv[1]))
def fail(m): print("FAIL folds.json: " + m); sys.exit(1)
if [f["fold"] for f in j["folds"]] != [0, 1, 2]: fail(f"folds {j['folds']}")
for f in j["folds"]:
    if not 0 <= f["val_mean_dice"] <= 1: fail(f"fold {f['fold']} Dice {f['val_mean_dice']}")
    if len(f["val_dice"]) != len(j["class_names"]): fail(f"fold {f['fold']}: {len(f['val_dice'])} class Dice")
mean = sum(f["val_mean_dice"] for f in j["folds"]) / 3
if abs(mean - j["mean_dice"]) > 1e-9: fail(f"mean {j['mean_dice']} is not the folds' {mean}")
PY
for k in 0 1 2; do [ -s "$W/run-folds/fold-$k/checkpoints/last.pt" ] || fail "fold $k left no checkpoint"; done

# Bad values: one line naming the flag.
for bad in "--time-budget 5x" "--fold 7 --folds 3" "--fold two" "--folds 1" "--resume x.pt --fold all"; do
  # shellcheck disable=SC2086
  train bad --auto --dataset msd --run-dir run-bad $bad && fail "$bad: accepted"
  [ "$(wc -l < "$W/bad.log")" -eq 1 ] && grep -q -- "${bad%% *}" "$W/bad.log" || fail "$bad: $(cat "$W/bad.log")"
done
for bad in "--device-memory 2" "--auto --device-memory -1"; do
  # shellcheck disable=SC2086
  train bad --dataset msd --run-dir run-bad $bad && fail "$bad: accepted"
  [ "$(wc -l < "$W/bad.log")" -eq 1 ] && grep -q -- "--device-memory" "$W/bad.log" || fail "$bad: $(cat "$W/bad.log")"
done
[ ! -e "$W/run-bad" ] || fail "a refused run left run-bad behind"
echo "auto_train: plan applied, flags and the file win, steps from the budget, folds summarised"
