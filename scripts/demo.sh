#!/usr/bin/env bash
# README command 1: installs what is missing, builds, and runs the main job on sample data:
# writes a synthetic CT study (`voxseg phantom`: a DICOM series with its ground truth, no real
# patient), lists it with `voxseg info`, segments it with the demo model in
# sample_data/models/ct-phantom (`voxseg segment`: label map, DICOM SEG, statistics, preview,
# run record) and prints the statistics. Then the real case: a real MR T1 head series from
# ../shared/data (Siemens XA30 enhanced DICOM, 3D T1) -> brain mask, total intracranial volume and preview with the
# brain-extraction package (deepbet 1.0.2's networks; skipped with a message when the data is
# absent), and a real CT from TotalSegmentator's tests -> liver and liver lesions with
# pyliverlesionseg 0.3's two networks (sample_data/models/liver; skipped when absent). VOXSEG_DEMO_DIR overrides the output folder (default sample_data/), VOXSEG_DEMO_SEED
# the phantom's seed, VOXSEG_SHARED_DATA the data folder.
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

# The real case: brain extraction of a real T1-weighted MR series (docs/brain-extraction.md).
data="${VOXSEG_SHARED_DATA:-../shared/data}"
t1="$data/dcm_qa_xa30/5_anat-T1w_acq-tfl"
brain="$out/brain_extraction"
echo
if [ ! -d "$t1" ]; then
  echo "== real cases skipped: $t1 not found (set VOXSEG_SHARED_DATA to the shared data folder)"
  exit 0
fi
rm -rf "$brain"
echo "== voxseg segment $t1 -m sample_data/models/brain-extraction -o $brain   (real head, Siemens 3D T1)"
"$voxseg" segment "$t1" -m sample_data/models/brain-extraction -o "$brain" \
  --outputs nifti,seg,stats,preview
tiv=$(sed -n 's/.*"tiv_ml": \([0-9.]*\).*/\1/p' "$brain/run.json" | head -n 1)
printf '\ntotal intracranial volume (TIV): %.1f mL   (deepbet 1.0.2 on the same series: 1573.0 mL)\n' "$tiv"
echo "brain mask, DICOM SEG, statistics and preview in $brain:"
ls "$brain"
echo "open $brain/preview.png"

# The real CT case: the liver, then lesions inside it, on TotalSegmentator's own test CT
# (docs/liver-model.md; its 30-slice version: the lesion stage tiles the liver at 1 x 1 x 3 mm,
# about 2 minutes on 2 cores).
ct="$data/totalsegmentator-tests/example_ct_sm.nii.gz"
liver="$out/liver"
echo
if [ ! -f "$ct" ]; then
  echo "== real CT case skipped: $ct not found"
  exit 0
fi
rm -rf "$liver"
echo "== voxseg segment $ct -m sample_data/models/liver -o $liver   (real CT, abdomen)"
"$voxseg" segment "$ct" -m sample_data/models/liver -o "$liver" --outputs nifti,stats,preview
ml=$(python3 -c "import json,sys; print(', '.join('%s %s mL' % (l['name'], l['volume_ml']) \
  for l in json.load(open(sys.argv[1]))['labels']))" "$liver/statistics.json" 2>/dev/null || echo "?")
echo "$ml (liver Dice against TotalSegmentator's liver on this CT: 0.97)"
echo "open $liver/preview.png"
