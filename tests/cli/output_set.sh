#!/usr/bin/env bash
# Every output of a `tessera infer` run commits together or not at all (run/output_set.hpp):
#   - a scene to labels + probabilities + overlay + polygons + STAC item: all appear;
#   - the same run with a failure planted after the labels and probabilities were written (a
#     folder where the overlay's staged file goes): exit 1, a one-line error, and not one of
#     the outputs nor their side files (.aux.xml, .qml) at the final paths, no staging left;
#   - the same run killed (SIGKILL) while it writes the overlay (a FIFO there blocks it): the
#     labels exist staged, nothing at the final paths; a rerun removes its staging folder;
#   - a DICOM series to a DICOM SEG with --overlay: both written, no GDCM noise, the overlay
#     the same picture as from a label volume of the same labels; the same run failing at the
#     overlay: no seg.dcm left.
# The staged names are the documented contract: <folder>/.tessera.partial-<host>-<pid>/<file name>.
# Usage: output_set.sh TESSERA MAKE_SAMPLE
set -uo pipefail
T="$1"; GEN="$2"
W="$(mktemp -d /tmp/tessera-output-set.XXXXXX)"
trap 'rm -rf "$W"' EXIT
failures=0; checks=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL $*"; }
cd "$W"
H=$(uname -n)  # the host part of a staging folder's name (gethostname)

"$GEN" --out s --size 256 --ct-size 32 --targets 0 > gen.log 2>&1 || { echo "FAIL generator: $(tail -2 gen.log)"; exit 1; }
scene_outputs=(out/labels.tif out/labels.tif.aux.xml out/labels.qml out/probs.tif out/overlay.png out/polygons.gpkg
               out/labels.stac.json)
# The command itself in the background ($! is its pid, which names its staging folder).
scene_run=("$T" infer --model unet-tiny --init random --seed 0 --classes 4 --tile 64 --no-progress --input s/scene.tif
           --output out/labels.tif --probabilities out/probs.tif --overlay out/overlay.png --vectorize out/polygons.gpkg
           --vector-background)
left_over() {  # the outputs (and staging folders) present now
  local found=()
  for f in "$@"; do [ -e "$f" ] && found+=("$f"); done
  for d in out/.tessera.partial-*; do [ -e "$d" ] && found+=("$d"); done
  echo "${found[*]}"
}

# 1. A run that succeeds leaves every output, and no staging folder.
if "${scene_run[@]}" > ok.log 2>&1; then pass "infer with five outputs"; else fail "infer: $(tail -3 ok.log)"; fi
missing=()
for f in "${scene_outputs[@]}"; do [ -s "$f" ] || missing+=("$f"); done
[ ${#missing[@]} -eq 0 ] && pass "every output present" || fail "missing after a successful run: ${missing[*]}"
staging=$(ls -d out/.tessera.partial-* 2>/dev/null)
[ -z "$staging" ] && pass "no staging folder after commit" || fail "staging left: $staging"
rm -rf out

# 2. A failure after the labels and probabilities: the overlay's staged path is a folder.
"${scene_run[@]}" > planted.log 2>&1 &
pid=$!
mkdir -p "out/.tessera.partial-$H-$pid/overlay.png"
wait $pid; status=$?
[ $status -eq 1 ] && pass "planted overlay failure exits 1" || fail "planted overlay failure: exit $status: $(tail -3 planted.log)"
grep -q "overlay.png" planted.log && pass "the error names the overlay" || fail "error: $(tail -2 planted.log)"
left=$(left_over "${scene_outputs[@]}")
[ -z "$left" ] && pass "a failed run leaves no output" || fail "a failed run left: $left"

# 3. Killed while it writes the overlay: a FIFO at the overlay's staged path blocks the write.
rm -rf out
"${scene_run[@]}" > killed.log 2>&1 &
pid=$!
mkdir -p "out/.tessera.partial-$H-$pid" && mkfifo "out/.tessera.partial-$H-$pid/overlay.png"
for _ in $(seq 600); do  # until the labels are written (staged) and the overlay blocks
  [ -f "out/.tessera.partial-$H-$pid/labels.tif" ] && [ -f "out/.tessera.partial-$H-$pid/probs.tif" ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
sleep 1
if [ -f "out/.tessera.partial-$H-$pid/labels.tif" ] && kill -0 $pid 2>/dev/null; then
  pass "labels staged while the overlay blocks"
  kill -9 $pid; wait $pid 2>/dev/null
  left=$(left_over "${scene_outputs[@]}")
  [ "$left" = "out/.tessera.partial-$H-$pid" ] && pass "killed run: nothing at the final paths (only its staging folder)" ||
    fail "killed run left: $left"
  # A rerun into the same folder removes the killed run's staging folder (its process is gone).
  "${scene_run[@]}" > rerun.log 2>&1 || fail "rerun after the kill: $(tail -3 rerun.log)"
  staging=$(ls -d out/.tessera.partial-* 2>/dev/null)
  [ -z "$staging" ] && pass "a rerun leaves no staging folder of the killed run" || fail "after the rerun: $staging"
else
  fail "the run did not block at the overlay: $(tail -3 killed.log)"; kill -9 $pid 2>/dev/null
fi

# 4. DICOM SEG with an overlay: it succeeds (the overlay takes the labels, not the SEG read
# back), without GDCM's complaints; then a failure at the overlay leaves no seg.dcm.
rm -rf out
seg_run=("$T" infer --model unet3d-tiny --init random --seed 0 --classes 3 --tile 16 --no-progress --input s/ct_dicom
         --output out/seg.dcm --overlay out/seg.png)
if "${seg_run[@]}" > seg_ok.log 2>&1 && [ -s out/seg.dcm ] && [ -s out/seg.png ]; then
  pass "SEG + overlay: both written"
else
  fail "SEG + overlay: $(tail -3 seg_ok.log)"
fi
grep -qi "not supported\|gdcm" seg_ok.log && fail "SEG + overlay prints: $(grep -i 'not supported\|gdcm' seg_ok.log | head -2)" \
  || pass "SEG + overlay: no GDCM noise"
# The same labels written as a label volume: the SEG's overlay is the same picture (each
# segment drawn as the class it stands for).
"$T" infer --model unet3d-tiny --init random --seed 0 --classes 3 --tile 16 --no-progress --input s/ct_dicom \
  --output vol/seg.nii.gz --overlay vol/seg.png > seg_vol.log 2>&1 || fail "label volume + overlay: $(tail -2 seg_vol.log)"
/usr/bin/python3 -c '
import sys
from osgeo import gdal
a, b = (gdal.Open(p).ReadAsArray() for p in sys.argv[1:])
sys.exit(0 if a.shape == b.shape and (a == b).all() else 1)' out/seg.png vol/seg.png \
  && pass "the SEG overlay equals the label volume overlay" || fail "the SEG overlay differs from the label volume one"
rm -rf out
"${seg_run[@]}" > seg.log 2>&1 &
pid=$!
mkdir -p "out/.tessera.partial-$H-$pid/seg.png"
wait $pid; status=$?
[ $status -ne 0 ] && grep -q "seg.png" seg.log && pass "SEG + failing overlay exits $status naming seg.png" \
  || fail "SEG + failing overlay: exit $status: $(tail -2 seg.log)"
left=$(left_over out/seg.dcm out/seg.png)
[ -z "$left" ] && pass "SEG run that failed leaves no output" || fail "SEG run left: $left"

echo "$checks checks, $failures failures"
[ $failures -eq 0 ]
