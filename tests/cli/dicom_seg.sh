#!/usr/bin/env bash
# `tessera infer` from a DICOM series to a DICOM SEG, as a PACS or 3D Slicer receives it:
# dicom3tools' dciodvfy finds no error in it (its warnings are shown); pydicom reads Modality SEG,
# one segment per class present, and every segment's frames, unpacked and placed by their
# Image Position Patient through the NIfTI's affine, equal the labels of the same run written
# as NIfTI (read with nibabel); each frame derives from the CT slice at its position; the SEG
# shares the CT's patient, study and frame of reference and references every CT instance.
# A NIfTI input with a .dcm output is refused in one line, leaving nothing.
# dciodvfy is required (scripts/setup.sh installs dicom3tools): without it the test fails.
# Usage: dicom_seg.sh TESSERA MAKE_SAMPLE
set -uo pipefail
T="$1"; GEN="$2"
if ! command -v dciodvfy >/dev/null; then
  echo "FAIL dciodvfy not installed (scripts/setup.sh installs it: apt-get install dicom3tools)"
  exit 1
fi
W="$(mktemp -d /tmp/tessera-dicom-seg.XXXXXX)"
trap 'rm -rf "$W"' EXIT
failures=0; checks=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL $*"; }

"$GEN" --out "$W/s" --only ct --ct-size 48 --targets 0 >/dev/null || { echo "FAIL generator"; exit 1; }
infer() {
  "$T" infer --model unet3d-tiny --init random --classes 3 --tile 32 --no-progress "$@"
}
for out in seg.dcm labels.nii.gz; do
  if infer --input "$W/s/ct_dicom" --output "$W/$out" >"$W/infer.log" 2>&1; then pass "infer -> $out"
  else fail "infer -> $out: $(tail -3 "$W/infer.log")"; fi
done
[ -f "$W/seg.dcm" ] && [ -f "$W/labels.nii.gz" ] || { echo "$checks checks, $((failures + 1)) failures"; exit 1; }

echo "== dciodvfy"
# dciodvfy exits 0 when it found no error (warnings allowed) and 1 after an "Error" or
# "Abort" line (errors in the file, or one it could not read); >= 128 is a signal (a crash).
dciodvfy "$W/seg.dcm" >"$W/dciodvfy.log" 2>&1
verifier=$?
sed 's/^/     /' "$W/dciodvfy.log"
if [ "$verifier" -ge 128 ]; then fail "dciodvfy crashed (exit $verifier, signal $((verifier - 128)))"
elif grep -q "^Error\|^Abort" "$W/dciodvfy.log"; then fail "dciodvfy reports errors (exit $verifier)"
elif [ "$verifier" -ne 0 ]; then fail "dciodvfy exited $verifier without an Error line"
else pass "dciodvfy: no errors, exit 0 ($(grep -c '^Warning' "$W/dciodvfy.log") warnings)"; fi

echo "== pydicom against the NIfTI labels"
/usr/bin/python3 - "$W/seg.dcm" "$W/labels.nii.gz" "$W/s/ct_dicom" <<'PY'
import glob
import sys

import nibabel
import numpy as np
import pydicom

seg_path, nifti_path, ct_folder = sys.argv[1:4]
failures = 0
def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what)
    failures += not ok

seg = pydicom.dcmread(seg_path)
labels_img = nibabel.load(nifti_path)
labels = np.asarray(labels_img.dataobj)  # (x, y, z)
to_voxel = np.linalg.inv(labels_img.affine)  # RAS mm -> voxel
ct = {}
for f in glob.glob(ct_folder + "/*.dcm"):
    d = pydicom.dcmread(f, stop_before_pixels=True)
    ct[tuple(round(float(v), 3) for v in d.ImagePositionPatient)] = d

check(seg.Modality == "SEG" and seg.SegmentationType == "BINARY", f"Modality {seg.Modality}, {seg.SegmentationType}")
present = sorted(set(np.unique(labels).tolist()) - {0, 255})
segments = seg.SegmentSequence
check(len(segments) == len(present), f"{len(segments)} segments for the classes present {present}")
for s, cls in zip(segments, present):
    check(s.SegmentLabel == f"class {cls}", f"segment {s.SegmentNumber} is {s.SegmentLabel!r} (class {cls})")

frames = seg.pixel_array
if frames.ndim == 2:
    frames = frames[np.newaxis]
check(frames.shape == (int(seg.NumberOfFrames), labels.shape[1], labels.shape[0]),
      f"frames {frames.shape}, labels (x y z) {labels.shape}")
rebuilt = {int(s.SegmentNumber): np.zeros(labels.shape, dtype=bool) for s in segments}
misplaced = 0
wrong_source = 0
for f, groups in enumerate(seg.PerFrameFunctionalGroupsSequence):
    number = int(groups.SegmentIdentificationSequence[0].ReferencedSegmentNumber)
    lps = [float(v) for v in groups.PlanePositionSequence[0].ImagePositionPatient]
    i, j, k = (to_voxel @ np.array([-lps[0], -lps[1], lps[2], 1.0]))[:3]  # LPS -> RAS -> voxel
    z = int(round(k))
    if abs(i) > 1e-3 or abs(j) > 1e-3 or abs(k - z) > 1e-3 or not 0 <= z < labels.shape[2] or rebuilt[number][:, :, z].any():
        misplaced += 1
        continue
    rebuilt[number][:, :, z] = frames[f].T.astype(bool)  # frame (row y, column x) -> (x, y)
    source = groups.DerivationImageSequence[0].SourceImageSequence[0]
    at = ct.get(tuple(round(v, 3) for v in lps))
    wrong_source += at is None or source.ReferencedSOPInstanceUID != at.SOPInstanceUID
check(misplaced == 0, f"every frame sits on one slice of the labels ({misplaced} misplaced or doubled)")
check(wrong_source == 0, f"every frame derives from the CT slice at its position ({wrong_source} do not)")
for s, cls in zip(segments, present):
    differ = int(np.count_nonzero(rebuilt[int(s.SegmentNumber)] != (labels == cls)))
    check(differ == 0, f"segment {s.SegmentNumber} equals the NIfTI's class {cls} voxel for voxel ({differ} differ)")

some_ct = next(iter(ct.values()))
for key in ("PatientID", "StudyInstanceUID", "FrameOfReferenceUID"):
    check(seg.get(key) == some_ct.get(key), f"{key} is the CT's")
referenced = {r.ReferencedSOPInstanceUID for r in seg.ReferencedSeriesSequence[0].ReferencedInstanceSequence}
check(seg.ReferencedSeriesSequence[0].SeriesInstanceUID == some_ct.SeriesInstanceUID
      and referenced == {d.SOPInstanceUID for d in ct.values()},
      f"Referenced Series Sequence lists the CT series and its {len(ct)} instances ({len(referenced)} listed)")
sys.exit(1 if failures else 0)
PY
[ $? -eq 0 ] && pass "pydicom: SEG matches the NIfTI labels" || fail "pydicom: SEG does not match the NIfTI labels"

echo "== a NIfTI input cannot make a DICOM SEG"
if infer --input "$W/s/ct.nii.gz" --output "$W/refused/seg.dcm" >"$W/refused.log" 2>&1; then
  fail "NIfTI -> .dcm succeeded"
else
  msg=$(cat "$W/refused.log")
  [ "$(wc -l <"$W/refused.log")" -eq 1 ] && grep -q "a DICOM SEG needs a DICOM series as input; .*ct.nii.gz is NIfTI" <<<"$msg" \
    && [ -z "$(ls -A "$W/refused" 2>/dev/null)" ] && pass "refused: $msg" || fail "refusal: $msg; left: $(ls -A "$W/refused" 2>/dev/null)"
fi

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
