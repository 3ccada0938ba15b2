#!/usr/bin/env bash
# A user's own data, end to end (issue 33):
#   analyst: a 3-band scene and own labels in which class 0 is a real class (water), names and
#     colours set once (data.classes) and background none: the labels' categories, colour table
#     and .qml, the vectors (class-0 polygons kept), `tessera eval` and `model-info` all use
#     them; --stac-relative items and collection resolve after the tree is moved; a 3-band scene into a 4-band model is refused naming --bands and runs with
#     --bands 1,2,3,3; 16-bit values and another pixel size draw the intensity and spacing
#     warnings;
#   clinician: a CT model on an MR-like volume (0..254) draws the intensity warning, a model
#     trained on the CT series on the series relabelled MR the modality warning; the label
#     volume gets ITK-SNAP and 3D Slicer side files with the class names, which eval reads.
# Usage: own_data.sh TESSERA MAKE_SAMPLE
set -uo pipefail
T="$1"; GEN="$2"
W="$(mktemp -d /tmp/tessera-own-data.XXXXXX)"
trap 'rm -rf "$W"' EXIT
cd "$W"
failures=0
pass() { echo "ok   $*"; }
fail() { failures=$((failures + 1)); echo "FAIL $*"; }
die() { echo "FAIL $*"; exit 1; }
PY=/usr/bin/python3

# ---- the analyst ----------------------------------------------------------------------
"$GEN" --out s --size 256 --only scene --targets 0 > gen.log 2>&1 || die "generator: $(tail -2 gen.log)"
gdal_translate -q -b 1 -b 2 -b 3 s/scene.tif scene3.tif || die "gdal_translate -b 1 -b 2 -b 3"
# Own labels: the sample's water (3) becomes class 0, its class 0 becomes 3.
$PY - <<'PY' || die "labels"
from osgeo import gdal
gdal.UseExceptions()
src = gdal.Open("s/scene_labels.tif")
a = src.GetRasterBand(1).ReadAsArray()
b = a.copy(); b[a == 3] = 0; b[a == 0] = 3
out = gdal.GetDriverByName("GTiff").CreateCopy("own_labels.tif", src)
out.GetRasterBand(1).WriteArray(b)
out = None
PY
cat > own.yaml <<YAML
run_dir: run3
model: {preset: unet-tiny, base_filters: 4, classes: 4}
data:
  pairs: [{image: scene3.tif, labels: own_labels.tif}]
  classes:
    - {name: water, color: "#1f78b4"}
    - {name: building, color: "#e31a1c"}
    - {name: road, color: "#777777"}
    - {name: vegetation, color: "#33a02c"}
  background: none
train: {tile: 64, batch: 1, steps: 2, seed: 1}
YAML
"$T" train --config own.yaml --no-progress > train.log 2>&1 || die "train: $(tail -3 train.log)"
grep -q "classes: 0 water #1f78b4, 1 building #e31a1c, 2 road #777777, 3 vegetation #33a02c; background: none" train.log \
  && pass "train names the classes, colours and background" || fail "train summary: $(grep classes train.log)"
CKPT=run3/checkpoints/last.pt
$PY -c "
from osgeo import gdal
d = gdal.Open('scene3.tif', gdal.GA_Update); d.SetMetadataItem('ACQUISITION_DATETIME', '2024-05-02 10:30:00'); d = None"
"$T" infer --checkpoint $CKPT --input scene3.tif --output labels.tif --overlay overlay.png --vectorize polys.gpkg \
  --tile 64 --no-progress > infer.log 2>&1 || die "infer: $(tail -3 infer.log)"
info=$(gdalinfo labels.tif)
k=0; bad=""
for n in water building road vegetation; do grep -qE "^ +$k: $n\$" <<<"$info" || bad+=" category $k"; k=$((k + 1)); done
grep -qE "^ +0: 31,120,180,255$" <<<"$info" || bad+=" colour 0"
grep -qE "^ +3: 51,160,44,255$" <<<"$info" || bad+=" colour 3"
grep -q '<paletteEntry value="0" color="#1f78b4" alpha="255" label="water"/>' labels.qml || bad+=" qml"
[ -z "$bad" ] && pass "labels.tif: categories, colour table and .qml from data.classes" || fail "labels.tif:$bad"
$PY - <<'PY' && pass "STAC datetime: the scene's acquisition time" || fail "STAC datetime: $(grep -i datetime labels.stac.json)"
import json, sys
p = json.load(open("labels.stac.json"))["properties"]
sys.exit(0 if p["datetime"] == "2024-05-02T10:30:00Z" and p["tessera:datetime_source"].startswith("acquisition") else 1)
PY
# --stac-relative: a self-contained catalogue. The scenes in one folder, the labels in another;
# the whole tree moved elsewhere, every path the items and the collection name still resolves
# from their folder, none is absolute, there is no self link, and a rerun keeps the scene.
mkdir -p tree/scenes && cp scene3.tif tree/scenes/ && cp $CKPT tree/last.pt
(cd tree && "$T" infer --checkpoint last.pt --input scenes --output pub --tile 64 \
  --stac-relative --no-progress) > rel.log 2>&1 || fail "infer --stac-relative: $(tail -2 rel.log)"
mv tree moved
$PY - <<'PY' && pass "--stac-relative: items and collection resolve after a move, no absolute path, no self link" \
  || fail "--stac-relative: $(cat moved/pub/scene3.stac.json)"
import json, os, sys
bad = []
for name in ("moved/pub/scene3.stac.json", "moved/pub/collection.json"):
    doc = json.load(open(name)); folder = os.path.dirname(name)
    hrefs = [l["href"] for l in doc["links"]] + [a["href"] for a in doc.get("assets", {}).values()]
    hrefs += [doc["properties"][k] for k in ("tessera:source", "tessera:checkpoint") if "properties" in doc]
    bad += [f"{name}: self link" for l in doc["links"] if l["rel"] == "self"]
    bad += [f"{name}: {h}" for h in hrefs if os.path.isabs(h) or not os.path.exists(os.path.join(folder, h))]
sys.exit("\n".join(bad) if bad else 0)
PY
(cd moved && "$T" infer --checkpoint last.pt --input scenes --output pub --tile 64 --stac-relative --no-progress) \
  > rel2.log 2>&1
grep -q ": kept, finished by an earlier run" rel2.log && pass "a rerun keeps the scene its relative item names" \
  || fail "rerun after the move: $(cat rel2.log)"
zero=$(ogrinfo -q -sql "SELECT COUNT(*) AS n FROM labels WHERE class_id = 0 AND class_name = 'water'" polys.gpkg | grep -oE "n \(Integer\) = [0-9]+" | grep -oE "[0-9]+$")
[ "${zero:-0}" -gt 0 ] && pass "vectors keep class 0 (water): $zero polygons" || fail "no class-0 polygons in polys.gpkg"
$PY - <<'PY' && pass "overlay draws class 0 in its colour" || fail "overlay leaves class 0 undrawn"
import sys
import numpy as np
from osgeo import gdal
lab = gdal.Open("labels.tif").ReadAsArray()
png = gdal.Open("overlay.png").ReadAsArray()  # (3, h, w): the picture, then the legend to its right
if png.shape[2] <= lab.shape[1]: sys.exit("no legend beside the picture")
png = png[:, :lab.shape[0], :lab.shape[1]]
water = lab == 0
if not water.any(): sys.exit("no water predicted")
# Blending at 0.5 with #1f78b4 puts blue above red on every water pixel.
sys.exit(0 if (png[2][water].astype(int) - png[0][water].astype(int) > 20).mean() > 0.95 else 1)
PY
"$T" eval --pred labels.tif --truth own_labels.tif > eval.log 2>&1 || fail "eval: $(tail -2 eval.log)"
grep -qE "^water +" eval.log && grep -qE "^vegetation +" eval.log && pass "eval names the classes from the raster" \
  || fail "eval: $(head -3 eval.log)"
"$T" model-info --checkpoint $CKPT > info.log 2>&1 || fail "model-info"
grep -q "input channels          3: channel 1 \[" info.log && grep -q "0 water #1f78b4" info.log \
  && pass "model-info lists input channels, names and colours" || fail "model-info: $(cat info.log)"
# A 4-band model: the 3-band scene is refused naming --bands, then runs with --bands 1,2,3,3.
sed -e 's/scene3.tif/s\/scene.tif/' -e 's/run_dir: run3/run_dir: run4/' own.yaml > own4.yaml
"$T" train --config own4.yaml --no-progress > train4.log 2>&1 || die "train 4 bands: $(tail -3 train4.log)"
"$T" infer --checkpoint run4/checkpoints/last.pt --input scene3.tif --output l4.tif --tile 64 --no-progress > b.log 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "has 3 bands but the model expects 4.*--bands 1,2,3,3" b.log && [ ! -e l4.tif ] \
  && pass "3 bands into a 4-band model: refused, naming --bands 1,2,3,3" || fail "band mismatch (rc $rc): $(cat b.log)"
"$T" infer --checkpoint run4/checkpoints/last.pt --input scene3.tif --output l4.tif --tile 64 --bands 1,2,3,3 \
  --no-progress > b.log 2>&1 && [ -s l4.tif ] && pass "--bands 1,2,3,3 runs" || fail "--bands: $(tail -2 b.log)"
gdal_translate -q -srcwin 0 0 100 60 scene3.tif crop.tif
"$T" info crop.tif > crop_info.log 2>&1
grep -qE "^  size +100 x 60 \(columns x rows\)$" crop_info.log && grep -q 'ID\["EPSG",32633\]\]$\|AUTHORITY\["EPSG","32633"\]\]$' crop_info.log \
  && pass "info: columns first, the whole CRS" || fail "info: $(cat crop_info.log)"
# 16-bit reflectances into the 8-bit model, and a 4x coarser pixel: warnings naming the check.
gdal_translate -q -ot UInt16 -scale 0 255 0 25500 scene3.tif scene16.tif
"$T" infer --checkpoint $CKPT --input scene16.tif --output l16.tif --tile 64 --no-progress > w.log 2>&1
grep -q "warning: scene16.tif: intensity check: channel 1 spans" w.log && pass "intensity warning for 16-bit values" \
  || fail "no intensity warning: $(cat w.log)"
read -r ulx uly lrx lry < <($PY -c "
from osgeo import gdal
g = gdal.Open('scene3.tif').GetGeoTransform(); d = gdal.Open('scene3.tif')
print(g[0], g[3], g[0] + 4 * g[1] * d.RasterXSize, g[3] + 4 * g[5] * d.RasterYSize)")
gdal_translate -q -a_ullr "$ulx" "$uly" "$lrx" "$lry" scene3.tif coarse.tif
"$T" infer --checkpoint $CKPT --input coarse.tif --output lc.tif --tile 64 --no-progress > c.log 2>&1
grep -q "warning: coarse.tif: spacing check: pixel size" c.log && pass "spacing warning for a 4x coarser pixel" \
  || fail "no spacing warning: $(cat c.log)"
grep -q "warning:" infer.log && fail "warnings on the training scene itself: $(grep warning: infer.log)" || true

# ---- the clinician --------------------------------------------------------------------
"$GEN" --out ct --only ct --ct-size 32 --targets 0 > gen_ct.log 2>&1 || die "CT generator: $(tail -2 gen_ct.log)"
cat > ct.yaml <<YAML
run_dir: runct
model: {preset: unet3d-tiny, base_filters: 4, classes: 3}
data:
  pairs: [{image: ct/ct.nii.gz, labels: ct/ct_labels.nii.gz}]
  classes: [{name: background}, {name: liver, color: "#dd8265"}, {name: kidney}]
  normalization: {kind: ct, window: [-250, 750]}
train: {tile: 8, batch: 1, steps: 2, seed: 1}
YAML
"$T" train --config ct.yaml --no-progress > ct_train.log 2>&1 || die "CT train: $(tail -3 ct_train.log)"
$PY - <<'PY' || die "MR volume"
import nibabel as nib, numpy as np
ct = nib.load("ct/ct.nii.gz")
a = ct.get_fdata()
mr = np.clip((a + 1000) / 2000 * 254, 0, 254).astype(np.uint8)  # an MR-like 0..254 volume
nib.save(nib.Nifti1Image(mr, ct.affine), "mr.nii.gz")
PY
"$T" infer --checkpoint runct/checkpoints/last.pt --input ct/ct.nii.gz --output seg.nii.gz --overlay seg.png --no-progress \
  > ct.log 2>&1 || die "CT infer: $(tail -3 ct.log)"
$PY -c "
from osgeo import gdal
import sys
d = gdal.Open('seg.png'); sys.exit(0 if d.RasterXSize > 3 * 32 and d.RasterYSize >= 32 else 1)" \
  && pass "volume overlay: three planes and a legend" || fail "volume overlay size"
"$T" info ct/ct.nii.gz > ct_info.log 2>&1
grep -qE "^  size +32 x 32 x 32 \(columns x rows x slices\)$" ct_info.log && grep -qE "^  nodata +none$" ct_info.log \
  && pass "info prints x first and nodata" || fail "info: $(cat ct_info.log)"
grep -q "warning:" ct.log && fail "warnings for the CT the model was trained on: $(grep warning: ct.log)" || pass "no warning on CT"
"$T" infer --checkpoint runct/checkpoints/last.pt --input mr.nii.gz --output mr_seg.nii.gz --no-progress > mr.log 2>&1
grep -q "warning: mr.nii.gz: intensity check: channel 1 spans \[0, [0-9.]*\].*trained on CT values" mr.log \
  && pass "CT model on an MR volume: the intensity warning" || fail "no clear warning: $(cat mr.log)"
[ -f seg.itksnap.txt ] && [ -f seg_ColorTable.ctbl ] && grep -q '"liver"' seg.itksnap.txt \
  && grep -qE "^1 liver 221 130 101 255$" seg_ColorTable.ctbl && grep -qE "^0 background 0 0 0 0$" seg_ColorTable.ctbl \
  && pass "label volume side files for ITK-SNAP and Slicer" || fail "side files: $(ls; cat seg_ColorTable.ctbl 2>&1)"
# A model trained on the DICOM series keeps its modality (CT): the same series relabelled MR
# draws the modality warning, the CT series itself none.
sed -e 's|ct/ct.nii.gz|ct/ct_dicom|' -e 's/run_dir: runct/run_dir: runctd/' ct.yaml > ctd.yaml
"$T" train --config ctd.yaml --no-progress > ctd_train.log 2>&1 || die "CT series train: $(tail -3 ctd_train.log)"
cp -r ct/ct_dicom mr_dicom && dcmodify -nb -m "(0008,0060)=MR" mr_dicom/*.dcm > /dev/null 2>&1 || die "dcmodify"
"$T" infer --checkpoint runctd/checkpoints/last.pt --input mr_dicom --output mrd.nii.gz --no-progress > mrd.log 2>&1
"$T" infer --checkpoint runctd/checkpoints/last.pt --input ct/ct_dicom --output ctd.nii.gz --no-progress > ctd.log 2>&1
grep -q "warning: mr_dicom: modality check: the image is MR but the model was trained on CT" mrd.log \
  && ! grep -q "modality check" ctd.log && pass "modality warning for an MR series into a CT model, none for CT" \
  || fail "modality check: $(cat mrd.log ctd.log)"
"$T" eval --pred seg.nii.gz --truth ct/ct_labels.nii.gz > ct_eval.log 2>&1 && grep -qE "^kidney +" ct_eval.log \
  && pass "eval names a volume's classes from its side files" || fail "eval on volumes: $(cat ct_eval.log)"

[ $failures -eq 0 ] && echo "own data: all checks passed" || { echo "own data: $failures failed"; exit 1; }
