#!/usr/bin/env bash
# `tessera infer --mode stream` (strips of rows through the network, nothing recomputed)
# against `--mode tile` on the sample scene and CT: the same labels pixel for pixel,
# probabilities within 1e-5, the summary says "recompute 1.00x"; --mode auto picks the
# stream when tiles would recompute and says why; bf16 streams; what cannot stream is refused
# in one line naming the flag, leaving no output.
# Usage: infer_stream.sh TESSERA MAKE_SAMPLE
set -uo pipefail
T="$1"; GEN="$2"
W="$(mktemp -d /tmp/tessera-infer-stream.XXXXXX)"
trap 'rm -rf "$W"' EXIT
failures=0; checks=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL $*"; }
cd "$W"

"$GEN" --out s --size 333 --ct-size 30 --targets 0 > gen.log 2>&1 || { echo "FAIL generator: $(tail -2 gen.log)"; exit 1; }
net=(--model unet-tiny --filters 8 --init random --seed 3 --threads 2 --no-progress)

# same_labels A B WHAT: the label rasters' pixels (and the probabilities' within 1e-5, when
# given as A.probs B.probs) are equal.
same_rasters() {
  /usr/bin/python3 - "$@" <<'PY'
import sys
import numpy as np
from osgeo import gdal
a, b = gdal.Open(sys.argv[1]), gdal.Open(sys.argv[2])
la, lb = a.ReadAsArray(), b.ReadAsArray()
if la.shape != lb.shape or not np.array_equal(la, lb):
    sys.exit(f"{int((la != lb).sum()) if la.shape == lb.shape else la.shape} labels differ")
if a.GetGeoTransform() != b.GetGeoTransform() or a.GetProjection() != b.GetProjection():
    sys.exit("georeferencing differs")
if len(sys.argv) > 3:
    pa, pb = gdal.Open(sys.argv[3]).ReadAsArray(), gdal.Open(sys.argv[4]).ReadAsArray()
    d = np.nanmax(np.abs(pa.astype(np.float64) - pb))
    if not d <= 1e-5: sys.exit(f"probabilities differ by {d:.3g}")
print(f"{la.size} labels equal ({len(np.unique(la))} classes)")
PY
}

echo "== stream against tiles of 64 (2-D, probabilities too)"
"$T" infer "${net[@]}" --input s/scene.tif --output tile.tif --probabilities ptile.tif --mode tile --tile 64 > tile.log 2>&1 \
  || fail "tile: $(tail -2 tile.log)"
"$T" infer "${net[@]}" --input s/scene.tif --output stream.tif --probabilities pstream.tif --mode stream > stream.log 2>&1 \
  || fail "stream: $(tail -2 stream.log)"
if why=$(same_rasters tile.tif stream.tif ptile.tif pstream.tif 2>&1); then pass "stream = tiles: $why"; else fail "stream != tiles: $why"; fi
grep -q "recompute 1.00x" stream.log && grep -q "strips, stream (--mode stream; " stream.log \
  && pass "summary: $(grep -o 'strips, .*' stream.log)" || fail "stream summary: $(cat stream.log)"
grep -q "recompute [2-9]\.[0-9]*x" tile.log && pass "tiles of 64 recompute: $(grep -o 'recompute [0-9.]*x' tile.log)" \
  || fail "tile summary lacks its recompute: $(cat tile.log)"

echo "== auto: tiles when the whole image is one tile, the stream when tiles are predicted slower"
"$T" infer "${net[@]}" --input s/scene.tif --output auto1.tif > auto1.log 2>&1 || fail "auto: $(tail -2 auto1.log)"
grep -q "tiles (auto: the whole image is one tile" auto1.log && pass "auto, whole image: tiles" || fail "auto1: $(cat auto1.log)"
"$T" infer "${net[@]}" --input s/scene.tif --output auto2.tif --memory-budget 120MiB > auto2.log 2>&1 \
  || fail "auto under a budget: $(tail -2 auto2.log)"
grep -q "stream (auto: predicted [0-9.]*x one pass's time against [0-9.]*x for tiles of [0-9]*" auto2.log \
  && pass "auto under a budget: $(grep -o 'stream (auto[^)]*)' auto2.log)" || fail "auto2: $(cat auto2.log)"
if why=$(same_rasters tile.tif auto2.tif 2>&1); then pass "auto's stream = tiles"; else fail "auto's stream: $why"; fi
"$T" infer "${net[@]}" --input s/scene.tif --output auto3.tif --tile 64 > auto3.log 2>&1 || fail "auto --tile: $(tail -2 auto3.log)"
grep -q "tiles (auto: --tile 64 given)" auto3.log && pass "auto with --tile 64: tiles" || fail "auto3: $(cat auto3.log)"

echo "== bf16 streams"
"$T" infer "${net[@]}" --input s/scene.tif --output bf16.tif --mode stream --precision bf16 > bf16.log 2>&1 \
  || fail "bf16 stream: $(tail -2 bf16.log)"
/usr/bin/python3 - <<'PY' && pass "bf16 stream agrees with fp32 on most labels" || fail "bf16 stream"
import sys
import numpy as np
from osgeo import gdal
a, b = gdal.Open("stream.tif").ReadAsArray(), gdal.Open("bf16.tif").ReadAsArray()
share = (a == b).mean()
print(f"bf16 stream: {share:.4%} of the labels as fp32's")
sys.exit(0 if share >= 0.9 else 1)
PY

echo "== 3-D: slabs of slices against tiles"
vol=(--model unet3d-tiny --filters 4 --classes 3 --init random --seed 2 --threads 2 --no-progress --input s/ct.nii.gz)
"$T" infer "${vol[@]}" --output vtile.nii.gz --mode tile --tile 8 > vtile.log 2>&1 || fail "3-D tile: $(tail -2 vtile.log)"
"$T" infer "${vol[@]}" --output vstream.nii.gz --mode stream > vstream.log 2>&1 || fail "3-D stream: $(tail -2 vstream.log)"
"$T" eval --pred vstream.nii.gz --truth vtile.nii.gz --json > veval.json 2>&1
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); c=[k for k in d["classes"] if k["truth_pixels"]>0]; sys.exit(0 if len(c)>1 and all(k["dice"]==1.0 for k in c) else 1)' veval.json \
  && pass "3-D stream = tiles of 8: $(grep -o 'recompute [0-9.]*x' vstream.log) vs $(grep -o 'recompute [0-9.]*x' vtile.log)" \
  || fail "3-D stream != tiles: $(head -c 300 veval.json)"

echo "== refused in one line, naming the flag, nothing written"
refuse() {  # WHAT WORD ARGS...
  local what="$1" word="$2"; shift 2
  "$T" infer "${net[@]}" --input s/scene.tif --output refused.tif "$@" > refused.log 2>&1; local rc=$?
  if [ $rc -ne 0 ] && [ "$(grep -c . refused.log)" -eq 1 ] && grep -q -- "$word" refused.log && [ ! -e refused.tif ]; then
    pass "$what: $(cat refused.log)"
  else
    fail "$what: exit $rc: $(head -3 refused.log)"
  fi
}
refuse "--mode stream --tile 64" "--tile 64" --mode stream --tile 64
refuse "--mode stream --sp 2" "--sp" --mode stream --sp 2
refuse "--mode stream, same padding" "padding is same" --mode stream --padding same
refuse "--mode stream, group norm" "statistics" --mode stream --norm group
refuse "--mode sideways" "--mode" --mode sideways

echo "== $checks checks, $failures failed"
[ "$failures" -eq 0 ]
