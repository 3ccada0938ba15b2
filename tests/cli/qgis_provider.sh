#!/usr/bin/env bash
# Tessera inside QGIS, as an analyst runs it: the plugin (integrations/qgis) installed by its
# script into a temporary QGIS profile, then the real `qgis_process run tessera:segment_raster`
# headless segments the sample scene with a checkpoint trained here (labels as COG, polygons,
# probabilities); PyQGIS opens the outputs and checks the labels' paletted renderer (classes,
# names and colours of the checkpoint / the colour table), CRS and extent (the scene's), and the
# polygons' categories; "Evaluate segmentation" scores the labels against the truth (its JSON
# equals `tessera eval --json`); a cancelled run (PyQGIS cancels once tessera's relayed progress
# passes 0) leaves no output, temporary or child process; QGIS renders the result with a legend
# (integrations/qgis/screenshot.py, the docs' figure). QGIS is required (scripts/setup.sh
# installs qgis, python3-qgis, qgis-providers): without it the test fails.
# Usage: qgis_provider.sh TESSERA MAKE_SAMPLE
set -uo pipefail
T="$1"; GEN="$2"
HERE="$(cd "$(dirname "$0")" && pwd)"
QGIS_DIR="$HERE/../../integrations/qgis"
# Debian's /usr/bin/qgis_process wrapper adds --noversioncheck, which qgis_process 3.22 refuses.
QGIS_PROCESS=$(command -v qgis_process.bin || command -v qgis_process) \
  || { echo "FAIL qgis_process not installed (scripts/setup.sh installs it: apt-get install qgis)"; exit 1; }
/usr/bin/python3 -c "import qgis.core" 2>/dev/null \
  || { echo "FAIL PyQGIS not installed (scripts/setup.sh installs it: apt-get install python3-qgis)"; exit 1; }
W="$(mktemp -d /tmp/tessera-qgis.XXXXXX)"
trap 'rm -rf "$W"' EXIT

failures=0; checks=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL $*"; }
export QT_QPA_PLATFORM=offscreen QGIS_CUSTOM_CONFIG_PATH="$W/qgis" XDG_RUNTIME_DIR="$W/xdg" TESSERA_EXECUTABLE="$T"
mkdir -p -m 700 "$XDG_RUNTIME_DIR"
NAMES=(vegetation building road water)

"$QGIS_DIR/install.sh" "$W/qgis" >"$W/install.log" 2>&1 && pass "$(cat "$W/install.log")" \
  || { echo "FAIL install.sh: $(cat "$W/install.log")"; exit 1; }
"$QGIS_PROCESS" list 2>/dev/null | grep -q "tessera:segment_raster" && pass "qgis_process lists tessera:segment_raster" \
  || fail "qgis_process does not list the provider"

source "$(dirname "${BASH_SOURCE[0]}")/lib_scene_checkpoint.sh"
train_scene_checkpoint 768 4

echo "== qgis_process run tessera:segment_raster"
if "$QGIS_PROCESS" run tessera:segment_raster -- CHECKPOINT="$CKPT" INPUT="$W/s/scene.tif" TILE=128 PRECISION=0 \
  COG=true OUTPUT="$W/out/labels.tif" VECTORS="$W/out/polygons.gpkg" PROBABILITIES="$W/out/probabilities.tif" \
  >"$W/run.log" 2>&1; then pass "segment_raster ran: $(grep -c . "$W/run.log") lines of log"
else fail "segment_raster: $(tail -5 "$W/run.log")"; fi
for f in labels.tif labels.qml polygons.gpkg polygons.qml probabilities.tif; do
  [ -s "$W/out/$f" ] && pass "wrote $f" || fail "no $f ($(ls "$W/out" 2>/dev/null | tr '\n' ' '))"
done
[[ "$(gdalinfo "$W/out/labels.tif" 2>&1)" == *LAYOUT=COG* ]] && pass "labels are a COG" || fail "labels are not a COG"

echo "== PyQGIS opens the outputs"
/usr/bin/python3 "$HERE/qgis_provider.py" check "$W/s/scene.tif" "$W/out/labels.tif" "$W/out/polygons.gpkg" "${NAMES[@]}" \
  2>"$W/check.err" | sed 's/^/  /'
[ "${PIPESTATUS[0]}" -eq 0 ] && pass "PyQGIS checks" || fail "PyQGIS checks ($(grep -v Warning "$W/check.err" | tail -3))"

echo "== Evaluate segmentation"
if "$QGIS_PROCESS" run tessera:evaluate_segmentation -- PREDICTION="$W/out/labels.tif" TRUTH="$W/s/scene_labels.tif" \
  HOLDOUT_FRACTION=0.25 OUTPUT="$W/eval.json" >"$W/eval.log" 2>&1 \
  && "$T" eval --json --pred "$W/out/labels.tif" --truth "$W/s/scene_labels.tif" --holdout-fraction 0.25 >"$W/direct.json" \
  && /usr/bin/python3 -c "import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:]); sys.exit(a!=b)" "$W/eval.json" "$W/direct.json"
then pass "evaluate_segmentation: $(grep -o 'mean_dice [0-9.]*' "$W/eval.log" | head -1), the same JSON as tessera eval --json"
else fail "evaluate_segmentation: $(tail -3 "$W/eval.log")"; fi

echo "== cancel"
mkdir -p "$W/cancelled"
/usr/bin/python3 "$HERE/qgis_provider.py" cancel "$W/qgis/profiles/default/python/plugins" "$CKPT" "$W/s/scene.tif" \
  "$W/cancelled" 2>"$W/cancel.err" | sed 's/^/  /'
[ "${PIPESTATUS[0]}" -eq 0 ] && pass "a cancelled run leaves nothing" || fail "cancel ($(grep -v Warning "$W/cancel.err" | tail -3))"

echo "== screenshot"
if /usr/bin/python3 "$QGIS_DIR/screenshot.py" "$W/s/scene.tif" "$W/out/labels.tif" "$W/shot.png" >"$W/shot.log" 2>&1 \
  && /usr/bin/python3 - "$W/shot.png" "$W/out/labels.qml" <<'PY'
import re, sys
import numpy as np
from osgeo import gdal
shot = gdal.Open(sys.argv[1]).ReadAsArray()  # bands, rows, columns
colours = re.findall(r'color="#([0-9a-f]{6})"', open(sys.argv[2]).read())
pixels = shot[:3].reshape(3, -1).T.astype(int)
# A legend swatch is its class colour at the labels' 55 % opacity over the white page.
def drawn(c):
    blended = np.array([0.55 * int(c[i:i + 2], 16) + 0.45 * 255 for i in (0, 2, 4)])
    return np.count_nonzero(np.abs(pixels - blended).max(axis=1) <= 3) >= 100
swatches = sum(drawn(c) for c in colours)
sys.exit(0 if shot.shape[1] > 300 and swatches == len(colours) else f"{swatches} of {len(colours)} class colours drawn")
PY
then pass "QGIS rendered the scene with a legend of every class colour ($(tail -1 "$W/shot.log" | cut -c1-60))"
else fail "screenshot: $(tail -2 "$W/shot.log")"; fi

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
