#!/usr/bin/env bash
# A PACS round trip over DICOMweb, against a real PACS: Debian's Orthanc with its DICOMweb
# plugin on 127.0.0.1 (a free port, a temporary storage folder, HTTP basic authentication on,
# the DICOM port off). The sample CT series is uploaded with STOW-RS (Python's HTTP client),
# `tessera info dicomweb://…/studies/UID` lists it, and
#   tessera infer --input dicomweb://…/studies/S/series/X --output seg.dcm --store dicomweb://…
# retrieves it (QIDO-RS, WADO-RS), infers with a checkpoint trained here and stores the DICOM
# SEG (STOW-RS); QIDO-RS then finds exactly one SEG in the study, referencing the CT series,
# whose frames, segments and positions equal those of the same checkpoint run on the local
# series. A wrong password, a missing series, a run that fails after the retrieval, a store
# with a wrong password and a stopped server each give a one-line error naming the flag and
# leave nothing stored (and no local output). A bearer token (TESSERA_DICOMWEB_TOKEN) is sent as
# "Authorization: Bearer" (a QIDO-RS stand-in in Python accepts it and refuses a wrong one).
# Orthanc (and the stand-in) are stopped by the test in every case.
# Orthanc, its plugin and pydicom are required (scripts/setup.sh installs them): without
# them the test fails.
# Usage: pacs_dicomweb.sh TESSERA MAKE_SAMPLE
set -uo pipefail
T="$1"; GEN="$2"
HERE="$(cd "$(dirname "$0")" && pwd)"
ORTHANC=/usr/sbin/Orthanc
PLUGIN=/usr/share/orthanc/plugins/libOrthancDicomWeb.so
[ -x "$ORTHANC" ] || { echo "FAIL $ORTHANC missing (scripts/setup.sh installs it: apt-get install orthanc)"; exit 1; }
[ -f "$PLUGIN" ] || { echo "FAIL $PLUGIN missing (scripts/setup.sh installs it: apt-get install orthanc-dicomweb)"; exit 1; }
/usr/bin/python3 -c "import pydicom, numpy" || { echo "FAIL python3-pydicom missing (scripts/setup.sh)"; exit 1; }

W="$(mktemp -d /tmp/tessera-pacs.XXXXXX)"
ORTHANC_PID=""
stop_orthanc() {
  [ -n "$ORTHANC_PID" ] || return 0
  kill "$ORTHANC_PID" 2>/dev/null
  wait "$ORTHANC_PID" 2>/dev/null
  ORTHANC_PID=""
}
TOKEN_PID=""
trap 'stop_orthanc; [ -n "$TOKEN_PID" ] && kill "$TOKEN_PID" 2>/dev/null; rm -rf "$W"' EXIT
trap 'exit 130' INT TERM
failures=0; checks=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL $*"; }
PORT=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
PASSWORD="pw-$RANDOM$RANDOM"
ROOT="http://127.0.0.1:$PORT/dicom-web"
WEB="dicomweb://127.0.0.1:$PORT/dicom-web"
pacs() { /usr/bin/python3 "$HERE/pacs_dicomweb.py" "$ROOT" tessera "$PASSWORD" "$@"; }

mkdir -p "$W/orthanc"
cat > "$W/orthanc.json" <<JSON
{
  "Name": "tessera-test", "StorageDirectory": "$W/orthanc", "IndexDirectory": "$W/orthanc",
  "HttpPort": $PORT, "RemoteAccessAllowed": false, "DicomServerEnabled": false,
  "AuthenticationEnabled": true, "RegisteredUsers": {"tessera": "$PASSWORD"},
  "Plugins": ["$PLUGIN"], "DicomWeb": {"Enable": true, "Root": "/dicom-web/"}
}
JSON
start_orthanc() {
  "$ORTHANC" "$W/orthanc.json" >>"$W/orthanc.log" 2>&1 &
  ORTHANC_PID=$!
  pacs wait || { echo "FAIL Orthanc did not start: $(tail -3 "$W/orthanc.log")"; exit 1; }
}
start_orthanc

"$GEN" --out "$W/s" --only ct --ct-size 32 --targets 0 >/dev/null || { echo "FAIL generator"; exit 1; }
cat > "$W/train.yaml" <<YAML
run_dir: $W/run
model: {preset: unet3d-tiny, base_filters: 4, classes: 3}
data:
  pairs: [{image: $W/s/ct.nii.gz, labels: $W/s/ct_labels.nii.gz}]
  class_names: [background, liver, kidney]
train: {tile: 16, batch: 1, steps: 2, seed: 1}
YAML
"$T" train --config "$W/train.yaml" --no-progress >/dev/null 2>"$W/train.err" \
  || { echo "FAIL train: $(head -3 "$W/train.err")"; exit 1; }
export TMPDIR="$W/tmp"  # where tessera stages a retrieved series: empty after every run
mkdir -p "$TMPDIR"
infer() { "$T" infer --checkpoint "$W/run/checkpoints/last.pt" --tile 16 --no-progress "$@"; }

read -r STUDY SERIES < <(pacs upload "$W/s/ct_dicom") || { echo "FAIL STOW-RS upload"; exit 1; }
[ -n "${SERIES:-}" ] && pass "uploaded the CT series $SERIES (study $STUDY) by STOW-RS" || { echo "FAIL upload"; exit 1; }
export TESSERA_DICOMWEB_USER=tessera TESSERA_DICOMWEB_PASSWORD="$PASSWORD"

echo "== tessera info lists the study's series"
if "$T" info "$WEB/studies/$STUDY" >"$W/info.log" 2>&1 && grep -q "$SERIES" "$W/info.log" && grep -q "CT" "$W/info.log"; then
  pass "info: $(grep -c "series " "$W/info.log") series listed, the CT among them"
else fail "info: $(cat "$W/info.log")"; fi

# refused NAME EXPECTED ARGS...: non-zero, one line matching EXPECTED, no local output, no SEG stored.
refused() {
  local name="$1" expected="$2"; shift 2
  rm -rf "$W/out"
  # One line on stderr: the error (stdout may hold what ran before it, e.g. the classes line).
  if infer "$@" >"$W/$name.out" 2>"$W/$name.log"; then fail "$name: succeeded"; return; fi
  local msg segs
  msg=$(cat "$W/$name.log")
  segs=$(pacs count-seg "$STUDY")
  if [ "$(wc -l <"$W/$name.log")" -eq 1 ] && grep -qE "$expected" <<<"$msg" && [ -z "$(ls -A "$W/out" 2>/dev/null)" ] \
    && [ "$segs" = 0 ] && [ -z "$(ls -A "$TMPDIR")" ]; then
    pass "$name: $msg"
  else fail "$name: '$msg' ($segs SEG stored; left: $(ls -A "$W/out" "$TMPDIR" 2>/dev/null | tr '\n' ' '))"; fi
}
SERIES_URL="$WEB/studies/$STUDY/series/$SERIES"
echo "== refusals leave nothing stored"
TESSERA_DICOMWEB_PASSWORD=wrong refused wrong-password "^tessera: error: --input $SERIES_URL: HTTP 401 Unauthorized" \
  --input "$SERIES_URL" --output "$W/out/seg.dcm" --store "$WEB"
TESSERA_DICOMWEB_PASSWORD=wrong refused store-wrong-password "^tessera: error: --store $WEB: HTTP 401 Unauthorized" \
  --input "$W/s/ct_dicom" --output "$W/out/seg.dcm" --store "$WEB"
refused missing-series "^tessera: error: --input $WEB/studies/$STUDY/series/1\.2\.3\.4: no such series on the server" \
  --input "$WEB/studies/$STUDY/series/1.2.3.4" --output "$W/out/seg.dcm" --store "$WEB"
refused failed-run "^tessera: error: --vectorize needs a 2-D raster; $SERIES_URL is a volume" \
  --input "$SERIES_URL" --output "$W/out/seg.dcm" --store "$WEB" --vectorize "$W/out/polygons.gpkg"
stop_orthanc
rm -rf "$W/out"
if TESSERA_DICOMWEB_RETRIES=2 infer --input "$SERIES_URL" --output "$W/out/seg.dcm" --store "$WEB" >"$W/stopped.log" 2>&1; then
  fail "stopped server: succeeded"
else
  msg=$(cat "$W/stopped.log")
  [ "$(wc -l <"$W/stopped.log")" -eq 1 ] && grep -q "^tessera: error: --input $SERIES_URL: cannot reach .*(2 tries)" <<<"$msg" \
    && [ -z "$(ls -A "$W/out" 2>/dev/null)" ] && [ -z "$(ls -A "$TMPDIR")" ] && pass "stopped server: $msg" \
    || fail "stopped server: '$msg' (left: $(ls -A "$W/out" "$TMPDIR" 2>/dev/null | tr '\n' ' '))"
fi
start_orthanc
segs=$(pacs count-seg "$STUDY")
[ "$segs" = 0 ] && pass "restarted: no SEG stored by the failed runs" || fail "$segs SEG stored by failed runs"

echo "== a bearer token (TESSERA_DICOMWEB_TOKEN) reaches the server as Authorization: Bearer"
# Orthanc alone knows only basic authentication: a QIDO-RS stand-in that answers [] to the token
# it was given and 401 to anything else.
TOKEN_PORT=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
/usr/bin/python3 - "$TOKEN_PORT" <<'PY' &
import http.server, sys
class Qido(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.headers.get("Authorization") == "Bearer t0ken-42"
        self.send_response(200 if ok else 401)
        self.send_header("Content-Type", "application/dicom+json")
        self.end_headers()
        self.wfile.write(b"[]" if ok else b"")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Qido).serve_forever()
PY
TOKEN_PID=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$TOKEN_PORT") 2>/dev/null && break; sleep 0.1; done
token_info() { env -u TESSERA_DICOMWEB_USER -u TESSERA_DICOMWEB_PASSWORD TESSERA_DICOMWEB_TOKEN="$1" \
  "$T" info "dicomweb://127.0.0.1:$TOKEN_PORT/rs/studies/1.2.3" 2>&1; }
msg=$(token_info t0ken-42)
grep -q "the server holds no series of study 1.2.3" <<<"$msg" && pass "token accepted: $msg" || fail "token: $msg"
msg=$(token_info wrong)
grep -q "HTTP 401 Unauthorized" <<<"$msg" && pass "wrong token: $msg" || fail "wrong token: $msg"
kill "$TOKEN_PID"; wait "$TOKEN_PID" 2>/dev/null

echo "== the round trip"
if infer --input "$W/s/ct_dicom" --output "$W/local/seg.dcm" >"$W/local.log" 2>&1; then pass "local series -> seg.dcm"
else fail "local run: $(tail -3 "$W/local.log")"; fi
if infer --input "$SERIES_URL" --output "$W/web/seg.dcm" --store "$WEB" >"$W/web.log" 2>&1 \
  && grep -q "stored to $WEB" "$W/web.log"; then pass "dicomweb:// in, STOW-RS out: $(grep "stored to" "$W/web.log")"
else fail "dicomweb run: $(tail -3 "$W/web.log")"; fi
if check=$(pacs check-seg "$STUDY" "$SERIES" "$W/local/seg.dcm" 2>&1); then pass "QIDO-RS finds the SEG: $check"
else fail "the stored SEG: $check"; fi
[ -z "$(ls -A "$TMPDIR")" ] && pass "the retrieved series was removed" || fail "left in TMPDIR: $(ls -A "$TMPDIR")"

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
