#!/usr/bin/env bash
# End-to-end checks through the `tessera` command, as a user runs it:
# tiling never changes the answer, geometry survives, bad input fails cleanly.
# Usage: end_to_end.sh TESSERA MAKE_SAMPLE MAKE_FIXTURES. Every input is made here.
set -uo pipefail
T="$1"; GEN="$2"; FIXGEN="$3"
W="$(mktemp -d /tmp/tessera-e2e.XXXXXX)"
trap 'rm -rf "$W"' EXIT
failures=0; checks=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL $*"; }
py() { /usr/bin/python3 -c "$@"; }

# Temporaries a writer may leave beside OUT (its folder): "<name>.partial-<pid>...", "*.tmp".
temporaries_beside() {
  local dir; dir=$(dirname "$1")
  [ -d "$dir" ] && find "$dir" -maxdepth 1 \( -name '*.partial*' -o -name '*.tmp' -o -name '.*.tmp' \) -printf '%f ' 2>/dev/null
}

# Expect a clean failure: exit 1 (no crash, no abort), a one-line `tessera: error:` naming $2,
# nothing at the output path $3 and no temporaries beside it.
expect_clean_failure() {
  local what="$1" name="$2" out="$3"; shift 3
  local err="$W/stderr.txt"
  "$@" --no-progress >/dev/null 2>"$err"; local rc=$?
  local lines; lines=$(grep -c . "$err")
  local temps; temps=$(temporaries_beside "$out")
  if [ $rc -eq 1 ] && grep -q "^tessera: error: .*$name" "$err" && [ "$lines" -eq 1 ] && [ ! -e "$out" ] && [ -z "$temps" ]; then
    pass "$what: exit $rc, '$(cat "$err")'"
  else
    fail "$what: exit $rc, $lines stderr lines, output exists: $([ -e "$out" ] && echo yes || echo no), temporaries: '${temps}': $(head -3 "$err")"
  fi
}

echo "== sample data (small) and fixtures (odd and broken files)"
"$GEN" --out "$W/s" --size 512 --ct-size 64 >/dev/null || { echo "FAIL generator"; exit 1; }
S="$W/s"
"$FIXGEN" --out "$W/fx" >/dev/null || { echo "FAIL fixture generator"; exit 1; }
FX="$W/fx"

echo "== model-info halos (DESIGN.md table, and 3-D)"
for pair in unet-small:92 unet-medium1:230 unet-medium2:188 unet-large:380 unet3d-32:92; do
  m="${pair%%:*}"; want="${pair##*:}"
  got=$("$T" model-info --model "$m" --json | py 'import json,sys; print(json.load(sys.stdin)["halo"])')
  [ "$got" = "$want" ] && pass "$m halo $got" || fail "$m halo $got, want $want"
done

echo "== tiling never changes the answer"
for tile in 64 128 256; do
  "$T" infer --model unet-tiny --init random --seed 3 --classes 4 --input "$S/scene.tif" \
    --output "$W/tile$tile.tif" --tile "$tile" --no-progress >/dev/null || fail "infer --tile $tile"
done
"$T" eval --pred "$W/tile64.tif" --truth "$W/tile256.tif" --json > "$W/same.json"
py 'import json,sys; j=json.load(open(sys.argv[1])); d=[c["dice"] for c in j["classes"] if c["truth_pixels"]>0]; sys.exit(0 if len(d)>1 and min(d)==1.0 else 1)' "$W/same.json" \
  && pass "--tile 64 and --tile 256 give identical labels (more than one class present)" \
  || fail "--tile 64 and --tile 256 differ: $(cat "$W/same.json" | head -c 400)"
cmp -s "$W/tile128.tif" "$W/tile256.tif" && pass "--tile 128 and 256 give byte-identical GeoTIFFs" \
  || fail "--tile 128 and 256 files differ"
expect_clean_failure "tile off the pooling grid" "tile" "$W/bad-tile.tif" \
  "$T" infer --model unet-tiny --init random --input "$S/scene.tif" --output "$W/bad-tile.tif" --tile 100

echo "== georeferencing survives (gdalinfo -json)"
gdalinfo -json "$S/scene.tif" > "$W/in.json"; gdalinfo -json "$W/tile64.tif" > "$W/out.json"
py '
import json,sys
a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2]))
ok = a["geoTransform"]==b["geoTransform"] and a["coordinateSystem"]["wkt"]==b["coordinateSystem"]["wkt"] and a["size"]==b["size"]
sys.exit(0 if ok else 1)' "$W/in.json" "$W/out.json" && pass "label GeoTIFF has the scene's CRS, geotransform and size" \
  || fail "georeference differs"

echo "== volumes: NIfTI and DICOM in, NIfTI out with the same geometry"
"$T" infer --model unet3d-tiny --filters 4 --init random --classes 3 --input "$S/ct.nii.gz" \
  --output "$W/ct_labels.nii.gz" --tile 16 --no-progress >/dev/null || fail "infer CT"
"$T" info --json "$S/ct.nii.gz" > "$W/ct_in.json"; "$T" info --json "$W/ct_labels.nii.gz" > "$W/ct_out.json"
"$T" info --json "$S/ct_dicom" > "$W/ct_dcm.json"
py '
import json,sys
a,b,c=[json.load(open(p)) for p in sys.argv[1:4]]
close=lambda x,y: all(abs(p-q)<1e-4 for p,q in zip(x,y)) and len(x)==len(y)
ok = all(close(a[k],b[k]) and close(a[k],c[k]) for k in ("spacing","origin","direction")) and a["size"]==b["size"]==c["size"]
sys.exit(0 if ok else 1)' "$W/ct_in.json" "$W/ct_out.json" "$W/ct_dcm.json" \
  && pass "label NIfTI and DICOM series have the CT's spacing, origin and direction" || fail "volume geometry differs"
# The same CT as a DICOM series (stored as HU + 1024) gives the same labels as the NIfTI.
"$T" infer --model unet3d-tiny --filters 4 --init random --classes 3 --input "$S/ct_dicom" \
  --output "$W/ct_dcm_labels.nii.gz" --tile 16 --no-progress >/dev/null || fail "infer CT from DICOM"
"$T" info --json "$W/ct_dcm_labels.nii.gz" > "$W/ct_dcm_out.json"
"$T" eval --pred "$W/ct_dcm_labels.nii.gz" --truth "$W/ct_labels.nii.gz" --json > "$W/dcm_vs_nii.json"
py '
import json,sys
e=json.load(open(sys.argv[1])); a=json.load(open(sys.argv[2])); b=json.load(open(sys.argv[3]))
close=lambda x,y: len(x)==len(y) and all(abs(p-q)<1e-4 for p,q in zip(x,y))
same_geo = a["size"]==b["size"] and all(close(a[k],b[k]) for k in ("spacing","origin","direction"))
present=[c for c in e["classes"] if c["truth_pixels"]>0]
same = len(present)>1 and all(c["dice"]==1.0 and c["predicted_pixels"]==c["truth_pixels"] for c in e["classes"])
sys.exit(0 if same_geo and same else 1)' "$W/dcm_vs_nii.json" "$W/ct_out.json" "$W/ct_dcm_out.json" \
  && pass "infer on the DICOM series gives the NIfTI input's labels and geometry" \
  || fail "DICOM and NIfTI labels differ: $(head -c 400 "$W/dcm_vs_nii.json")"
# One file of the series opens the series.
"$T" info --json "$(ls "$S"/ct_dicom/*.dcm | head -1)" > "$W/ct_dcm1.json" \
  && py 'import json,sys; a,b=[json.load(open(p)) for p in sys.argv[1:3]]; sys.exit(0 if a["size"]==b["size"] else 1)' \
       "$W/ct_dcm1.json" "$W/ct_in.json" \
  && pass "info on one DICOM file describes its whole series" || fail "info on one DICOM file: $(head -c 300 "$W/ct_dcm1.json")"

echo "== train -> checkpoint -> infer -> eval"
cat > "$W/train.yaml" <<YAML
run_dir: run
model: {preset: unet-tiny, base_filters: 8, classes: 4}
data:
  pairs: [{image: $S/scene.tif, labels: $S/scene_labels.tif}]
  holdout: {fraction: 0.25}
train: {tile: 64, batch: 2, steps: 6, checkpoint_every: 3, seed: 2}
YAML
"$T" train --config "$W/train.yaml" --no-progress >/dev/null 2>&1 && [ -f "$W/run/checkpoints/last.pt" ] \
  && [ "$(grep -c '"loss"' "$W/run/metrics.jsonl")" -eq 6 ] && [ "$(grep -c '"val_dice"' "$W/run/metrics.jsonl")" -eq 1 ] \
  && pass "train wrote a checkpoint, 6 step lines and 1 validation line" || fail "train: $(head -c 300 "$W/run/metrics.jsonl")"
sed 's|run_dir: run|run_dir: run_same|; s|base_filters: 8,|base_filters: 8, padding: same,|; s|steps: 6|steps: 2|' "$W/train.yaml" > "$W/same.yaml"
"$T" train --config "$W/same.yaml" --no-progress >/dev/null 2>&1 && [ -f "$W/run_same/checkpoints/last.pt" ] \
  && "$T" infer --checkpoint "$W/run_same/checkpoints/last.pt" --input "$S/scene.tif" --output "$W/pred_same.tif" \
       --tile 128 --no-progress >/dev/null && pass "same-padding network trains and infers" || fail "same-padding train/infer"
"$T" infer --checkpoint "$W/run/checkpoints/last.pt" --input "$S/scene.tif" --output "$W/pred.tif" --tile 128 \
  --no-progress >/dev/null && "$T" eval --pred "$W/pred.tif" --truth "$S/scene_labels.tif" --json > "$W/eval.json" \
  && pass "infer from checkpoint and eval" || fail "infer/eval from checkpoint"
# eval.json: the fields are there and agree with each other (IoU = Dice / (2 - Dice), mean over
# the classes present, pixel counts add up to the image), and the prediction is not empty.
py '
import json,math,sys
j=json.load(open(sys.argv[1])); problems=[]
if j.get("pred")!=sys.argv[2] or j.get("truth")!=sys.argv[3]: problems.append("pred/truth paths")
if j["region"]["size"]!=[512,512]: problems.append("region %s" % j["region"])
cls=j["classes"]
if [c["class"] for c in cls]!=list(range(len(cls))) or not 2<=len(cls)<=4: problems.append("class list")
for c in cls:
    for k in ("dice","iou","precision","recall"):
        v=c[k]
        if v is not None and not 0<=v<=1: problems.append("%s %s=%s" % (c["class"],k,v))
    if c["dice"] is not None and c["iou"] is not None and abs(c["iou"]-c["dice"]/(2-c["dice"]))>1e-6:
        problems.append("class %d: IoU != Dice/(2-Dice)" % c["class"])
present=[c["dice"] for c in cls if c["truth_pixels"]>0]
if abs(j["mean_dice"]-sum(present)/len(present))>1e-9: problems.append("mean_dice")
if sum(c["truth_pixels"] for c in cls)!=512*512: problems.append("truth pixels do not add up")
if sum(c["predicted_pixels"] for c in cls)!=512*512: problems.append("predicted pixels do not add up")
print("; ".join(problems)); sys.exit(1 if problems else 0)' "$W/eval.json" "$W/pred.tif" "$S/scene_labels.tif" > "$W/eval_check.txt" \
  && pass "eval.json fields consistent (mean Dice $(py 'import json,sys; print(round(json.load(open(sys.argv[1]))["mean_dice"],3))' "$W/eval.json"))" \
  || fail "eval.json: $(cat "$W/eval_check.txt")"

echo "== polygon labels: rasterised onto the image grid with GDAL"
if command -v gdal_polygonize.py >/dev/null; then
  gdal_polygonize.py -q "$S/scene_labels.tif" -f GPKG "$W/polys.gpkg" polys class_id
  sed "s|run_dir: run|run_dir: run_poly|; s|labels: $S/scene_labels.tif|labels: $W/polys.gpkg, label_attribute: class_id|; s|steps: 6|steps: 2|" \
    "$W/train.yaml" > "$W/poly.yaml"
  "$T" train --config "$W/poly.yaml" --no-progress >/dev/null 2>&1 \
    && [ "$(gdalinfo -checksum "$W/run_poly/labels/polys-class_id.tif" | grep Checksum)" = "$(gdalinfo -checksum "$S/scene_labels.tif" | grep Checksum)" ] \
    && pass "train on polygons: labels burnt from gdal_polygonize output equal the label raster" || fail "polygon labels"
else
  fail "polygon labels: gdal_polygonize.py missing (apt-get install gdal-bin python3-gdal, or scripts/setup.sh)"
fi

echo "== bad input: clear one-line error, non-zero exit, no output left behind"
expect_clean_failure "tile 3 of a tiled GeoTIFF corrupt" "corrupt_tile.tif" "$W/corrupt_out.tif" \
  "$T" infer --model unet-tiny --filters 4 --init random --input "$FX/corrupt_tile.tif" --output "$W/corrupt_out.tif" --tile 256
grep -q "tile 3" "$W/stderr.txt" && pass "the error names the damaged tile" || fail "no tile named: $(cat "$W/stderr.txt")"
# Every raster of the fixtures: infers, or fails cleanly naming the file.
for f in "$FX"/*.tif; do
  n=$(basename "$f"); o="$W/any/$n"; mkdir -p "$(dirname "$o")"
  "$T" infer --model unet-tiny --filters 4 --init random --input "$f" --output "$o" --tile 64 --no-progress \
    >/dev/null 2>"$W/err.txt"; rc=$?
  temps=$(temporaries_beside "$o")
  if [ $rc -eq 0 ] && [ -f "$o" ] && [ -z "$temps" ]; then pass "$n: inferred"
  elif [ $rc -eq 1 ] && [ ! -e "$o" ] && [ -z "$temps" ] && [ "$(grep -c . "$W/err.txt")" -eq 1 ] \
       && grep -q "^tessera: error: .*$n" "$W/err.txt"; then pass "$n: clean error: $(cat "$W/err.txt")"
  else fail "$n: exit $rc, temporaries '$temps': $(head -3 "$W/err.txt")"; fi
done
cp "$S/ct.nii.gz" "$W/trunc.nii.gz"; truncate -s $(( $(stat -c %s "$W/trunc.nii.gz") / 2 )) "$W/trunc.nii.gz"
expect_clean_failure "truncated NIfTI" "trunc.nii.gz" "$W/trunc_out.nii.gz" \
  "$T" infer --model unet3d-tiny --init random --input "$W/trunc.nii.gz" --output "$W/trunc_out.nii.gz" --tile 16
mkdir -p "$W/empty_dicom"
expect_clean_failure "empty DICOM folder" "empty_dicom" "$W/empty_out.nii.gz" \
  "$T" infer --model unet3d-tiny --init random --input "$W/empty_dicom" --output "$W/empty_out.nii.gz" --tile 16
gdal_translate -q -outsize 50% 50% "$S/scene_labels.tif" "$W/small_labels.tif"
sed "s|$S/scene_labels.tif|$W/small_labels.tif|; s|run_dir: run|run_dir: run_bad|" "$W/train.yaml" > "$W/bad.yaml"
expect_clean_failure "label raster of another size" "small_labels.tif" "$W/run_bad/checkpoints/last.pt" \
  "$T" train --config "$W/bad.yaml"

echo "$((checks - failures)) passed, $failures failed"
[ $failures -eq 0 ]
