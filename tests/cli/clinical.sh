#!/usr/bin/env bash
# Clinical imaging through `tessera`, as a clinician's pipeline runs it (issue 15):
#   1. a plugin model: the SE-U-Net trains from a YAML (model: {name: se-unet}) with S4's
#      curriculum (tile sides rising by epoch up to the whole volume) and the adaptive Dice +
#      focal loss, on a CT of 0.7 x 0.7 x 2.5 mm resampled to 1 mm isotropic; its checkpoint
#      carries the model's name, the CT normalisation and the spacing; `tessera infer` runs it
#      at 1 mm and writes labels on the input's exact grid (nibabel: shape and affine equal);
#      `tessera eval` scores them: its Dice, IoU, precision and recall are numpy's overlaps;
#   2. the CT statistics the checkpoint carries equal numpy's over the training cases'
#      foreground (0.5 / 99.5 percentiles, mean and std of the clipped values);
#   3. an MR dataset folder (MSD layout, channel "MRI", another gain per case) trains with the
#      per-image z-score (nothing dataset-wide stored) and infers folder to folder; a probe
#      network imported with that architecture shows the values infer feeds the network are
#      (x - mean) / std over each image's non-zero voxels;
#   4. refusals in one line: a bad spacing, a window for MR (--pp with a plugin model that
#      declares no layer sequence: tests/cli/compose_train.sh).
# Usage: clinical.sh TESSERA MAKE_SAMPLE
set -uo pipefail
T="$1"; GEN="$2"
PYTHON_MODULE="$(cd "$(dirname "$0")/../../python" && pwd)"  # python/tessera_unet.py
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
# The scores are the overlaps of the written labels with the truth, counted here with numpy.
/usr/bin/python3 - <<'PY' || exit 1
import json, math, sys
import nibabel as nib, numpy as np
j = json.load(open("se_eval.json"))
pred = np.asarray(nib.load("se_labels.nii.gz").dataobj).astype(np.int64).ravel()
truth = np.asarray(nib.load("ct/ct_labels.nii.gz").dataobj).astype(np.int64).ravel()
def fail(m): print("FAIL eval: " + m); sys.exit(1)
rows = {c["class"]: c for c in j["classes"]}
if sorted(rows) != [0, 1, 2]: fail(f"classes {sorted(rows)}, expected 0, 1, 2")
dices, ious = [], []
for k, name in enumerate(["background", "liver", "kidney"]):
    tp = int(((pred == k) & (truth == k)).sum()); fp = int(((pred == k) & (truth != k)).sum())
    fn = int(((pred != k) & (truth == k)).sum())
    want = {"name": name, "truth_pixels": tp + fn, "predicted_pixels": tp + fp, "dice": 2 * tp / (2 * tp + fp + fn),
            "iou": tp / (tp + fp + fn), "precision": tp / (tp + fp), "recall": tp / (tp + fn)}
    for key, v in want.items():
        got = rows[k].get(key)
        if got != v if isinstance(v, (str, int)) else not math.isclose(got, v, rel_tol=1e-9):
            fail(f"{name} {key} {got}, numpy {v} (tp {tp}, fp {fp}, fn {fn})")
    dices.append(want["dice"]); ious.append(want["iou"])
if not math.isclose(j["mean_dice"], np.mean(dices), rel_tol=1e-9): fail(f"mean_dice {j['mean_dice']}, numpy {np.mean(dices)}")
if not math.isclose(j["mean_iou"], np.mean(ious), rel_tol=1e-9): fail(f"mean_iou {j['mean_iou']}, numpy {np.mean(ious)}")
print("eval: Dice " + ", ".join(f"{d:.4f}" for d in dices) + " equal numpy's overlaps of the written labels")
PY

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

# The z-score by its values: a probe network with the MR model's architecture, weights set by
# hand so that its labels threshold the normalised intensity z it is given
#   0 where z <= -0.001,  2 where z > 1.001,  1 between
# (enc0 computes relu(z), relu(-z), relu(z - 1) with centre taps, dec0 passes them on, the
# deeper levels are zero, the head compares them). Labels equal to numpy's thresholds of
# (x - mean) / std over the image's non-zero voxels say that `tessera infer` fed the network
# values of mean 0 and std 1 there. The architecture file must carry an offset and a scale to
# import: deliberately wrong ones, which an mr checkpoint must not use; resampling off, so
# the voxels are the file's.
"$T" export --checkpoint mr_run/checkpoints/last.pt --out mr_model.pt > export.log 2>&1 || fail "export mr: $(tail -2 export.log)"
/usr/bin/python3 - "$PYTHON_MODULE" <<'PY' || fail "building the probe network"
import json, sys
import torch
sys.path.insert(0, sys.argv[1])
import tessera_unet
j = json.load(open("mr_model.json"))
j["normalization"]["offset"], j["normalization"]["scale"] = [12345.0], [0.001]
j["resampling"]["spacing"] = []
json.dump(j, open("probe.json", "w"))
state = {k: torch.zeros_like(v) for k, v in tessera_unet.TesseraUNet(tessera_unet.read_spec("probe.json")).state_dict().items()}
c = (1,) * 3  # the centre tap of a 3 x 3 x 3 kernel
w, b = state["enc0.conv0.weight"], state["enc0.conv0.bias"]
w[(0, 0) + c], w[(1, 0) + c], w[(2, 0) + c], b[2] = 1, -1, 1, -1  # z, -z, z - 1, then ReLU
for name in ("enc0.conv1", "dec0.conv0", "dec0.conv1"):
    for k in range(3):
        state[name + ".weight"][(k, k) + c] = 1  # identity on those three channels
h, hb = state["head.weight"], state["head.bias"]
h[0, 1], h[1, 0], hb[1], h[2, 0], h[2, 2] = 1, 1, 1e-3, 1, 1  # logits relu(-z); relu(z) + 0.001; relu(z) + relu(z - 1)
torch.save(state, "probe.pt")
PY
"$T" import --weights probe.pt --arch probe.json --out probe.ckpt > import.log 2>&1 || fail "import the probe: $(tail -2 import.log)"
for img in mr/imagesTs/ct_test_000.nii.gz mr/imagesTr/ct_001.nii.gz; do
  "$T" infer --checkpoint probe.ckpt --input "$img" --output probe_labels.nii.gz --no-progress > probe.log 2>&1 ||
    fail "infer with the probe on $img: $(tail -2 probe.log)"
  /usr/bin/python3 - "$img" probe_labels.nii.gz <<'PY' || exit 1
import sys
import nibabel as nib, numpy as np
x = np.asarray(nib.load(sys.argv[1]).dataobj, dtype=np.float64)
got = np.asarray(nib.load(sys.argv[2]).dataobj).astype(np.int64)
def fail(m): print(f"FAIL MR z-score of {sys.argv[1]}: " + m); sys.exit(1)
def probe(z): return np.where(z > 1.001, 2, np.where(z > -0.001, 1, 0))
body = x != 0
mean, std = x[body].mean(), x[body].std()
z = (x - mean) / std
want = probe(z)
near = (np.abs(z + 0.001) < 1e-4) | (np.abs(z - 1.001) < 1e-4)  # float32 rounding may go either way
if got.shape != x.shape: fail(f"labels {got.shape}, image {x.shape}")
bad = (got != want) & ~near
if bad.any():
    i = tuple(np.argwhere(bad)[0])
    fail(f"{bad.sum()} of {x.size} voxels are not numpy's z-score over the non-zero voxels (mean {mean:.2f}, std "
         f"{std:.2f}), e.g. {i}: x {x[i]}, z {z[i]:.4f}, class {got[i]} instead of {want[i]}")
whole = probe((x - x.mean()) / x.std())
if (whole != want).sum() < 100 or np.bincount(want.ravel(), minlength=3).min() < 100:
    fail("the image cannot tell the mask's statistics from the whole image's; the check would prove nothing")
print(f"MR z-score of {sys.argv[1]}: the network saw (x - {mean:.1f}) / {std:.1f} over the {body.sum()} non-zero voxels "
      f"(mean 0, std 1 there; the whole image's statistics would change {(whole != want).sum()} labels)")
PY
done

# --- 4. Refusals ---------------------------------------------------------------------------
refuse() {  # NAME EXPECTED-TEXT COMMAND...
  local name="$1" want="$2"; shift 2
  if "$@" > "$name.log" 2>&1; then fail "$name: accepted"; fi
  [ "$(grep -vc '^$' "$name.log")" -eq 1 ] || fail "$name: not one line: $(cat "$name.log")"
  grep -q -- "$want" "$name.log" || fail "$name: expected '$want', got: $(cat "$name.log")"
}
sed 's/spacing: \[1, 1, 1\]/spacing: [1, 0, 1]/' se.yaml > bad_spacing.yaml
refuse bad_spacing "data.resample.spacing: must be positive and finite, got 0" "$T" train --config bad_spacing.yaml --no-progress
sed 's/normalization: {kind: ct}/normalization: {kind: mr, window: [-100, 200]}/' se.yaml > mr_window.yaml
refuse mr_window "data.normalization.window: a window is for kind ct (this is mr)" "$T" train --config mr_window.yaml --no-progress
echo "clinical: all checks passed"
