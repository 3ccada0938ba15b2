#!/usr/bin/env bash
# A Medical Segmentation Decathlon folder as the data source, end to end:
#   - tessera-make-sample --msd writes imagesTr/labelsTr/imagesTs and a dataset.json whose
#     listed files exist (three training cases with --targets 2, one test image);
#   - `tessera train` with data.dataset trains on all cases but data.validation's, validates
#     on that case as a whole volume (metrics.jsonl holds Dice per class of dataset.json),
#     takes the class names from dataset.json, and leaves a checkpoint;
#   - fold K of N validates on the K-th case by id; dataset with pairs and an unknown
#     validation case are one-line errors, exit 1;
#   - `tessera infer --input MSD_FOLDER --output OUT` labels imagesTs into OUT/<case>.nii.gz,
#     on the test image's own grid (size, spacing, direction, origin) though that grid is turned,
#     anisotropic and not the training spacing.
# Usage: msd_dataset.sh TESSERA MAKE_SAMPLE
set -uo pipefail
T="$1"; GEN="$2"
W="$(mktemp -d /tmp/tessera-msd.XXXXXX)"
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL $*"; exit 1; }

"$GEN" --msd "$W/msd" --ct-size 32 --targets 2 > "$W/gen.log" 2>&1 || fail "generator: $(tail -2 "$W/gen.log")"
python3 - "$W/msd" <<'PY' || exit 1
import json, os, sys
root = sys.argv[1]
d = json.load(open(os.path.join(root, "dataset.json")))
def fail(m): print("FAIL dataset.json: " + m); sys.exit(1)
if d.get("labels") != {"0": "background", "1": "liver", "2": "kidney"}: fail(f"labels {d.get('labels')}")
if d.get("modality") != {"0": "CT"}: fail(f"modality {d.get('modality')}")
if len(d["training"]) != 3 or d.get("numTraining") != 3: fail(f"{len(d['training'])} training cases, expected 3")
if len(d["test"]) != 1: fail(f"{len(d['test'])} test images, expected 1")
for e in d["training"]:
    for k in ("image", "label"):
        if not os.path.isfile(os.path.join(root, e[k])): fail(f"{e[k]} missing")
if not os.path.isfile(os.path.join(root, d["test"][0])): fail(f"{d['test'][0]} missing")
PY

cat > "$W/train.yaml" <<YAML
run_dir: run
model: {preset: unet3d-tiny, base_filters: 4}
data: {dataset: msd, validation: [ct_002]}
train: {tile: 16, batch: 1, steps: 4, steps_per_epoch: 2, seed: 1}
YAML
"$T" train --config "$W/train.yaml" --threads 2 --no-progress > "$W/train.log" 2>&1 || fail "train: $(tail -3 "$W/train.log")"
grep -q "2 training cases, 1 validation cases: ct_002" "$W/train.log" || fail "the split is not ct_000, ct_001 / ct_002: $(grep msd "$W/train.log")"
[ -s "$W/run/checkpoints/last.pt" ] || fail "no checkpoint run/checkpoints/last.pt"
python3 - "$W/run" <<'PY' || exit 1
import json, sys, yaml
run = sys.argv[1]
lines = [json.loads(l) for l in open(run + "/metrics.jsonl") if l.strip()]
val = [l for l in lines if "val_mean_dice" in l]
def fail(m): print("FAIL " + m); sys.exit(1)
if len(val) != 2: fail(f"{len(val)} validations in metrics.jsonl, expected 2 (steps 4, steps_per_epoch 2)")
for v in val:
    if len(v.get("val_dice", [])) != 3: fail(f"validation Dice for {len(v.get('val_dice', []))} classes, expected 3: {v}")
c = yaml.safe_load(open(run + "/config.yaml"))
if c["data"]["class_names"] != ["background", "liver", "kidney"]: fail(f"class names {c['data']['class_names']}")
if c["model"]["classes"] != 3: fail(f"model.classes {c['model']['classes']}, expected dataset.json's 3")
PY

# Fold 1 of 3 validates on the second case by id; train a single step.
sed -e 's/validation: \[ct_002\]/fold: 1, folds: 3/' -e 's/steps: 4/steps: 1/' -e 's/^run_dir: run/run_dir: fold/' \
  "$W/train.yaml" > "$W/fold.yaml"
"$T" train --config "$W/fold.yaml" --threads 2 --no-progress > "$W/fold.log" 2>&1 || fail "fold train: $(tail -3 "$W/fold.log")"
grep -q "2 training cases, 1 validation cases (fold 1 of 3): ct_001" "$W/fold.log" || fail "fold 1 of 3 is not ct_001: $(grep msd "$W/fold.log")"

# Refusals: one line, exit 1.
refuse() {  # NAME EXPECTED-TEXT YAML
  printf '%s\n' "$3" > "$W/$1.yaml"
  if "$T" train --config "$W/$1.yaml" --no-progress > "$W/$1.log" 2>&1; then fail "$1: accepted"; fi
  [ "$(wc -l < "$W/$1.log")" -eq 1 ] || fail "$1: not one line: $(cat "$W/$1.log")"
  grep -q "$2" "$W/$1.log" || fail "$1: expected '$2', got: $(cat "$W/$1.log")"
}
refuse with_pairs "data.dataset and data.pairs: give one of them" \
  "data: {dataset: msd, pairs: [{image: msd/imagesTr/ct_000.nii.gz, labels: msd/labelsTr/ct_000.nii.gz}]}"
refuse unknown_case "case 'ct_009' is not among the training cases of" "data: {dataset: msd, validation: [ct_009]}"
refuse no_folder "nothing/dataset.json: not found" "data: {dataset: nothing}"
refuse class_count "data.class_names has 2 names but the dataset has 3 labels" "data: {dataset: msd, class_names: [a, b]}"

# Inference folder to folder: imagesTs/ct_test_000.nii.gz -> out/ct_test_000.nii.gz. The test
# image is first given a grid no training case has: axes turned 30 degrees about z and 10 about
# x (a direction matrix with no zero), spacing 0.8 x 1.1 x 2.6 mm (anisotropic, and not the
# training cases', so infer resamples it and puts the labels back), a moved origin.
/usr/bin/python3 - "$W/msd/imagesTs/ct_test_000.nii.gz" <<'PY' || fail "rewriting the test image's grid"
import sys
import nibabel as nib, numpy as np
img = nib.load(sys.argv[1])
a, b = np.radians(30), np.radians(10)
turn = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]]) @ \
       np.array([[1, 0, 0], [0, np.cos(b), -np.sin(b)], [0, np.sin(b), np.cos(b)]])
affine = np.eye(4)
affine[:3, :3] = turn @ np.diag([0.8, 1.1, 2.6])
affine[:3, 3] = [-12.5, 30.25, 7.0]
out = nib.Nifti1Image(np.asarray(img.dataobj), affine)
out.set_qform(affine, code=1)
out.set_sform(affine, code=1)
nib.save(out, sys.argv[1])
PY
"$T" infer --checkpoint "$W/run/checkpoints/last.pt" --input "$W/msd" --output "$W/out" --tile 16 --no-progress \
  > "$W/infer.log" 2>&1 || { echo "FAIL infer on the dataset folder: $(tail -3 "$W/infer.log")"; exit 1; }
[ -e "$W/out/ct_test_000.nii.gz" ] || { echo "FAIL infer: no out/ct_test_000.nii.gz ($(ls "$W/out" | tr '\n' ' '))"; exit 1; }
grep -q "ct_test_000.nii.gz resampled to" "$W/infer.log" || fail "the test image was not resampled: $(head -3 "$W/infer.log")"
"$T" info --json "$W/msd/imagesTs/ct_test_000.nii.gz" > "$W/in.json" || fail "info on the test image"
"$T" info --json "$W/out/ct_test_000.nii.gz" > "$W/out.json" || fail "info on the labels: $(cat "$W/out.json")"
/usr/bin/python3 - "$W/in.json" "$W/out.json" <<'PY' || exit 1
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
def fail(m): print("FAIL infer: " + m); sys.exit(1)
if a["size"] != b["size"]: fail(f"labels of size {b['size']} differ from the image's {a['size']}")
if a["origin"] != b["origin"]: fail(f"labels at origin {b['origin']}, the image at {a['origin']}")
if b["channels"] != 1 or b["data_type"] not in ("Byte", "UInt8"): fail(f"labels are {b['channels']} x {b['data_type']}, expected 1 x UInt8")
PY
/usr/bin/python3 - "$W/msd/imagesTs/ct_test_000.nii.gz" "$W/out/ct_test_000.nii.gz" <<'PY' || exit 1
import sys
import nibabel as nib, numpy as np
img, lab = nib.load(sys.argv[1]), nib.load(sys.argv[2])
def fail(m): print("FAIL infer: " + m); sys.exit(1)
zi, zl = np.array(img.header.get_zooms()[:3]), np.array(lab.header.get_zooms()[:3])
if not np.allclose(zl, zi, atol=1e-4): fail(f"labels of spacing {zl} mm, the image {zi} mm")
di, dl = img.affine[:3, :3] / zi, lab.affine[:3, :3] / zl
if not np.allclose(dl, di, atol=1e-4): fail(f"labels of direction\n{dl}\nthe image\n{di}")
if not np.allclose(lab.affine, img.affine, atol=1e-3): fail(f"labels affine\n{lab.affine}\nthe image\n{img.affine}")
if np.allclose(di, np.eye(3), atol=0.1): fail("the test image's direction is the identity; the check would prove nothing")
print(f"labels on the test image's grid: spacing {np.round(zl, 3).tolist()} mm, direction and origin equal")
PY
echo "PASS msd_dataset (train and infer)"
