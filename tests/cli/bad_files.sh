#!/usr/bin/env bash
# Every fixture of tests/fixtures through `tessera info` and `tessera infer`, as a user meets it.
# Broken files (expect open_error / read_error in fixtures.tsv): exit 1, exactly one line on
# stderr, `tessera: error: <the file>: ...`, nothing left in the output folder (no output, no
# *.partial* or *.tmp temporaries), peak RSS bounded. Odd but valid files infer; files without
# data give an all-nodata (255) label image.
# Usage: bad_files.sh TESSERA MAKE_FIXTURES
set -uo pipefail
T="$1"; FIXGEN="$2"
W="$(mktemp -d /tmp/tessera-bad-files.XXXXXX)"
trap 'rm -rf "$W"' EXIT
F="$W/fixtures"
"$FIXGEN" --out "$F" >/dev/null || { echo "FAIL tessera-make-fixtures"; exit 1; }
# Peak RSS allowed for any command on these tiny files (LibTorch alone takes a few hundred MiB;
# under ASan, TESSERA_SANITIZED from the debug-sanitize preset, its shadow memory and quarantine
# add about as much again). A runaway allocation from a lying header still passes either cap.
if [ -n "${TESSERA_SANITIZED:-}" ]; then MAX_RSS_MIB=${MAX_RSS_MIB:-2000}; else MAX_RSS_MIB=${MAX_RSS_MIB:-800}; fi
failures=0; checks=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL $*"; }

# measure OUT ERR CMD...: runs CMD with stdout to OUT and stderr to ERR; prints "rc peak_rss_mib".
measure() {
  /usr/bin/python3 - "$@" <<'PY'
import resource, subprocess, sys
out, err, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(out, "w") as o, open(err, "w") as e:
    try:
        rc = subprocess.call(cmd, stdout=o, stderr=e)
    except OSError as x:  # not executable: report like the shell would
        print(x, file=e); rc = 126
print(rc if rc >= 0 else 128 - rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
PY
}

infer_args() {  # kind -> model arguments (explicit small tiles: defaults are not under test here)
  if [ "$1" = volume ]; then echo "--model unet3d-tiny --filters 4 --init random --classes 3 --tile 16"
  else echo "--model unet-tiny --filters 4 --init random --classes 3 --tile 64"; fi
}
out_name() { [ "$1" = volume ] && echo labels.nii || echo labels.tif; }

# expect_failure WHAT FILE OUTDIR CMD...: exit 1, one error line naming FILE, OUTDIR empty, RSS bounded.
expect_failure() {
  local what="$1" file="$2" outdir="$3"; shift 3
  local rc rss; read -r rc rss < <(measure "$W/out.txt" "$W/err.txt" "$@")
  local lines; lines=$(grep -c . "$W/err.txt")
  local left; left=$(ls -A "$outdir" 2>/dev/null | tr '\n' ' ')
  local problems=""
  [ "$rc" -eq 1 ] || problems+=" exit $rc;"
  [ "$lines" -eq 1 ] || problems+=" $lines stderr lines;"
  grep -q "^tessera: error: $file: " "$W/err.txt" || problems+=" error line does not start with the file;"
  [ -z "$left" ] || problems+=" left behind: $left;"
  [ "$rss" -le "$MAX_RSS_MIB" ] || problems+=" peak RSS $rss MiB > $MAX_RSS_MIB;"
  if [ -z "$problems" ]; then pass "$what: $(cat "$W/err.txt") [${rss} MiB]"
  else fail "$what:$problems $(head -3 "$W/err.txt")"; fi
}

# all_255 FILE: every label is nodata (255). NIfTI-1 (.nii) or a GeoTIFF (via gdal_translate).
all_255() {
  local f="$1"
  if [[ "$f" == *.tif ]]; then
    gdal_translate -q -of ENVI "$f" "$W/raw.bin" >/dev/null || return 1
    f="$W/raw.bin"; set -- "$f" 0
  else
    set -- "$f" nifti
  fi
  /usr/bin/python3 - "$@" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
if sys.argv[2] == "nifti":
    dims = struct.unpack("<8h", data[40:56]); n = 1
    for d in dims[1:dims[0] + 1]: n *= d
    data = data[int(struct.unpack("<f", data[108:112])[0]):][:n]
    assert len(data) == n, "short label data"
sys.exit(0 if data and data.count(255) == len(data) else 1)
PY
}

while IFS=$'\t' read -r name kind expect description; do
  f="$F/$name"; o="$W/out/$name"; mkdir -p "$o"; out="$o/$(out_name "$kind")"
  # shellcheck disable=SC2046
  infer=("$T" infer $(infer_args "$kind") --input "$f" --output "$out" --no-progress)
  case "$expect" in
    open_error)
      expect_failure "info $name ($description)" "$f" "$o" "$T" info "$f"
      expect_failure "infer $name" "$f" "$o" "${infer[@]}" ;;
    read_error)
      read -r rc rss < <(measure "$W/out.txt" "$W/err.txt" "$T" info "$f")
      [ "$rc" -eq 0 ] && pass "info $name opens ($description)" || fail "info $name: exit $rc: $(head -2 "$W/err.txt")"
      expect_failure "infer $name" "$f" "$o" "${infer[@]}" ;;
    reads|all_nodata)
      read -r rc rss < <(measure "$W/out.txt" "$W/err.txt" "${infer[@]}")
      # A label raster's sidecars (io/label_style.hpp, io/stac.hpp): the attribute table, the
      # QGIS style and the STAC item; a label volume's (io/label_sidecars.hpp): the ITK-SNAP
      # label description and the Slicer colour table.
      stem=$(basename "$out"); stem=${stem%.gz}; stem=${stem%.*}
      left=$(ls -A "$o" | grep -vx -e "$(basename "$out")" -e "$(basename "$out").aux.xml" \
             -e "$(basename "${out%.*}").qml" -e "$(basename "${out%.*}").stac.json" \
             -e "$stem.itksnap.txt" -e "${stem}_ColorTable.ctbl" | tr '\n' ' ')
      if [ "$rc" -ne 0 ] || [ ! -f "$out" ] || [ -n "$left" ] || [ "$rss" -gt "$MAX_RSS_MIB" ]; then
        fail "infer $name: exit $rc, output $([ -f "$out" ] && echo present || echo missing), extra files '$left', $rss MiB: $(head -2 "$W/err.txt")"
      elif [ "$expect" = all_nodata ] && ! all_255 "$out"; then
        fail "infer $name: labels are not all nodata (255)"
      else
        pass "infer $name ($description) [${rss} MiB]"
      fi ;;
    *) fail "$name: unknown expectation '$expect'" ;;
  esac
done < "$F/fixtures.tsv"

echo "== a missing input"
mkdir -p "$W/out/missing"
# shellcheck disable=SC2046
expect_failure "infer missing.tif" "$W/missing.tif" "$W/out/missing" \
  "$T" infer $(infer_args raster) --input "$W/missing.tif" --output "$W/out/missing/labels.tif" --no-progress

echo "$((checks - failures)) passed, $failures failed"
[ "$checks" -gt 40 ] || { echo "FAIL only $checks checks ran"; exit 1; }
[ $failures -eq 0 ]
