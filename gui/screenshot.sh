#!/usr/bin/env bash
# Renders tessera-view offscreen and saves PNG screenshots for the README.
#   gui/screenshot.sh [BUILD_DIR] [OUT_DIR] [DATA_DIR] [RUN_DIR]
# BUILD_DIR defaults to ./build, OUT_DIR to gui/screenshots, DATA_DIR to
# sample_data/generated (make it with tessera-make-sample). Without RUN_DIR the devices
# shot uses a small synthetic telemetry directory (4 ranks, rank 3 stale) written here.
# Writes viewer-scene.png (scene + label overlay), viewer-scene-outline.png, viewer-ct.png
# (three linked views) and viewer-devices.png (devices panel with a run).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=${2:-$root/gui/screenshots}
data=${3:-$root/sample_data/generated}
run=${4:-}
view=$build/gui/tessera-view
[[ -x $view ]] || { echo "screenshot.sh: $view not built (cmake --build $build --target tessera-view)" >&2; exit 1; }
[[ -f $data/scene.tif ]] || { echo "screenshot.sh: $data/scene.tif missing (run tessera-make-sample --out $data)" >&2; exit 1; }
mkdir -p "$out"
export QT_QPA_PLATFORM=${QT_QPA_PLATFORM:-offscreen}

if [[ -z $run ]]; then
  run=$(mktemp -d)
  trap 'rm -rf "$run"' EXIT
  mkdir -p "$run/telemetry"
  python3 - "$run/telemetry" <<'PY'
import json, math, sys, time
now = time.time()
for rank in range(4):
    with open(f"{sys.argv[1]}/rank-{rank}.jsonl", "w") as f:
        end = now - (120 if rank == 3 else 0)   # rank 3 stopped reporting two minutes ago
        for i in range(60):
            t = end - (59 - i) * 1.5
            util = 60 + 30 * math.sin(i / 6 + rank) if rank != 3 else 20
            f.write(json.dumps({"time": t, "rank": rank, "host": f"node{rank // 2}", "device": f"cuda:{rank % 2}",
                                "mem_used_bytes": int((9 + rank + 2 * math.sin(i / 9)) * 2**30),
                                "mem_total_bytes": 16 * 2**30, "util_pct": round(util, 1),
                                "phase": "infer", "step": 200 + i, "tiles_done": 40 * i + rank}) + "\n")
PY
fi

"$view" "$data/scene.tif" --labels "$data/scene_labels.tif" --screenshot "$out/viewer-scene.png"
"$view" "$data/scene.tif" --labels "$data/scene_labels.tif" --outline --opacity 0.9 --screenshot "$out/viewer-scene-outline.png"
if [[ -f $data/ct.nii.gz ]]; then
  labels=()
  if [[ -f $data/ct_labels.nii.gz ]]; then
    # The sample's organ names (sample_data/README.md) as an ITK-SNAP label description file.
    table=$(mktemp --suffix=.txt)
    printf '%s\n' '# ITK-SNAP Label Description File' \
      '    1   229   57   53        1  1  1    "liver"' \
      '    2   255  235   59        1  1  1    "kidney"' > "$table"
    labels=(--labels "$data/ct_labels.nii.gz" --colors "$table")
  fi
  "$view" "$data/ct.nii.gz" "${labels[@]}" --screenshot "$out/viewer-ct.png"
  if [[ -n ${table:-} ]]; then rm -f "$table"; fi
fi
"$view" "$data/scene.tif" --labels "$data/scene_labels.tif" --run "$run" --devices-height 300 --screenshot "$out/viewer-devices.png"
ls -l "$out"/viewer-*.png
