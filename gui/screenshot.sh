#!/usr/bin/env bash
# Renders tessera-view offscreen and saves PNG screenshots for the README.
#   gui/screenshot.sh [BUILD_DIR] [OUT_DIR] [DATA_DIR] [RUN_DIR]
# BUILD_DIR defaults to ./build, OUT_DIR to gui/screenshots, DATA_DIR to
# sample_data/generated (make it with tessera-make-sample). Without RUN_DIR the devices
# shot is of a real finished 2-rank run (`mpirun -np 2 tessera infer --run-dir`) made here.
# Writes viewer-scene.png (scene + label overlay), viewer-scene-outline.png, viewer-ct.png
# (three linked views, the label volume's names in the legend) and viewer-devices.png (the
# devices panel of that run: both ranks done, each with its own process memory and tiles).
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
  # A real finished run: `mpirun -np 2 tessera infer --run-dir` on the sample scene (a random
  # unet-tiny: the devices panel, not the labels, is the point of this shot).
  run=$(mktemp -d)
  trap 'rm -rf "$run"' EXIT
  tessera=$build/cli/tessera
  [[ -x $tessera ]] || { echo "screenshot.sh: $tessera not built (needed for the 2-rank run)" >&2; exit 1; }
  mpirun --allow-run-as-root --oversubscribe -np 2 "$tessera" infer --model unet-tiny --init random --seed 3 \
    --classes 4 --input "$data/scene.tif" --output "$run/labels.tif" --tile 128 --run-dir "$run" --no-progress \
    > "$run/infer.log" 2>&1 || { cat "$run/infer.log" >&2; exit 1; }
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
