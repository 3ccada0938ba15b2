#!/usr/bin/env bash
# tessera train --auto holds out validation cases and decides the post-processing on them
# (docs/new-dataset.md), on a generated hard dataset of 6 cases:
#   - with no split given, the validation cases are fold 0 of 5 — the split `--fold 0 --folds 5`
#     (and `--fold all`'s first fold) makes: the same cases, and config.yaml says data.folds 5,
#     data.fold 0 with its reason;
#   - at the end the run infers those cases into RUN/validation/ as `tessera infer
#     --no-postprocessing` does (the same labels), and RUN/postprocessing.json is decided on
#     them alone: its cases are the validation cases, its Dice what `tessera postprocess` gives
#     on RUN/validation against their truth;
#   - with --time-budget the validation inference is reserved before the steps are sized: the
#     seconds left for steps plus the reserve fit in the budget;
#   - --fold none: every case trains, no validation, no post-processing decision.
# Usage: auto_validation.sh TESSERA MAKE_SAMPLE
set -uo pipefail
T="$(realpath "$1")"; GEN="$(realpath "$2")"
W="$(mktemp -d /tmp/tessera-auto-validation.XXXXXX)"
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL $*"; exit 1; }
train() {  # NAME FLAGS...: in $W, log in $W/NAME.log
  local name="$1"; shift
  (cd "$W" && "$T" train --auto --dataset hard --threads 2 --no-progress --device-memory 0.25 --batch 1 "$@" > "$name.log" 2>&1)
}
key() {  # FILE SECTION KEY: the value of SECTION.KEY in a resolved config
  python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))[sys.argv[2]][sys.argv[3]])' "$@"
}
split_of() { sed -n 's/^train: .*: \([0-9]* training cases, [0-9]* validation cases.*\)$/\1/p' "$W/$1.log"; }

"$GEN" --msd "$W/hard" --hard --ct-size 24 --cases 6 --test-cases 1 > "$W/gen.log" 2>&1 || fail "generator: $(tail -2 "$W/gen.log")"

# The default: fold 0 of 5, with a time budget (the reserve) and the decision at the end.
train auto --run-dir run --time-budget 2m --steps-per-epoch 1000 || fail "train --auto: $(tail -3 "$W/auto.log")"
C="$W/run/config.yaml"
[ "$(key "$C" data folds) $(key "$C" data fold)" = "5 0" ] || fail "data.folds/fold not 5/0: $(grep -A8 '^data:' "$C")"
grep -q '^# auto: data.folds: 5 — nnU-Net.s 5 folds; this run validates on fold 0' "$C" || fail "no reason for the holdout: $(grep 'data.fold' "$C")"
train explicit --run-dir run-explicit --fold 0 --folds 5 --steps 1 || fail "--fold 0 --folds 5: $(tail -3 "$W/explicit.log")"
[ -n "$(split_of auto)" ] && [ "$(split_of auto)" = "$(split_of explicit)" ] ||
  fail "the default split '$(split_of auto)' is not --fold 0 --folds 5's '$(split_of explicit)'"
[ "$(split_of auto)" = "4 training cases, 2 validation cases (fold 0 of 5): case_000, case_005" ] ||
  fail "fold 0 of 5 of 6 cases by id is case_000, case_005: $(split_of auto)"

# The reserve: the steps are sized on the budget less what was spent and the validation's reserve.
grep -q '^# auto: validation_inference: [0-9.]* s — .*reserved from --time-budget before sizing the steps' "$C" ||
  fail "no validation_inference reserve: $(grep 'validation_inference' "$C")"
python3 - "$C" <<'PY' || exit 1
import re, sys
head = open(sys.argv[1]).read()
reserve = float(re.search(r"^# auto: validation_inference: ([0-9.]+) s", head, re.M).group(1))
m = re.search(r"^# auto: train.steps: .*--time-budget ([0-9]+) s: .* ([0-9.]+) s spent opening the data and measuring, "
              r"([0-9.]+) s reserved for the validation inference .*: ([0-9.]+) s left", head, re.M)
if not m: print("FAIL no steps line with the reserve: " + head); sys.exit(1)
budget, spent, reserved, left = map(float, m.groups())
if reserve <= 0 or abs(reserved - reserve) > 0.011: print(f"FAIL reserve {reserve}, steps line says {reserved}"); sys.exit(1)
if abs(budget - spent - reserve - left) > 0.03: print(f"FAIL {left} s left of {budget}: not less {spent} spent and {reserve} reserved"); sys.exit(1)
PY

# The decision: on the validation cases' predictions alone, as `tessera postprocess` takes it.
P="$W/run/postprocessing.json"
[ -s "$P" ] || fail "no run/postprocessing.json: $(tail -5 "$W/auto.log")"
[ "$(cd "$W/run/validation" && ls ./*.nii.gz)" = "$(printf './case_000.nii.gz\n./case_005.nii.gz')" ] || fail "run/validation: $(ls -a "$W/run/validation")"
grep -q '^train: validation: 2 cases inferred and decided' "$W/auto.log" || fail "no decision line: $(tail -6 "$W/auto.log")"
grep -qE '^ *liver +[0-9]+ +[0-9.]+ +[0-9.]+  (kept|not kept)$' "$W/auto.log" || fail "no per-class table: $(tail -6 "$W/auto.log")"
mkdir -p "$W/check" "$W/same"
"$T" postprocess --run "$W/check" --pred "$W/run/validation" --truth "$W/hard/labelsTr" > "$W/check.log" 2>&1 ||
  fail "postprocess: $(tail -2 "$W/check.log")"
python3 - "$P" "$W/check/postprocessing.json" <<'PY' || exit 1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
if a["cases"] != ["case_000.nii.gz", "case_005.nii.gz"]: print(f"FAIL decided on {a['cases']}, not the validation cases"); sys.exit(1)
if a != b: print(f"FAIL the run's decision {a} is not tessera postprocess's on run/validation {b}"); sys.exit(1)
PY
# RUN/validation holds tessera infer's labels (its defaults, without post-processing).
for c in case_000 case_005; do
  "$T" infer --checkpoint "$W/run/checkpoints/last.pt" --input "$W/hard/imagesTr/$c.nii.gz" --output "$W/infer/$c.nii.gz" \
    --threads 2 --no-progress --no-postprocessing > "$W/infer.log" 2>&1 || fail "infer $c: $(tail -2 "$W/infer.log")"
done
"$T" postprocess --run "$W/same" --pred "$W/run/validation" --truth "$W/infer" > "$W/same.log" 2>&1 || fail "postprocess same"
python3 - "$W/same/postprocessing.json" <<'PY' || exit 1
import json, sys
for c in json.load(open(sys.argv[1]))["classes"]:
    if c["cases"] and abs(c["dice_without"] - 1) > 1e-12:
        print(f"FAIL run/validation differs from tessera infer's labels: class {c['label']} Dice {c['dice_without']}"); sys.exit(1)
PY

# --fold none: no holdout, nothing decided.
train none --run-dir run-none --fold none --steps 1 || fail "--fold none: $(tail -3 "$W/none.log")"
[ "$(split_of none)" = "6 training cases, 0 validation cases" ] || fail "--fold none: $(split_of none)"
[ ! -e "$W/run-none/postprocessing.json" ] && [ ! -e "$W/run-none/validation" ] || fail "--fold none decided post-processing"
train bad --run-dir run-bad --fold none --folds 5 && fail "--fold none --folds 5 accepted"
[ "$(wc -l < "$W/bad.log")" -eq 1 ] && grep -q -- "--folds" "$W/bad.log" || fail "--fold none --folds 5: $(cat "$W/bad.log")"
echo "auto_validation: fold 0 of 5 held out, the decision taken on it as tessera postprocess does, its inference reserved"
