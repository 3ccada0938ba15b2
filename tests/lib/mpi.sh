# The preamble of the scripts that run `tessera` under mpirun (tests/cli/infer_spatial.sh,
# tests/parallel/spatial_train.sh, tests/parallel/mpi_cli.sh), each called as
# `SCRIPT TESSERA MAKE_SAMPLE MPIEXEC`. Sourced with a name for the scratch directory and the
# script's arguments:
#   source "$(dirname "$0")/../lib/mpi.sh" NAME "$@"
# Sets
#   T, GEN    the tessera and tessera-make-sample executables;
#   MPI       mpirun with what root on an oversubscribed CPU box needs: "${MPI[@]}" -np 2 "$T" …
#             (an array, not a function, so a job started with & is mpirun itself and can be
#             killed with its children);
#   W         a fresh /tmp/tessera-NAME.XXXXXX, removed on exit;
#   failures  the checks failed so far;
# and defines
#   pass, fail    one line per check ("ok   …", "FAIL …"), fail counts;
#   sample ARGS…  tessera-make-sample --out "$W/s" ARGS, ending the script when it fails;
#   finish        prints the count; as the script's last command it is its exit status;
#   same_losses RUN_A RUN_B [MIN_STEPS]   the per-step losses of two runs (RUN/metrics.jsonl)
#                 equal within 1e-5 relative over the same steps (at least MIN_STEPS, default
#                 1); prints the worst difference;
#   run NAME CONFIG RANKS FLAGS…   `tessera train --config $W/CONFIG.yaml` into $W/NAME on one
#                 process or RANKS under mpirun (--threads 1, no progress, log in $W/NAME.log);
#                 false, after a FAIL line naming the error, when it fails;
#   compare REFERENCE NAME WHAT    pass or fail on same_losses of $W/REFERENCE and $W/NAME.
set -uo pipefail
[ $# -eq 4 ] || { echo "usage: $(basename "$0") TESSERA MAKE_SAMPLE MPIEXEC" >&2; exit 2; }
T="$2"; GEN="$3"; MPI=("$4" --allow-run-as-root --oversubscribe)
W="$(mktemp -d "/tmp/tessera-$1.XXXXXX")"
trap 'rm -rf "$W"' EXIT
failures=0
pass() { echo "ok   $*"; }
fail() { failures=$((failures + 1)); echo "FAIL $*"; }
sample() { "$GEN" --out "$W/s" "$@" >/dev/null || { echo "FAIL generator"; exit 1; }; }
finish() { echo "== $failures failed"; [ "$failures" -eq 0 ]; }

same_losses() {
  /usr/bin/python3 - "$1" "$2" "${3:-1}" <<'PY'
import json, sys
def losses(run):
    return [(j["step"], j["loss"]) for j in map(json.loads, open(run + "/metrics.jsonl")) if "loss" in j]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
if len(a) < int(sys.argv[3]) or [s for s, _ in a] != [s for s, _ in b] or any(x is None for _, x in a + b):
    print(f"steps {[s for s, _ in a]} against {[s for s, _ in b]}"); sys.exit(1)
worst = max(abs(x - y) / abs(x) for (_, x), (_, y) in zip(a, b))
print(f"{len(a)} steps, losses {a[0][1]:.4f} … {a[-1][1]:.4f}, worst relative difference {worst:.1e}")
sys.exit(0 if worst <= 1e-5 else 1)
PY
}

run() {
  local name=$1 cfg=$2 ranks=$3
  shift 3
  local cmd=("$T" train --config "$W/$cfg.yaml" --threads 1 --no-progress --run-dir "$W/$name" "$@")
  if [ "$ranks" -eq 1 ]; then "${cmd[@]}" > "$W/$name.log" 2>&1; else "${MPI[@]}" -np "$ranks" "${cmd[@]}" > "$W/$name.log" 2>&1; fi ||
    { fail "$name: $(grep -m1 'tessera: error' "$W/$name.log" || tail -2 "$W/$name.log")"; return 1; }
}

compare() {
  local cmp
  cmp=$(same_losses "$W/$1" "$W/$2" 6) && pass "$3: $cmp" || fail "$3 differs from one process: $cmp"
}
