#!/usr/bin/env bash
# A folder of scenes the way an analyst's batch job runs it: 6 generated scenes, three in UTM
# zone 33 and three re-placed in zone 32, through `mpirun -np 2 tessera infer --input DIR
# --output DIR --mosaic m.vrt --t-srs EPSG:3857`:
#   * every scene's labels equal the single-process run's (same grid, pixel for pixel);
#   * the ranks took whole scenes (per-rank counts printed, each scene named with its rank);
#   * the mosaic opens in GDAL with the union of the scenes' extents, each scene's labels at
#     their place;
#   * each STAC item has the item schema's required fields, and its bbox and geometry contain
#     its label raster's footprint (the corners taken to WGS 84 by OSR here); the collection's
#     extent holds every item;
#   * a SIGKILL mid-run, then a rerun: the finished scenes are kept, only the others computed;
#   * bad requests (mixed CRSs without --t-srs, an unknown CRS, a mosaic format) fail in one
#     line before any inference.
# Usage: analyst_scenes.sh TESSERA MAKE_SAMPLE MPIEXEC
source "$(dirname "$0")/../lib/mpi.sh" analyst-scenes "$@"
PY=/usr/bin/python3
NS=6

echo "== 6 scenes, two UTM zones"
mkdir -p "$W/scenes"
for k in 1 2 3 4 5 6; do
  "$GEN" --out "$W/g$k" --only scene --targets 0 --seed "$k" --size $((256 + 64 * k)) >/dev/null \
    || { echo "FAIL generator (seed $k)"; exit 1; }
  mv "$W/g$k/scene.tif" "$W/scenes/scene_$k.tif"
done
# Scenes 4-6 move to zone 32 (EPSG:32632): their upper-left corner, taken from a place beside
# the zone-33 scenes, is given in zone-32 coordinates; the pixel size stays.
"$PY" - "$W/scenes" <<'PY' || { echo "FAIL placing the scenes"; exit 1; }
import sys
from osgeo import gdal, osr
gdal.UseExceptions()
z33, z32 = osr.SpatialReference(), osr.SpatialReference()
z33.ImportFromEPSG(32633); z32.ImportFromEPSG(32632)
for s in (z33, z32): s.SetAxisMappingStrategy(osr.OAMS_TRADITIONAL_GIS_ORDER)
to32 = osr.CoordinateTransformation(z33, z32)
for k in range(1, 7):
    ds = gdal.Open(f"{sys.argv[1]}/scene_{k}.tif", gdal.GA_Update)
    gt = list(ds.GetGeoTransform())
    x, y = 500000.0 + ((k - 1) % 3) * 900.0, 5800000.0 - ((k - 1) // 3) * 900.0  # a 3 x 2 grid
    if k >= 4:
        x, y, _ = to32.TransformPoint(x, y)
        ds.SetProjection(z32.ExportToWkt())
    gt[0], gt[3] = x, y
    ds.SetGeoTransform(gt)
    ds = None
PY
# A fixed tile and thread count: the default tile follows each rank's share of the memory, and
# another tile runs other kernels whose last bits decide a random network's near-ties.
common=(--model unet-tiny --init random --seed 1 --classes 4 --threads 1 --tile 256 --no-progress)

echo "== bad requests fail in one line before inference"
expect_refusal() {  # WHAT NEEDLE OUTDIR -- command...
  local what="$1" needle="$2" out="$3"; shift 3
  "$@" > "$W/bad.out" 2> "$W/bad.err"; local rc=$?
  local lines; lines=$(grep -c . "$W/bad.err")
  if [ "$rc" -ne 0 ] && grep -q -- "$needle" "$W/bad.err" && [ "$lines" -eq 1 ] && \
     [ -z "$(ls -A "$out" 2>/dev/null | grep -v '^$')" ]; then
    pass "$what: exit $rc, '$(cat "$W/bad.err")'"
  else
    fail "$what: exit $rc, $lines lines, output '$(ls -A "$out" 2>/dev/null | tr '\n' ' ')': $(head -3 "$W/bad.err")"
  fi
}
expect_refusal "mixed CRSs without --t-srs" "give --t-srs" "$W/bad1" \
  "$T" infer "${common[@]}" --input "$W/scenes" --output "$W/bad1" --mosaic "$W/bad1/m.vrt"
expect_refusal "unknown CRS" "--t-srs EPSG:999999" "$W/bad2" \
  "$T" infer "${common[@]}" --input "$W/scenes" --output "$W/bad2" --t-srs EPSG:999999
expect_refusal "mosaic format" "unknown mosaic format" "$W/bad3" \
  "$T" infer "${common[@]}" --input "$W/scenes" --output "$W/bad3" --mosaic "$W/bad3/m.kml" --t-srs EPSG:3857

echo "== one process (the reference)"
"$T" infer "${common[@]}" --input "$W/scenes" --output "$W/ref" --t-srs EPSG:3857 > "$W/ref.log" 2>&1 \
  || { fail "one process: $(tail -3 "$W/ref.log")"; finish; exit; }
pass "one process: $(tail -2 "$W/ref.log" | head -1)"

echo "== mpirun -np 2, --mosaic, --t-srs EPSG:3857"
"${MPI[@]}" -np 2 "$T" infer "${common[@]}" --input "$W/scenes" --output "$W/out" --t-srs EPSG:3857 \
  --mosaic "$W/out/mosaic.vrt" > "$W/np2.log" 2>&1 || fail "mpirun -np 2: $(tail -3 "$W/np2.log")"
grep "scenes:" "$W/np2.log" | sed 's/^/  /'
if grep -Eq "^$NS scenes: $NS computed \(whole scenes per rank: [1-9][0-9]* [1-9][0-9]*\)" "$W/np2.log" &&
   [ "$(grep -Ec '^.*scene_[1-6]\.tif: rank [01]$' "$W/np2.log")" -eq "$NS" ]; then
  pass "both ranks took whole scenes, each scene on one rank"
else
  fail "per-rank scene counts: $(grep -E 'scenes:|: rank' "$W/np2.log" | tr '\n' ';')"
fi

# Checks in Python (GDAL bindings + numpy), one mode per question.
cat > "$W/check.py" <<'EOF'
import glob, json, os, sys
import numpy as np
from osgeo import gdal, ogr, osr
gdal.UseExceptions()

def read(path):
    ds = gdal.Open(path)
    return ds, ds.GetRasterBand(1).ReadAsArray()

mode = sys.argv[1]
if mode == "same":  # every scene of folder A equals folder B's: grid, CRS and labels
    bad = 0
    for a in sorted(glob.glob(sys.argv[2] + "/scene_*.tif")):
        b = os.path.join(sys.argv[3], os.path.basename(a))
        da, la = read(a); db, lb = read(b)
        same_grid = da.GetGeoTransform() == db.GetGeoTransform() and la.shape == lb.shape
        srs = osr.SpatialReference(wkt=db.GetProjection())
        differ = int(np.count_nonzero(la != lb)) if la.shape == lb.shape else la.size
        print(f"  {os.path.basename(a)}: {la.shape}, EPSG:{srs.GetAuthorityCode(None)}, {differ} pixels differ")
        bad += (not same_grid) or differ != 0 or srs.GetAuthorityCode(None) != "3857"
    sys.exit(1 if bad else 0)
if mode == "mosaic":  # extent = union of the scenes', each scene's labels at their place
    m, _ = gdal.Open(sys.argv[2]), None
    gt = m.GetGeoTransform()
    scenes = sorted(glob.glob(sys.argv[3] + "/scene_*.tif"))
    x0 = y1 = float("inf"); x1 = y0 = -float("inf")
    for s in scenes:
        d = gdal.Open(s); g = d.GetGeoTransform()
        x0 = min(x0, g[0]); y1 = min(y1, g[3] + d.RasterYSize * g[5])
        x1 = max(x1, g[0] + d.RasterXSize * g[1]); y0 = max(y0, g[3])
    mx1, my1 = gt[0] + m.RasterXSize * gt[1], gt[3] + m.RasterYSize * gt[5]
    px = abs(gt[1])
    print(f"  mosaic {m.RasterXSize}x{m.RasterYSize}, x {gt[0]:.1f}..{mx1:.1f}, y {my1:.1f}..{gt[3]:.1f}; "
          f"scenes' union x {x0:.1f}..{x1:.1f}, y {y1:.1f}..{y0:.1f}")
    ok = all(abs(a - b) <= px for a, b in ((gt[0], x0), (mx1, x1), (gt[3], y0), (my1, y1)))
    band = m.GetRasterBand(1)
    ok = ok and band.GetNoDataValue() == 255
    for s in scenes:  # a block in the middle of every scene, read through the mosaic
        d = gdal.Open(s); g = d.GetGeoTransform(); lab = d.GetRasterBand(1).ReadAsArray()
        r0, c0 = d.RasterYSize // 2, d.RasterXSize // 2
        mc = int(round((g[0] + c0 * g[1] - gt[0]) / gt[1])); mr = int(round((g[3] + r0 * g[5] - gt[3]) / gt[5]))
        got = band.ReadAsArray(mc, mr, 16, 16)
        if not np.array_equal(got, lab[r0:r0 + 16, c0:c0 + 16]):
            print(f"  {os.path.basename(s)}: the mosaic differs at its centre"); ok = False
    sys.exit(0 if ok else 1)
if mode == "stac":  # required fields; bbox and geometry hold the input's footprint in WGS 84
    wgs = osr.SpatialReference(); wgs.ImportFromEPSG(4326); wgs.SetAxisMappingStrategy(osr.OAMS_TRADITIONAL_GIS_ORDER)
    bad = 0; items = sorted(glob.glob(sys.argv[2] + "/scene_*.stac.json"))
    if len(items) != int(sys.argv[3]): print(f"  {len(items)} items"); sys.exit(1)
    boxes = []
    for path in items:
        j = json.load(open(path))
        missing = [k for k in ("type", "stac_version", "id", "geometry", "bbox", "properties", "links", "assets")
                   if k not in j]
        missing += [k for k in ("datetime", "proj:epsg", "proj:transform", "proj:shape", "label:classes", "label:type")
                    if k not in j.get("properties", {})]
        if j.get("type") != "Feature": missing.append("type=Feature")
        if any("href" not in a for a in j.get("assets", {}).values()): missing.append("asset href")
        scene = os.path.join(sys.argv[2], os.path.basename(path).replace(".stac.json", ".tif"))
        d = gdal.Open(scene); g = d.GetGeoTransform()  # the label raster the item describes
        src = osr.SpatialReference(wkt=d.GetProjection()); src.SetAxisMappingStrategy(osr.OAMS_TRADITIONAL_GIS_ORDER)
        ct = osr.CoordinateTransformation(src, wgs)
        corners = [ct.TransformPoint(g[0] + c * d.RasterXSize * g[1], g[3] + r * d.RasterYSize * g[5])[:2]
                   for r in (0, 1) for c in (0, 1)]
        b = j["bbox"]; boxes.append(b)
        eps = 1e-9
        in_bbox = all(b[0] - eps <= x <= b[2] + eps and b[1] - eps <= y <= b[3] + eps for x, y in corners)
        geom = ogr.CreateGeometryFromJson(json.dumps(j["geometry"])).Buffer(1e-9)
        in_geom = all(geom.Contains(ogr.CreateGeometryFromWkt(f"POINT ({x!r} {y!r})")) for x, y in corners)
        labels_href = os.path.join(os.path.dirname(path), j["assets"]["labels"]["href"])
        print(f"  {os.path.basename(path)}: bbox {['%.5f' % v for v in b]}, EPSG:{j['properties']['proj:epsg']}, "
              f"missing {missing}, footprint in bbox {in_bbox}, in geometry {in_geom}")
        bad += bool(missing) or not in_bbox or not in_geom or not os.path.exists(labels_href) \
               or j["properties"]["proj:epsg"] != 3857
    c = json.load(open(sys.argv[2] + "/collection.json"))
    ext = c["extent"]["spatial"]["bbox"][0]
    holds = all(ext[0] <= b[0] and ext[1] <= b[1] and ext[2] >= b[2] and ext[3] >= b[3] for b in boxes)
    links = sum(1 for l in c["links"] if l["rel"] == "item")
    print(f"  collection: type {c.get('type')}, {links} item links, extent holds every item: {holds}")
    bad += c.get("type") != "Collection" or links != len(items) or not holds
    sys.exit(1 if bad else 0)
sys.exit(2)
EOF
"$PY" "$W/check.py" same "$W/ref" "$W/out" && pass "every scene's labels equal one process's (EPSG:3857)" \
  || fail "mpirun -np 2 labels differ from one process"
"$PY" "$W/check.py" mosaic "$W/out/mosaic.vrt" "$W/out" && pass "mosaic: union extent, every scene at its place" \
  || fail "mosaic"
"$PY" "$W/check.py" stac "$W/out" "$NS" && pass "STAC items and collection" || fail "STAC items"

echo "== SIGKILL mid-run, then a rerun keeps the finished scenes"
setsid "${MPI[@]}" -np 2 "$T" infer "${common[@]}" --input "$W/scenes" --output "$W/k" --t-srs EPSG:3857 \
  > "$W/k1.log" 2>&1 &
job=$!
for _ in $(seq 1 1200); do  # up to 120 s: kill once two scenes are finished
  n=$(ls "$W"/k/scene_*.stac.json 2>/dev/null | wc -l)
  [ "$n" -ge 2 ] && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
kill -9 -- -"$job" 2>/dev/null; pkill -9 -f -- "--output $W/k " 2>/dev/null; wait "$job" 2>/dev/null
kept=$(ls "$W"/k/scene_*.stac.json 2>/dev/null | wc -l)
echo "  killed with $kept of $NS scenes finished"
if [ "$kept" -lt 1 ] || [ "$kept" -ge "$NS" ]; then
  fail "the kill did not land mid-run ($kept of $NS finished)"
else
  "${MPI[@]}" -np 2 "$T" infer "${common[@]}" --input "$W/scenes" --output "$W/k" --t-srs EPSG:3857 \
    > "$W/k2.log" 2>&1 || fail "rerun: $(tail -3 "$W/k2.log")"
  grep "scenes:" "$W/k2.log" | sed 's/^/  /'
  again=$(grep -c ": kept, finished by an earlier run" "$W/k2.log")
  # "N computed" is the sum of what the ranks ran (whole scenes per rank: a b), not N minus kept.
  spread=$(sed -nE "s/^$NS scenes: .*whole scenes per rank: ([0-9 ]+)\).*/\1/p" "$W/k2.log")
  ran=0; for n in $spread; do ran=$((ran + n)); done
  if grep -Eq "^$NS scenes: $((NS - kept)) computed .* $kept kept from an earlier run, 0 failed" "$W/k2.log" && \
     [ "$again" -eq "$kept" ] && [ "$ran" -eq $((NS - kept)) ]; then
    pass "rerun kept the $kept finished scenes and computed $((NS - kept))"
  else
    fail "rerun: $(grep -E 'scenes:|kept' "$W/k2.log" | tr '\n' ';')"
  fi
  "$PY" "$W/check.py" same "$W/ref" "$W/k" > /dev/null && pass "after the kill and rerun, every scene equals one process's" \
    || fail "after the rerun the labels differ from one process"
  left=$(ls -A "$W/k" | grep partial | tr '\n' ' ')
  [ -z "$left" ] && pass "no temporaries left after the rerun" || fail "temporaries left: $left"
fi
finish
