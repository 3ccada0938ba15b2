#!/usr/bin/env bash
# What a Domain Separation Network buys on an unlabelled domain (README, "Domain
# parallelism"): target-domain Dice of three models with the same U-Net (unet-tiny, same
# padding, group norm), the same steps, tiles and seed:
#   (a) source only   a U-Net trained on the labelled source scene;
#   (b) DSN           sample_data/scene_dsn.yaml: source labels + target 1's images, no target labels;
#   (c) target labels a U-Net trained on target 1's own labels: the upper bound.
# All three are scored on the right-most quarter of target 1 (x >= 75%), which (c) never
# trained on; (a) and (b) infer target 1 with the source's normalisation, as a user would.
# Prints a Markdown table (mean Dice over the four classes and per class) and the gap closed,
# (b − a) / (c − a). Seeds: TESSERA_DSN_SEEDS (default "1 2"); steps: TESSERA_DSN_STEPS (300).
# Usage: scripts/dsn_accuracy.sh [WORK_DIR]   (default runs/dsn_accuracy)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
tessera_setup
tessera_build --target tessera tessera-make-sample
tessera_sample_data
T="$BUILD_DIR/cli/tessera"
W="${1:-$TESSERA_ROOT/runs/dsn_accuracy}"
STEPS="${TESSERA_DSN_STEPS:-300}"
SEEDS="${TESSERA_DSN_SEEDS:-1 2}"
NAMES=vegetation,building,road,water
mkdir -p "$W"

# A U-Net config with the DSN's shared U-Net, trained on one labelled image.
unet_config() {  # IMAGE LABELS
  cat <<YAML
model: {preset: unet-tiny, padding: same, norm: group, classes: 4}
data:
  pairs: [{image: $1, labels: $2}]
  class_names: [vegetation, building, road, water]
  holdout: {axis: x, fraction: 0.25}
train: {tile: 128, batch: 4, steps: $STEPS, learning_rate: 0.003, checkpoint_every: 100}
YAML
}
unet_config "$SAMPLE_DIR/scene.tif" "$SAMPLE_DIR/scene_labels.tif" >"$W/source_only.yaml"
unet_config "$SAMPLE_DIR/scene_t1.tif" "$SAMPLE_DIR/scene_t1_labels.tif" >"$W/target_labels.yaml"

# Mean and per-class Dice of a run's prediction on target 1's held-back quarter.
score() {  # RUN
  "$T" infer --checkpoint "$1/checkpoints/last.pt" --input "$SAMPLE_DIR/scene_t1.tif" --output "$1/t1_labels.tif" \
    --no-progress >/dev/null
  "$T" eval --pred "$1/t1_labels.tif" --truth "$SAMPLE_DIR/scene_t1_labels.tif" --holdout-fraction 0.25 \
    --names "$NAMES" --json >"$1/t1_eval.json"
}

for seed in $SEEDS; do
  for model in source_only dsn target_labels; do
    run="$W/$model-seed$seed"
    config="$W/$model.yaml"
    [ "$model" = dsn ] && config="$TESSERA_ROOT/sample_data/scene_dsn.yaml"
    echo "== $model, seed $seed ($STEPS steps)"
    start=$(date +%s)
    "$T" train --config "$config" --run-dir "$run" --steps "$STEPS" --seed "$seed" --no-progress 2>&1 | grep -E "^trained|^train:" || exit 1
    echo "$(($(date +%s) - start))" >"$run/train_seconds"
    score "$run" || exit 1
  done
done

/usr/bin/python3 - "$W" "$SEEDS" <<'PY'
import json, statistics, sys
work, seeds = sys.argv[1], sys.argv[2].split()
rows = [("(a) source only", "source_only"), ("(b) DSN, unlabelled target", "dsn"), ("(c) target labels (upper bound)", "target_labels")]
def dice(model, seed):
    e = json.load(open(f"{work}/{model}-seed{seed}/t1_eval.json"))
    return e
first = dice("source_only", seeds[0])
names = [c["name"] for c in first["classes"]]
print(f"Target-domain Dice on target 1's held-back quarter, seeds {', '.join(seeds)} (mean over seeds; range in brackets)\n")
print("| model | mean Dice | " + " | ".join(names) + " | train s |")
print("|---|---|" + "---|" * len(names) + "---|")
means = {}
for label, model in rows:
    evals = [dice(model, s) for s in seeds]
    m = [e["mean_dice"] for e in evals]
    means[model] = m
    per = []
    for k in range(len(names)):
        v = [e["classes"][k]["dice"] for e in evals]
        per.append("–" if None in v else f"{statistics.mean(v):.3f}")
    secs = [int(open(f"{work}/{model}-seed{s}/train_seconds").read()) for s in seeds]
    print(f"| {label} | {statistics.mean(m):.3f} [{min(m):.3f}–{max(m):.3f}] | " + " | ".join(per) + f" | {statistics.mean(secs):.0f} |")
# One formula (docs/domain-adaptation.md): the gap of the means, the per-seed gaps as its range.
a, b, c = (statistics.mean(means[k]) for k in ("source_only", "dsn", "target_labels"))
gap = (b - a) / (c - a) if c != a else float('nan')
gaps = [(y - x) / (z - x) if z != x else float('nan') for x, y, z in zip(means["source_only"], means["dsn"], means["target_labels"])]
print(f"\nGap closed by the DSN, (mean b − mean a) / (mean c − mean a): {gap:.2f}, per seed {min(gaps):.2f}–{max(gaps):.2f} (goal: ≥ 0.5)")
PY
