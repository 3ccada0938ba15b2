#!/usr/bin/env bash
# `tessera export` → PyTorch (python/tessera_unet.py) gives Tessera's logits, and
# PyTorch → `tessera import` → Tessera gives Python's logits; bad files fail cleanly.
# Models: 2-D valid/batch-norm/transposed, 3-D valid/group-norm, 2-D same/instance/upsample,
# each trained a few steps on generated sample data so that every tensor is non-trivial.
# Usage: export_python.sh TESSERA MAKE_SAMPLE PYTHON_MODULE_DIR. Needs Debian's python3-torch
# (scripts/setup.sh installs it): fails, naming the package, without it.
set -uo pipefail
T="$1"; GEN="$2"; export TESSERA_PYTHON="$3"
PY=/usr/bin/python3  # Debian's python3-torch; the python3 on PATH may lack torch
HERE="$(cd "$(dirname "$0")" && pwd)"
if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "FAIL: $PY cannot import torch: python3-torch missing (apt-get install python3-torch, or scripts/setup.sh)"; exit 1
fi
W="$(mktemp -d /tmp/tessera-export.XXXXXX)"
trap 'rm -rf "$W"' EXIT
failures=0; checks=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL $*"; }
cmp_py() { "$PY" "$HERE/compare_logits.py" "$@"; }

# Clean failure: non-zero exit below 128, one stderr line naming $2 (and $3 if given),
# nothing at the output path $4.
expect_clean_failure() {
  local what="$1" name="$2" also="$3" out="$4"; shift 4
  "$@" >/dev/null 2>"$W/err.txt"; local rc=$?
  local lines; lines=$(grep -c . "$W/err.txt")
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$lines" -eq 1 ] && grep -qF "$name" "$W/err.txt" \
     && grep -qF -- "$also" "$W/err.txt" && [ ! -e "$out" ]; then
    pass "$what: '$(cat "$W/err.txt")'"
  else
    fail "$what: exit $rc, $lines lines, output exists: $([ -e "$out" ] && echo yes || echo no): $(head -3 "$W/err.txt")"
  fi
}

"$GEN" --out "$W/s" --size 256 --ct-size 64 >/dev/null || { echo "FAIL generator"; exit 1; }
S="$W/s"

# train NAME IMAGE LABELS MODEL_YAML TILE
train() {
  cat > "$W/$1.yaml" <<YAML
run_dir: $W/$1
model: $4
data:
  pairs: [{image: $2, labels: $3}]
train: {tile: $5, batch: 2, steps: 3, learning_rate: 0.002, seed: 5}
YAML
  "$T" train --config "$W/$1.yaml" --threads 2 --no-progress >"$W/$1.log" 2>&1 \
    || { fail "train $1: $(tail -2 "$W/$1.log")"; return 1; }
}

# roundtrip NAME FORMAT: Python tunes the weights, saves them, Tessera imports them.
roundtrip() {
  local n="$1" how="$2"
  cmp_py tune "$W/$n.pt" "$W/$n.json" "$W/$n.in.pt" "$W/$n.tuned.pt" "$W/$n.py_out.pt" "$how" \
    || { fail "$n: python tune"; return; }
  "$T" import --weights "$W/$n.tuned.pt" --arch "$W/$n.json" --out "$W/$n.tuned.ckpt" >/dev/null 2>"$W/err.txt" \
    || { fail "$n: import of a $how state_dict: $(cat "$W/err.txt")"; return; }
  "$T" export --checkpoint "$W/$n.tuned.ckpt" --out "$W/$n.back.pt" --example-input "$W/$n.in2.pt" \
    --example-output "$W/$n.out2.pt" >/dev/null || { fail "$n: export of imported checkpoint"; return; }
  cmp_py roundtrip "$W/$n.tuned.pt" "$W/$n.back.pt" "$W/$n.in.pt" "$W/$n.in2.pt" "$W/$n.py_out.pt" "$W/$n.out2.pt" \
    && pass "$n: Python-tuned weights ($how state_dict) -> tessera import -> Tessera logits equal Python's" \
    || fail "$n: round trip"
}

echo "== train three small networks (3 steps each)"
train u2 "$S/scene.tif" "$S/scene_labels.tif" "{preset: unet-tiny, base_filters: 8, classes: 4, norm: batch}" 64
train u3 "$S/ct.nii.gz" "$S/ct_labels.nii.gz" "{preset: unet3d-tiny, base_filters: 4, classes: 3, norm: group}" 8
train us "$S/scene.tif" "$S/scene_labels.tif" \
  "{preset: unet-tiny, levels: 3, base_filters: 8, classes: 4, padding: same, norm: instance, decoder: upsample}" 64

echo "== export: PyTorch gives Tessera's logits"
for n in u2 u3 us; do
  [ -f "$W/$n/checkpoints/last.pt" ] || { fail "$n: no checkpoint"; continue; }
  "$T" export --checkpoint "$W/$n/checkpoints/last.pt" --out "$W/$n.pt" --arch "$W/$n.json" \
    --example-input "$W/$n.in.pt" --example-output "$W/$n.out.pt" >/dev/null 2>"$W/err.txt" \
    || { fail "$n: export: $(cat "$W/err.txt")"; continue; }
  cmp_py check "$W/$n.pt" "$W/$n.json" "$W/$n.in.pt" "$W/$n.out.pt" \
    && pass "$n: python/tessera_unet.py logits equal Tessera's within 1e-4" || fail "$n: logits differ"
done
"$T" export --checkpoint "$W/u2/checkpoints/last.pt" --out "$W/default/u2.pt" >/dev/null \
  && [ -f "$W/default/u2.json" ] && [ ! -e "$W/default/u2.pt.partial-"* ] \
  && pass "export without --arch writes model.json beside model.pt" || fail "default --arch"

echo "== import: Tessera gives PyTorch's logits"
roundtrip u2 ordered
roundtrip u3 plain
roundtrip us ordered
"$T" infer --checkpoint "$W/u2.tuned.ckpt" --input "$S/scene.tif" --output "$W/u2.labels.tif" --tile 128 \
  --no-progress >/dev/null 2>&1 && [ -f "$W/u2.labels.tif" ] \
  && pass "tessera infer runs from an imported checkpoint" || fail "infer from imported checkpoint"

echo "== bad files: one-line error naming the file, nothing written"
cmp_py broken "$W/u2.pt" "$W" >/dev/null || fail "python broken"
expect_clean_failure "export: missing checkpoint" "nope.ckpt" "" "$W/x.pt" \
  "$T" export --checkpoint "$W/nope.ckpt" --out "$W/x.pt"
head -c 3000 "$W/u2.pt" > "$W/trunc.pt"
expect_clean_failure "import: truncated weights" "trunc.pt" "" "$W/x.ckpt" \
  "$T" import --weights "$W/trunc.pt" --arch "$W/u2.json" --out "$W/x.ckpt"
expect_clean_failure "import: missing weights" "absent.pt" "" "$W/x.ckpt" \
  "$T" import --weights "$W/absent.pt" --arch "$W/u2.json" --out "$W/x.ckpt"
expect_clean_failure "import: wrong shape" "wrong_shape.pt" "'head.weight'" "$W/x.ckpt" \
  "$T" import --weights "$W/wrong_shape.pt" --arch "$W/u2.json" --out "$W/x.ckpt"
expect_clean_failure "import: missing parameter" "missing.pt" "'dec0.conv1.bias'" "$W/x.ckpt" \
  "$T" import --weights "$W/missing.pt" --arch "$W/u2.json" --out "$W/x.ckpt"
expect_clean_failure "import: unexpected parameter" "extra.pt" "'enc0.norm9.num_batches_tracked'" "$W/x.ckpt" \
  "$T" import --weights "$W/extra.pt" --arch "$W/u2.json" --out "$W/x.ckpt"
expect_clean_failure "import: not a dict" "tensor.pt" "not a dict" "$W/x.ckpt" \
  "$T" import --weights "$W/tensor.pt" --arch "$W/u2.json" --out "$W/x.ckpt"
expect_clean_failure "import: weights of another architecture" "u3.pt" "has shape" "$W/x.ckpt" \
  "$T" import --weights "$W/u3.pt" --arch "$W/u2.json" --out "$W/x.ckpt"
printf '{"format": "tessera-model", "version": 1, "model": {"dims": 2' > "$W/bad.json"
expect_clean_failure "import: damaged model.json" "bad.json" "" "$W/x.ckpt" \
  "$T" import --weights "$W/u2.pt" --arch "$W/bad.json" --out "$W/x.ckpt"

echo "$((checks - failures)) passed, $failures failed"
[ $failures -eq 0 ]
