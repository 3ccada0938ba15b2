#!/usr/bin/env bash
# `tessera infer --vectorize` and `--probabilities` as a user runs them, checked against
# independent tools: GDAL's own gdal_polygonize.py (4-connected, like ours) for the polygon
# counts per class, numpy for the probabilities. Tiling must not change the polygons (no
# cuts at tile seams), single-process and run-dir (VRT mosaic, and mpirun -np 2 when given)
# outputs must agree — their label rasters pixel for pixel, then their polygons feature for
# feature — and bad requests fail in one line before any inference.
# Usage: vectorize_cli.sh TESSERA MAKE_SAMPLE [MPIEXEC]. Needs python3-gdal, python3-numpy and
# gdal-bin (scripts/setup.sh installs them): fails, naming the missing package, without them.
set -uo pipefail
T="$1"; GEN="$2"; MPIEXEC="${3:-}"
PY=/usr/bin/python3
# The first missing package, named with the install hint (exit 1).
missing() { echo "FAIL: $1 missing (apt-get install $2, or scripts/setup.sh)"; exit 1; }
[ -x "$PY" ] || missing "$PY" python3
"$PY" -c 'from osgeo import gdal, ogr' 2>/dev/null || missing "$PY's osgeo (GDAL's Python bindings)" python3-gdal
"$PY" -c 'import numpy' 2>/dev/null || missing "$PY's numpy" python3-numpy
command -v ogrinfo >/dev/null || missing ogrinfo gdal-bin
command -v gdal_polygonize.py >/dev/null || missing gdal_polygonize.py gdal-bin
W="$(mktemp -d /tmp/tessera-vectorize.XXXXXX)"
trap 'rm -rf "$W"' EXIT
failures=0; checks=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL $*"; }

# Checks in Python (GDAL bindings + numpy), one mode per question.
cat > "$W/check.py" <<'EOF'
import sys
import numpy as np
from osgeo import gdal, ogr

def per_class(path, first=1):
    """{class_id: (features, total area)} of a vector file, classes >= first."""
    ds = ogr.Open(path); n = {}  # keep ds alive while its layer is read
    for f in ds.GetLayer(0):
        c = f.GetField("class_id")
        if c >= first:
            area = f.GetField("area") if f.GetFieldIndex("area") >= 0 else 0.0  # gdal_polygonize has none
            k, a = n.get(c, (0, 0.0)); n[c] = (k + 1, a + area)
    return n

def labels(path):
    ds = gdal.Open(path); gt = ds.GetGeoTransform()
    return ds.GetRasterBand(1).ReadAsArray(), abs(gt[1] * gt[5] - gt[2] * gt[4])

mode = sys.argv[1]
if mode == "gdal":  # ours vs gdal_polygonize.py on the same labels, and areas vs pixel counts
    lab, px = labels(sys.argv[2]); first = int(sys.argv[5])
    ours, ref = per_class(sys.argv[3], first), per_class(sys.argv[4], first)
    ok = len(ref) >= 2 and sorted(ours) == sorted(ref)
    ds = ogr.Open(sys.argv[3])  # a random-init network has no class names: "class <id>"
    bad_names = sum(1 for f in ds.GetLayer(0) if f.GetField("class_name") != f"class {f.GetField('class_id')}")
    if bad_names: print(f"  {bad_names} features with a wrong class_name"); ok = False
    for c in sorted(ref):
        want = np.count_nonzero(lab == c) * px
        k, a = ours.get(c, (0, 0.0))
        print(f"  class {c}: ours {k} features {a:.2f} m2, gdal_polygonize {ref[c][0]}, pixels x area {want:.2f} m2")
        ok = ok and k == ref[c][0] and abs(a - want) <= 1e-6 * want
    sys.exit(0 if ok else 1)
if mode == "labels":  # two label rasters equal pixel for pixel on the same grid (exit 0), or
    # differing only where the first run's probabilities (argv[4]) tie between the two labels
    # (exit 3): another tile size runs other convolution kernels, whose float32 sums differ in
    # the last bits, and a random network has near-ties that such bits decide.
    a, b = gdal.Open(sys.argv[2]), gdal.Open(sys.argv[3])
    la, lb = a.GetRasterBand(1).ReadAsArray(), b.GetRasterBand(1).ReadAsArray()
    same_grid = la.shape == lb.shape and a.GetGeoTransform() == b.GetGeoTransform() and a.GetProjection() == b.GetProjection()
    differ = int(np.count_nonzero(la != lb)) if la.shape == lb.shape else la.size
    print(f"  {la.shape} vs {lb.shape}, same geotransform and CRS: {same_grid}, {differ} label pixels differ")
    if not same_grid: sys.exit(1)
    if differ == 0: sys.exit(0)
    if len(sys.argv) < 5: sys.exit(1)
    probs = gdal.Open(sys.argv[4]).ReadAsArray()  # (classes, rows, cols)
    ys, xs = np.nonzero(la != lb)
    gaps = np.abs(probs[la[ys, xs], ys, xs] - probs[lb[ys, xs], ys, xs])
    tie = 2e-5  # float32 softmax of logits that differ in their last bits
    print(f"  probability gap between the two labels where they differ: max {gaps.max():.2e} (tie below {tie:.0e})")
    sys.exit(3 if differ <= 1e-4 * la.size and gaps.max() <= tie else 1)
if mode == "same":  # two vector files from equal labels: the same features, one for one
    def features(path):
        ds = ogr.Open(path)
        out = []
        for f in ds.GetLayer(0):
            e = f.GetGeometryRef().GetEnvelope()
            out.append((f.GetField("class_id"), round(f.GetField("area"), 6), tuple(round(v, 6) for v in e)))
        return sorted(out)
    a, b = features(sys.argv[2]), features(sys.argv[3])
    only_a, only_b = len(set(a) - set(b)), len(set(b) - set(a))
    print(f"  {len(a)} vs {len(b)} features; {only_a} only in the first, {only_b} only in the second")
    sys.exit(0 if a == b and len(a) > 0 else 1)
sys.exit(2)
EOF
# agrees_with_gdal LABELS VECTOR WHAT [FIRST_CLASS]: per class feature counts equal gdal_polygonize.py's.
agrees_with_gdal() {
  local ref="$W/ref-$(basename "$2").gpkg"
  gdal_polygonize.py -q "$1" -b 1 -f GPKG "$ref" ref class_id > /dev/null 2>&1 || { fail "$3: gdal_polygonize.py failed"; return; }
  "$PY" "$W/check.py" gdal "$1" "$2" "$ref" "${4:-1}" && pass "$3: features per class = gdal_polygonize.py's, area = pixels x pixel area" \
    || fail "$3: differs from gdal_polygonize.py"
}
# same_polygons LABELS_A VECTOR_A LABELS_B VECTOR_B WHAT: the label rasters must be equal
# pixel for pixel first (tiling and parallelism never change a label); only then are the
# polygons compared, feature for feature (class, area, bounding box).
# The first raster's probabilities (PROBS_A) tell a tie decided by rounding from a real
# difference; with such ties the polygons differ there too, so they are not compared.
same_polygons() {
  "$PY" "$W/check.py" labels "$1" "$3" "$PROBS_A"
  case $? in
    0) pass "$5: label rasters equal pixel for pixel" ;;
    3) pass "$5: label rasters equal but for pixels whose probabilities tie (rounding)"; return ;;
    *) fail "$5: the label rasters differ"; return ;;
  esac
  "$PY" "$W/check.py" same "$2" "$4" && pass "$5: the same features" || fail "$5: features differ"
}

echo "== sample scene (512 px)"
"$GEN" --out "$W/s" --size 512 --only scene >/dev/null || { echo "FAIL generator"; exit 1; }
S="$W/s/scene.tif"
PROBS_A="$W/probs.tif"  # the --tile 64 run's probabilities, the reference of same_polygons
common=(--model unet-tiny --init random --seed 1 --classes 4 --input "$S" --no-progress)

echo "== --vectorize and --probabilities, --tile 64"
"$T" infer "${common[@]}" --output "$W/labels64.tif" --tile 64 --vectorize "$W/out64.gpkg" \
  --probabilities "$W/probs.tif" > "$W/log64.txt" 2>&1 || fail "infer --tile 64: $(tail -3 "$W/log64.txt")"
ogrinfo -so "$W/out64.gpkg" labels > "$W/ogrinfo.txt" 2>&1 && pass "ogrinfo -so opens out64.gpkg" \
  || fail "ogrinfo -so: $(head -3 "$W/ogrinfo.txt")"
for field in class_id class_name area; do
  grep -q "^$field:" "$W/ogrinfo.txt" && pass "field $field present" || fail "field $field missing"
done

echo "== polygons equal gdal_polygonize.py's (whole raster, 4-connected) on the same labels"
agrees_with_gdal "$W/labels64.tif" "$W/out64.gpkg" "--tile 64"

echo "== class 0 polygons on request, too"
"$T" infer "${common[@]}" --output "$W/labels_bg.tif" --tile 256 --vectorize "$W/bg.geojson" \
  --vector-background > "$W/logbg.txt" 2>&1 || fail "infer --vector-background: $(tail -3 "$W/logbg.txt")"
agrees_with_gdal "$W/labels_bg.tif" "$W/bg.geojson" "--vector-background (GeoJSON)" 0

echo "== tiling does not change the polygons (no cuts at seams)"
"$T" infer "${common[@]}" --output "$W/labels128.tif" --tile 128 --vectorize "$W/out128.gpkg" \
  > "$W/log128.txt" 2>&1 || fail "infer --tile 128: $(tail -3 "$W/log128.txt")"
agrees_with_gdal "$W/labels128.tif" "$W/out128.gpkg" "--tile 128"
same_polygons "$W/labels64.tif" "$W/out64.gpkg" "$W/labels128.tif" "$W/out128.gpkg" "--tile 128 and --tile 64 give the same polygons"

echo "== the layer has the raster's CRS"
"$PY" - "$W/out64.gpkg" "$S" <<'EOF' && pass "layer CRS is the scene's" || fail "layer CRS differs"
import sys
from osgeo import gdal, ogr, osr
ds = ogr.Open(sys.argv[1]); lyr = ds.GetLayer(0)
r = osr.SpatialReference(wkt=gdal.Open(sys.argv[2]).GetProjection())
sys.exit(0 if lyr.GetSpatialRef() is not None and lyr.GetSpatialRef().IsSame(r) else 1)
EOF

echo "== --min-area and --simplify"
"$T" infer "${common[@]}" --output "$W/labels_f.tif" --tile 256 --vectorize "$W/filtered.shp" \
  --min-area 0.5 --simplify 1 > "$W/logf.txt" 2>&1 || fail "infer --min-area: $(tail -3 "$W/logf.txt")"
"$PY" - "$W/filtered.shp" "$W/bg.geojson" <<'EOF' && pass "--min-area 0.5 keeps exactly the polygons of >= 0.5 m2 (Shapefile, simplified)" || fail "--min-area filter wrong"
import sys
from osgeo import ogr
a = ogr.Open(sys.argv[1]); b = ogr.Open(sys.argv[2])  # keep datasets alive while their layers are used
kept = a.GetLayer(0).GetFeatureCount()
# bg.geojson: the same seed and --tile, unfiltered exact polygons (class 0 too)
big = sum(1 for f in b.GetLayer(0) if f.GetField("class_id") >= 1 and f.GetGeometryRef().GetArea() >= 0.5)
total = sum(1 for f in b.GetLayer(0) if f.GetField("class_id") >= 1)
print("kept", kept, "of", total, "expected", big); sys.exit(0 if kept == big and 0 < kept < total else 1)
EOF

echo "== probabilities: one Float32 band per class, sum to 1, argmax = labels"
"$PY" - "$W/probs.tif" "$W/labels64.tif" <<'EOF' && pass "probabilities sum to 1 and their argmax is the label raster" || fail "probabilities wrong"
import sys
import numpy as np
from osgeo import gdal
p = gdal.Open(sys.argv[1]); l = gdal.Open(sys.argv[2])
ok = p.RasterCount == 4 and p.GetRasterBand(1).DataType == gdal.GDT_Float32
ok = ok and p.GetGeoTransform() == l.GetGeoTransform() and p.GetProjection() == l.GetProjection()
ok = ok and p.GetMetadataItem("COMPRESSION", "IMAGE_STRUCTURE") is not None and p.GetRasterBand(1).GetBlockSize() == [256, 256]
a = p.ReadAsArray().astype(np.float64); lab = l.GetRasterBand(1).ReadAsArray()
valid = lab != 255
s = a.sum(axis=0)[valid]
err = np.abs(s - 1).max()
arg = a.argmax(axis=0)
top2 = np.sort(a, axis=0)[-2:]
tie = top2[1] == top2[0]
wrong = np.count_nonzero((arg != lab) & valid & ~tie)
print(f"max |sum - 1| = {err:.2e}, argmax mismatches = {wrong} (ties {np.count_nonzero(tie & valid)}), classes present {np.unique(lab[valid]).tolist()}")
sys.exit(0 if ok and err < 1e-5 and wrong == 0 and a.min() >= 0 and a.max() <= 1 else 1)
EOF
[ -z "$(ls "$W" | grep partial)" ] && pass "no temporaries left" || fail "temporaries left: $(ls "$W" | grep partial)"

echo "== run-dir mosaic (VRT over tiles) polygonized whole"
"$T" infer "${common[@]}" --output "$W/labels_rd.tif" --tile 128 --run-dir "$W/run" --vectorize "$W/rd.gpkg" \
  > "$W/logrd.txt" 2>&1 || fail "infer --run-dir: $(tail -3 "$W/logrd.txt")"
agrees_with_gdal "$W/labels_rd.tif" "$W/rd.gpkg" "--run-dir"
same_polygons "$W/labels64.tif" "$W/out64.gpkg" "$W/labels_rd.tif" "$W/rd.gpkg" "--run-dir gives the same polygons as one process"
if [ -n "$MPIEXEC" ] && command -v "$MPIEXEC" >/dev/null; then
  "$MPIEXEC" --allow-run-as-root --oversubscribe -np 2 "$T" infer "${common[@]}" --output "$W/labels_np2.tif" \
    --tile 128 --run-dir "$W/run2" --vectorize "$W/np2.gpkg" > "$W/lognp2.txt" 2>&1 \
    || fail "mpirun -np 2 infer --vectorize: $(tail -3 "$W/lognp2.txt")"
  agrees_with_gdal "$W/labels_np2.tif" "$W/np2.gpkg" "mpirun -np 2"
  same_polygons "$W/labels64.tif" "$W/out64.gpkg" "$W/labels_np2.tif" "$W/np2.gpkg" "mpirun -np 2 gives the same polygons as one process"
fi

echo "== bad requests fail in one line naming the problem, before inference, leaving nothing"
expect_clean_failure() {
  local what="$1" name="$2" out="$3"; shift 3
  "$@" --no-progress >/dev/null 2>"$W/err.txt"; local rc=$?
  local lines; lines=$(grep -c . "$W/err.txt")
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q -- "$name" "$W/err.txt" && [ "$lines" -eq 1 ] && [ ! -e "$out" ]; then
    pass "$what: exit $rc, '$(cat "$W/err.txt")'"
  else
    fail "$what: exit $rc, $lines lines, output exists: $([ -e "$out" ] && echo yes || echo no): $(head -3 "$W/err.txt")"
  fi
}
expect_clean_failure "unknown vector extension" "out.kml" "$W/nolabels1.tif" \
  "$T" infer --model unet-tiny --init random --classes 4 --input "$S" --output "$W/nolabels1.tif" --vectorize "$W/out.kml"
expect_clean_failure "negative --min-area" "min-area" "$W/nolabels2.tif" \
  "$T" infer --model unet-tiny --init random --classes 4 --input "$S" --output "$W/nolabels2.tif" --vectorize "$W/x.gpkg" --min-area -3
expect_clean_failure "--probabilities with --run-dir" "not with --run-dir" "$W/nolabels3.tif" \
  "$T" infer --model unet-tiny --init random --classes 4 --input "$S" --output "$W/nolabels3.tif" --run-dir "$W/r3" --probabilities "$W/p3.tif"
"$GEN" --out "$W/ct" --ct-size 32 --only ct >/dev/null || fail "CT generator"
expect_clean_failure "--vectorize on a volume" "needs a 2-D raster" "$W/ctlabels.nii.gz" \
  "$T" infer --model unet3d-tiny --init random --classes 3 --input "$W/ct/ct.nii.gz" --output "$W/ctlabels.nii.gz" --vectorize "$W/ct.gpkg"

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
