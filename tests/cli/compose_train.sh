#!/usr/bin/env bash
# `tessera train` with the modes composed, under mpirun, against one process with the same
# global batch: the same per-step losses (RUN/metrics.jsonl, 6 steps, 1e-5 relative) for
#   - 4 ranks = pipeline 2 × spatial 2 (every stage's tiles split in two blocks), GPipe;
#   - 4 ranks = pipeline 2 × spatial 2, 1F1B with activation checkpointing (the recomputed
#     forwards exchange halos and take whole-image norm statistics like the first ones);
#   - 8 ranks = data 2 × pipeline 2 × spatial 2, batch 1 per replica;
#   - 2 ranks = the SE-U-Net (a registry model) split in two blocks (--sp 2), and cut into two
#     pipeline stages (--pp 2, GPipe as LAMP ran it; its plugin declares its layer sequence);
# a registry model that declares no layer sequence (the seed's s0-unet) is refused by --pp in
# one line naming it;
# and the run says and records the grid it ran. A tiny network on 32 px tiles, so 8 ranks
# oversubscribed on two cores finish in seconds. The configuration is well conditioned: with 4
# filters at learning rate 0.05 rounding grows to 2e-4 by step 4 for --sp 2 and --pp 2 alone
# as well (one process is then the outlier), so such a run could not tell a bug from rounding. Exactness of one step (forward, loss, every
# parameter after 3 SGD and Adam steps) is tests/parallel/compose_test.cpp.
# Usage: compose_train.sh TESSERA MAKE_SAMPLE MPIEXEC
source "$(dirname "$0")/../lib/mpi.sh" compose "$@"
sample --size 256 --only scene

cat > "$W/c.yaml" <<YAML
model: {preset: unet-tiny, classes: 4, base_filters: 8, norm: group, padding: same}
data:
  pairs: [{image: s/scene.tif, labels: s/scene_labels.tif}]
train: {tile: 32, batch: 2, steps: 6, seed: 3, optimizer: sgd, learning_rate: 0.02, foreground_fraction: 0.3,
        loss: {kind: ce}, validate: false}
YAML

run one c 1 || { finish; exit; }
run ppsp c 4 --pp 2 --sp 2 --schedule gpipe && compare one ppsp "--pp 2 --sp 2 on 4 ranks (GPipe)"
run ppsp-ckpt c 4 --pp 2 --sp 2 --schedule 1f1b --activation-checkpoint always &&
  compare one ppsp-ckpt "--pp 2 --sp 2 on 4 ranks (1F1B, activation checkpointing always)"
run dpppsp c 8 --dp 2 --pp 2 --sp 2 --batch 1 && compare one dpppsp "--dp 2 --pp 2 --sp 2 (batch 1) on 8 ranks"

grep -q "data 2 × pipeline 2 × spatial 2, spatial 2 × 1 (blocks of 16 × 32 px)" "$W/dpppsp.log" &&
  pass "8 ranks are data 2 × pipeline 2 × spatial 2, the stages' tiles in blocks of 16 × 32 px" ||
  fail "grid: $(grep -m1 '^train:' "$W/dpppsp.log")"
/usr/bin/python3 - "$W/dpppsp/config.yaml" <<'PY' && pass "config.yaml records dp 2, pp 2, sp 2" || fail "resolved config"
import sys, yaml
p = yaml.safe_load(open(sys.argv[1]))["parallel"]
assert (p["dp"], p["pp"], p["sp"]) == (2, 2, 2), p
PY

# A registry model under --sp: the SE-U-Net (plugin) squeezes each channel over the whole tile.
sed 's/model: {.*}/model: {name: se-unet, dims: 2, base_filters: 4, levels: 3, classes: 4, norm: instance}/' "$W/c.yaml" > "$W/se.yaml"
run se-one se 1 && run se-sp2 se 2 --sp 2 && compare se-one se-sp2 "se-unet --sp 2 on 2 ranks"
run se-pp2 se 2 --pp 2 --schedule gpipe && compare se-one se-pp2 "se-unet --pp 2 on 2 ranks (GPipe)"
sed 's/model: {.*}/model: {name: s0-unet, dims: 2, base_filters: 4, levels: 3, classes: 4, padding: same}/' "$W/c.yaml" > "$W/seed.yaml"
if "${MPI[@]}" -np 2 "$T" train --config "$W/seed.yaml" --threads 1 --no-progress --run-dir "$W/seed" --pp 2 > "$W/seed.log" 2>&1; then
  fail "s0-unet --pp 2: accepted"
elif [ "$(grep -c 'tessera: error' "$W/seed.log")" -ge 1 ] && grep -q "model s0-unet presents no layer sequence" "$W/seed.log"; then
  pass "s0-unet --pp 2 refused: $(grep -m1 'tessera: error' "$W/seed.log")"
else
  fail "s0-unet --pp 2: $(tail -3 "$W/seed.log")"
fi
finish
