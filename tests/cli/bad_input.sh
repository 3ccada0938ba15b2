#!/usr/bin/env bash
# Bad input on the training / config / checkpoint side, through the `tessera` command as a user
# meets it. Every case: exit 1, exactly one `tessera: error:` line naming the file or field and
# the problem, nothing left at the output path and no temporaries (*.partial*, *.tmp).
# Covered: missing input, missing / damaged / truncated checkpoint (infer and train --resume
# auto, with the fall-back to an intact step checkpoint), a checkpoint for another band count,
# labels >= classes, eval of different sizes, an output folder that cannot be made, malformed
# YAML, an unknown or mistyped YAML key, and a NaN loss (stop, keep the last good checkpoint,
# --resume auto continues from it).
# Usage: bad_input.sh TESSERA MAKE_SAMPLE
set -uo pipefail
T="$1"; GEN="$2"
W="$(mktemp -d /tmp/tessera-bad-input.XXXXXX)"
trap 'rm -rf "$W"' EXIT
failures=0; checks=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL $*"; }
py() { /usr/bin/python3 -c "$@"; }

# expect_error WHAT PATTERN OUT CMD...: exit 1, exactly one "tessera: error:" line and it
# matches the extended regex PATTERN, nothing at OUT (unless OUT is ""), no temporaries in $W.
expect_error() {
  local what="$1" pattern="$2" out="$3"; shift 3
  "$@" >"$W/out.txt" 2>"$W/err.txt"; local rc=$?
  local errors; errors=$(grep -c "^tessera: error: " "$W/err.txt")
  local problems=""
  [ "$rc" -eq 1 ] || problems+=" exit $rc;"
  [ "$errors" -eq 1 ] || problems+=" $errors error lines;"
  grep "^tessera: error: " "$W/err.txt" | grep -Eq -- "$pattern" || problems+=" error does not match /$pattern/;"
  [ -z "$out" ] || [ ! -e "$out" ] || problems+=" $out exists;"
  local left; left=$(find "$W" \( -name '*.partial*' -o -name '*.tmp' \) | head -3 | tr '\n' ' ')
  [ -z "$left" ] || problems+=" temporaries left: $left;"
  if [ -z "$problems" ]; then pass "$what: $(grep '^tessera: error: ' "$W/err.txt")"
  else fail "$what:$problems $(grep -v '^train: \|^telemetry' "$W/err.txt" | head -3)"; fi
}

flip_byte() {  # FILE FRACTION: xor one byte at FRACTION of the file's length
  py 'import sys
p, f = sys.argv[1], float(sys.argv[2])
b = bytearray(open(p, "rb").read()); i = min(len(b) - 1, int(len(b) * f)); b[i] ^= 0x10
open(p, "wb").write(b)' "$1" "$2"
}
cut_file() { truncate -s $(( $(stat -c %s "$1") * $2 / 100 )) "$1"; }  # FILE PERCENT_KEPT
loss_steps() {  # RUN: the step numbers of metrics.jsonl's loss lines, in file order
  py 'import json, sys
print(" ".join(str(json.loads(l)["step"]) for l in open(sys.argv[1]) if "\"loss\"" in l))' "$1/metrics.jsonl"
}

"$GEN" --out "$W/s" --size 256 --only scene >/dev/null || { echo "FAIL tessera-make-sample"; exit 1; }
S="$W/s"
cat > "$W/train.yaml" <<YAML
model: {preset: unet-tiny, classes: 4, base_filters: 4}
data:
  pairs: [{image: s/scene.tif, labels: s/scene_labels.tif}]
train: {tile: 32, batch: 2, steps: 6, checkpoint_every: 2, seed: 1}
YAML
train=("$T" train --config "$W/train.yaml" --threads 1 --no-progress)
"${train[@]}" --run-dir "$W/good" > "$W/good.log" 2>&1 || { echo "FAIL training the reference run: $(tail -2 "$W/good.log")"; exit 1; }
GOOD="$W/good/checkpoints/last.pt"
infer=("$T" infer --input "$S/scene.tif" --tile 64 --no-progress)

echo "== missing files"
expect_error "missing input (infer)" "nope\.tif" "$W/o1.tif" \
  "$T" infer --checkpoint "$GOOD" --input "$W/nope.tif" --output "$W/o1.tif" --no-progress
sed 's|s/scene.tif|s/nope.tif|' "$W/train.yaml" > "$W/missing_image.yaml"
expect_error "missing input (train)" "nope\.tif" "$W/r_missing" \
  "$T" train --config "$W/missing_image.yaml" --run-dir "$W/r_missing" --no-progress
expect_error "missing checkpoint" "nope\.pt" "$W/o2.tif" "${infer[@]}" --checkpoint "$W/nope.pt" --output "$W/o2.tif"
expect_error "missing config" "nope\.yaml" "$W/r_noconf" "$T" train --config "$W/nope.yaml" --run-dir "$W/r_noconf"

echo "== damaged checkpoints are refused whole (checksum), never loaded half-way"
for f in 0.02 0.3 0.5 0.7 0.9 0.97 0.999; do
  cp "$GOOD" "$W/flipped.pt"; flip_byte "$W/flipped.pt" "$f"
  expect_error "infer, byte at $f of the checkpoint flipped" "flipped\.pt: .*(damaged|checksum)" "$W/o3.tif" \
    "${infer[@]}" --checkpoint "$W/flipped.pt" --output "$W/o3.tif"
done
for keep in 50 99; do
  cp "$GOOD" "$W/cut.pt"; cut_file "$W/cut.pt" $keep
  expect_error "infer, checkpoint cut to $keep%" "cut\.pt: " "$W/o4.tif" "${infer[@]}" --checkpoint "$W/cut.pt" --output "$W/o4.tif"
done

echo "== train --resume auto on a damaged last.pt: refused, or resumed from an intact step checkpoint and said so"
for damage in flip cut; do
  rm -rf "$W/r_$damage"; "${train[@]}" --run-dir "$W/r_$damage" --steps 4 >/dev/null 2>&1
  if [ $damage = flip ]; then flip_byte "$W/r_$damage/checkpoints/last.pt" 0.5; else cut_file "$W/r_$damage/checkpoints/last.pt" 99; fi
  before=$(md5sum < "$W/r_$damage/checkpoints/last.pt"); metrics=$(md5sum < "$W/r_$damage/metrics.jsonl")
  expect_error "resume auto, last.pt damaged ($damage), no step checkpoint" "last\.pt: .*(damaged|checksum|cut short|not a readable)" "" \
    "${train[@]}" --run-dir "$W/r_$damage" --resume auto
  [ "$before" = "$(md5sum < "$W/r_$damage/checkpoints/last.pt")" ] && [ "$metrics" = "$(md5sum < "$W/r_$damage/metrics.jsonl")" ] \
    && pass "resume auto ($damage): the refused run changed neither last.pt nor metrics.jsonl" \
    || fail "resume auto ($damage): the refused run changed last.pt or metrics.jsonl"
done
sed 's|seed: 1}|seed: 1, keep_last: 3}|' "$W/train.yaml" > "$W/keep.yaml"
"$T" train --config "$W/keep.yaml" --threads 1 --no-progress --run-dir "$W/r_keep" --steps 4 >/dev/null 2>&1
flip_byte "$W/r_keep/checkpoints/last.pt" 0.5
"$T" train --config "$W/keep.yaml" --threads 1 --no-progress --run-dir "$W/r_keep" --resume auto >/dev/null 2>"$W/err.txt"; rc=$?
if [ $rc -eq 0 ] && grep -Eq "warning: .*last\.pt: .*damaged.*resuming from .*step-000004\.pt" "$W/err.txt" \
   && [ "$(loss_steps "$W/r_keep")" = "1 2 3 4 5 6" ]; then
  pass "resume auto, last.pt damaged, step-000004.pt intact: said so, resumed from it, steps 1..6 once each"
else
  fail "resume auto with a step checkpoint to fall back to: exit $rc, steps '$(loss_steps "$W/r_keep")': $(grep -v '^telemetry' "$W/err.txt" | head -3)"
fi
"${infer[@]}" --checkpoint "$W/r_keep/checkpoints/last.pt" --output "$W/o_keep.tif" >/dev/null 2>&1 \
  && pass "the checkpoint written after the fall-back loads" || fail "the checkpoint written after the fall-back does not load"

echo "== inputs that do not fit"
gdal_translate -q -b 1 -b 2 -b 3 "$S/scene.tif" "$W/three_bands.tif"
expect_error "4-band checkpoint on a 3-band raster" "three_bands\.tif: .*3 bands.*4" "$W/o5.tif" \
  "$T" infer --checkpoint "$GOOD" --input "$W/three_bands.tif" --output "$W/o5.tif" --tile 64 --no-progress
sed 's|classes: 4|classes: 3|' "$W/train.yaml" > "$W/classes3.yaml"
expect_error "labels up to 3 with classes: 3" "scene_labels\.tif: label value 3 " "$W/r_classes/checkpoints/last.pt" \
  "$T" train --config "$W/classes3.yaml" --run-dir "$W/r_classes" --no-progress
gdal_translate -q -outsize 50% 50% "$S/scene_labels.tif" "$W/half.tif"
expect_error "eval of prediction and truth of different sizes" "half\.tif.*scene_labels\.tif|scene_labels\.tif.*half\.tif" "" \
  "$T" eval --pred "$W/half.tif" --truth "$S/scene_labels.tif"

echo "== an output folder that cannot be made (a regular file stands in its path: fails for root too)"
echo "not a folder" > "$W/plain_file"
expect_error "infer --output under a regular file" "plain_file" "$W/plain_file/out.tif" \
  "${infer[@]}" --checkpoint "$GOOD" --output "$W/plain_file/out.tif"
expect_error "train --run-dir under a regular file" "plain_file/run" "$W/plain_file/run" \
  "${train[@]}" --run-dir "$W/plain_file/run"

echo "== config files"
printf 'model: {preset: unet-tiny, classes: 4}\ntrain: {tile: 32, batch: [2\n' > "$W/malformed.yaml"
expect_error "malformed YAML" "malformed\.yaml:[0-9]+: not valid YAML" "$W/r_malformed" \
  "$T" train --config "$W/malformed.yaml" --run-dir "$W/r_malformed" --no-progress
cat > "$W/unknown.yaml" <<YAML
model: {preset: unet-tiny, classes: 4, base_filters: 4}
data:
  pairs: [{image: s/scene.tif, labels: s/scene_labels.tif}]
train:
  tile: 32
  batch: 2
  learnig_rate: 0.01
YAML
expect_error "unknown key" "unknown\.yaml:7: unknown key 'train\.learnig_rate' \(did you mean 'learning_rate'\?\)" "$W/r_unknown" \
  "$T" train --config "$W/unknown.yaml" --run-dir "$W/r_unknown" --no-progress
sed 's|labels: s/scene_labels.tif|lables: s/scene_labels.tif|' "$W/train.yaml" > "$W/unknown_pair.yaml"
expect_error "unknown key in a list entry" "unknown_pair\.yaml:3: unknown key 'data\.pairs\[0\]\.lables' \(did you mean 'labels'\?\)" \
  "$W/r_unknown" "$T" train --config "$W/unknown_pair.yaml" --run-dir "$W/r_unknown" --no-progress
sed 's|batch: 2|batch: two|' "$W/train.yaml" > "$W/typed.yaml"
expect_error "mistyped value" "typed\.yaml:4: train\.batch: expected an integer, got 'two'" "$W/r_typed" \
  "$T" train --config "$W/typed.yaml" --run-dir "$W/r_typed" --no-progress

echo "== the project's own configs use known keys only (sample_data/*.yaml, README's example)"
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
py 'import re, sys
text = open(sys.argv[1]).read()
block = re.search(r"A training config.*?```yaml\n(.*?)```", text, re.S).group(1)
open(sys.argv[2], "w").write(block)' "$SRC/README.md" "$W/readme.yaml" || fail "README.md: no YAML block after 'A training config'"
for c in "$SRC"/sample_data/*.yaml "$W/readme.yaml"; do
  # Their images are usually not generated: the run must get as far as opening them.
  "$T" train --config "$c" --run-dir "$W/r_known" --steps 1 --batch 1 --no-progress >/dev/null 2>"$W/err.txt"; rc=$?
  if [ $rc -eq 0 ] || grep -Eq "\.(tif|nii\.gz|gpkg)(: | )" "$W/err.txt" && ! grep -Eq "yaml:[0-9]+:" "$W/err.txt"; then
    pass "$(basename "$c"): every key known (stops at its missing image)"
  else fail "$(basename "$c"): $(head -2 "$W/err.txt")"; fi
done
rm -rf "$W/r_known"

echo "== NaN loss: stop naming the step, keep the last good checkpoint, --resume auto continues"
sed 's|seed: 1}|seed: 1, keep_last: 10}|; s|steps: 6|steps: 8|' "$W/train.yaml" > "$W/nan.yaml"
nan_train=("$T" train --config "$W/nan.yaml" --threads 1 --no-progress --run-dir "$W/r_nan")
expect_error "NaN loss at step 5" "step 5: loss is NaN.*last good checkpoint.*last\.pt" "$W/r_nan/checkpoints/step-000006.pt" \
  env TESSERA_TEST_NAN=step=5 "${nan_train[@]}"
cmp -s "$W/r_nan/checkpoints/last.pt" "$W/r_nan/checkpoints/step-000004.pt" && [ "$(loss_steps "$W/r_nan")" = "1 2 3 4" ] \
  && pass "after the NaN: last.pt is the step-4 checkpoint, metrics.jsonl ends at step 4" \
  || fail "after the NaN: last.pt is not step 4's or metrics.jsonl has steps '$(loss_steps "$W/r_nan")'"
"${nan_train[@]}" --resume auto > /dev/null 2>"$W/err.txt"; rc=$?
[ $rc -eq 0 ] && grep -q "resuming from .*last\.pt" "$W/err.txt" && [ "$(loss_steps "$W/r_nan")" = "1 2 3 4 5 6 7 8" ] \
  && pass "--resume auto after the NaN continues from step 4 to 8" \
  || fail "--resume auto after the NaN: exit $rc, steps '$(loss_steps "$W/r_nan")': $(grep -v '^telemetry' "$W/err.txt" | head -2)"
sed 's|seed: 1}|seed: 1, optimizer: sgd, learning_rate: 1e38}|; s|checkpoint_every: 2|checkpoint_every: 1|' "$W/train.yaml" > "$W/diverge.yaml"
expect_error "a learning rate that diverges" "step [0-9]+: (loss is (NaN|[+-]Inf)|weights became NaN or Inf)" "" \
  "$T" train --config "$W/diverge.yaml" --threads 1 --no-progress --run-dir "$W/r_diverge"
if [ -f "$W/r_diverge/checkpoints/last.pt" ]; then
  "${infer[@]}" --checkpoint "$W/r_diverge/checkpoints/last.pt" --output "$W/o_div.tif" >/dev/null 2>&1 \
    && pass "the checkpoint kept by the diverged run loads" || fail "the checkpoint kept by the diverged run does not load"
fi

echo "$((checks - failures)) passed, $failures failed"
[ $failures -eq 0 ]
