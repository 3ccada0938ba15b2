#!/usr/bin/env bash
# `tessera infer` with its default tile (--tile auto) on small images finishes in seconds with
# a peak resident set under 600 MiB, and its summary says which tile it chose and why:
# a 40³ volume (unet3d-tiny), a one-slice NIfTI, a 1 × 1 and a 300² raster (unet-tiny).
# With a fixed 512 default one tile was 512³ plus halo whatever the image: 10+ GiB and minutes.
# Each case runs under a watchdog that kills it past 1.5 GiB or 180 s, so a regression fails
# quickly without exhausting the machine. Peak RSS: the child's ru_maxrss.
# Usage: infer_defaults.sh TESSERA MAKE_SAMPLE
set -uo pipefail
T="$1"; GEN="$2"
W="$(mktemp -d /tmp/tessera-infer-defaults.XXXXXX)"
trap 'rm -rf "$W"' EXIT
failures=0; checks=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL $*"; }

echo "== inputs"
"$GEN" --out "$W/ct" --only ct --ct-size 40 >/dev/null || { echo "FAIL generator (ct)"; exit 1; }
"$GEN" --out "$W/sc" --only scene --size 300 >/dev/null || { echo "FAIL generator (scene)"; exit 1; }
gdal_translate -q -srcwin 0 0 1 1 "$W/sc/scene.tif" "$W/one.tif" || { echo "FAIL gdal_translate 1 x 1"; exit 1; }
# A one-slice NIfTI-1 (2-D: dim = [2, 96, 80]), float32, written by hand: 348-byte header,
# 4 bytes of extension flags, data from offset 352.
/usr/bin/python3 - "$W/slice.nii" <<'PY' || { echo "FAIL writing slice.nii"; exit 1; }
import struct, sys
import numpy as np
nx, ny = 96, 80
h = bytearray(348)
struct.pack_into("<i", h, 0, 348)
struct.pack_into("<8h", h, 40, 2, nx, ny, 1, 1, 1, 1, 1)        # dim
struct.pack_into("<hh", h, 70, 16, 32)                           # datatype float32, bitpix
struct.pack_into("<8f", h, 76, 1, 0.8, 0.8, 1, 1, 1, 1, 1)       # pixdim (qfac, spacing)
struct.pack_into("<f", h, 108, 352.0)                             # vox_offset
struct.pack_into("<f", h, 112, 1.0)                               # scl_slope
struct.pack_into("<h", h, 252, 1)                                 # qform_code: scanner
h[344:348] = b"n+1\0"
y, x = np.mgrid[0:ny, 0:nx]
img = (np.hypot(y - ny / 2, x - nx / 2) < 25) * 400.0 - 200.0 + 10.0 * np.sin(x / 5.0)
with open(sys.argv[1], "wb") as f:
    f.write(bytes(h) + b"\0\0\0\0" + img.astype("<f4").tobytes())
PY

# run NAME MAX_SECONDS TESSERA-ARGS...: runs `tessera infer ARGS`, records peak RSS (MiB),
# seconds and stdout in $W/NAME.{rss,sec,out}; returns the exit status.
run() {
  local name="$1" limit="$2"; shift 2
  /usr/bin/python3 - "$W/$name" "$limit" "$T" infer "$@" --no-progress <<'PY'
import resource, subprocess, sys, time
out, limit, cmd = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
kill_rss_kib = 1536 * 1024
start = time.monotonic()
with open(out + ".out", "w") as o, open(out + ".err", "w") as e:
    p = subprocess.Popen(cmd, stdout=o, stderr=e)
    why = ""
    while p.poll() is None:
        time.sleep(0.1)
        try:
            rss = int(next(l for l in open(f"/proc/{p.pid}/status") if l.startswith("VmRSS:")).split()[1])
        except (OSError, StopIteration):
            continue
        if rss > kill_rss_kib or time.monotonic() - start > limit:
            why = f"killed by the watchdog at {rss // 1024} MiB after {time.monotonic() - start:.0f} s"
            p.kill()
    p.wait()
seconds = time.monotonic() - start
peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
open(out + ".rss", "w").write(str(peak_mib))
open(out + ".sec", "w").write(f"{seconds:.1f}")
if why:
    open(out + ".err", "a").write(why + "\n")
sys.exit(p.returncode if p.returncode >= 0 else 128 - p.returncode)
PY
}

# A default that suits the input keeps these small runs under 600 MiB (under ASan,
# TESSERA_SANITIZED from the debug-sanitize preset, 1600 MiB: shadow memory and quarantine);
# a default sized for a large input takes gigabytes either way.
if [ -n "${TESSERA_SANITIZED:-}" ]; then MAX_RSS_MIB=1600; else MAX_RSS_MIB=600; fi

# check NAME TILE_TEXT MAX_SECONDS TESSERA-ARGS...: the run succeeds, stays under MAX_RSS_MIB
# and MAX_SECONDS, and its summary line contains TILE_TEXT.
check() {
  local name="$1" want="$2" limit="$3"; shift 3
  run "$name" "$limit" "$@"; local rc=$?
  local rss sec; rss=$(cat "$W/$name.rss"); sec=$(cat "$W/$name.sec")
  if [ $rc -ne 0 ]; then
    fail "$name: exit $rc after $sec s, peak $rss MiB: $(tail -2 "$W/$name.err")"
  elif [ "$rss" -ge "$MAX_RSS_MIB" ]; then
    fail "$name: peak RSS $rss MiB >= $MAX_RSS_MIB MiB ($sec s): $(cat "$W/$name.out")"
  elif ! grep -qF -- "$want" "$W/$name.out"; then
    fail "$name: summary lacks '$want': $(cat "$W/$name.out")"
  else
    pass "$name: $sec s, peak $rss MiB: $(grep -o 'tile [0-9×]* ([^)]*)' "$W/$name.out")"
  fi
}

echo "== default tile: whole small image, seconds, < 600 MiB"
check volume40 "tile 40 (auto: whole image, 40³ rounded up to 4" 120 \
  --model unet3d-tiny --init random --classes 3 --input "$W/ct/ct.nii.gz" --output "$W/o40.nii.gz"
check slice "tile 4×80×96 (auto: whole image, 1×80×96 rounded up to 4" 120 \
  --model unet3d-tiny --init random --classes 3 --input "$W/slice.nii" --output "$W/oslice.nii.gz"
# 2-D: --mode auto may stream these (its choice checked below); the tile choice itself under --mode tile.
check pixel "tile 8 (auto: whole image, 1² rounded up to 8" 120 \
  --model unet-tiny --init random --input "$W/one.tif" --output "$W/o1.tif" --mode tile
check raster300 "tile 304 (auto: whole image, 300² rounded up to 8" 120 \
  --model unet-tiny --init random --input "$W/sc/scene.tif" --output "$W/o300.tif" --mode tile
check auto300 "(auto: predicted " 120 \
  --model unet-tiny --init random --input "$W/sc/scene.tif" --output "$W/oauto300.tif"

echo "== explicit --tile larger than the image: clamped, and said so"
check clamped "tile 40 (--tile 512 clamped to the image, 40³ rounded up to 4)" 120 \
  --model unet3d-tiny --init random --classes 3 --input "$W/ct/ct.nii.gz" --output "$W/o512.nii.gz" --tile 512
cmp -s "$W/o40.nii.gz" "$W/o512.nii.gz" && pass "auto and --tile 512 give the same labels" \
  || fail "auto and --tile 512 labels differ"

echo "== a budget below the whole image's prediction: smaller tiles, predicted within the budget"
whole=$(grep -o 'predicted [0-9]* MiB' "$W/raster300.out" | head -1 | grep -o '[0-9]*')
budget=$(( ${whole:-300} - 20 ))
check budget "auto: largest fitting the $budget MiB budget" 180 \
  --model unet-tiny --init random --input "$W/sc/scene.tif" --output "$W/obudget.tif" --memory-budget "${budget}MiB" \
  --mode tile
grep -q ': [2-9][0-9]* tiles\|: 1[0-9][0-9]* tiles' "$W/budget.out" && pass "the budget splits the 300² raster" \
  || fail "the budget did not split the raster: $(cat "$W/budget.out")"
# Same labels (the GeoTIFF bytes may differ with the write order of the tiles), also from --mode auto.
"$T" eval --pred "$W/oauto300.tif" --truth "$W/o300.tif" --json > "$W/same_auto.json" 2>&1
/usr/bin/python3 -c 'import json,sys; d=[c["dice"] for c in json.load(open(sys.argv[1]))["classes"] if c["truth_pixels"]>0]; sys.exit(0 if len(d)>1 and min(d)==1.0 else 1)' "$W/same_auto.json" \
  && pass "--mode auto (its choice) gives the tiles' labels" \
  || fail "--mode auto changes the labels: $(head -c 300 "$W/same_auto.json")"
"$T" eval --pred "$W/obudget.tif" --truth "$W/o300.tif" --json > "$W/same.json" 2>&1
/usr/bin/python3 -c 'import json,sys; d=[c["dice"] for c in json.load(open(sys.argv[1]))["classes"] if c["truth_pixels"]>0]; sys.exit(0 if len(d)>1 and min(d)==1.0 else 1)' "$W/same.json" \
  && pass "the budget's smaller tiles give the same labels" \
  || fail "tiles chosen under a budget change the labels: $(head -c 300 "$W/same.json")"

echo "== bad values: one-line errors naming the flag"
for args in "--tile 100" "--tile big" "--memory-budget lots" "--tile 64 --memory-budget 1GiB"; do
  # shellcheck disable=SC2086
  "$T" infer --model unet-tiny --init random --input "$W/one.tif" --output "$W/bad.tif" $args --no-progress \
    >/dev/null 2>"$W/bad.err"; rc=$?
  flag="${args%% *}"; [ "$args" = "--tile 64 --memory-budget 1GiB" ] && flag="--memory-budget"
  if [ $rc -eq 1 ] && [ "$(grep -c . "$W/bad.err")" -eq 1 ] && grep -q -- "$flag" "$W/bad.err" && [ ! -e "$W/bad.tif" ]; then
    pass "$args: $(cat "$W/bad.err")"
  else
    fail "$args: exit $rc: $(head -3 "$W/bad.err")"
  fi
done

echo "== $checks checks, $failures failed"
[ "$failures" -eq 0 ]
