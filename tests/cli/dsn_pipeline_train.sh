#!/usr/bin/env bash
# `tessera train` with model.kind dsn in pipeline stages (the DSN's encoder levels, shared and
# private side by side, then its heads; engine/src/train/dsn.cpp), under mpirun, against one
# process with the same global batch: the same per-step losses (RUN/metrics.jsonl, 6 steps,
# 1e-5 relative) for 1 source + 1 target and
#   - 2 ranks = --pp 2, one domain group training both domains (2 micro-batches), GPipe;
#   - 2 ranks = --pp 2, 1F1B with activation checkpointing always;
#   - 4 ranks = --dp 2 --pp 2 (batch 1 per replica);
#   - 16 ranks = all four axes: 2 domain groups × --dp 2 × --pp 2 × --sp 2 (batch 1 per replica);
# and the 16-rank run says the grid it ran. Refused in one line: more stages than the DSN's
# chain has layers, MMD in stages, parallel.micro_batches. A tiny network (4 filters, 3
# levels, no norm) on 32 px tiles, so 16 ranks oversubscribed on two cores finish in seconds.
# Exactness of the parameters and the forward output is tests/parallel/dsn_pipeline_test.cpp.
# Usage: dsn_pipeline_train.sh TESSERA MAKE_SAMPLE MPIEXEC
source "$(dirname "$0")/../lib/mpi.sh" dsnpipeline "$@"
sample --size 256 --only scene --targets 1

cat > "$W/d.yaml" <<YAML
model: {kind: dsn, preset: unet-tiny, classes: 4, base_filters: 4, levels: 3, norm: none, padding: same,
        dsn: {private_filters: 4, recon_filters: 4, classifier_hidden: 8, alpha: 0.5, beta: 0.5, gamma: 0.5,
              similarity: dann}}
data:
  source: {pairs: [{image: s/scene.tif, labels: s/scene_labels.tif}]}
  targets:
    - images: [s/scene_t1.tif]
  class_names: [vegetation, building, road, water]
train: {tile: 32, batch: 2, steps: 6, seed: 3, optimizer: sgd, learning_rate: 0.05, checkpoint_every: 3}
YAML

run one d 1 || { finish; exit; }
run pp2 d 2 --pp 2 --schedule gpipe && compare one pp2 "DSN --pp 2 on 2 ranks (both domains in one group, GPipe)"
run pp2ck d 2 --pp 2 --schedule 1f1b --activation-checkpoint always &&
  compare one pp2ck "DSN --pp 2 on 2 ranks (1F1B, activation checkpointing always)"
run dppp d 4 --dp 2 --pp 2 --batch 1 && compare one dppp "DSN --dp 2 --pp 2 (batch 1) on 4 ranks"
run all d 16 --dp 2 --pp 2 --sp 2 --batch 1 &&
  compare one all "DSN --dp 2 --pp 2 --sp 2 (batch 1) on 16 ranks = 2 domain groups x 2 x 2 x 2"
grep -q "16 ranks = 2 domain groups x 2 replicas x 2 stages x 2 spatial blocks" "$W/all.log" &&
  pass "16 ranks are 2 domain groups x 2 replicas x 2 stages x 2 spatial blocks" ||
  fail "grid: $(grep -m1 '^train: DSN' "$W/all.log")"

# refuse NAME EXPECTED-TEXT CONFIG FLAGS…: one line naming it, exit 1, no run directory.
refuse() {
  local name=$1 want=$2 cfg=$3 out
  shift 3
  out=$("$T" train --config "$W/$cfg.yaml" --no-progress --run-dir "$W/refused-$name" "$@" 2>&1) && { fail "$name: accepted"; return; }
  if [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q -- "$want" && [ ! -e "$W/refused-$name" ]; then
    pass "$name: $out"
  else
    fail "$name: wanted one line with '$want', nothing written; got: $out"
  fi
}
refuse stages "4 pipeline layers" d --pp 5
sed 's/similarity: dann/similarity: mmd, mmd_sigmas: [0.5, 2]/' "$W/d.yaml" > "$W/mmd.yaml"
refuse mmd "similarity mmd" mmd --pp 2
sed 's/checkpoint_every: 3}/checkpoint_every: 3}\nparallel: {micro_batches: 1}/' "$W/d.yaml" > "$W/micro.yaml"
refuse micro "parallel.micro_batches" micro --pp 2
finish
