#!/usr/bin/env bash
# End-to-end checks through the `tessera` command, as a user runs it:
# tiling never changes the answer, geometry survives, bad input fails cleanly.
# Usage: end_to_end.sh TESSERA MAKE_SAMPLE SHARED_DATA_DIR
set -uo pipefail
T="$1"; GEN="$2"; SHARED="$3"
W="$(mktemp -d /tmp/tessera-e2e.XXXXXX)"
trap 'rm -rf "$W"' EXIT
failures=0; checks=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL $*"; }
py() { /usr/bin/python3 -c "$@"; }

# Expect a clean failure: non-zero exit below 128 (no crash), a one-line error naming $2,
# and nothing at the output path $3.
expect_clean_failure() {
  local what="$1" name="$2" out="$3"; shift 3
  local err="$W/stderr.txt"
  "$@" --no-progress >/dev/null 2>"$err"; local rc=$?
  local lines; lines=$(grep -c . "$err")
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "$name" "$err" && [ "$lines" -eq 1 ] && [ ! -e "$out" ]; then
    pass "$what: exit $rc, '$(cat "$err")'"
  else
    fail "$what: exit $rc, $lines stderr lines, output exists: $([ -e "$out" ] && echo yes || echo no): $(head -3 "$err")"
  fi
}

echo "== sample data (small)"
"$GEN" --out "$W/s" --size 512 --ct-size 64 >/dev/null || { echo "FAIL generator"; exit 1; }
S="$W/s"

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

echo "== polygon labels: rasterised onto the image grid with GDAL"
if command -v gdal_polygonize.py >/dev/null; then
  gdal_polygonize.py -q "$S/scene_labels.tif" -f GPKG "$W/polys.gpkg" polys class_id
  sed "s|run_dir: run|run_dir: run_poly|; s|labels: $S/scene_labels.tif|labels: $W/polys.gpkg, label_attribute: class_id|; s|steps: 6|steps: 2|" \
    "$W/train.yaml" > "$W/poly.yaml"
  "$T" train --config "$W/poly.yaml" --no-progress >/dev/null 2>&1 \
    && [ "$(gdalinfo -checksum "$W/run_poly/labels/polys-class_id.tif" | grep Checksum)" = "$(gdalinfo -checksum "$S/scene_labels.tif" | grep Checksum)" ] \
    && pass "train on polygons: labels burnt from gdal_polygonize output equal the label raster" || fail "polygon labels"
else
  echo "skip polygon labels: gdal_polygonize.py not installed"
fi

echo "== bad input: clear one-line error, non-zero exit, no output left behind"
if [ -d "$SHARED/geotiff" ]; then
  expect_clean_failure "corrupt.tif fails mid-scene" "corrupt.tif" "$W/corrupt.tif" \
    "$T" infer --model unet-tiny --init random --input "$SHARED/geotiff/corrupt.tif" --output "$W/corrupt.tif" --tile 256
  for f in "$SHARED"/geotiff/*.tif; do
    n=$(basename "$f"); [ "$n" = corrupt.tif ] && continue
    "$T" infer --model unet-tiny --filters 4 --init random --input "$f" --output "$W/any-$n" --tile 64 --no-progress \
      >/dev/null 2>"$W/err.txt"; rc=$?
    if [ $rc -eq 0 ] && [ -f "$W/any-$n" ]; then pass "$n: inferred"
    elif [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ ! -e "$W/any-$n" ] && grep -q "$n" "$W/err.txt"; then pass "$n: clean error: $(cat "$W/err.txt")"
    else fail "$n: exit $rc: $(head -3 "$W/err.txt")"; fi
  done
else
  echo "skip shared GeoTIFFs: $SHARED/geotiff absent"
fi
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
