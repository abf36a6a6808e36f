#!/usr/bin/env bash
# `voxseg batch` vs N separate `voxseg segment` runs, same model, same cases, one run each
# (results go to docs/perf-batch.md).
#
#   bench/batch_bench.sh [--cases N] [--threads T] [--scenario hippocampus|ct|phantom|nnunet|nnunet-ct|both]
#
# hippocampus: the first N MSD hippocampus crops (../shared/data/msd-hippocampus-cropped, T1 MR,
#   about 36x50x35 voxels) with the hippocampus model package: sample_data/models/hippocampus, or
#   the folder in $HIPPOCAMPUS_MODEL.
# ct: N generated CT DICOM series (voxseg synth, 96x96x48, different seeds) with the golden
#   PlainConvUNet of the tests (tests/engine/golden/nnunet_plain.onnx) packaged on the fly.
# phantom: N CT phantom studies (voxseg phantom, DICOM, 256x256x150, different seeds) with the
#   CT demo model sample_data/models/ct-phantom: the realistic CT case.
# nnunet: the hippocampus crops with a trained nnU-Net v2 model folder ($NNUNET_MODEL_FOLDER,
#   fold 0, e.g. from tools/nnunet_parity.py train), exported by tools/export_nnunet.py without
#   mirroring: nnU-Net's own folder prediction (nnUNetv2_predict_from_modelfolder, CPU,
#   --disable_tta, torch threads = T) vs the separate runs vs the batch, same network.
# nnunet-ct: the same three on N CT phantom studies (NIfTI) with an nnU-Net model trained on
#   phantoms by tools/nnunet_ct_phantom.py ($NNUNET_MODEL_FOLDER).
# Extra options for the batch only (e.g. BATCH_ARGS="--devices cpu,cpu": two inference workers
# splitting the threads) come from $BATCH_ARGS.
# Both commands run on the CPU backend with --threads T and outputs nifti,stats. Reported:
# wall time, cases/min, speed-up, peak RSS of each process (GNU time), and for the batch the
# resident and peak memory after the first and the last case (summary.json). The batch's label
# maps are compared byte for byte with the separate runs'. Needs build/app/voxseg, GNU time.
set -euo pipefail
cd "$(dirname "$0")/.."
cases=20
threads=1
scenario=both
while [ $# -gt 0 ]; do
  case "$1" in
    --cases) cases="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --scenario) scenario="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
voxseg="$(readlink -f "${VOXSEG:-build/app/voxseg}")"
data="${VOXSEG_SHARED_DATA:-../shared/data}"
[ -x "$voxseg" ] || { echo "build voxseg first (scripts/build.sh)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "GNU time not installed (apt-get install time)" >&2; exit 2; }
work="$(mktemp -d "${TMPDIR:-/tmp}/voxseg-batch-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT

echo "# batch benchmark, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "host: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); voxseg $("$voxseg" --version | cut -d' ' -f2); $cases cases, --threads $threads${BATCH_ARGS:+; batch also gets: $BATCH_ARGS}"
common=(--device cpu --threads "$threads" --outputs nifti,stats --quiet)

# run_one NAME MODEL MANIFEST(csv with case_id,input)
run_one() {
  local name=$1 model=$2 manifest=$3 n
  n=$(($(wc -l <"$manifest") - 1))
  echo
  echo "## $name: $n cases, model $(basename "$model") ($(du -sh "$model" | cut -f1))"
  # N separate processes, one model load each.
  local t0 t1 sep_rss=0
  t0=$(date +%s.%N)
  while IFS=, read -r id input; do
    [ "$id" = case_id ] && continue
    /usr/bin/time -f "%M" -o "$work/time.txt" \
      "$voxseg" segment "$input" -m "$model" -o "$work/$name-separate/$id" "${common[@]}"
    sep_rss=$(( $(cat "$work/time.txt") > sep_rss ? $(cat "$work/time.txt") : sep_rss ))
  done <"$manifest"
  t1=$(date +%s.%N)
  local sep_s; sep_s=$(echo "$t1 - $t0" | bc -l)
  # One batch process.
  t0=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$work/time.txt" \
    "$voxseg" batch "$manifest" -m "$model" -o "$work/$name-batch" "${common[@]}" ${BATCH_ARGS:-}
  t1=$(date +%s.%N)
  local batch_s batch_rss; batch_s=$(echo "$t1 - $t0" | bc -l); batch_rss=$(cat "$work/time.txt")
  local same=0 differ=0
  while IFS=, read -r id input; do
    [ "$id" = case_id ] && continue
    if cmp -s "$work/$name-separate/$id/segmentation.nii.gz" "$work/$name-batch/$id/segmentation.nii.gz"; then
      same=$((same + 1)); else differ=$((differ + 1)); fi
  done <"$manifest"
  python3 - "$work/$name-batch/.voxseg-batch/summary-0-of-1.json" "$n" "$sep_s" "$batch_s" \
    "$sep_rss" "$batch_rss" "$same" "$differ" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
n, sep, bat = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
sep_rss, bat_rss, same, differ = (int(x) for x in sys.argv[5:9])
done = [c for c in s["cases"] if c["state"] == "done"]
assert s["counts"]["done"] == n, s["counts"]
print("| | wall s | cases/min | peak RSS MiB |")
print("|---|---:|---:|---:|")
print(f"| {n} x `voxseg segment` | {sep:.1f} | {n * 60 / sep:.1f} | {sep_rss / 1024:.0f} (largest process) |")
print(f"| `voxseg batch` | {bat:.1f} | {n * 60 / bat:.1f} | {bat_rss / 1024:.0f} |")
print(f"\nspeed-up: {sep / bat:.2f}x; model load in the batch {s['model_load_seconds']:.2f} s; "
      f"label maps identical to the separate runs: {same} of {same + differ}")
first, last = done[0], done[-1]
print(f"batch memory after the first case: RSS {first['rss_mb']:.0f} MiB (peak {first['max_rss_mb']:.0f}); "
      f"after the last: RSS {last['rss_mb']:.0f} MiB (peak {last['max_rss_mb']:.0f})")
st = s["stage_seconds_total"]
print("batch stage seconds (summed over cases): " +
      ", ".join(f"{k} {v:.1f}" for k, v in sorted(st.items(), key=lambda kv: -kv[1])))
PY
}

if [ "$scenario" = hippocampus ] || [ "$scenario" = both ]; then
  model="${HIPPOCAMPUS_MODEL:-sample_data/models/hippocampus}"
  images="$data/msd-hippocampus-cropped/images"
  if [ -f "$model/model.json" ] && [ -d "$images" ]; then
    echo "case_id,input" >"$work/hippo.csv"
    ls "$images" | grep '\.nii\.gz$' | sort | head -n "$cases" | while read -r f; do
      echo "${f%.nii.gz},$(readlink -f "$images/$f")" >>"$work/hippo.csv"
    done
    run_one hippocampus "$(readlink -f "$model")" "$work/hippo.csv"
  else
    echo; echo "## hippocampus: skipped (no model package at $model or no $images)"
  fi
fi

if [ "$scenario" = ct ] || [ "$scenario" = both ]; then
  mkdir -p "$work/ctmodel"
  cp tests/engine/golden/nnunet_plain.onnx "$work/ctmodel/model.onnx"
  sha=$(sha256sum "$work/ctmodel/model.onnx" | cut -d' ' -f1)
  cat >"$work/ctmodel/model.json" <<JSON
{"name": "tiny-ct", "version": "0.1", "license": "MIT", "description": "golden PlainConvUNet",
 "channels": [{"modality": "CT", "normalization": {"scheme": "ct", "clip": [-1000, 1000], "mean": 0, "std": 300}}],
 "spacing_mm": [2.0, 2.0, 2.0], "patch_size": [16, 24, 20], "axis_order": "zyx", "orientation": "native",
 "labels": [{"value": 1, "name": "one", "color": [255, 0, 0]}, {"value": 2, "name": "two", "color": [0, 255, 0]}],
 "output": "softmax", "inference": {"overlap": 0.5, "gaussian_sigma_scale": 0.125, "mirror_axes": []},
 "sha256": "$sha"}
JSON
  echo "case_id,input" >"$work/ct.csv"
  for i in $(seq 1 "$cases"); do
    "$voxseg" synth "$work/ct/s$i" --size 96x96x48 --spacing 1.5x1.5x3.0 --seed "$i" --quiet
    echo "ct-$i,$work/ct/s$i" >>"$work/ct.csv"
  done
  run_one ct "$work/ctmodel" "$work/ct.csv"
fi

if [ "$scenario" = phantom ]; then
  echo "case_id,input" >"$work/phantom.csv"
  for i in $(seq 1 "$cases"); do
    "$voxseg" phantom "$work/phantom/p$i" --seed "$((900000 + i))" --outputs dicom --quiet
    echo "phantom-$i,$work/phantom/p$i/dicom" >>"$work/phantom.csv"
  done
  run_one phantom "$(readlink -f sample_data/models/ct-phantom)" "$work/phantom.csv"
fi

# nnunet_vs NAME MANIFEST: exports $NNUNET_MODEL_FOLDER (fold 0, no mirroring), then nnU-Net's own
# folder prediction, the separate runs and the batch over the manifest's NIfTI inputs.
nnunet_vs() {
  local name=$1 manifest=$2
  local folder="${NNUNET_MODEL_FOLDER:?set NNUNET_MODEL_FOLDER to a trained nnU-Net v2 model folder}"
  python3 tools/export_nnunet.py "$folder" -o "$work/nnupkg" --folds 0 --no-mirroring --force \
    >"$work/export.log" 2>&1 || { cat "$work/export.log"; exit 1; }
  rm -rf "$work/nnu_in" "$work/nnu_out"
  mkdir -p "$work/nnu_in"
  while IFS=, read -r id input; do
    [ "$id" = case_id ] && continue
    ln -s "$input" "$work/nnu_in/${id}_0000.nii.gz"
  done <"$manifest"
  echo
  echo "## $name: nnU-Net's folder prediction, same network (fold 0, no mirroring)"
  local t0 t1 nnu_s
  t0=$(date +%s.%N)
  OMP_NUM_THREADS=$threads /usr/bin/time -f "%M" -o "$work/time.txt" \
    nnUNetv2_predict_from_modelfolder -i "$work/nnu_in" -o "$work/nnu_out" -m "$folder" -f 0 \
    --disable_tta -device cpu -npp 1 -nps 1 >"$work/nnu.log" 2>&1 || { tail "$work/nnu.log"; exit 1; }
  t1=$(date +%s.%N)
  nnu_s=$(echo "$t1 - $t0" | bc -l)
  printf "nnUNetv2_predict_from_modelfolder: %.1f s, %.1f cases/min, peak RSS %.0f MiB\n" \
    "$nnu_s" "$(echo "$cases * 60 / $nnu_s" | bc -l)" "$(echo "$(cat "$work/time.txt") / 1024" | bc -l)"
  run_one "$name" "$work/nnupkg" "$manifest"
}

if [ "$scenario" = nnunet ]; then
  images="$data/msd-hippocampus-cropped/images"
  echo "case_id,input" >"$work/nnu.csv"
  ls "$images" | grep '\.nii\.gz$' | sort | head -n "$cases" | while read -r f; do
    echo "${f%.nii.gz},$(readlink -f "$images/$f")" >>"$work/nnu.csv"
  done
  nnunet_vs nnunet "$work/nnu.csv"
fi

if [ "$scenario" = nnunet-ct ]; then
  # CT phantom studies (256x256x150 at 1.5x1.5x2 mm, NIfTI in HU: nnU-Net reads no DICOM) with
  # the nnU-Net model of tools/nnunet_ct_phantom.py.
  echo "case_id,input" >"$work/nnuct.csv"
  for i in $(seq 1 "$cases"); do
    "$voxseg" phantom "$work/phantom/p$i" --seed "$((900000 + i))" --outputs image --quiet
    echo "phantom-$i,$work/phantom/p$i/image.nii.gz" >>"$work/nnuct.csv"
  done
  nnunet_vs nnunet-ct "$work/nnuct.csv"
fi
