# Sourced by CLI tests (not a test itself): train_scene_checkpoint SIDE STEPS makes a SIDE² sample
# scene in $W/s and trains a small unet-tiny on it for STEPS steps with the class names
# ${NAMES[0..3]}; sets CKPT to its last checkpoint. Needs T (tessera), GEN (tessera-make-sample), W.
train_scene_checkpoint() {
  local side=$1 steps=$2
  "$GEN" --out "$W/s" --size "$side" --only scene --targets 0 >/dev/null || { echo "FAIL generator"; exit 1; }
  cat > "$W/train.yaml" <<YAML
run_dir: $W/run
model: {preset: unet-tiny, base_filters: 4, classes: 4}
data:
  pairs: [{image: $W/s/scene.tif, labels: $W/s/scene_labels.tif}]
  class_names: [${NAMES[0]}, ${NAMES[1]}, ${NAMES[2]}, ${NAMES[3]}]
train: {tile: 64, batch: 1, steps: $steps, seed: 1}
YAML
  "$T" train --config "$W/train.yaml" --no-progress >/dev/null 2>"$W/train.err" \
    || { echo "FAIL train: $(head -3 "$W/train.err")"; exit 1; }
  CKPT="$W/run/checkpoints/last.pt"
}
