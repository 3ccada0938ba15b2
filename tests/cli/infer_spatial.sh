#!/usr/bin/env bash
# `mpirun -np P tessera infer --sp P` (each tile split over P ranks, halos exchanged, rank 0
# writes) gives the labels of one process with the same tile: a random-init `same`-padding
# U-Net with whole-window norm statistics, on a 2-D raster (1-D split over 2 ranks, 2 × 2 mesh
# over 4) and a 3-D volume (slabs over 2 ranks, 2 × 2 × 1 over 4), with several tiles and with
# the whole image as one tile. Labels may differ only at ties: pixels whose top two one-process
# probabilities are within 1e-4 (2-D; a volume, without probabilities, in at most one voxel). Also: the summary names
# the decomposition, no rank leaves a staged file, --probabilities work under --sp, and what
# --sp refuses (a `valid` model, a rank count other than --sp, --run-dir, a mesh of another
# size) is a one-line error, exit 1, no output.
# Usage: infer_spatial.sh TESSERA MAKE_SAMPLE MPIEXEC
source "$(dirname "$0")/../lib/mpi.sh" infer-spatial "$@"
export TESSERA_THREADS=1

sample --size 256 --ct-size 32
RASTER=(--model unet-tiny --padding same --norm group --init random --seed 3 --classes 4 --input "$W/s/scene.tif" --no-progress)
VOLUME=(--model unet3d-tiny --padding same --norm instance --init random --seed 3 --classes 3 --input "$W/s/ct.nii.gz" --no-progress)

# differing REF OUT [REF_PROBS]: "N differ, T of them ties": pixels/voxels whose labels differ
# (GeoTIFF through GDAL, NIfTI-1 .nii from its header's vox_offset), and how many of them the one-process
# run's probabilities REF_PROBS show as a tie, top two within 1e-4 (fp32 sums in another order
# move probabilities by up to ~3e-5 here). Exit 1 when the shapes differ or a difference is no tie.
differing() {
  /usr/bin/python3 - "$@" <<'PY'
import struct, sys
import numpy as np
def labels(path):
    if path.endswith(".nii"):
        raw = open(path, "rb").read()
        dims = struct.unpack_from("<8h", raw, 40)
        offset = int(struct.unpack_from("<f", raw, 108)[0])
        return np.frombuffer(raw, np.uint8, int(np.prod(dims[1:1 + dims[0]])), offset)
    from osgeo import gdal
    return gdal.Open(path).ReadAsArray()
a, b = labels(sys.argv[1]), labels(sys.argv[2])
if a.shape != b.shape:
    print(f"shapes {a.shape} and {b.shape}")
    sys.exit(1)
differ = a != b
ties = 0
if len(sys.argv) > 3 and differ.any():
    from osgeo import gdal
    top = np.sort(gdal.Open(sys.argv[3]).ReadAsArray(), axis=0)
    ties = int(((top[-1] - top[-2]) < 1e-4)[differ].sum())
# Volumes have no probabilities to tell a tie: one voxel of a 32³ volume may differ (the
# whole-volume tile with instance norm flips one voxel on some CPUs, at the commit before the
# DSN too; a missing halo or a local norm changes hundreds).
slack = 1 if len(sys.argv) <= 3 and sys.argv[1].endswith(".nii") else 0
print(f"{int(differ.sum())} differ, {ties} of them ties" + (f", {slack} untied allowed (volume)" if slack else ""))
sys.exit(0 if differ.sum() - ties <= slack else 1)
PY
}

# same NAME REF OUT LOG MESH [REF_PROBS]: the outputs agree in every pixel but ties, and the
# summary names the mesh.
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

# case NAME RANKS REF OUT MESH REF_PROBS ARGS...: mpirun -np RANKS tessera infer ARGS, compared
# with REF (REF_PROBS: its probabilities, or "").
case_() {
  local name="$1" ranks="$2" ref="$3" out="$4" mesh="$5" probs="$6"; shift 6
  "${MPI[@]}" -np "$ranks" "$T" infer "$@" --output "$out" > "$W/$name.log" 2>&1 \
    || { fail "$name: exit $?: $(tail -3 "$W/$name.log")"; return; }
  same "$name" "$ref" "$out" "$W/$name.log" "$mesh" $probs
}

echo "== 2-D raster 256², unet-tiny --padding same --norm group (whole-window statistics)"
for tile in 64 256; do
  "$T" infer "${RASTER[@]}" --tile $tile --output "$W/one$tile.tif" --probabilities "$W/one${tile}p.tif" >/dev/null \
    || { fail "one-process infer --tile $tile"; continue; }
  case_ "raster tile $tile, 2 ranks" 2 "$W/one$tile.tif" "$W/two$tile.tif" "2 (mesh 2 × 1)" "$W/one${tile}p.tif" \
    "${RASTER[@]}" --tile $tile --sp 2
  case_ "raster tile $tile, 2x2 mesh" 4 "$W/one$tile.tif" "$W/four$tile.tif" "4 (mesh 2 × 2)" "$W/one${tile}p.tif" \
    "${RASTER[@]}" --tile $tile --sp 4 --sp-mesh 2x2
done
# The one-tile run is not the tiled one: the test compares like with like.
n=$(differing "$W/one64.tif" "$W/one256.tif" | cut -d" " -f1)
echo "     (tiles of 64 and one 256 tile differ in $n pixels: each run is compared with its own tile's reference)"

echo "== 3-D volume 32³, unet3d-tiny --padding same --norm instance"
for tile in 16 32; do
  "$T" infer "${VOLUME[@]}" --tile $tile --output "$W/vone$tile.nii" >/dev/null \
    || { fail "one-process infer --tile $tile (volume)"; continue; }
  case_ "volume tile $tile, 2 ranks" 2 "$W/vone$tile.nii" "$W/vtwo$tile.nii" "2 (mesh 2 × 1 × 1)" "" \
    "${VOLUME[@]}" --tile $tile --sp 2
done
case_ "volume tile 32, 2x2 mesh" 4 "$W/vone32.nii" "$W/vfour32.nii" "4 (mesh 2 × 2 × 1)" "" \
  "${VOLUME[@]}" --tile 32 --sp 4 --sp-mesh 2x2

echo "== no staged leftovers; --probabilities under --sp"
left=$(find "$W" -name '*.partial*')
[ -z "$left" ] && pass "no staged (.partial) files left by any rank" || fail "staged files left: $left"
"${MPI[@]}" -np 2 "$T" infer "${RASTER[@]}" --tile 64 --sp 2 --output "$W/ptwo.tif" --probabilities "$W/ptwo_p.tif" \
  > "$W/ptwo.log" 2>&1 || fail "--sp 2 --probabilities: $(tail -3 "$W/ptwo.log")"
/usr/bin/python3 - "$W/one64p.tif" "$W/ptwo_p.tif" <<'PY' && pass "--probabilities under --sp 2 within 1e-4 of one process" \
  || fail "--probabilities under --sp 2 differ from one process"
import sys
import numpy as np
from osgeo import gdal
a, b = (gdal.Open(p).ReadAsArray() for p in sys.argv[1:3])
d = float(np.nanmax(np.abs(a - b)))
print(f"     largest probability difference {d:.2e}")
sys.exit(0 if a.shape == b.shape and d <= 1e-4 and np.array_equal(np.isnan(a), np.isnan(b)) else 1)
PY

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
