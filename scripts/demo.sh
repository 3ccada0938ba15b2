#!/usr/bin/env bash
# Set-up, build, then the main job on sample_data/: train a small U-Net on the sample scene,
# infer the whole scene tiled, write a georeferenced label GeoTIFF and an overlay PNG,
# evaluate on the held-back quarter; then the same for the CT volume (NIfTI out).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
tessera_setup
tessera_build --target tessera tessera-make-sample
tessera_sample_data
T="$BUILD_DIR/cli/tessera"
RUNS="$TESSERA_ROOT/runs"
mkdir -p "$RUNS"

echo
echo "== scene: train (sample_data/scene.yaml)"
"$T" train --config "$TESSERA_ROOT/sample_data/scene.yaml" --run-dir "$RUNS/scene"
echo "== scene: infer the whole scene, tiled"
"$T" infer --checkpoint "$RUNS/scene/checkpoints/last.pt" --input "$SAMPLE_DIR/scene.tif" \
  --output "$RUNS/scene/labels.tif" --tile 512 --overlay "$RUNS/scene/overlay.png"
echo "== scene: Dice per class on the held-back quarter (x >= 75%)"
"$T" eval --pred "$RUNS/scene/labels.tif" --truth "$SAMPLE_DIR/scene_labels.tif" \
  --holdout-fraction 0.25 --names vegetation,building,road,water | tee "$RUNS/scene/eval.txt"

echo
echo "== CT: train (sample_data/ct.yaml)"
"$T" train --config "$TESSERA_ROOT/sample_data/ct.yaml" --run-dir "$RUNS/ct"
echo "== CT: infer the whole volume (NIfTI in, NIfTI out)"
"$T" infer --checkpoint "$RUNS/ct/checkpoints/last.pt" --input "$SAMPLE_DIR/ct.nii.gz" \
  --output "$RUNS/ct/labels.nii.gz" --tile 64 --overlay "$RUNS/ct/overlay.png"
echo "== CT: the same from the DICOM series"
"$T" infer --checkpoint "$RUNS/ct/checkpoints/last.pt" --input "$SAMPLE_DIR/ct_dicom" \
  --output "$RUNS/ct/labels_from_dicom.nii.gz" --tile 64 --no-progress
echo "== CT: Dice per organ on the held-back slices (z >= 75%)"
"$T" eval --pred "$RUNS/ct/labels.nii.gz" --truth "$SAMPLE_DIR/ct_labels.nii.gz" \
  --holdout-fraction 0.25 --names background,liver,kidney | tee "$RUNS/ct/eval.txt"

echo
echo "Outputs:"
echo "  $RUNS/scene/labels.tif     label GeoTIFF (CRS and geotransform of the scene, class names)"
echo "  $RUNS/scene/labels.qml     its QGIS style; labels.tif.aux.xml: attribute table; labels.stac.json: STAC item"
echo "  $RUNS/scene/overlay.png    scene with labels blended"
echo "  $RUNS/ct/labels.nii.gz     label volume (spacing, origin, direction of the CT)"
echo "  $RUNS/ct/overlay.png       middle axial slice with labels"
echo "  $RUNS/*/metrics.jsonl      training curves; checkpoints in $RUNS/*/checkpoints/"
