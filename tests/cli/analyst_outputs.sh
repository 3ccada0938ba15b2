#!/usr/bin/env bash
# Label rasters as GIS analysts open them: `gdalinfo` lists the checkpoint's class names
# (categories) and a raster attribute table whose Count column is the histogram of the labels;
# a QGIS style (.qml) with every class sits beside the output; `--cog` and a .cog.tif name give
# Cloud-Optimized GeoTIFFs (labels and --probabilities) that GDAL's validator accepts, with
# internal overviews and no .ovr; label overviews hold, for every 2 x 2 block, its most
# frequent class (MODE: no averaged or picked class ids), probability overviews the block's mean;
# the run-directory (tile mosaic) output is named the same way;
# a run that fails at the end leaves no output, sidecar or temporary.
# Usage: analyst_outputs.sh TESSERA MAKE_SAMPLE
set -uo pipefail
T="$1"; GEN="$2"
W="$(mktemp -d /tmp/tessera-analyst.XXXXXX)"
trap 'rm -rf "$W"' EXIT
VALIDATE=/usr/lib/python3/dist-packages/osgeo_utils/samples/validate_cloud_optimized_geotiff.py
failures=0; checks=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL $*"; }
NAMES=(vegetation building road water)

source "$(dirname "${BASH_SOURCE[0]}")/lib_scene_checkpoint.sh"
train_scene_checkpoint 512 2
infer() { "$T" infer --checkpoint "$CKPT" --input "$W/s/scene.tif" --tile 128 --no-progress "$@"; }

# named FILE [NAMES...]: gdalinfo shows every name as a category and the attribute table; the
# table's Count column equals the labels' histogram (nodata skipped); QML lists every name.
named() {
  local f="$1"; shift
  local info qml="${f%.*}.qml" problems=""
  info=$(gdalinfo "$f" 2>&1)
  grep -q "Categories:" <<<"$info" || problems+=" no Categories;"
  local k=0
  for n in "$@"; do
    grep -qE "^ +$k: $n\$" <<<"$info" || problems+=" category $k $n missing;"
    [ -f "$qml" ] && grep -q "<paletteEntry value=\"$k\" color=\"#[0-9a-f]\{6\}\" alpha=\"255\" label=\"$n\"/>" "$qml" \
      || problems+=" $qml lacks $n;"
    k=$((k + 1))
  done
  grep -q "<GDALRasterAttributeTable" <<<"$info" || problems+=" no RasterAttributeTable;"
  grep -q "NoData Value=255" <<<"$info" || problems+=" no nodata 255;"
  grep -q "Color Table" <<<"$info" || problems+=" no colour table;"
  local counted
  counted=$(/usr/bin/python3 - "$f" 2>&1 <<'PY'
import sys
import numpy as np
from osgeo import gdal
gdal.UseExceptions()
ds = gdal.Open(sys.argv[1])  # kept: a band outliving its dataset crashes
band = ds.GetRasterBand(1)
hist = np.bincount(band.ReadAsArray().ravel(), minlength=256)
rat = band.GetDefaultRAT()
cols = {rat.GetUsageOfCol(c): c for c in range(rat.GetColumnCount())}
rows = {rat.GetValueAsInt(r, cols[gdal.GFU_MinMax]): rat.GetValueAsDouble(r, cols[gdal.GFU_PixelCount])
        for r in range(rat.GetRowCount())}
for v in range(255):
    if rows.get(v, 0) != hist[v]:
        sys.exit(f"value {v}: Count {rows.get(v)} but {hist[v]} pixels")
PY
) || problems+=" counts: $counted;"
  [ -z "$problems" ] && pass "$f: names, attribute table with counts, colours, nodata, .qml" \
    || fail "$f:$problems"
}

# cog FILE: the validator accepts it; internal overviews, no .ovr.
cog() {
  local f="$1" out
  out=$(/usr/bin/python3 "$VALIDATE" "$f" 2>&1)
  if [ $? -eq 0 ] && grep -q "is a valid cloud optimized GeoTIFF" <<<"$out"; then pass "validator: $(head -1 <<<"$out")"
  else fail "validator on $f: $out"; fi
  out=$(gdalinfo "$f" 2>&1)
  grep -q "Overviews:" <<<"$out" && grep -q "LAYOUT=COG" <<<"$out" && [ ! -e "$f.ovr" ] \
    && pass "$f: internal overviews, no .ovr" || fail "$f: overviews $(grep -c Overviews: <<<"$out"), .ovr $(ls "$f.ovr" 2>&1)"
}

# modal_overviews FILE: the first overview of a label COG is the mode of each 2 x 2 block of the
# full-resolution labels (nodata aside): only classes the labels have, a one-class block keeps
# its class, a mixed block shows one of its most frequent classes (AVERAGE or NEAREST do not).
modal_overviews() {
  local f="$1" out
  out=$(/usr/bin/python3 - "$f" 2>&1 <<'PY'
import sys
import numpy as np
from osgeo import gdal
gdal.UseExceptions()
ds = gdal.Open(sys.argv[1])  # kept: a band outliving its dataset crashes
band = ds.GetRasterBand(1)
nodata = band.GetNoDataValue()
full = band.ReadAsArray()
if band.GetOverviewCount() < 1:
    sys.exit("no overview")
half = band.GetOverview(0).ReadAsArray()
h, w = half.shape
if full.shape != (2 * h, 2 * w):
    sys.exit(f"overview {half.shape} is not half of {full.shape}")
present = set(np.unique(full).tolist())
stray = sorted(set(np.unique(half).tolist()) - present)
if stray:
    sys.exit(f"overview values {stray} are no class of the full-resolution labels {sorted(present)}")
blocks = full.reshape(h, 2, w, 2).transpose(0, 2, 1, 3).reshape(h, w, 4)
counts = np.stack([(blocks == v).sum(axis=2) for v in range(256)], axis=2)
if nodata is not None:
    counts[:, :, int(nodata)] = 0
best = counts.max(axis=2)
shown = np.take_along_axis(counts, half[:, :, None].astype(np.int64), axis=2)[:, :, 0]
uniform = (blocks == blocks[:, :, :1]).all(axis=2) & (best > 0)
mixed = ~uniform & (best > 0)
if not (half[uniform] == blocks[:, :, 0][uniform]).all():
    y, x = np.argwhere(uniform & (half != blocks[:, :, 0]))[0]
    sys.exit(f"a block of class {int(blocks[y, x, 0])} shows {int(half[y, x])} at overview pixel ({y}, {x})")
wrong = mixed & (shown != best)
if wrong.any():
    y, x = np.argwhere(wrong)[0]
    sys.exit(f"{wrong.sum()} of {mixed.sum()} mixed 2 x 2 blocks do not show their most frequent class, e.g. "
             f"overview pixel ({y}, {x}) is {int(half[y, x])} for the block {blocks[y, x].tolist()}")
if mixed.sum() < 100 or uniform.sum() < 100:
    sys.exit(f"too few one-class ({uniform.sum()}) or mixed ({mixed.sum()}) blocks to tell MODE from another resampling")
print(f"{uniform.sum()} one-class blocks keep their class, {mixed.sum()} mixed blocks show their most frequent one")
PY
) && pass "$f: label overviews are the mode of each 2 x 2 block: $out" || fail "$f: label overviews: $out"
}

# no_temporaries DIR: nothing half-written left.
no_temporaries() {
  local left; left=$(find "$1" -name '*.partial*' | tr '\n' ' ')
  [ -z "$left" ] && pass "$1: no temporaries" || fail "$1: left behind: $left"
}

echo "== --cog labels and probabilities"
infer --cog --output "$W/out/labels.cog.tif" --probabilities "$W/out/probs.tif" >"$W/infer.log" 2>&1 \
  || fail "infer --cog: $(tail -3 "$W/infer.log")"
named "$W/out/labels.cog.tif" "${NAMES[@]}"
cog "$W/out/labels.cog.tif"
modal_overviews "$W/out/labels.cog.tif"
cog "$W/out/probs.tif"
# Probability overviews are averages of 2 x 2 pixels (not one of them).
/usr/bin/python3 - "$W/out/probs.tif" <<'PY' && pass "probability overviews are averages" || fail "probability overviews"
import sys
import numpy as np
from osgeo import gdal
ds = gdal.Open(sys.argv[1])
band = ds.GetRasterBand(1)
full = band.ReadAsArray().astype(np.float64)
half = band.GetOverview(0).ReadAsArray().astype(np.float64)
mean = full.reshape(half.shape[0], 2, half.shape[1], 2).mean(axis=(1, 3))
ok = np.isfinite(mean)
sys.exit(0 if np.allclose(half[ok], mean[ok], atol=1e-5) and not np.allclose(half[ok], full[::2, ::2][ok]) else 1)
PY
no_temporaries "$W/out"

echo "== plain GeoTIFF, .cog.tif by name, random init"
infer --output "$W/plain/labels.tif" >"$W/infer.log" 2>&1 || fail "infer plain: $(tail -3 "$W/infer.log")"
named "$W/plain/labels.tif" "${NAMES[@]}"
grep -q "LAYOUT=COG" <<<"$(gdalinfo "$W/plain/labels.tif")" && fail "plain .tif is a COG" || pass "plain .tif is not a COG"
infer --output "$W/byname/labels.cog.tif" >"$W/infer.log" 2>&1 || fail "infer .cog.tif: $(tail -3 "$W/infer.log")"
cog "$W/byname/labels.cog.tif"
modal_overviews "$W/byname/labels.cog.tif"
"$T" infer --model unet-tiny --init random --seed 1 --classes 4 --input "$W/s/scene.tif" --tile 128 --no-progress \
  --output "$W/random/labels.tif" >"$W/infer.log" 2>&1 || fail "infer --init random: $(tail -3 "$W/infer.log")"
named "$W/random/labels.tif" "class 0" "class 1" "class 2" "class 3"

echo "== run directory (tile mosaic) output"
infer --cog --run-dir "$W/rd" --output "$W/rd_out/labels.tif" >"$W/infer.log" 2>&1 \
  || fail "infer --run-dir: $(tail -3 "$W/infer.log")"
named "$W/rd_out/labels.tif" "${NAMES[@]}"
cog "$W/rd_out/labels.tif"
modal_overviews "$W/rd_out/labels.tif"
/usr/bin/python3 -c '
import sys
from osgeo import gdal
a, b = (gdal.Open(p) for p in sys.argv[1:3])
sys.exit(0 if (a.ReadAsArray() == b.ReadAsArray()).all() else 1)' "$W/rd_out/labels.tif" "$W/out/labels.cog.tif" \
  && pass "run-directory labels equal the single-process labels" || fail "run-directory labels differ"
no_temporaries "$W/rd_out"; no_temporaries "$W/rd"

echo "== a run failing at the end leaves nothing"
# A folder where a sidecar goes: writing it fails after the labels are computed; neither the
# labels nor the other sidecar may stay.
for blocked in labels.cog.qml labels.cog.tif.aux.xml; do
  rm -rf "$W/fail"; mkdir -p "$W/fail/$blocked/x"
  if infer --output "$W/fail/labels.cog.tif" >"$W/infer.log" 2>&1; then fail "infer with $blocked blocked succeeded"
  else
    left=$(cd "$W/fail" && ls -A | grep -vx "$blocked" | tr '\n' ' ')
    [ -z "$left" ] && [ "$(ls -A "$W/fail/$blocked")" = x ] && pass "failed run left nothing: $(tail -1 "$W/infer.log")" \
      || fail "$blocked blocked: failed run left $left"
  fi
done

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
