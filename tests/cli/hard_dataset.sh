#!/usr/bin/env bash
# The harder generated dataset (tessera-make-sample --msd DIR --hard; docs/new-dataset.md):
#   - the same seed writes the same bytes, another seed other cases;
#   - 8 training and 2 held-out cases (imagesTs with labelsTs), every case its own spacing,
#     anisotropic ones among them, the documented axis flips in the headers (tessera info), and
#     the anatomy kept in place by them (the liver's centre on the patient's right, LPS x < 0);
#   - `tessera plan --dataset` fingerprints each case with its own spacing (per LPS axis) and
#     plans the spacing computed here by hand from those headers: the median per axis, and
#     nnU-Net's anisotropy rule (coarsest axis > 3x the others and under a third of their
#     voxels: its 10th percentile, not finer than the others);
#   - --hard without --msd, and --hard with MR, are one-line refusals.
# Usage: hard_dataset.sh TESSERA MAKE_SAMPLE
set -uo pipefail
T="$1"; GEN="$2"
W="$(mktemp -d /tmp/tessera-hard-dataset.XXXXXX)"
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL $*"; exit 1; }

gen() { "$GEN" --msd "$W/$1" --hard --ct-size 24 --cases 8 --test-cases 2 --seed "$2" > "$W/$1.log" 2>&1 || fail "generator: $(tail -2 "$W/$1.log")"; }
gen a 7; gen b 7; gen c 8
diff -r "$W/a" "$W/b" > /dev/null || fail "seed 7 twice: the datasets differ"
cmp -s "$W/a/imagesTr/case_003.nii.gz" "$W/c/imagesTr/case_003.nii.gz" && fail "seeds 7 and 8: case_003 is the same"

for f in "$W"/a/imagesTr/*.nii.gz "$W"/a/imagesTs/*.nii.gz; do
  "$T" info --json "$f" > "$f.info.json" 2>&1 || fail "info $f: $(cat "$f.info.json")"
done
"$T" plan --dataset "$W/a" --device-memory 2 --json > "$W/plan.json" 2> "$W/plan.err" || fail "plan: $(cat "$W/plan.err")"
python3 - "$W/a" "$W/plan.json" <<'PY' || exit 1
import glob, json, os, sys
root, plan = sys.argv[1], json.load(open(sys.argv[2]))
def fail(m): print("FAIL " + m); sys.exit(1)
def info(path): return json.load(open(path + ".info.json"))
train = sorted(glob.glob(root + "/imagesTr/*.nii.gz"))
test = sorted(glob.glob(root + "/imagesTs/*.nii.gz"))
if len(train) != 8 or len(test) != 2: fail(f"{len(train)} training and {len(test)} test images, expected 8 and 2")
for t in test:
    if not os.path.isfile(t.replace("imagesTs", "labelsTs")): fail(f"no labelsTs for {t}")
heads = [info(p) for p in train]
spacings = [[h["spacing"][2], h["spacing"][1], h["spacing"][0]] for h in heads]  # (z, y, x); only flips here
shapes = [h["size"] for h in heads]  # (z, y, x) already
if len({tuple(s) for s in spacings}) != len(spacings): fail(f"cases share a spacing: {spacings}")
if not any(s[0] > 1.4 * s[2] for s in spacings): fail(f"no anisotropic case: {spacings}")
# The documented flips (sample_data/ct_cases.hpp): x in odd cases, y when case % 3 == 2, z when case % 4 == 3.
flipped = 0
for k, h in enumerate(heads + [info(p) for p in test]):
    want = [k % 2 == 1, k % 3 == 2, k % 4 == 3]
    got_flips = [h["direction"][4 * a] < 0 for a in range(3)]
    if got_flips != want: fail(f"{h['path']}: direction {h['direction']}, expected flips (x, y, z) {want}")
    flipped += any(want)
# The flips keep the anatomy in place: the liver lies on the patient's right (LPS x < 0, within
# the body's half) in every case, whichever way its voxels are stored.
import gzip, struct
for p, h in zip(train, heads):
    raw = gzip.open(p.replace("imagesTr", "labelsTr")).read()
    nx, ny, nz = struct.unpack("<8h", raw[40:56])[1:4]
    voxels = raw[int(struct.unpack("<f", raw[108:112])[0]):]
    xs = [i % nx for i, v in enumerate(voxels[:nx * ny * nz]) if v == 1]
    x = h["origin"][0] + h["direction"][0] * h["spacing"][0] * sum(xs) / len(xs)
    if not -0.5 * nx * h["spacing"][0] < x < 0: fail(f"{p}: the liver's centre is at LPS x = {x:.1f} mm")
# The fingerprint: each case's own spacing and extent.
got = {c["id"]: c for c in plan["fingerprint"]["cases"]}
for p, s, sh in zip(train, spacings, shapes):
    c = got[os.path.basename(p)[:-7]]
    if any(abs(a - b) > 1e-9 for a, b in zip(c["spacing"], s)) or c["extent"] != sh: fail(f"{p}: fingerprint {c}, header {s} {sh}")
def percentile(v, q):
    v = sorted(v); at = q / 100 * (len(v) - 1); lo = int(at); hi = min(lo + 1, len(v) - 1)
    return v[lo] + (at - lo) * (v[hi] - v[lo])
target = [percentile([s[a] for s in spacings], 50) for a in range(3)]
size = [percentile([sh[a] for sh in shapes], 50) for a in range(3)]
worst = max(range(3), key=lambda a: target[a])
others = [a for a in range(3) if a != worst]
if target[worst] > 3 * max(target[a] for a in others) and size[worst] * 3 < min(size[a] for a in others):
    target[worst] = max(percentile([s[worst] for s in spacings], 10), max(target[a] for a in others))
if any(abs(a - b) > 1e-9 for a, b in zip(plan["plan"]["spacing"], target)):
    fail(f"plan spacing {plan['plan']['spacing']}, by hand {target} (cases {spacings})")
print("hard_dataset: spacing", [round(t, 3) for t in target], "from", len(spacings), "cases,", flipped, "of 10 flipped")
PY
[ $? -eq 0 ] || exit 1

# The same cases as image/label pairs of a training config: the same fingerprint and plan.
{
  echo "model: {classes: 3}"
  echo "data:"
  echo "  class_names: [background, liver, kidney]"
  echo "  pairs:"
  for f in "$W"/a/imagesTr/*.nii.gz; do
    echo "    - {image: a/imagesTr/$(basename "$f"), labels: a/labelsTr/$(basename "$f")}"
  done
} > "$W/pairs.yaml"
"$T" plan --dataset "$W/pairs.yaml" --device-memory 2 --json > "$W/pairs.json" 2> "$W/pairs.err" || fail "plan of a config: $(cat "$W/pairs.err")"
python3 - "$W/plan.json" "$W/pairs.json" <<'PY' || exit 1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def fail(m): print("FAIL plan of the config's pairs: " + m); sys.exit(1)
if [c["id"] for c in a["fingerprint"]["cases"]] != [c["id"] for c in b["fingerprint"]["cases"]]: fail("other cases")
for key in ("class_fractions", "class_names"):
    if a["fingerprint"][key] != b["fingerprint"][key]: fail(f"{key} {b['fingerprint'][key]}, folder {a['fingerprint'][key]}")
for key in ("spacing", "patch", "pooling", "batch"):
    if a["plan"][key] != b["plan"][key]: fail(f"{key} {b['plan'][key]}, folder {a['plan'][key]}")
PY
printf 'data: {pairs: [{image: a/imagesTr/case_000.nii.gz, labels: roads.geojson}]}\n' > "$W/polygons.yaml"
"$T" plan --dataset "$W/polygons.yaml" > "$W/polygons.log" 2>&1 && fail "plan of polygon labels: accepted"
[ "$(wc -l < "$W/polygons.log")" -eq 1 ] && grep -q "polygons.yaml:[0-9]*: data.pairs\[0\].labels: .*polygons" "$W/polygons.log" ||
  fail "polygon labels: $(cat "$W/polygons.log")"

"$GEN" --hard --out "$W/x" > "$W/refused.log" 2>&1 && fail "--hard without --msd: accepted"
[ "$(wc -l < "$W/refused.log")" -eq 1 ] && grep -q -- "--hard: needs --msd" "$W/refused.log" || fail "--hard alone: $(cat "$W/refused.log")"
"$GEN" --msd "$W/mr" --hard --msd-modality MR > "$W/mr.log" 2>&1 && fail "--hard with MR: accepted"
[ "$(wc -l < "$W/mr.log")" -eq 1 ] && grep -q -- "--hard: CT only" "$W/mr.log" || fail "--hard MR: $(cat "$W/mr.log")"
for flag in "--ct-spacing 1 2" "--targets 2"; do
  # shellcheck disable=SC2086
  "$GEN" --msd "$W/ignored" --hard $flag > "$W/ignored.log" 2>&1 && fail "--hard $flag: accepted (it has no effect)"
  [ "$(wc -l < "$W/ignored.log")" -eq 1 ] && grep -q -- "${flag%% *}: has no effect with --hard" "$W/ignored.log" ||
    fail "--hard $flag: $(cat "$W/ignored.log")"
done
echo "hard_dataset: deterministic, per-case spacing and orientation, plan spacing as by hand"
