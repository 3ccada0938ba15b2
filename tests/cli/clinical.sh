#!/usr/bin/env bash
# Clinical imaging through `tessera`, as a clinician's pipeline runs it (issue 15):
#   1. a plugin model: the SE-U-Net trains from a YAML (model: {name: se-unet}) with S4's
#      curriculum (tile sides rising by epoch up to the whole volume) and the adaptive Dice +
#      focal loss, on a CT of 0.7 x 0.7 x 2.5 mm resampled to 1 mm isotropic; its checkpoint
#      carries the model's name, the CT normalisation and the spacing; `tessera infer` runs it
#      at 1 mm and writes labels on the input's exact grid (nibabel: shape and affine equal);
#      `tessera eval` scores them;
#   2. the CT statistics the checkpoint carries equal numpy's over the training cases'
#      foreground (0.5 / 99.5 percentiles, mean and std of the clipped values);
#   3. an MR dataset folder (MSD layout, channel "MRI", another gain per case) trains with the
#      per-image z-score (nothing dataset-wide stored) and infers folder to folder;
#   4. refusals in one line: --pp with a plugin model, a bad spacing, a window for MR.
# Usage: clinical.sh TESSERA MAKE_SAMPLE
set -uo pipefail
T="$1"; GEN="$2"
W="$(mktemp -d /tmp/tessera-clinical.XXXXXX)"
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL $*"; exit 1; }
cd "$W"

# --- 1. SE-U-Net on an anisotropic CT, resampled to 1 mm -------------------------------
"$GEN" --out ct --only ct --ct-size 32 --targets 0 --ct-spacing 0.7 2.5 > gen.log 2>&1 || fail "generator: $(tail -2 gen.log)"
cat > se.yaml <<YAML
run_dir: se
model: {name: se-unet, base_filters: 4, levels: 3, classes: 3}
data:
  pairs: [{image: ct/ct.nii.gz, labels: ct/ct_labels.nii.gz}]
  class_names: [background, liver, kidney]
  holdout: {axis: z, fraction: 0.25}
  normalization: {kind: ct}
  resample: {spacing: [1, 1, 1]}
train:
  tile: 8
  batch: 1
  steps: 6
  steps_per_epoch: 2
  seed: 1
  curriculum: [{epoch: 0, tile: 8}, {epoch: 1, tile: 16}, {epoch: 2, tile: 96}]
  loss: {kind: adaptive_dice_focal}
YAML
"$T" train --config se.yaml --threads 2 --no-progress > se.log 2>&1 || fail "se-unet train: $(tail -3 se.log)"
grep -q "3-D se-unet" se.log || fail "the plan line does not name se-unet: $(grep 'train:' se.log | head -3)"
grep -q "volumes at 1 x 1 x 1 mm (images linear, labels nearest): 1 of 1 resampled" se.log ||
  fail "no resampling to 1 mm reported: $(grep -i resampl se.log)"
grep -q "CT normalisation from" se.log || fail "no CT statistics reported: $(grep -i normal se.log)"
[ -s se/checkpoints/last.pt ] || fail "no se/checkpoints/last.pt"
"$T" model-info --checkpoint se/checkpoints/last.pt --json > se_info.json || fail "model-info on the checkpoint"
/usr/bin/python3 - <<'PY' || exit 1
import json, sys
j = json.load(open("se_info.json"))
def fail(m): print("FAIL checkpoint: " + m); sys.exit(1)
if j["name"] != "se-unet": fail(f"model name {j['name']}")
n = j["normalization"]
if n["kind"] != "ct" or len(n["clip_low"]) != 1 or not n["clip_low"][0] < n["clip_high"][0]: fail(f"normalization {n}")
if j.get("resampling", {}).get("spacing") != [1.0, 1.0, 1.0]: fail(f"resampling {j.get('resampling')}")
PY

"$T" infer --checkpoint se/checkpoints/last.pt --input ct/ct.nii.gz --output se_labels.nii.gz --no-progress \
  > se_infer.log 2>&1 || fail "se-unet infer: $(tail -3 se_infer.log)"
grep -q "resampled to 1 x 1 x 1 mm" se_infer.log || fail "infer did not run at 1 mm: $(head -3 se_infer.log)"
/usr/bin/python3 - <<'PY' || exit 1
import sys
import nibabel as nib, numpy as np
img, lab = nib.load("ct/ct.nii.gz"), nib.load("se_labels.nii.gz")
def fail(m): print("FAIL labels on the input grid: " + m); sys.exit(1)
if lab.shape != img.shape: fail(f"shape {lab.shape}, input {img.shape}")
if not np.allclose(lab.affine, img.affine, atol=1e-4): fail(f"affine\n{lab.affine}\ninput\n{img.affine}")
if not np.allclose(lab.header.get_zooms()[:3], img.header.get_zooms()[:3], atol=1e-5): fail("spacing differs")
v = np.asarray(lab.dataobj)
if v.max() > 2: fail(f"label {v.max()} beyond the 3 classes")
PY
"$T" eval --pred se_labels.nii.gz --truth ct/ct_labels.nii.gz --names background,liver,kidney --json > se_eval.json \
  2> se_eval.err || fail "eval: $(cat se_eval.err)"
/usr/bin/python3 -c "import json; j = json.load(open('se_eval.json')); assert 'dice' in json.dumps(j).lower()" ||
  fail "eval printed no Dice: $(head -c 300 se_eval.json)"

# --- 2. The CT statistics are numpy's over the training cases' foreground ----------------
"$GEN" --msd msd --ct-size 32 --targets 1 > msd_gen.log 2>&1 || fail "generator --msd: $(tail -2 msd_gen.log)"
cat > msd.yaml <<YAML
run_dir: msd_run
model: {preset: unet3d-tiny, base_filters: 4, padding: same}
data: {dataset: msd}
train: {tile: 16, batch: 1, steps: 2, seed: 1}
YAML
"$T" train --config msd.yaml --threads 2 --no-progress > msd.log 2>&1 || fail "msd train: $(tail -3 msd.log)"
"$T" model-info --checkpoint msd_run/checkpoints/last.pt --json > msd_info.json || fail "model-info msd"
/usr/bin/python3 - <<'PY' || exit 1
import json, sys
import nibabel as nib, numpy as np
n = json.load(open("msd_info.json"))["normalization"]
def fail(m): print("FAIL CT statistics: " + m); sys.exit(1)
if n["kind"] != "ct": fail(f"kind {n['kind']} for a dataset whose channel is CT")
fg = []
for case in ("ct_000", "ct_001"):
    x = np.asarray(nib.load(f"msd/imagesTr/{case}.nii.gz").dataobj, dtype=np.float64)
    y = np.asarray(nib.load(f"msd/labelsTr/{case}.nii.gz").dataobj)
    fg.append(x[y > 0])
fg = np.concatenate(fg)
lo, hi = np.percentile(fg, 0.5), np.percentile(fg, 99.5)
c = np.clip(fg, lo, hi)
want = {"clip_low": lo, "clip_high": hi, "offset": c.mean(), "scale": c.std()}
for k, v in want.items():
    got = n[k][0]
    if abs(got - v) > 1e-4 * max(1.0, abs(v)): fail(f"{k} {got}, numpy {v}")
print(f"CT statistics equal numpy's: clip [{lo:.1f}, {hi:.1f}] HU, mean {c.mean():.2f}, std {c.std():.2f} ({fg.size} voxels)")
PY

# --- 3. MR: per-image z-score, dataset folder to folder ----------------------------------
"$GEN" --msd mr --ct-size 32 --targets 1 --msd-modality MR > mr_gen.log 2>&1 || fail "generator MR: $(tail -2 mr_gen.log)"
sed -e 's/run_dir: msd_run/run_dir: mr_run/' -e 's/dataset: msd/dataset: mr, normalization: {mask: true}/' msd.yaml > mr.yaml
"$T" train --config mr.yaml --threads 2 --no-progress > mr.log 2>&1 || fail "mr train: $(tail -3 mr.log)"
grep -q "normalisation mr: per-image z-score inside the non-zero mask" mr.log || fail "MR not z-scored per image: $(grep -i normal mr.log)"
"$T" model-info --checkpoint mr_run/checkpoints/last.pt --json > mr_info.json || fail "model-info mr"
/usr/bin/python3 -c "
import json, sys
n = json.load(open('mr_info.json'))['normalization']
sys.exit(0 if n['kind'] == 'mr' and n['mask'] and n['offset'] == [] else 1)" || fail "MR checkpoint normalisation: $(/usr/bin/python3 -c "import json; print(json.load(open('mr_info.json'))['normalization'])")"
"$T" infer --checkpoint mr_run/checkpoints/last.pt --input mr --output mr_out --no-progress > mr_infer.log 2>&1 ||
  fail "mr infer: $(tail -3 mr_infer.log)"
[ -e mr_out/ct_test_000.nii.gz ] || fail "no mr_out/ct_test_000.nii.gz"

# --- 4. Refusals ---------------------------------------------------------------------------
refuse() {  # NAME EXPECTED-TEXT COMMAND...
  local name="$1" want="$2"; shift 2
  if "$@" > "$name.log" 2>&1; then fail "$name: accepted"; fi
  [ "$(grep -vc '^$' "$name.log")" -eq 1 ] || fail "$name: not one line: $(cat "$name.log")"
  grep -q -- "$want" "$name.log" || fail "$name: expected '$want', got: $(cat "$name.log")"
}
refuse pp_plugin "model se-unet is a registry model without a layer sequence" \
  "$T" train --config se.yaml --pp 2 --no-progress
sed 's/spacing: \[1, 1, 1\]/spacing: [1, 0, 1]/' se.yaml > bad_spacing.yaml
refuse bad_spacing "data.resample.spacing: must be positive and finite, got 0" "$T" train --config bad_spacing.yaml --no-progress
sed 's/normalization: {kind: ct}/normalization: {kind: mr, window: [-100, 200]}/' se.yaml > mr_window.yaml
refuse mr_window "data.normalization.window: a window is for kind ct (this is mr)" "$T" train --config mr_window.yaml --no-progress
echo "clinical: all checks passed"
