#!/usr/bin/env bash
# `tessera infer --precision bf16` against fp32 on a trained model (issue 16):
#   - the labels agree wherever fp32's own decision is not a near-tie: a pixel may differ only
#     where fp32's two largest class probabilities are closer than twice the largest
#     probability difference, and at most 0.5 % of the pixels differ;
#   - the probabilities agree within bfloat16's resolution (max |Δp| <= 0.05);
#   - the output keeps the input's georeferencing;
#   - bf16 on a volume, where this LibTorch has no bfloat16 3-D pooling on the CPU, is one line;
#   - train.precision bf16 trains (recorded in the run's config.yaml); for a volume, one line.
# Usage: precision.sh TESSERA MAKE_SAMPLE
set -uo pipefail
T="$1"; GEN="$2"
W="$(mktemp -d /tmp/tessera-precision.XXXXXX)"
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL $*"; exit 1; }
cd "$W"

"$GEN" --out s --size 256 --ct-size 24 --targets 0 > gen.log 2>&1 || fail "generator: $(tail -2 gen.log)"
cat > train.yaml <<YAML
run_dir: run
model: {preset: unet-tiny, base_filters: 8, classes: 4}
data:
  pairs: [{image: s/scene.tif, labels: s/scene_labels.tif}]
train: {tile: 64, batch: 2, steps: 40, seed: 1, learning_rate: 0.003, validate: false}
YAML
"$T" train --config train.yaml --threads 2 --no-progress > train.log 2>&1 || fail "train: $(tail -3 train.log)"
for p in fp32 bf16; do
  "$T" infer --checkpoint run/checkpoints/last.pt --input s/scene.tif --output "labels_$p.tif" \
    --probabilities "probs_$p.tif" --precision "$p" --no-progress > "infer_$p.log" 2>&1 || fail "infer $p: $(tail -2 "infer_$p.log")"
done
/usr/bin/python3 - <<'PY' || exit 1
import sys
import numpy as np
from osgeo import gdal
def read(path):
    ds = gdal.Open(path)
    return ds, ds.ReadAsArray()
def fail(m): print("FAIL bf16 against fp32: " + m); sys.exit(1)
d32, l32 = read("labels_fp32.tif")
d16, l16 = read("labels_bf16.tif")
_, p32 = read("probs_fp32.tif")
_, p16 = read("probs_bf16.tif")
if d16.GetGeoTransform() != d32.GetGeoTransform() or d16.GetProjection() != d32.GetProjection():
    fail("georeferencing differs")
top2 = np.sort(p32, axis=0)[-2:]
margin = top2[1] - top2[0]
differ = l32 != l16
share = differ.mean()
dp = np.abs(p32.astype(np.float64) - p16).max()
worst = margin[differ].max() if differ.any() else 0.0
print(f"bf16: labels agree on {1 - share:.5%} of {l32.size} pixels; max |dp| {dp:.4f}; "
      f"largest fp32 margin where they differ {worst:.4f}")
if share > 0.005: fail(f"{share:.4%} of the labels differ (at most 0.5 %)")
if dp > 0.05: fail(f"probabilities differ by up to {dp:.4f} (bf16 keeps 8 bits: at most 0.05 here)")
# A label may flip only where the two largest fp32 probabilities are closer than the
# probabilities' own bf16 error could move them (twice the largest |dp|).
if worst > 2 * dp: fail(f"a label differs where fp32 decided by {worst:.3f}, more than 2 x max |dp|")
PY

if "$T" infer --model unet3d-tiny --init random --seed 0 --input s/ct.nii.gz --output ct.nii.gz --precision bf16 \
     --no-progress > vol.log 2>&1; then
  fail "bf16 on a volume accepted on the CPU"
fi
[ "$(grep -vc '^$' vol.log)" -eq 1 ] || fail "bf16 volume refusal not one line: $(cat vol.log)"
grep -q "no bfloat16 3-D max pooling" vol.log || fail "bf16 volume refusal: $(cat vol.log)"
[ ! -e ct.nii.gz ] || fail "a refused run left ct.nii.gz"
# train.precision bf16 (mixed precision) through the command: the resolved config says so and
# the run trains; --pp / a 3-D model are refused in one line naming the key.
sed 's/steps: 40/steps: 10/; s/validate: false}/validate: false, precision: bf16}/; s/^run_dir: run$/run_dir: run16/' \
  train.yaml > train16.yaml
"$T" train --config train16.yaml --threads 2 --no-progress > train16.log 2>&1 || fail "train bf16: $(tail -3 train16.log)"
grep -q "precision: bf16" run16/config.yaml || fail "run16/config.yaml does not record precision bf16"
cat > train3d.yaml <<YAML
run_dir: run3d
model: {preset: unet3d-tiny, classes: 3}
data:
  pairs: [{image: s/ct.nii.gz, labels: s/ct_labels.nii.gz}]
train: {tile: 8, batch: 1, steps: 2, precision: bf16}
YAML
if "$T" train --config train3d.yaml --no-progress > t3d.log 2>&1; then fail "bf16 training of a volume accepted on the CPU"; fi
# (the resampling note printed before it is progress, not part of the error)
[ "$(grep -c 'error:' t3d.log)" -eq 1 ] || fail "3-D bf16 refusal not one error line: $(cat t3d.log)"
grep 'error:' t3d.log | grep -q "train.precision bf16: 3-D" || fail "3-D bf16 refusal: $(cat t3d.log)"
# parallel.gradient_compression: a value it does not know is one line naming the file and key.
sed 's/^run_dir: run$/run_dir: runz/' train.yaml > trainz.yaml
printf 'parallel: {gradient_compression: zip}\n' >> trainz.yaml
if "$T" train --config trainz.yaml --no-progress > tz.log 2>&1; then fail "gradient_compression zip accepted"; fi
[ "$(grep -c 'error:' tz.log)" -eq 1 ] || fail "gradient_compression refusal not one error line: $(cat tz.log)"
grep 'error:' tz.log | grep -q "trainz.yaml: parallel.gradient_compression: 'zip' is not one of none, bf16, fp16" ||
  fail "gradient_compression refusal: $(cat tz.log)"
echo "precision: all checks passed"
