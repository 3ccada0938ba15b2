#!/usr/bin/env bash
# The `tessera` command under mpirun, as an HPC user runs it: sample-parallel infer gives
# the single-process mosaic and resumes after SIGKILL with the same mosaic; data-parallel
# train writes one metrics file and per-rank telemetry, and its per-step losses equal one
# process's with the same global batch, also after resuming a 2-rank run on 4 ranks.
# Failing ranks end the job with Tessera's own one-line error naming the rank:
#   - a rank that stops answering (hangs in a step, TESSERA_TEST_HANG): the others give up
#     after TESSERA_COLLECTIVE_TIMEOUT and name it;
#   - a rank that throws in a pipeline step or in sample-parallel inference
#     (TESSERA_TEST_THROW): the job ends at once, long before any timeout;
#   - a bad config on every rank; and a rank killed by SIGKILL (mpirun's own message).
# Usage: mpi_cli.sh TESSERA MAKE_SAMPLE MPIEXEC
source "$(dirname "$0")/../lib/mpi.sh" mpi-cli "$@"
checksum() { gdalinfo -checksum "$1" | grep -o 'Checksum=[0-9]*'; }
geo() { gdalinfo -json "$1" | /usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["geoTransform"], j["size"])'; }

sample --size 384 --ct-size 32
S="$W/s"
export TESSERA_THREADS=1

echo "== sample-parallel inference equals one process"
"$T" infer --model unet-tiny --init random --seed 3 --classes 4 --input "$S/scene.tif" --output "$W/one.tif" \
  --tile 64 --no-progress >/dev/null || fail "single-process infer"
"${MPI[@]}" -np 2 "$T" infer --model unet-tiny --init random --seed 3 --classes 4 --input "$S/scene.tif" \
  --output "$W/two.tif" --tile 64 --run-dir "$W/run2" --no-progress > "$W/two.log" 2>&1 || fail "mpirun -np 2 infer: $(tail -3 "$W/two.log")"
[ "$(checksum "$W/one.tif")" = "$(checksum "$W/two.tif")" ] && [ "$(geo "$W/one.tif")" = "$(geo "$W/two.tif")" ] \
  && pass "2 ranks: same labels ($(checksum "$W/two.tif")), same geotransform and size; $(grep -o 'per rank: [0-9 ]*' "$W/two.log")" \
  || fail "2-rank mosaic differs from one process"
ls "$W/run2/telemetry/rank-0.jsonl" "$W/run2/telemetry/rank-1.jsonl" >/dev/null 2>&1 \
  && pass "telemetry for both inference ranks" || fail "telemetry files missing: $(ls "$W/run2/telemetry" 2>&1)"

echo "== SIGKILL during sample-parallel inference, then rerun"
big=(infer --model unet-tiny --init random --seed 3 --classes 4 --input "$S/scene.tif" --tile 32 --no-progress)
"$T" "${big[@]}" --output "$W/ref32.tif" >/dev/null || fail "single-process infer --tile 32"
"${MPI[@]}" -np 2 "$T" "${big[@]}" --output "$W/killed.tif" --run-dir "$W/runk" >/dev/null 2>&1 &
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
"${MPI[@]}" -np 2 "$T" "${big[@]}" --output "$W/killed.tif" --run-dir "$W/runk" > "$W/resume.log" 2>&1 || fail "rerun: $(tail -3 "$W/resume.log")"
kept=$(grep -o '[0-9]* kept' "$W/resume.log" | grep -o '[0-9]*')
[ "$(checksum "$W/killed.tif")" = "$(checksum "$W/ref32.tif")" ] && [ "${kept:-0}" -ge 1 ] \
  && pass "rerun kept $kept finished tiles, mosaic identical to an uninterrupted run" \
  || fail "resumed mosaic differs or nothing kept (kept ${kept:-?}): $(tail -2 "$W/resume.log")"

# Starts `mpirun ARGS…` in the background (stdout and stderr to $W/NAME.out, .err) and waits
# for it to end. The clock starts when MARK appears on its stderr (empty: at launch); a job
# still running LIMIT seconds later is killed and reported as hung. Sets rc and took.
run_job() {
  local name=$1 mark=$2 limit=$3 job t0
  shift 3
  "${MPI[@]}" "$@" > "$W/$name.out" 2> "$W/$name.err" &
  job=$!
  t0=$(date +%s)
  if [ -n "$mark" ]; then
    while kill -0 "$job" 2>/dev/null && ! grep -q "$mark" "$W/$name.err" && [ $(( $(date +%s) - t0 )) -lt 180 ]; do
      sleep 0.2
    done
    t0=$(date +%s)
  fi
  while kill -0 "$job" 2>/dev/null && [ $(( $(date +%s) - t0 )) -le "$limit" ]; do sleep 0.2; done
  took=$(( $(date +%s) - t0 ))
  if kill -0 "$job" 2>/dev/null; then
    kill -9 "$job" $(pgrep -P "$job") 2>/dev/null; wait "$job" 2>/dev/null
    rc=hung
  else
    wait "$job"; rc=$?
  fi
}
echo "== data-parallel train through the CLI equals one process"
cat > "$W/train.yaml" <<YAML
run_dir: run
model: {preset: unet-tiny, classes: 4, base_filters: 4}
data:
  pairs: [{image: s/scene.tif, labels: s/scene_labels.tif}]
train: {tile: 32, batch: 2, steps: 3, seed: 1, checkpoint_every: 2, optimizer: sgd, learning_rate: 0.01}
YAML
"${MPI[@]}" -np 2 "$T" train --config "$W/train.yaml" --no-progress > "$W/train.log" 2>&1 || fail "mpirun -np 2 train: $(tail -3 "$W/train.log")"
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
"$T" train --config "$W/train.yaml" --run-dir "$W/one" --batch 4 --no-progress > "$W/one.log" 2>&1 \
  || fail "one process, batch 4: $(tail -3 "$W/one.log")"
cmp=$(same_losses "$W/one" "$W/run") && pass "2 ranks × batch 2 = one process × batch 4: $cmp" \
  || fail "2-rank losses differ from one process with the global batch: $cmp"

echo "== a 2-rank checkpoint resumes on 4 ranks (replicated state), as one process would"
"${MPI[@]}" -np 4 "$T" train --config "$W/train.yaml" --steps 5 --resume auto --no-progress > "$W/resume4.log" 2>&1 \
  || fail "resume on 4 ranks: $(tail -3 "$W/resume4.log")"
steps=$(/usr/bin/python3 -c 'import json,sys; print(",".join(str(json.loads(l)["step"]) for l in open(sys.argv[1]) if "loss" in l))' "$W/run/metrics.jsonl")
[ "$steps" = "1,2,3,4,5" ] && grep -q '"global_batch":8' "$W/run/metrics.jsonl" && grep -q "resumed from step 3 " "$W/resume4.log" \
  && pass "resumed from step 3 on 4 ranks (global batch 8), steps $steps" || fail "steps after resume: $steps"
"$T" train --config "$W/train.yaml" --run-dir "$W/one" --batch 8 --steps 5 --resume auto --no-progress > "$W/one5.log" 2>&1 \
  || fail "one process resumed with batch 8: $(tail -3 "$W/one5.log")"
cmp=$(same_losses "$W/one" "$W/run") && pass "resumed on 4 ranks = one process resumed with batch 8: $cmp" \
  || fail "losses after the 4-rank resume differ from one process: $cmp"

echo "== a failing rank ends the job with its rank named"
"${MPI[@]}" -np 2 "$T" train --config "$W/missing.yaml" > /dev/null 2> "$W/err.txt"; rc=$?
[ $rc -ne 0 ] && grep -q "tessera: error: rank [01]: .*missing.yaml" "$W/err.txt" \
  && pass "exit $rc: $(grep -m1 'tessera: error' "$W/err.txt")" || fail "exit $rc: $(head -3 "$W/err.txt")"

sed -e 's/steps: 3/steps: 100000/' -e 's/^run_dir: run$/run_dir: run-long/' "$W/train.yaml" > "$W/long.yaml"

echo "== a rank that stops answering: the others end the job within the timeout + 30 s, naming it"
run_job hang "stops answering" 50 -np 4 -x TESSERA_TEST_HANG=rank=1,step=3 -x TESSERA_COLLECTIVE_TIMEOUT=20 \
  "$T" train --config "$W/long.yaml" --run-dir "$W/runh" --no-progress
msg=$(grep -m1 'tessera: error' "$W/hang.err")
if [ "$rc" = hung ]; then
  fail "job still running 50 s after rank 1 stopped answering (TESSERA_COLLECTIVE_TIMEOUT=20): $(tail -3 "$W/hang.err")"
elif [ "$rc" -ne 0 ] && [ "$took" -ge 15 ] &&
     grep -q "tessera: error: rank [023]: mpi [a-z_]* timed out after 20 s waiting for rank 1 " "$W/hang.err"; then
  pass "exit $rc ${took} s after rank 1 stopped: $msg"
else
  fail "exit $rc ${took} s after the hang: ${msg:-$(tail -3 "$W/hang.err")}"
fi

echo "== a rank that throws in a pipeline step ends the job at once"
cat > "$W/pp.yaml" <<YAML
model: {preset: unet-tiny, classes: 4, base_filters: 4, norm: group}
data:
  pairs: [{image: s/scene.tif, labels: s/scene_labels.tif}]
train: {tile: 32, batch: 2, steps: 100000, seed: 1, optimizer: sgd, loss: {kind: focal}}
YAML
run_job ppthrow "" 100 -np 2 -x TESSERA_TEST_THROW=rank=1,step=2 -x TESSERA_COLLECTIVE_TIMEOUT=200 \
  "$T" train --config "$W/pp.yaml" --pp 2 --run-dir "$W/runp" --no-progress
msg=$(grep -m1 'tessera: error' "$W/ppthrow.err")
[ "$rc" != hung ] && [ "$rc" -ne 0 ] && grep -q "tessera: error: rank 1: injected failure in training step 2" "$W/ppthrow.err" &&
  ! grep -q "timed out" "$W/ppthrow.err" \
  && pass "exit $rc within ${took} s of launch (timeout 200 s): $msg" \
  || fail "--pp 2, rank 1 threw in step 2: exit $rc after ${took} s: ${msg:-$(tail -3 "$W/ppthrow.err")}"

echo "== a rank that throws in sample-parallel inference ends the job at once"
run_job infthrow "" 100 -np 2 -x TESSERA_TEST_THROW=rank=1,tile=2 -x TESSERA_COLLECTIVE_TIMEOUT=200 \
  "$T" "${big[@]}" --output "$W/thrown.tif" --run-dir "$W/runt"
msg=$(grep -m1 'tessera: error' "$W/infthrow.err")
[ "$rc" != hung ] && [ "$rc" -ne 0 ] && grep -q "tessera: error: rank 1: injected failure in tile 2" "$W/infthrow.err" &&
  ! grep -q "timed out" "$W/infthrow.err" && [ ! -e "$W/thrown.tif" ] \
  && pass "exit $rc within ${took} s of launch (timeout 200 s), no output file: $msg" \
  || fail "infer, rank 1 threw at its tile 2: exit $rc after ${took} s: ${msg:-$(tail -3 "$W/infthrow.err")}"

echo "== killing one rank of a 4-rank training ends the job within 60 s"
start=$(date +%s)
"${MPI[@]}" -np 4 -x TESSERA_COLLECTIVE_TIMEOUT=200 "$T" train --config "$W/long.yaml" --run-dir "$W/run4" --no-progress \
  > /dev/null 2> "$W/err4.txt" &
job=$!
for _ in $(seq 1 1200); do [ -s "$W/run4/metrics.jsonl" ] && break; sleep 0.05; done
victim=$(pgrep -P "$job" | sed -n 3p)
victim_rank=$(tr '\0' '\n' < "/proc/$victim/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
kill -9 "$victim" 2>/dev/null
for _ in $(seq 1 1200); do kill -0 "$job" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$job" 2>/dev/null; then
  kill -9 "$job" $(pgrep -P "$job") 2>/dev/null; fail "job still running 60 s after a rank was killed"
else
  wait "$job"; rc=$?; took=$(( $(date +%s) - start ))
  # mpirun ends the job itself (long before the 200 s timeout) and names the rank.
  [ $rc -ne 0 ] && [ -n "$victim_rank" ] && grep -q "rank $victim_rank " "$W/err4.txt" \
    && pass "exit $rc within ${took} s of start, rank $victim_rank named: $(grep -m1 "rank $victim_rank " "$W/err4.txt" | head -c 160)" \
    || fail "exit $rc, killed rank ${victim_rank:-?}: $(head -5 "$W/err4.txt")"
fi

finish
