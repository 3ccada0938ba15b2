#!/usr/bin/env bash
# tessera-gpu-check --device cpu: every step of the GPU check run on the CPU with a small
# network and scene (the PyTorch reference through Debian's python3-torch), the JSON report
# read back: each step present with its figures and passed, the label histograms of Tessera
# and PyTorch covering the scene and agreeing; bad flags refused in one line, nothing written.
# Usage: gpu_check_dry_run.sh TESSERA_GPU_CHECK
set -uo pipefail
G="$1"
W="$(mktemp -d /tmp/tessera-gpu-check.XXXXXX)"
trap 'rm -rf "$W"' EXIT
failures=0
fail() { failures=$((failures + 1)); echo "FAIL $*"; }

# Debian's PyTorch 1.13 cannot run the reference in bfloat16 on the CPU (its bf16
# conv_transpose2d refuses the decoder's weights), so the reference runs fp32 and Tessera's
# bf16 pass runs alone, its labels compared with its fp32 pass.
small=(--device cpu --levels 3 --base-filters 8 --scene 192 --tile 64 --batch 2 --repeats 1 --train-steps 3)
"$G" "${small[@]}" --precisions fp32 --python /usr/bin/python3 --out "$W/report.json" > "$W/out.txt" 2> "$W/err.txt"
rc=$?
if [ "$rc" -ne 0 ]; then
  fail "dry run: exit $rc"; tail -20 "$W/err.txt"; [ -f "$W/report.json" ] && cat "$W/report.json"
else
  echo "ok   dry run: $(cat "$W/out.txt")"
fi
[ -e "$W/report.work" ] && fail "the work folder report.work was left behind"
"$G" "${small[@]}" --precisions bf16 --python "" --out "$W/bf16.json" > /dev/null 2> "$W/err.txt" ||
  { fail "bf16 dry run: exit $?"; tail -20 "$W/err.txt"; }

python3 - "$W/report.json" "$W/bf16.json" 192 3 <<'PY' || failures=$((failures + 1))
import json, math, sys
path, path16, scene, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
r, r16 = json.load(open(path)), json.load(open(path16))
bad = []
def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        bad.append(what)
for report in (r, r16):
    for step in ("equality", "training", "throughput", "comm", "telemetry"):
        if "error" in report[step]:
            check(False, f"{step}: {report[step]['error'].splitlines()[0]}")
if bad:
    sys.exit(1)
check(r["device_kind"] == "cpu" and r["device"] == "cpu", "device cpu")
check(r["libtorch"].count(".") >= 1, "libtorch version " + r["libtorch"])
fb, tw = r["equality"]["forward_backward"], r["equality"]["tiled_versus_whole"]
check(fb["pass"] and fb["forward_rel_diff"] <= fb["tolerance"] and fb["gradient_rel_diff"] <= fb["gradient_tolerance"],
      f"forward/backward: {fb['forward_rel_diff']:.2e}, gradients {fb['gradient_rel_diff']:.2e}")
check(tw["pass"] and tw["rel_diff"] <= tw["tolerance"] and tw["labels_equal_fraction"] == 1.0,
      f"tiled versus whole: {tw['rel_diff']:.2e}, labels equal {tw['labels_equal_fraction']}")
t = r["training"]
check(t["pass"] and len(t["losses_cpu"]) == steps and len(t["losses_device"]) == steps
      and all(math.isfinite(v) for v in t["losses_cpu"] + t["losses_device"]),
      f"training: {steps} steps, worst {t['worst_rel_diff']}")
x = r["throughput"]["fp32"]
ok = x["pass"] and x["tessera"]["seconds"] > 0 and x["tessera"]["useful_tflops"] > 0
ok = ok and sum(x["tessera"]["label_counts"]) == scene * scene
ok = ok and "error" not in x["pytorch"] and x["pytorch"]["seconds"] > 0
ok = ok and sum(x["pytorch"]["label_counts"]) == scene * scene
ok = ok and x["label_histogram_difference"] <= x["label_histogram_allowed"]
check(ok, f"throughput fp32: tessera {x['tessera']['seconds']:.3f} s, pytorch "
          f"{x['pytorch'].get('seconds', float('nan')):.3f} s, histogram difference {x.get('label_histogram_difference')}")
y = r16["throughput"]["bf16"]
counts16, counts32 = y["tessera"]["label_counts"], x["tessera"]["label_counts"]
moved = sum(abs(a - b) for a, b in zip(counts16, counts32)) / 2 / (scene * scene)
check(y["pass"] and "pytorch" not in y and sum(counts16) == scene * scene and moved <= y["label_histogram_allowed"],
      f"throughput bf16 (Tessera alone): {y['tessera']['seconds']:.3f} s, labels moved against fp32 {moved:.4f}")
check(r["comm"]["pass"] and "skipped" in r["comm"], "comm: " + r["comm"].get("skipped", "not skipped on the CPU"))
check(r["telemetry"]["pass"] and r["telemetry"]["samples"] >= 1, f"telemetry: {r['telemetry']['samples']} samples")
check(r["pass"] and r16["pass"], "reports pass")
sys.exit(1 if bad else 0)
PY

# Bad flags: one line naming the flag, exit 1, no report.
for bad in "--device tpu" "--tile 30" "--precisions fp16"; do
  flag="${bad%% *}"
  "$G" $bad --out "$W/bad.json" > /dev/null 2> "$W/bad.txt"; rc=$?
  if [ "$rc" -eq 1 ] && [ "$(wc -l < "$W/bad.txt")" -eq 1 ] && grep -q -- "$flag" "$W/bad.txt" && [ ! -e "$W/bad.json" ]; then
    echo "ok   $bad: $(cat "$W/bad.txt")"
  else
    fail "$bad: exit $rc, $(head -3 "$W/bad.txt" | tr '\n' ' ')"
  fi
done
[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
