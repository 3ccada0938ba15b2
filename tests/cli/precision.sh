#!/usr/bin/env bash
# `tessera infer --precision bf16` against fp32 on a trained model (issue 16):
#   - the labels agree wherever fp32's own decision is not a near-tie: a pixel may differ only
#     where fp32's two largest class probabilities are closer than twice the largest
#     probability difference, and at most 0.5 % of the pixels differ;
#   - the probabilities agree within bfloat16's resolution (max |Δp| <= 0.05), and differ from
#     fp32's on most pixels: the network really ran in bfloat16 (a --precision that did
#     nothing would pass every bound above);
#   - oneDNN says so (ONEDNN_VERBOSE): every convolution of the bf16 run reads and writes
#     bf16, every one of the fp32 run f32;
#   - the output keeps the input's georeferencing;
#   - bf16 on a volume, where this LibTorch has no bfloat16 3-D pooling on the CPU, is one line;
#   - train.precision bf16 trains in mixed precision: its convolutions forward and backward run
#     in bf16 (oneDNN), its per-step losses differ from the fp32 run's of the same seed at every
#     step yet stay within 5 % of them, and it learns as much (final loss within 5 % of fp32's);
#     recorded in the run's config.yaml; for a volume, one line.
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
  ONEDNN_VERBOSE=1 "$T" infer --checkpoint run/checkpoints/last.pt --input s/scene.tif --output "labels_$p.tif" \
    --probabilities "probs_$p.tif" --precision "$p" --no-progress > "infer_$p.log" 2>&1 || fail "infer $p: $(tail -2 "infer_$p.log")"
done
# oneDNN's verbose lines: "onednn_verbose,exec,cpu,convolution,IMPL,PROP,src_DT::...".
# conv_types LOG [PROP]: the source data types of the convolutions executed, one per line.
conv_types() { grep -E "^(onednn|dnnl)_verbose,exec,cpu,convolution," "$1" | grep -- "${2:-}" | grep -o "src_[a-z0-9]*" | sort | uniq -c; }
check_convolutions() {  # LOG WANT (f32|bf16) WHAT [PROP]
  local types; types=$(conv_types "$1" "${4:-}")
  [ -n "$types" ] || fail "$3: oneDNN ran no convolution${4:+ ($4)} (ONEDNN_VERBOSE; $(grep -c verbose "$1") verbose lines)"
  echo "$3${4:+ ($4)}: convolutions by source type: $(echo $types)"
  [ "$(echo "$types" | grep -vc "src_$2\$")" -eq 0 ] || fail "$3: convolutions not all in $2: $(echo $types)"
}
check_convolutions infer_fp32.log f32 "infer fp32"
check_convolutions infer_bf16.log bf16 "infer bf16"
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
delta = np.abs(p32.astype(np.float64) - p16)
dp = np.nanmax(delta)
moved = np.nanmean(delta > 0)
worst = margin[differ].max() if differ.any() else 0.0
print(f"bf16: labels agree on {1 - share:.5%} of {l32.size} pixels; max |dp| {dp:.4f}; "
      f"largest fp32 margin where they differ {worst:.4f}; probabilities differ on {moved:.1%} of the values")
# bfloat16 keeps 8 significant bits: a network that really ran in it moves nearly every
# probability; one that ran in fp32 (a --precision that did nothing) moves none.
if moved < 0.5: fail(f"only {moved:.2%} of the probabilities differ from fp32's: did the network run in bfloat16?")
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
# The same 10 steps in fp32 and in bf16, same seed; oneDNN's verbose lines show which type
# every convolution ran in, forward and backward.
sed 's/steps: 40/steps: 10/; s/^run_dir: run$/run_dir: run32/' train.yaml > train32.yaml
sed 's/validate: false}/validate: false, precision: bf16}/; s/^run_dir: run32$/run_dir: run16/' train32.yaml > train16.yaml
for p in 32 16; do
  ONEDNN_VERBOSE=1 "$T" train --config "train$p.yaml" --threads 2 --no-progress > "train$p.log" 2>&1 ||
    fail "train precision $p: $(grep -v verbose "train$p.log" | tail -3)"
done
grep -q "precision: bf16" run16/config.yaml || fail "run16/config.yaml does not record precision bf16"
for prop in forward_training backward_data backward_weights; do
  check_convolutions train32.log f32 "train fp32" "$prop"
  check_convolutions train16.log bf16 "train bf16" "$prop"
done
/usr/bin/python3 - <<'PY' || exit 1
import json, math, sys
def losses(run):
    out = []
    for line in open(run + "/metrics.jsonl"):
        m = json.loads(line)
        if "loss" in m and "step" in m: out.append(m["loss"])
    return out
l32, l16 = losses("run32"), losses("run16")
def fail(m): print("FAIL bf16 training: " + m); sys.exit(1)
if len(l32) != 10 or len(l16) != 10: fail(f"{len(l32)} fp32 and {len(l16)} bf16 loss lines, expected 10 each")
if not all(math.isfinite(x) for x in l16): fail(f"a bf16 loss is not finite: {l16}")
rel = [abs(a - b) / abs(a) for a, b in zip(l32, l16)]
print("bf16 training: per-step loss relative to fp32 " + " ".join(f"{r:.2e}" for r in rel) +
      f"; loss {l16[0]:.3f} -> {l16[-1]:.3f} (fp32 {l32[0]:.3f} -> {l32[-1]:.3f})")
# Autocast's forward rounds every convolution's inputs to 8 bits: each step's loss moves.
if any(r == 0 for r in rel): fail("a step's loss equals fp32's exactly: did it run in bfloat16?")
if max(rel) > 0.05: fail(f"a step's loss differs from fp32's by {max(rel):.1%} (at most 5 %)")
if abs(l16[-1] - l32[-1]) > 0.05 * l32[-1]: fail(f"final loss {l16[-1]:.4f} against fp32's {l32[-1]:.4f}")
PY
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
