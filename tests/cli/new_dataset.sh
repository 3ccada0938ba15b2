#!/usr/bin/env bash
# A new dataset (docs/new-dataset.md), end to end on a generated MSD folder:
#   - `tessera plan --dataset` prints the fingerprint and the plan, each choice with its reason,
#     and with --json the same as JSON (patch on the pooling grid, bottleneck 4-8 voxels);
#     a folder without dataset.json is one line naming it, exit 1;
#   - an instance-norm model trained on 16³ patches is inferred by default on Gaussian-blended
#     16³ windows, and the summary line says so and why; --window exact runs tiles and says so;
#     --tta mirror is said; --window gaussian with --tile 16 is one line naming both flags.
# Usage: new_dataset.sh TESSERA MAKE_SAMPLE
set -uo pipefail
T="$1"; GEN="$2"
W="$(mktemp -d /tmp/tessera-new-dataset.XXXXXX)"
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL $*"; exit 1; }

"$GEN" --msd "$W/msd" --ct-size 32 --targets 2 > "$W/gen.log" 2>&1 || fail "generator: $(tail -2 "$W/gen.log")"

"$T" plan --dataset "$W/msd" --device-memory 2 > "$W/plan.txt" 2>&1 || fail "plan: $(tail -3 "$W/plan.txt")"
for key in spacing patch pooling levels batch filters norm deep_supervision schedule foreground_fraction normalization augmentation; do
  grep -q "^  $key: " "$W/plan.txt" || fail "plan has no $key line: $(cat "$W/plan.txt")"
done
[ "$(grep -c '      why: ' "$W/plan.txt")" -ge 12 ] || fail "a choice without its reason: $(cat "$W/plan.txt")"
"$T" plan --dataset "$W/msd" --device-memory 2 --json > "$W/plan.json" 2>&1 || fail "plan --json: $(tail -3 "$W/plan.json")"
python3 - "$W/plan.json" <<'PY' || exit 1
import json, sys
j = json.load(open(sys.argv[1]))
def fail(m): print("FAIL plan --json: " + m); sys.exit(1)
f, p = j["fingerprint"], j["plan"]
if len(f["cases"]) != 3: fail(f"{len(f['cases'])} cases, expected 3")
if abs(sum(f["class_fractions"]) - 1) > 1e-9: fail(f"class fractions {f['class_fractions']}")
for side, pools in zip(p["patch"], p["pooling"]):
    if not 4 <= side >> pools < 8 or side % (1 << pools): fail(f"patch {p['patch']} pooling {p['pooling']}")
if p["batch"] < 2: fail(f"batch {p['batch']}")
PY
"$T" plan --dataset "$W/nothing" > "$W/bad.log" 2>&1 && fail "plan of a missing folder: accepted"
[ "$(wc -l < "$W/bad.log")" -eq 1 ] && grep -q "nothing/dataset.json" "$W/bad.log" || fail "bad folder: $(cat "$W/bad.log")"

cat > "$W/train.yaml" <<YAML
run_dir: run
model: {preset: unet3d-tiny, base_filters: 4, padding: same, norm: instance}
data: {dataset: msd}
train: {tile: 16, batch: 1, steps: 2, steps_per_epoch: 2, seed: 1}
YAML
(cd "$W" && "$T" train --config train.yaml --threads 2 --no-progress > train.log 2>&1) || fail "train: $(tail -3 "$W/train.log")"
infer() {  # NAME FLAGS...
  local name="$1"; shift
  "$T" infer --checkpoint "$W/run/checkpoints/last.pt" --input "$W/msd/imagesTs/ct_test_000.nii.gz" \
    --output "$W/$name.nii.gz" --threads 2 --no-progress "$@" > "$W/$name.log" 2>&1
}
infer auto || fail "infer: $(tail -3 "$W/auto.log")"
grep -q "windows, gaussian windows 16×16×16 (auto: norm is instance" "$W/auto.log" || fail "default: $(cat "$W/auto.log")"
[ -s "$W/auto.nii.gz" ] || fail "no labels written"
infer exact --window exact || fail "infer --window exact: $(tail -3 "$W/exact.log")"
grep -q " tiles, " "$W/exact.log" || fail "--window exact: $(cat "$W/exact.log")"
infer mirror --tta mirror || fail "infer --tta mirror: $(tail -3 "$W/mirror.log")"
grep -q "gaussian windows 16×16×16 (.*), mirrored" "$W/mirror.log" || fail "--tta mirror: $(cat "$W/mirror.log")"
infer refused --window gaussian --tile 16 && fail "--window gaussian --tile 16: accepted"
[ "$(wc -l < "$W/refused.log")" -eq 1 ] && grep -q -- "--window gaussian: not with --tile 16" "$W/refused.log" ||
  fail "--window gaussian --tile 16: $(cat "$W/refused.log")"
echo "new_dataset: plan, gaussian windows by default, exact and mirrored on request"
