#!/usr/bin/env bash
# `mpirun -np P tessera infer --sp P` (each tile split over P ranks, halos exchanged, rank 0
# writes) gives the labels of one process with the same tile: a `same`-padding U-Net with
# whole-window norm statistics, on a 2-D raster (random init; 1-D split over 2 ranks, 2 × 2
# mesh over 4) and a 3-D volume (a checkpoint trained one step; slabs over 2 ranks, 2 × 2 × 1
# over 4), with several tiles and with the whole image as one tile. The split run is the
# one-process network up to float32 rounding, so: its probabilities (every 2-D run writes
# --probabilities) are within BOUND = 5e-5 of one process's (README, "Spatial parallel"), and
# a label may differ only at a tie, a pixel or voxel whose two top one-process probabilities
# are close enough for that rounding to swap them. A volume has no probability output: its
# one-process probabilities come, at test time, from the same weights through `tessera
# export` and python/tessera_unet.py in float64 (volume_margins.py), which must give one
# process's labels but at near-ties. Also: the summary names the decomposition, no rank
# leaves a staged file, and what --sp refuses (a `valid` model, a rank count other than --sp,
# --run-dir, a mesh of another size) is a one-line error, exit 1, no output.
#
# Where the rounding comes from (measured: one-process and split logits dumped through
# core's infer_logits, and the same network in float64). The split run's statistics are
# two-pass allreduced sums and its convolutions read pre-padded blocks; one process runs
# LibTorch's channels-last group_norm, whose single-pass E[x²] − E[x]² in float32 is the larger
# error: at tile 256 one process is 1.6e-4 (logits) from float64, the split run 2e-5. Worst
# probability difference seen: 3.0e-5 (2-D, whole 256² tile). The one 2-D pixel that differs
# at tile 256, (row 51, column 45), has top two probabilities 6.5e-6 apart in one process
# (float64 sides with the split run there). The volume (seed 1): 3 near-ties at tile 16 and 7
# for the whole volume (closest 8.6e-6), no voxel differs. Planted in spatial.cpp, a halo left
# at zero on one side or sent one slice off moves probabilities by 0.5 or more and flips
# thousands of labels, 2-D and 3-D (right-hand halo at zero: 6079 of the whole volume's voxels
# flip on 2 ranks, all but 4 of them away from a near-tie); planted in the decomposed norm, an
# epsilon of 3e-5 instead of one process's 1e-5 moves them by 7e-5 and fails every 2-D case
# (the volumes' logits are Spatial.ChannelsLastInferenceEqualsOneProcess's to check).
# Usage: infer_spatial.sh TESSERA MAKE_SAMPLE MPIEXEC
source "$(dirname "$0")/../lib/mpi.sh" infer-spatial "$@"
export TESSERA_THREADS=1

sample --size 256 --ct-size 32
RASTER=(--model unet-tiny --padding same --norm group --init random --seed 3 --classes 4 --input "$W/s/scene.tif" --no-progress)

BOUND=5e-5  # largest probability difference from one process (README: 5·10⁻⁵)
TIE=$(awk -v b=$BOUND 'BEGIN { print 2 * b }')  # a near-tie: top two within 2·BOUND (volumes)

# differing REF OUT REF_PROBS OUT_PROBS (2-D) or differing REF OUT "" MARGINS (3-D): "N differ …"
# for two label outputs (GeoTIFF through GDAL, NIfTI-1 .nii from its header's vox_offset).
# 2-D: D, the largest difference of the two runs' probabilities, must be at most BOUND (and
# nodata the same); a label may differ only where one process's two top probabilities are at
# most 2·D apart — a swap of the top two needs each to move by half their gap. 3-D: a volume
# has no probability output; MARGINS (volume_margins.py, float64 PyTorch) holds one process's
# top-two gap of every voxel, and a label may differ only where it is at most 2·BOUND (so at
# most as many voxels as there are such near-ties). Exit 1 otherwise.
differing() {
  PYTHONPATH="$(dirname "$0")/../lib" /usr/bin/python3 - "$BOUND" "$@" <<'PY'
import sys
import numpy as np
from label_arrays import labels
bound, ref, out, rest = float(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
a, b = labels(ref), labels(out)
if a.shape != b.shape:
    print(f"shapes {a.shape} and {b.shape}")
    sys.exit(1)
flips = np.argwhere(a != b)
if ref.endswith(".nii"):
    margin = np.load(rest[1])  # (k, j, i), as the labels
    if margin.shape != a.shape:
        print(f"margins of shape {margin.shape}, labels {a.shape}")
        sys.exit(1)
    near = int((margin <= 2 * bound).sum())
    untied = [tuple(int(v) for v in f[::-1]) for f in flips if not margin[tuple(f)] <= 2 * bound]
    margins = sorted(float(f"{margin[tuple(f)]:.1e}") for f in flips)
    print(f"{len(flips)} differ, one-process margins {margins[:5]}{' …' * (len(margins) > 5)}, "
          f"{near} voxels within 2·{bound:.0e}" + (f"; {len(untied)} are not ties, (i,j,k) {untied[:3]}" if untied else ""))
    sys.exit(1 if untied or len(flips) > near else 0)
from osgeo import gdal
p, q = (gdal.Open(f).ReadAsArray() for f in rest)
if p.shape != q.shape or not np.array_equal(np.isnan(p), np.isnan(q)):
    print(f"probabilities: shapes {p.shape} and {q.shape} or nodata differ")
    sys.exit(1)
d = float(np.nanmax(np.abs(p - q)))
top = np.sort(p, axis=0)
margin = top[-1] - top[-2]
near = int((margin <= 2 * d).sum())
untied = int(sum(not margin[tuple(f)] <= 2 * d for f in flips))
margins = sorted(float(f"{margin[tuple(f)]:.1e}") for f in flips)
print(f"probabilities within {d:.1e} (bound {bound:.0e}); {len(flips)} differ, one-process margins "
      f"{margins[:5]}{' …' * (len(margins) > 5)}, {near} pixels within 2·{d:.1e}"
      + (f"; {untied} are not ties" if untied else ""))
sys.exit(0 if d <= bound and not untied else 1)
PY
}

# same NAME REF OUT LOG MESH REF_PROBS OUT_PROBS | same NAME REF OUT LOG MESH "" MARGINS:
# the outputs agree in every pixel but ties (differing), and the summary names the mesh.
same() {
  local name="$1" ref="$2" out="$3" log="$4" mesh="$5" n
  if ! n=$(differing "$ref" "$out" "${@:6}" 2>&1); then
    fail "$name: labels of one process? $n"
  elif ! grep -qF "spatial ${mesh}" "$log"; then
    fail "$name: summary lacks 'spatial ${mesh}': $(cat "$log")"
  else
    pass "$name: labels of one process ($n); $(grep -o '[0-9]* tiles, tile [0-9×]* ([^)]*)\|spatial [^,]* x' "$log" | tr '\n' ' ')"
  fi
}

# case_ NAME RANKS REF OUT MESH REF_PROBS|"" MARGINS|"" ARGS...: mpirun -np RANKS tessera
# infer ARGS, compared with REF; with REF_PROBS (2-D) the run also writes OUT's probabilities
# (OUT minus .tif, then p.tif), compared with REF_PROBS; a volume is compared with MARGINS.
case_() {
  local name="$1" ranks="$2" ref="$3" out="$4" mesh="$5" probs="$6" margins="$7" extra=()
  shift 7
  [ -n "$probs" ] && extra=(--probabilities "${out%.tif}p.tif")
  "${MPI[@]}" -np "$ranks" "$T" infer "$@" --output "$out" "${extra[@]}" > "$W/$name.log" 2>&1 \
    || { fail "$name: exit $?: $(grep -m1 'tessera: error' "$W/$name.log" || tail -3 "$W/$name.log")"; return; }
  if [ -n "$probs" ]; then
    same "$name" "$ref" "$out" "$W/$name.log" "$mesh" "$probs" "${out%.tif}p.tif"
  else
    same "$name" "$ref" "$out" "$W/$name.log" "$mesh" "" "$margins"
  fi
}

echo "== 2-D raster 256², unet-tiny --padding same --norm group (whole-window statistics)"
for tile in 64 256; do
  "$T" infer "${RASTER[@]}" --tile $tile --output "$W/one$tile.tif" --probabilities "$W/one${tile}p.tif" >/dev/null \
    || { fail "one-process infer --tile $tile"; continue; }
  case_ "raster tile $tile, 2 ranks" 2 "$W/one$tile.tif" "$W/two$tile.tif" "2 (mesh 2 × 1)" "$W/one${tile}p.tif" "" \
    "${RASTER[@]}" --tile $tile --sp 2
  case_ "raster tile $tile, 2x2 mesh" 4 "$W/one$tile.tif" "$W/four$tile.tif" "4 (mesh 2 × 2)" "$W/one${tile}p.tif" "" \
    "${RASTER[@]}" --tile $tile --sp 4 --sp-mesh 2x2
done
# The one-tile run is not the tiled one: the test compares like with like.
n=$(/usr/bin/python3 -c "import sys; from osgeo import gdal; a, b = (gdal.Open(f).ReadAsArray() for f in sys.argv[1:]); print(int((a != b).sum()))" \
  "$W/one64.tif" "$W/one256.tif")
echo "     (tiles of 64 and one 256 tile differ in $n pixels: each run is compared with its own tile's reference)"

echo "== 3-D volume 32³, unet3d-tiny (8 filters) --padding same --norm instance, trained one step"
# A volume has no probability output, so its near-ties come from an independent path: the
# checkpoint through `tessera export` into python/tessera_unet.py, in float64, tiled as Tessera
# tiles (volume_margins.py). The split and one-process runs use that export brought back by
# `tessera import`, so PyTorch and Tessera run the very weights of model.pt; the trained
# checkpoint itself (channels-last weights, as `tessera train` saves them) is run once more.
# Seed 1: with seed 3 some 150 voxels have all 8 last features at zero, so only the head's
# bias speaks there and two classes tie (volume_margins.py refuses over 1% near-ties).
cat > "$W/volume.yaml" <<YAML
run_dir: $W/vrun
model: {preset: unet3d-tiny, base_filters: 8, classes: 3, padding: same, norm: instance}
data:
  pairs: [{image: $W/s/ct.nii.gz, labels: $W/s/ct_labels.nii.gz}]
train: {tile: 16, batch: 1, steps: 1, seed: 1}
YAML
margins_ok=()
if ! /usr/bin/python3 -c 'import torch, nibabel' 2>/dev/null; then
  fail "volume: /usr/bin/python3 cannot import torch and nibabel (apt-get install python3-torch python3-nibabel)"
elif ! "$T" train --config "$W/volume.yaml" --threads 1 --no-progress > "$W/vtrain.log" 2>&1 \
    || ! "$T" export --checkpoint "$W/vrun/checkpoints/last.pt" --out "$W/v.pt" > "$W/vexport.log" 2>&1 \
    || ! "$T" import --weights "$W/v.pt" --arch "$W/v.json" --out "$W/v.ckpt" >> "$W/vexport.log" 2>&1; then
  fail "volume: train, export or import: $(tail -2 "$W/vtrain.log" "$W/vexport.log" 2>/dev/null | grep -v '^==' | tr '\n' ' ')"
else
  VOLUME=(--checkpoint "$W/v.ckpt" --input "$W/s/ct.nii.gz" --no-progress)
  for tile in 16 32; do
    "$T" infer "${VOLUME[@]}" --tile $tile --output "$W/vone$tile.nii" >/dev/null \
      || { fail "one-process infer --tile $tile (volume)"; continue; }
    # PyTorch's labels are one process's but at near-ties: the margins are of the network that ran.
    if n=$(/usr/bin/python3 "$(dirname "$0")/volume_margins.py" "$W/v.pt" "$W/v.json" "$W/s/ct.nii.gz" $tile \
        "$W/vone$tile.nii" "$TIE" "$W/margins$tile.npy" 2>&1); then
      pass "volume tile $tile, one process = PyTorch: $n"; margins_ok+=($tile)
    else
      fail "volume tile $tile, one process = PyTorch? $n"
    fi
  done
fi
if [[ " ${margins_ok[*]} " == *" 16 "* ]]; then
  case_ "volume tile 16, 2 ranks" 2 "$W/vone16.nii" "$W/vtwo16.nii" "2 (mesh 2 × 1 × 1)" "" "$W/margins16.npy" \
    "${VOLUME[@]}" --tile 16 --sp 2
fi
if [[ " ${margins_ok[*]} " == *" 32 "* ]]; then
  case_ "volume tile 32, 2 ranks" 2 "$W/vone32.nii" "$W/vtwo32.nii" "2 (mesh 2 × 1 × 1)" "" "$W/margins32.npy" \
    "${VOLUME[@]}" --tile 32 --sp 2
  case_ "volume tile 32, 2x2 mesh" 4 "$W/vone32.nii" "$W/vfour32.nii" "4 (mesh 2 × 2 × 1)" "" "$W/margins32.npy" \
    "${VOLUME[@]}" --tile 32 --sp 4 --sp-mesh 2x2
  case_ "volume tile 32, 2 ranks, the trained checkpoint itself" 2 "$W/vone32.nii" "$W/vtwoc32.nii" "2 (mesh 2 × 1 × 1)" "" \
    "$W/margins32.npy" --checkpoint "$W/vrun/checkpoints/last.pt" --input "$W/s/ct.nii.gz" --no-progress --tile 32 --sp 2
fi

echo "== no staged leftovers"
left=$(find "$W" -name '*.partial*')
[ -z "$left" ] && pass "no staged (.partial) files left by any rank" || fail "staged files left: $left"

echo "== refusals: one line, exit 1, no output"
refuse() {
  local name="$1" ranks="$2" want="$3"; shift 3
  rm -f "$W/bad.tif"
  "${MPI[@]}" -np "$ranks" "$T" infer "$@" --output "$W/bad.tif" > "$W/bad.out" 2> "$W/bad.err"; local rc=$?
  if [ $rc -ne 0 ] && grep -qF -- "$want" "$W/bad.err" && [ ! -e "$W/bad.tif" ]; then
    pass "$name: $(grep -F -- "$want" "$W/bad.err" | head -1)"
  else
    fail "$name: exit $rc: $(head -3 "$W/bad.err")"
  fi
}
refuse "valid padding" 2 "--padding same" --model unet-tiny --init random --input "$W/s/scene.tif" --tile 64 --sp 2 --no-progress
refuse "ranks != --sp" 4 "needs exactly 2 ranks" "${RASTER[@]}" --tile 64 --sp 2
refuse "--sp with --run-dir" 2 "--run-dir" "${RASTER[@]}" --tile 64 --sp 2 --run-dir "$W/run"
refuse "mesh != --sp" 2 "--sp-mesh 2x2" "${RASTER[@]}" --tile 64 --sp 2 --sp-mesh 2x2

finish
