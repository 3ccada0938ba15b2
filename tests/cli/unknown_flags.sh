#!/usr/bin/env bash
# Every command refuses a flag it does not have in one line that names the flag and the
# closest one it has, exits non-zero and writes nothing — before a required option is missed
# or an input is read.
# Usage: unknown_flags.sh TESSERA
set -uo pipefail
T="$1"
W="$(mktemp -d /tmp/tessera-unknown-flags.XXXXXX)"
trap 'rm -rf "$W"' EXIT
failures=0; checks=0
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL $*"; }

# check "ARGS" TYPO SUGGESTION
check() {
  local args="$1" typo="$2" near="$3"
  (cd "$W" && $T $args "--$typo" 1 > out.txt 2> err.txt); local rc=$?
  local lines; lines=$(wc -l < "$W/err.txt")
  if [ "$rc" -ne 0 ] && [ "$lines" -eq 1 ] && grep -q -- "unknown flag --$typo (did you mean --$near?)" "$W/err.txt" &&
     [ -z "$(ls -A "$W" | grep -v -e out.txt -e err.txt)" ]; then
    pass "tessera $args --$typo: $(cat "$W/err.txt")"
  else
    fail "tessera $args --$typo: exit $rc, $lines lines: $(head -3 "$W/err.txt" | tr '\n' ' ')"
  fi
}
check "infer --input in.tif --output out.tif" tilee tile
check "train --config c.yaml" learning-rat learning-rate
check "eval --pred p.tif --truth t.tif" hd96 hd95
check "info" jsn json
check "plan --model unet-tiny --image 512x512" devics devices
check "simulate" cluser cluster
check "export --checkpoint c.pt" outt out
check "bench infer" sizee size
check "bench pipeline" micr micro
echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
