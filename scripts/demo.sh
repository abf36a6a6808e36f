#!/usr/bin/env bash
# README command 1: installs what is missing, builds, and runs the main job on sample data:
# writes a synthetic CT-like DICOM series, lists it with `voxseg info` and converts it with
# `voxseg convert`. VOXSEG_DEMO_DIR overrides the output folder (default sample_data/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh

voxseg=build/app/voxseg
out="${VOXSEG_DEMO_DIR:-sample_data}"
series="$out/ct_series"
rm -rf "$series"
mkdir -p "$out"

echo
echo "== writing a synthetic CT series (256x256x120, 0.7x0.7x1.25 mm) to $series"
"$voxseg" synth "$series" --size 256x256x120 --spacing 0.7x0.7x1.25

echo
echo "== voxseg info $series"
"$voxseg" info "$series"

echo
echo "== voxseg convert $series -o $out/ct.nii.gz"
"$voxseg" convert "$series" -o "$out/ct.nii.gz"

echo
echo "done: DICOM series in $series, volume in $out/ct.nii.gz"
echo "try:  $voxseg info $out/ct.nii.gz     or     $voxseg --help"
