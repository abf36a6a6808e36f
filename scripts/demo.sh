#!/usr/bin/env bash
# README command 1: installs what is missing, builds, and runs the main job on sample data:
# writes a synthetic CT study (`voxseg phantom`: a DICOM series with its ground truth, no real
# patient), lists it with `voxseg info`, segments it with the demo model in
# sample_data/models/ct-phantom (`voxseg segment`: label map, DICOM SEG, statistics, preview,
# run record) and prints the statistics. VOXSEG_DEMO_DIR overrides the output folder
# (default sample_data/), VOXSEG_DEMO_SEED the phantom's seed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh

voxseg=build/app/voxseg
model=sample_data/models/ct-phantom
out="${VOXSEG_DEMO_DIR:-sample_data}"
seed="${VOXSEG_DEMO_SEED:-2026}"
study="$out/ct_phantom"
result="$out/segmentation"
rm -rf "$study" "$result"
mkdir -p "$out"

echo
echo "== voxseg phantom $study --seed $seed   (synthetic CT, 256x256x150, 1.5x1.5x2 mm)"
"$voxseg" phantom "$study" --seed "$seed"

echo
echo "== voxseg info $study/dicom"
"$voxseg" info "$study/dicom"

echo
echo "== voxseg segment $study/dicom -m $model -o $result --outputs nifti,seg,stats,preview"
"$voxseg" segment "$study/dicom" -m "$model" -o "$result" --outputs nifti,seg,stats,preview

echo
echo "== statistics ($result/statistics.csv)"
awk -F, 'NR == 1 { printf "%-18s %10s %14s %28s\n", "structure", "volume mL", "mean HU (sd)", "centroid LPS mm"; next }
         { printf "%-18s %10.1f %8.0f (%3.0f) %10.1f %8.1f %8.1f\n", $2, $4, $5, $6, $15, $16, $17 }' \
  "$result/statistics.csv"

echo
echo "done: study in $study (DICOM + ground truth labels.nii.gz), results in $result:"
ls "$result"
echo "open $result/preview.png, or load $study/dicom with $result/segmentation.nii.gz in a viewer"
