#!/usr/bin/env bash
# Plain Open MPI on one or more hosts. One rank per device: on CPU machines each rank gets
# cores / ranks-per-node intra-op threads (Tessera reads OMPI_COMM_WORLD_LOCAL_SIZE).
#   --map-by ppr:4:node   four ranks per node
#   --bind-to none        let LibTorch's threads use the rank's share of the cores
# As root, or with more ranks than cores, add --allow-run-as-root --oversubscribe.
set -euo pipefail
CONFIG="${1:?usage: mpirun.sh run.yaml [ranks]}"
RANKS="${2:-4}"
mpirun -np "$RANKS" --map-by ppr:4:node --bind-to none \
  tessera train --config "$CONFIG"                   # data parallel over all ranks (--dp defaults to world size)
mpirun -np "$RANKS" --map-by ppr:4:node --bind-to none \
  tessera infer --checkpoint runs/x/checkpoints/last.pt --input scene.tif --output labels.tif \
  --tile 512 --run-dir runs/x-infer                  # sample parallel; rerun resumes finished tiles
