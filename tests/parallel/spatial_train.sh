#!/usr/bin/env bash
# `tessera train --sp` under mpirun against one process with the same global batch: the same
# per-step losses (RUN/metrics.jsonl) over 6 steps, with SGD and with Adam, for
#   - 2 ranks = one tile split in 2 blocks along the first axis (--sp 2);
#   - 4 ranks = 2 replicas × 2 blocks, batch 1 per replica, against one process with batch 2;
#   - 4 ranks = one tile split into a 2 × 2 mesh (--sp 4 --sp-mesh 2x2);
#   - 4 ranks, batch norm synchronised over replicas (dp 2 × sp 2, train.sync_batch_norm);
#   - 3 ranks, uneven blocks (--sp 3: 16, 8, 8 of 32 rows).
# The learning rate is large enough that the weights move far within 6 steps, so a wrong
# gradient (a missing sum over the blocks, a micro-batch's share of accumulate: 2 not scaled)
# changes the later losses by far more than the 1e-5 relative allowed for rounding.
# Adam runs without normalisation: behind a group norm of one channel per group a conv bias
# has a gradient that is zero but for rounding, and Adam turns rounding-sized gradients into
# whole steps (plain data parallelism, --dp 2 against one process, drifts by 1e-4 there too).
# The configurations are well conditioned: one process with --threads 3 or 4 gives the losses
# of --threads 1 to 1e-7 (5e-6 with Adam at 0.003, 3e-4 with 48 px tiles, where rounding
# flips a tie whatever computes it: such a run cannot tell a bug from rounding).
# Then what --sp refuses, in one line naming the fix, before a run directory exists: a
# `valid` model (--padding same), a mesh that is not --sp blocks or has more
# axes than the model, a tile that does not split into blocks.
# Usage: spatial_train.sh TESSERA MAKE_SAMPLE MPIEXEC
source "$(dirname "$0")/../lib/mpi.sh" sptrain "$@"
sample --size 256 --only scene

# config NAME OPTIMIZER LR NORM ACCUMULATE: a small same-padding U-Net on 32 px tiles.
config() {
  cat > "$W/$1.yaml" <<YAML
model: {preset: unet-tiny, classes: 4, base_filters: 8, norm: $4, padding: same}
data:
  pairs: [{image: s/scene.tif, labels: s/scene_labels.tif}]
train: {tile: 32, batch: 2, accumulate: $5, steps: 6, seed: 3, optimizer: $2, learning_rate: $3, foreground_fraction: 0.3,
        loss: {kind: dice_ce}, validate: false, sync_batch_norm: true}
YAML
}
config sgd sgd 0.05 group 2
config adam adam 0.002 none 2
# Batch norm at lr 0.02: at 0.05 rounding grows tenfold a step here (1e-7 at step 3 to 2.2e-5
# at step 6 on this CPU, the code unchanged); unsynchronised statistics differ from step 1 on.
config bn sgd 0.02 batch 1  # with accumulate 2 ill-conditioned: --threads 3 differs from 1 by 5e-3

for opt in sgd adam; do
  echo "== $opt"
  run "$opt-one" "$opt" 1 || continue
  run "$opt-sp2" "$opt" 2 --sp 2 && compare "$opt-one" "$opt-sp2" "--sp 2 on 2 ranks"
  run "$opt-dp2sp2" "$opt" 4 --dp 2 --sp 2 --batch 1 && compare "$opt-one" "$opt-dp2sp2" "--dp 2 --sp 2 (batch 1) on 4 ranks"
  run "$opt-mesh" "$opt" 4 --sp 4 --sp-mesh 2x2 && compare "$opt-one" "$opt-mesh" "--sp 4 --sp-mesh 2x2 on 4 ranks"
done
echo "== batch norm, synchronised over replicas"
run bn-one bn 1 && run bn-dp2sp2 bn 4 --dp 2 --sp 2 --batch 1 && compare bn-one bn-dp2sp2 "--dp 2 --sp 2, batch norm"
echo "== uneven blocks: 32 rows over 3 ranks in steps of 8"
run sgd-sp3 sgd 3 --sp 3 && compare sgd-one sgd-sp3 "--sp 3 on 3 ranks ($(grep -o 'blocks of [^)]*' "$W/sgd-sp3.log"))"

echo "== the run says its decomposition and records it"
grep -q "data 1 × pipeline 1 × spatial 4, spatial 2 × 2 (blocks of 16 × 16 px)" "$W/sgd-mesh.log" \
  && pass "$(grep -o 'spatial 2 × 2 (blocks of [^)]*)' "$W/sgd-mesh.log")" || fail "plan line: $(grep -m1 '^train:' "$W/sgd-mesh.log")"
grep -q "data 2 × pipeline 1 × spatial 2, spatial 2 × 1 (blocks of 16 × 32 px)" "$W/sgd-dp2sp2.log" \
  && pass "dp 2 × sp 2: $(grep -o 'spatial 2 × 1 (blocks of [^)]*)' "$W/sgd-dp2sp2.log")" \
  || fail "plan line: $(grep -m1 '^train:' "$W/sgd-dp2sp2.log")"
/usr/bin/python3 - "$W/sgd-mesh/config.yaml" "$W/sgd-sp2/config.yaml" <<'PY' && pass "config.yaml records sp 4 / 2x2 and sp 2 / 2x1" || fail "resolved config"
import sys, yaml
for path, sp, mesh in [(sys.argv[1], 4, "2x2"), (sys.argv[2], 2, "2x1")]:
    p = yaml.safe_load(open(path))["parallel"]
    assert p["sp"] == sp and str(p["sp_mesh"]) == mesh, (path, p)
PY

echo "== refusals: one line, non-zero exit, no run directory"
# refused NAME PATTERN RANKS FLAGS…
refused() {
  local name=$1 pattern=$2 ranks=$3
  shift 3
  if "${MPI[@]}" -np "$ranks" "$T" train --config "$W/sgd.yaml" --threads 1 --no-progress --run-dir "$W/$name" "$@" \
       > "$W/$name.log" 2>&1; then
    fail "$name: accepted"; return
  fi
  local msg
  msg=$(grep -m1 "tessera: error" "$W/$name.log")
  if [[ "$msg" == *"$pattern"* ]] && [ ! -e "$W/$name" ]; then pass "$name: $msg"; else fail "$name: $(head -3 "$W/$name.log")"; fi
}
refused valid "(use --padding same)" 2 --sp 2 --padding valid
refused meshsize "--sp-mesh 2x2: 4 blocks, but --sp 2" 2 --sp 2 --sp-mesh 2x2
refused meshaxes "--sp-mesh 2x1x1: 3 axes for a 2-D model" 2 --sp 2 --sp-mesh 2x1x1
refused tile "sgd.yaml: train.tile on axis 0 of --sp 4 (mesh 4 × 1): side 16 cannot be split into 4 blocks" 4 --sp 4 --tile 16

finish
