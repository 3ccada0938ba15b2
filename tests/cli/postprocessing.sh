#!/usr/bin/env bash
# nnU-Net's post-processing through the `tessera` command:
#   - `tessera infer` with a checkpoint whose run has RUN/postprocessing.json keeps the largest
#     connected component of the classes it names, and its summary line says so; with
#     --no-postprocessing the labels are the network's (here an under-trained network's, in
#     pieces, so the check can fail);
#   - `tessera postprocess` decides on a folder of predictions against their truth and
#     refuses a missing truth with a one-line error naming --truth, writing nothing.
# Single components are checked with `tessera postprocess` itself on (labels, labels): keeping
# the largest component of a class in one piece leaves its Dice at 1.
# Usage: postprocessing.sh TESSERA MAKE_SAMPLE
set -uo pipefail
T="$1"; GEN="$2"
W="$(mktemp -d /tmp/tessera-postprocessing.XXXXXX)"
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL $*"; exit 1; }

"$GEN" --msd "$W/msd" --ct-size 32 --targets 2 > "$W/gen.log" 2>&1 || fail "generator: $(tail -2 "$W/gen.log")"
cat > "$W/train.yaml" <<YAML
run_dir: $W/run
model: {preset: unet3d-tiny, base_filters: 4}
data: {dataset: $W/msd, validation: [ct_002]}
train: {tile: 16, batch: 1, steps: 1, seed: 3}
YAML
"$T" train --config "$W/train.yaml" --threads 2 --no-progress > "$W/train.log" 2>&1 || fail "train: $(tail -3 "$W/train.log")"

# Components per class of a folder of labels: Dice with the largest component kept, vs itself.
single() {  # single DIR -> prints "label dice_with" per class
  rm -rf "$W/check" && mkdir -p "$W/check"
  "$T" postprocess --run "$W/check" --pred "$1" --truth "$1" > "$W/check.log" 2>&1 || fail "postprocess check: $(tail -2 "$W/check.log")"
  python3 -c 'import json,sys; [print(c["label"], c["dice_with"]) for c in json.load(open(sys.argv[1]))["classes"]]' \
    "$W/check/postprocessing.json"
}

"$T" infer --checkpoint "$W/run/checkpoints/last.pt" --input "$W/msd" --output "$W/raw" --threads 2 --no-progress \
  > "$W/raw.log" 2>&1 || fail "infer: $(tail -2 "$W/raw.log")"
grep -q "post-processing" "$W/raw.log" && fail "a run without postprocessing.json: the summary names post-processing"
single "$W/raw" > "$W/raw.components"
awk '$2 < 1 { n++ } END { exit n > 0 ? 0 : 1 }' "$W/raw.components" ||
  fail "precondition: the under-trained network's labels are in one piece per class ($(tr '\n' ' ' < "$W/raw.components")); the check below could not fail"

cat > "$W/run/postprocessing.json" <<JSON
{"cases": ["by hand"], "classes": [
 {"label": 1, "cases": 1, "dice_without": 0.5, "dice_with": 0.6, "keep_largest": true},
 {"label": 2, "cases": 1, "dice_without": 0.5, "dice_with": 0.6, "keep_largest": true}]}
JSON
"$T" infer --checkpoint "$W/run/checkpoints/last.pt" --input "$W/msd" --output "$W/kept" --threads 2 --no-progress \
  > "$W/kept.log" 2>&1 || fail "infer: $(tail -2 "$W/kept.log")"
grep -q "post-processing ($W/run/postprocessing.json): largest component of liver, kidney" "$W/kept.log" ||
  fail "the summary does not name the post-processing: $(grep -- '->' "$W/kept.log")"
single "$W/kept" > "$W/kept.components"
awk '$2 != 1 { n++ } END { exit n > 0 ? 1 : 0 }' "$W/kept.components" ||
  fail "with postprocessing.json a class is still in pieces: $(tr '\n' ' ' < "$W/kept.components")"

"$T" infer --checkpoint "$W/run/checkpoints/last.pt" --input "$W/msd" --output "$W/off" --threads 2 --no-progress \
  --no-postprocessing > "$W/off.log" 2>&1 || fail "infer --no-postprocessing: $(tail -2 "$W/off.log")"
grep -q "off (--no-postprocessing)" "$W/off.log" || fail "--no-postprocessing: the summary does not say so"
for f in "$W"/raw/*.nii.gz; do cmp -s "$f" "$W/off/$(basename "$f")" || fail "--no-postprocessing: $(basename "$f") differs from the run without postprocessing.json"; done

mkdir -p "$W/empty" "$W/run2"
"$T" postprocess --run "$W/run2" --pred "$W/raw" --truth "$W/empty" > "$W/bad.log" 2>&1 && fail "a missing truth accepted"
[ "$(wc -l < "$W/bad.log")" -eq 1 ] && grep -q -- "--truth" "$W/bad.log" && [ ! -e "$W/run2/postprocessing.json" ] || fail "missing truth: $(cat "$W/bad.log")"
echo "ok postprocessing"
