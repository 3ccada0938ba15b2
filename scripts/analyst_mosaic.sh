#!/usr/bin/env bash
# The README's "Analysts" example, end to end: a U-Net trained briefly on the sample scene
# labels six generated scenes (three in UTM zone 33, three in zone 32) under mpirun -np 2,
# whole scenes per rank, warped to EPSG:3857, as COGs, with one mosaic VRT, STAC items and a
# collection; then what GDAL says of them and a screenshot of the mosaic in the viewer
# (gui/screenshots/viewer-mosaic.png).
#   scripts/analyst_mosaic.sh [WORK_DIR]   (default /tmp/tessera-analyst-mosaic; needs a build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${TESSERA_BUILD_DIR:-$root/build}
W=${1:-/tmp/tessera-analyst-mosaic}
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 QT_QPA_PLATFORM=${QT_QPA_PLATFORM:-offscreen}
rm -rf "$W" && mkdir -p "$W/scenes"

echo "== train unet-tiny on the sample scene (150 steps)"
"$B/sample_data/tessera-make-sample" --out "$W/g" --size 1024 --targets 0 --only scene > /dev/null
cat > "$W/train.yaml" <<YAML
run_dir: $W/run
model: {preset: unet-tiny, classes: 4}
data:
  pairs: [{image: $W/g/scene.tif, labels: $W/g/scene_labels.tif}]
  class_names: [vegetation, building, road, water]
train: {tile: 128, batch: 4, steps: 150, seed: 1}
YAML
"$B/cli/tessera" train --config "$W/train.yaml" --no-progress | tail -1

echo "== six scenes, two UTM zones"
for k in 1 2 3 4 5 6; do
  "$B/sample_data/tessera-make-sample" --out "$W/g$k" --only scene --targets 0 --seed "$k" --size 1024 > /dev/null
  mv "$W/g$k/scene.tif" "$W/scenes/scene_$k.tif"
done
"$PY" - "$W/scenes" <<'PY'
import sys
from osgeo import gdal, osr
gdal.UseExceptions()
z33, z32 = osr.SpatialReference(), osr.SpatialReference()
z33.ImportFromEPSG(32633); z32.ImportFromEPSG(32632)
for s in (z33, z32): s.SetAxisMappingStrategy(osr.OAMS_TRADITIONAL_GIS_ORDER)
to32 = osr.CoordinateTransformation(z33, z32)
for k in range(1, 7):  # a 3 x 2 grid with 60 m gaps; scenes 4-6 written in zone 32
    ds = gdal.Open(f"{sys.argv[1]}/scene_{k}.tif", gdal.GA_Update)
    gt = list(ds.GetGeoTransform()); w = ds.RasterXSize * gt[1]
    x, y = 500000.0 + ((k - 1) % 3) * (w + 60), 5800000.0 - ((k - 1) // 3) * (w + 60)
    if k >= 4:
        x, y, _ = to32.TransformPoint(x, y); ds.SetProjection(z32.ExportToWkt())
    gt[0], gt[3] = x, y; ds.SetGeoTransform(gt); ds = None
PY

echo "== mpirun -np 2 tessera infer --input scenes --output labels --mosaic labels/mosaic.vrt --t-srs EPSG:3857 --cog"
mpirun --allow-run-as-root --oversubscribe -np 2 "$B/cli/tessera" infer --checkpoint "$W/run/checkpoints/last.pt" \
  --input "$W/scenes" --output "$W/labels" --mosaic "$W/labels/mosaic.vrt" --t-srs EPSG:3857 --cog --no-progress \
  | grep -E "scenes:|STAC|mosaic:"

echo "== what GDAL says"
gdalinfo "$W/labels/scene_1.tif" | grep -E "LAYOUT|Overviews|Categories" -A5 | head -12
"$PY" /usr/lib/python3/dist-packages/osgeo_utils/samples/validate_cloud_optimized_geotiff.py "$W/labels/scene_1.tif"
gdalinfo "$W/labels/mosaic.vrt" | grep -E "^Size|Upper Left|Lower Right"

echo "== the mosaic in the viewer"
read -r te w h < <(gdalinfo -json "$W/labels/mosaic.vrt" | "$PY" -c "
import json, sys; j = json.load(sys.stdin); g = j['geoTransform']; w, h = j['size']
print(f'{g[0]},{g[3] + h * g[5]},{g[0] + w * g[1]},{g[3]}', w, h)")
gdalwarp -q -overwrite -t_srs EPSG:3857 -te ${te//,/ } -ts "$w" "$h" -r bilinear "$W"/scenes/*.tif "$W/images_3857.tif"
"$B/gui/tessera-view" "$W/images_3857.tif" --labels "$W/labels/mosaic.vrt" --bands 1,2,3 \
  --screenshot "$root/gui/screenshots/viewer-mosaic.png" 2>/dev/null
