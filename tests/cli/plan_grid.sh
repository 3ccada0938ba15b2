#!/usr/bin/env bash
# `tessera plan --domains N` searches the process grid domains × dp × pp × sp and explains the
# choice. Every expectation is computed from the grid's rules over what the plan prints, not
# from remembered figures:
#   - every (pp, sp) row uses domains · dp · pp · sp devices, dp = min(⌊devices / domains /
#     (pp · sp)⌋, ⌈tiles / M⌉) with tiles = Π ⌈extent / inset⌉;
#   - exactly one row is chosen, it fits, and no fitting row is faster; every other row says
#     why it lost: "does not fit" exactly when its memory per rank exceeds the device's, else
#     "slower" with a pass time no better than the chosen one's;
#   - a domain costs every rank of its group the same state bytes whatever the layout (the
#     DSN's private encoder, reconstruction decoder and classifier), so rows of 3 domains and
#     of 1 at the same (pp, sp, inset, M) differ by one constant;
#   - with less memory per device and an inset every step must see whole (--tile 1024), a
#     layout that splits the tile (pp or sp > 1) is chosen and the row pp 1 × sp 1 does not fit;
#   - the text output prints the table and the chosen layout's line.
# The example of the issue: a 10 000² scene, 3 domains, 1 200 devices of 16 GiB (unet-tiny with
# `same` padding, so spatial splits are among the layouts).
# Usage: plan_grid.sh TESSERA
set -uo pipefail
T="$1"
W="$(mktemp -d /tmp/tessera-plan-grid.XXXXXX)"
trap 'rm -rf "$W"' EXIT
export HOME="$W"  # no calibration file: the default figures
failures=0
pass() { echo "ok   $*"; }
fail() { failures=$((failures + 1)); echo "FAIL $*"; }

plan() { "$T" plan --model unet-tiny --padding same --train "$@"; }

plan --image 10000x10000 --domains 3 --devices 1200 --device-memory 16 --json > "$W/d3.json" 2> "$W/err" ||
  { echo "FAIL plan: $(cat "$W/err")"; exit 1; }
plan --image 10000x10000 --domains 1 --devices 1200 --device-memory 16 --json > "$W/d1.json" 2> "$W/err" ||
  { echo "FAIL plan: $(cat "$W/err")"; exit 1; }
plan --image 10000x10000 --domains 3 --devices 1200 --device-memory 16 > "$W/d3.txt" 2> "$W/err" ||
  { echo "FAIL plan (text): $(cat "$W/err")"; exit 1; }
plan --image 2048x2048 --domains 2 --devices 16 --device-memory 0.45 --tile 1024 --json > "$W/tight.json" 2> "$W/err" ||
  { echo "FAIL plan (0.45 GiB, inset 1024): $(cat "$W/err")"; exit 1; }

/usr/bin/python3 - "$W" <<'PY' || failures=$((failures + 1))
import json, math, sys
W = sys.argv[1]
bad = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok: bad.append(what)

def rules(name, extent, domains, devices):
    d = json.load(open(f"{W}/{name}.json"))
    g, mem = d["grid"], d["device_memory_bytes"]
    rows, chosen = g["layouts"], g["layouts"][g["chosen"]]
    for r in rows:
        tiles = math.prod(math.ceil(e / r["tile_inset"]) for e in extent)
        dp = min(devices // domains // (r["pp"] * r["sp"]), math.ceil(tiles / r["micro_batches"]))
        check(r["dp"] == dp and r["devices_used"] == domains * r["dp"] * r["pp"] * r["sp"] <= devices,
              f"{name}: pp {r['pp']} sp {r['sp']}: dp {r['dp']} (rule {dp}), {r['devices_used']} devices")
        check(r["fits"] == (r["rank_bytes"] <= mem), f"{name}: pp {r['pp']} sp {r['sp']} fits iff its memory does")
        if r is chosen: continue
        if not r["fits"]:
            check(r["verdict"].startswith("does not fit"), f"{name}: pp {r['pp']} sp {r['sp']}: {r['verdict']}")
        else:
            check(r["verdict"].startswith("slower") and r["pass_seconds"] >= chosen["pass_seconds"],
                  f"{name}: pp {r['pp']} sp {r['sp']}: {r['verdict']}")
    check([r["verdict"] for r in rows].count("chosen") == 1 and chosen["verdict"] == "chosen" and chosen["fits"],
          f"{name}: one chosen layout, which fits: pp {chosen['pp']} sp {chosen['sp']} dp {chosen['dp']}")
    fastest = min(r["pass_seconds"] for r in rows if r["fits"])
    check(chosen["pass_seconds"] == fastest, f"{name}: the chosen layout is the fastest that fits ({fastest:.3g} s)")
    check(len({(r["pp"], r["sp"]) for r in rows}) == len(rows) and len(rows) > 1,
          f"{name}: {len(rows)} (pp, sp) combinations, each once")
    return rows

d3 = rules("d3", (10000, 10000), 3, 1200)
d1 = rules("d1", (10000, 10000), 1, 1200)
tight = rules("tight", (2048, 2048), 2, 16)
check(all(r["tile_inset"] == 1024 for r in tight), "--tile 1024: every row at inset 1024")

key = lambda r: (r["pp"], r["sp"], r["tile_inset"], r["micro_batches"])
one = {key(r): r for r in d1}
extra = {r["rank_bytes"] - one[key(r)]["rank_bytes"] for r in d3 if key(r) in one}
check(len(extra) == 1 and extra.pop() > 0, "3 domains add one constant state to every rank, whatever the layout")

whole = [r for r in tight if r["pp"] == 1 and r["sp"] == 1]
chosen = json.load(open(f"{W}/tight.json"))["grid"]
chosen = chosen["layouts"][chosen["chosen"]]
check(len(whole) == 1 and not whole[0]["fits"] and chosen["pp"] * chosen["sp"] > 1,
      f"0.45 GiB, inset 1024: pp 1 × sp 1 does not fit, chosen pp {chosen['pp']} × sp {chosen['sp']}")
sys.exit(1 if bad else 0)
PY

if grep -q "^process grid: domains × dp × pp × sp on 1200 devices" "$W/d3.txt" && grep -q "  - chosen: dp .* × 3 domains" "$W/d3.txt"; then
  pass "text: the grid table and $(grep -m1 '  - chosen:' "$W/d3.txt" | sed 's/^ *//')"
else
  fail "text: no grid table or chosen line: $(tail -5 "$W/d3.txt")"
fi
plan --image 10000x10000 --domains 7 --devices 1200 --device-memory 16 > "$W/d7.txt" 2> "$W/err" || fail "7 domains: $(cat "$W/err")"
grep -q "domains: 7 groups of $((1200 / 7)) devices.*($((1200 % 7)) of the 1200 devices left idle" "$W/d7.txt" &&
  pass "7 domains on 1200 devices: $((1200 % 7)) said idle" || fail "7 domains: no idle devices said: $(grep 'domains:' "$W/d7.txt")"
# unet-small with `same` padding (its receptive radius 92 is rounded to an aligned halo): plans.
"$T" plan --model unet-small --padding same --train --image 10000x10000 --domains 3 --devices 1200 --device-memory 16 \
  > "$W/small.txt" 2> "$W/err" && grep -q "  - chosen: dp" "$W/small.txt" &&
  pass "unet-small, same padding: $(grep -m1 '  - chosen:' "$W/small.txt" | sed 's/^ *//')" ||
  fail "unet-small, same padding: $(cat "$W/err") $(tail -2 "$W/small.txt")"
"$T" plan --model unet-small --image 512x512 --domains 5 --devices 4 > /dev/null 2> "$W/err" &&
  fail "--domains 5 on 4 devices accepted" ||
  { grep -q -- "--domains must be in 1" "$W/err" && pass "--domains 5 on 4 devices refused: $(cat "$W/err")" ||
    fail "--domains 5 on 4 devices: $(cat "$W/err")"; }
echo "== $failures failed"
[ "$failures" -eq 0 ]
