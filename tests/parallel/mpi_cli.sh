#!/usr/bin/env bash
# The `tessera` command under mpirun, as an HPC user runs it: data-parallel train writes
# one metrics file and per-rank telemetry; sample-parallel infer gives the single-process
# mosaic, resumes after SIGKILL with the same mosaic; a failing or killed rank ends the job.
# Usage: mpi_cli.sh TESSERA MAKE_SAMPLE MPIEXEC
set -uo pipefail
T="$1"; GEN="$2"; MPI="$3 --allow-run-as-root --oversubscribe"
W="$(mktemp -d /tmp/tessera-mpi-cli.XXXXXX)"
trap 'rm -rf "$W"' EXIT
failures=0
pass() { echo "ok   $*"; }
fail() { failures=$((failures + 1)); echo "FAIL $*"; }
checksum() { gdalinfo -checksum "$1" | grep -o 'Checksum=[0-9]*'; }
geo() { gdalinfo -json "$1" | /usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["geoTransform"], j["size"])'; }

"$GEN" --out "$W/s" --size 384 --ct-size 32 >/dev/null || { echo "FAIL generator"; exit 1; }
S="$W/s"
export TESSERA_THREADS=1

echo "== sample-parallel inference equals one process"
"$T" infer --model unet-tiny --init random --seed 3 --classes 4 --input "$S/scene.tif" --output "$W/one.tif" \
  --tile 64 --no-progress >/dev/null || fail "single-process infer"
$MPI -np 2 "$T" infer --model unet-tiny --init random --seed 3 --classes 4 --input "$S/scene.tif" \
  --output "$W/two.tif" --tile 64 --run-dir "$W/run2" --no-progress > "$W/two.log" 2>&1 || fail "mpirun -np 2 infer: $(tail -3 "$W/two.log")"
[ "$(checksum "$W/one.tif")" = "$(checksum "$W/two.tif")" ] && [ "$(geo "$W/one.tif")" = "$(geo "$W/two.tif")" ] \
  && pass "2 ranks: same labels ($(checksum "$W/two.tif")), same geotransform and size; $(grep -o 'per rank: [0-9 ]*' "$W/two.log")" \
  || fail "2-rank mosaic differs from one process"
ls "$W/run2/telemetry/rank-0.jsonl" "$W/run2/telemetry/rank-1.jsonl" >/dev/null 2>&1 \
  && pass "telemetry for both inference ranks" || fail "telemetry files missing: $(ls "$W/run2/telemetry" 2>&1)"

echo "== SIGKILL during sample-parallel inference, then rerun"
big=(infer --model unet-tiny --init random --seed 3 --classes 4 --input "$S/scene.tif" --tile 32 --no-progress)
"$T" "${big[@]}" --output "$W/ref32.tif" >/dev/null || fail "single-process infer --tile 32"
$MPI -np 2 "$T" "${big[@]}" --output "$W/killed.tif" --run-dir "$W/runk" >/dev/null 2>&1 &
job=$!
for _ in $(seq 1 600); do
  n=$(ls "$W/runk/tiles/killed.tif/" 2>/dev/null | grep -c '^tile-.*\.tif$')
  [ "${n:-0}" -ge 8 ] && break
  sleep 0.05
done
kids=$(pgrep -P "$job" 2>/dev/null)
kill -9 "$job" $kids 2>/dev/null; wait "$job" 2>/dev/null
before=$(ls "$W/runk/tiles/killed.tif/" | grep -c '^tile-.*\.tif$')
[ ! -e "$W/killed.tif" ] && pass "killed after $before of 144 tiles, no output file" || fail "killed run left an output file"
$MPI -np 2 "$T" "${big[@]}" --output "$W/killed.tif" --run-dir "$W/runk" > "$W/resume.log" 2>&1 || fail "rerun: $(tail -3 "$W/resume.log")"
kept=$(grep -o '[0-9]* kept' "$W/resume.log" | grep -o '[0-9]*')
[ "$(checksum "$W/killed.tif")" = "$(checksum "$W/ref32.tif")" ] && [ "${kept:-0}" -ge 1 ] \
  && pass "rerun kept $kept finished tiles, mosaic identical to an uninterrupted run" \
  || fail "resumed mosaic differs or nothing kept (kept ${kept:-?}): $(tail -2 "$W/resume.log")"

echo "== data-parallel train through the CLI"
cat > "$W/train.yaml" <<YAML
run_dir: run
model: {preset: unet-tiny, classes: 4, base_filters: 4}
data:
  pairs: [{image: s/scene.tif, labels: s/scene_labels.tif}]
train: {tile: 32, batch: 2, steps: 3, seed: 1, checkpoint_every: 2}
YAML
$MPI -np 2 "$T" train --config "$W/train.yaml" --no-progress > "$W/train.log" 2>&1 || fail "mpirun -np 2 train: $(tail -3 "$W/train.log")"
lines=$(wc -l < "$W/run/metrics.jsonl" 2>/dev/null)
[ "${lines:-0}" -eq 3 ] && grep -q '"global_batch":4' "$W/run/metrics.jsonl" \
  && pass "one metrics.jsonl with 3 steps at global batch 4" || fail "metrics.jsonl: ${lines:-none} lines"
[ -f "$W/run/checkpoints/last.pt" ] && pass "checkpoint written by rank 0" || fail "no checkpoint"
for r in 0 1; do
  f="$W/run/telemetry/rank-$r.jsonl"
  /usr/bin/python3 -c '
import json,sys
keys={"time","rank","host","device","mem_used_bytes","mem_total_bytes","util_pct","phase","step","tiles_done"}
rows=[json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if rows and all(keys <= set(r) for r in rows) and rows[-1]["step"]==3 else 1)' "$f" \
    && pass "rank $r telemetry has the schema, last step 3" || fail "rank $r telemetry: $(tail -1 "$f" 2>&1)"
done

echo "== a 2-rank checkpoint resumes on 4 ranks (replicated state)"
$MPI -np 4 "$T" train --config "$W/train.yaml" --steps 5 --resume auto --no-progress > "$W/resume4.log" 2>&1 \
  || fail "resume on 4 ranks: $(tail -3 "$W/resume4.log")"
steps=$(/usr/bin/python3 -c 'import json,sys; print(",".join(str(json.loads(l)["step"]) for l in open(sys.argv[1]) if "loss" in l))' "$W/run/metrics.jsonl")
[ "$steps" = "1,2,3,4,5" ] && grep -q '"global_batch":8' "$W/run/metrics.jsonl" \
  && pass "resumed at step 4 on 4 ranks (global batch 8), steps $steps" || fail "steps after resume: $steps"

echo "== a failing rank ends the job with its rank named"
$MPI -np 2 "$T" train --config "$W/missing.yaml" > /dev/null 2> "$W/err.txt"; rc=$?
[ $rc -ne 0 ] && grep -q "tessera: error: rank [01]: .*missing.yaml" "$W/err.txt" \
  && pass "exit $rc: $(grep -m1 'tessera: error' "$W/err.txt")" || fail "exit $rc: $(head -3 "$W/err.txt")"

echo "== killing one rank of a 4-rank training ends the job within 60 s"
sed -i 's/steps: 3/steps: 100000/' "$W/train.yaml"
start=$(date +%s)
$MPI -np 4 "$T" train --config "$W/train.yaml" --run-dir "$W/run4" --no-progress > /dev/null 2> "$W/err4.txt" &
job=$!
for _ in $(seq 1 1200); do [ -s "$W/run4/metrics.jsonl" ] && break; sleep 0.05; done
victim=$(pgrep -P "$job" | sed -n 3p)
kill -9 "$victim" 2>/dev/null
for _ in $(seq 1 1200); do kill -0 "$job" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$job" 2>/dev/null; then
  kill -9 "$job" $(pgrep -P "$job") 2>/dev/null; fail "job still running 60 s after a rank was killed"
else
  wait "$job"; rc=$?; took=$(( $(date +%s) - start ))
  [ $rc -ne 0 ] && grep -qi "rank" "$W/err4.txt" \
    && pass "exit $rc within ${took} s of start: $(grep -m1 -i 'rank' "$W/err4.txt" | head -c 160)" \
    || fail "exit $rc: $(head -5 "$W/err4.txt")"
fi

echo "== $failures failures"
[ $failures -eq 0 ]
