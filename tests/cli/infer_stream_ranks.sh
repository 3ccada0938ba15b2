#!/usr/bin/env bash
# `mpirun -np P tessera infer --run-dir RUN` streams: the P ranks sharing one image take bands
# of its rows (each the rows / P, rounded up to the pooling alignment) and stream each from ε
# rows above it, exchanging nothing; the mosaic equals one process streaming the whole image
# label for label: 2-D on 2 and 3 ranks (--mode auto picks the bands and says so), a 3-D
# volume's slabs on 2 ranks, bf16 on 2 ranks (close to one bf16 process: bf16 rounds
# differently where a band's rows were computed in other strips). The probabilities of bands
# against the whole image (1e-5) are tests/core/stream_inference_test.cpp's
# (StreamedInference.BandsTakenInAnyOrderEqualTheWholeImage): --run-dir writes labels only.
# Usage: infer_stream_ranks.sh TESSERA MAKE_SAMPLE MPIEXEC
source "$(dirname "$0")/../lib/mpi.sh" infer-stream-ranks "$@"
export TESSERA_THREADS=1
sample --size 333 --ct-size 30
net=(--model unet-tiny --filters 8 --init random --seed 3 --no-progress --input "$W/s/scene.tif")
vol=(--model unet3d-tiny --filters 4 --classes 3 --init random --seed 2 --no-progress --input "$W/s/ct.nii.gz")

# equal A B [MIN_SHARE]: the labels of two outputs (GeoTIFF through GDAL, NIfTI-1 .nii from its
# header) are identical, or with MIN_SHARE at least that share of them is.
equal() {
  PYTHONPATH="$(dirname "$0")/../lib" /usr/bin/python3 - "$@" <<'PY'
import sys
import numpy as np
from label_arrays import labels
a, b = labels(sys.argv[1]), labels(sys.argv[2])
if a.shape != b.shape: sys.exit(f"shapes {a.shape} and {b.shape}")
share = (a == b).mean()
print(f"{a.size} labels, {share:.4%} equal, {len(np.unique(a))} classes")
sys.exit(0 if share >= (float(sys.argv[3]) if len(sys.argv) > 3 else 1.0) else 1)
PY
}
# ranks NAME P ARGS…: `mpirun -np P tessera infer ARGS… --run-dir $W/NAME.run`, log in $W/NAME.log.
ranks() {
  local name=$1 np=$2
  shift 2
  "${MPI[@]}" -np "$np" "$T" infer "$@" --run-dir "$W/$name.run" > "$W/$name.log" 2>&1 ||
    { fail "$name: $(grep -m1 'error' "$W/$name.log" || tail -2 "$W/$name.log")"; return 1; }
}

echo "== 2-D: bands on 2 and 3 ranks against one process streaming the whole image"
"$T" infer "${net[@]}" --mode stream --output "$W/one.tif" > "$W/one.log" 2>&1 || fail "one process: $(tail -2 "$W/one.log")"
if ranks two 2 "${net[@]}" --mode auto --output "$W/two.tif"; then
  grep -q "2 bands (0 kept from an earlier run; per rank: 1 1), stream (auto: .*bands of [0-9]* rows over 2 ranks" "$W/two.log" \
    && pass "auto on 2 ranks streams bands: $(grep -o 'bands of [0-9]* rows over 2 ranks recompute [0-9.]*x' "$W/two.log")" \
    || fail "2-rank summary: $(cat "$W/two.log")"
  why=$(equal "$W/one.tif" "$W/two.tif" 2>&1) && pass "2 ranks = one process: $why" || fail "2 ranks: $why"
fi
if ranks three 3 "${net[@]}" --mode stream --output "$W/three.tif"; then
  grep -q "3 bands .*per rank: 1 1 1" "$W/three.log" && pass "3 ranks, a band each" || fail "3-rank summary: $(cat "$W/three.log")"
  why=$(equal "$W/one.tif" "$W/three.tif" 2>&1) && pass "3 ranks = one process: $why" || fail "3 ranks: $why"
fi

echo "== 3-D: slabs of slices on 2 ranks"
"$T" infer "${vol[@]}" --mode stream --output "$W/vone.nii" > "$W/vone.log" 2>&1 || fail "3-D one process: $(tail -2 "$W/vone.log")"
if ranks vtwo 2 "${vol[@]}" --mode stream --output "$W/vtwo.nii"; then
  why=$(equal "$W/vone.nii" "$W/vtwo.nii" 2>&1) && pass "3-D, 2 ranks = one process: $why" || fail "3-D 2 ranks: $why"
fi

echo "== bf16 bands on 2 ranks"
"$T" infer "${net[@]}" --mode stream --precision bf16 --output "$W/bone.tif" > "$W/bone.log" 2>&1 \
  || fail "bf16 one process: $(tail -2 "$W/bone.log")"
if ranks btwo 2 "${net[@]}" --mode stream --precision bf16 --output "$W/btwo.tif"; then
  why=$(equal "$W/bone.tif" "$W/btwo.tif" 0.99 2>&1) && pass "bf16, 2 ranks against one bf16 process: $why" \
    || fail "bf16 2 ranks: $why"
fi
finish
