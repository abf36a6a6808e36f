#!/usr/bin/env bash
# Runs one libFuzzer target of tests/fuzz for a fixed time (CI: the fuzz_<name>_short ctests,
# through scripts/test.sh; campaigns: longer FUZZ_SECONDS and a kept FUZZ_CORPUS).
# Usage: scripts/fuzz.sh <target name> <fuzzer binary> [extra libFuzzer args]
#   FUZZ_SECONDS   run time (default 20)
#   FUZZ_SEED      libFuzzer's random seed (default 1: a CI run mutates the same way every time,
#                  so it fails on what a change broke rather than on luck; campaigns: 0 = random)
#   FUZZ_CORPUS    corpus folder to grow and keep (default: a temporary folder)
#   FUZZ_ARTIFACTS where crash inputs are kept (default /tmp/voxseg-fuzz-artifacts/<target>)
#   VOXSEG_SHARED_DATA  the public test data (default ../shared/data)
#   VOXSEG_SOURCE_DIR   the repository (default: this script's parent folder)
# Seeds: tests/fuzz/seeds/<target> (text formats), tests/fuzz/regressions/<target> (every input
# that once crashed, re-run each time), files of the repository (ONNX, model.json) and of
# ../shared/data per target, copied to a temporary folder (the data folder is never written;
# without it the run goes on with the other seeds and says so). Seeds the target generates at
# start-up (SEG, RTSTRUCT, images written by voxseg) go there too (VOXSEG_FUZZ_SEED_DIR).
# A crash, leak, sanitizer report or timeout fails the run (exit 1) and prints the
# reproducer's path and its bytes (base64; hex of the first 4 KiB when it is large).
set -euo pipefail
name="$1"
fuzzer="$2"
shift 2
root="${VOXSEG_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
data="${VOXSEG_SHARED_DATA:-$root/../shared/data}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
seeds="$work/seeds"
corpus="${FUZZ_CORPUS:-$work/corpus}"
artifacts="${FUZZ_ARTIFACTS:-/tmp/voxseg-fuzz-artifacts/$name}"
mkdir -p "$seeds" "$corpus" "$work/artifacts"

# copy_seeds <max size (find -size)> <find arguments...>: copies matching files into $seeds.
copy_seeds() {
  local size="$1"
  shift
  find "$@" -type f -size "-$size" ! -name 'LICENSE*' ! -name 'README*' ! -name '*.txt' \
    ! -name '*.md' -exec cp -t "$seeds" --backup=numbered {} + 2>/dev/null || true
}
# data_seeds <max size> <paths under the data folder...> [-- find tests]
data_seeds() {
  local size="$1"
  shift
  local paths=() tests=()
  while (($#)) && [[ "$1" != -- ]]; do paths+=("$data/$1"); shift; done
  (($#)) && shift && tests=("$@")
  local present=()
  for p in "${paths[@]}"; do [[ -e "$p" ]] && present+=("$p"); done
  if ((${#present[@]} == 0)); then
    echo "note: test data absent ($data): $name runs without its data seeds"
    return
  fi
  copy_seeds "$size" "${present[@]}" "${tests[@]}"
}

max_len=65536
case "$name" in
  fuzz_dicom_header | fuzz_dicom_pixels | fuzz_node_instance)
    data_seeds 64k pydicom-test-files pydicom-data highdicom-test-files/ct_image.dcm ;;
  fuzz_dicomdir)
    data_seeds 64k pydicom-test-files/dicomdirtests -- -name 'DICOMDIR*' ;;
  fuzz_seg_reader)
    data_seeds 1024k highdicom-test-files dcmqi-data/segmentations -- -iname '*seg*.dcm'
    max_len=262144 ;;
  fuzz_rtstruct_reader)
    data_seeds 1024k pydicom-test-files/rtstruct.dcm dicompyler-core/rtss.dcm rt-utils/mock_data \
      -- -iname '*rt*.dcm'
    max_len=262144 ;;
  fuzz_image_nii) data_seeds 256k . -- -name '*.nii' ;;
  fuzz_image_nii_gz) data_seeds 64k . -- -name '*.nii.gz' ;;
  fuzz_image_nrrd) data_seeds 256k . -- -name '*.nrrd' ;;
  fuzz_image_mha) data_seeds 256k . -- \( -name '*.mha' -o -name '*.mhd' \) ;;
  fuzz_onnx_import)
    copy_seeds 256k "$root/tests/engine/golden" -name '*.onnx'
    max_len=262144 ;;
  fuzz_model_json)
    copy_seeds 64k "$root/sample_data/models" "$root/tests" -name 'model.json' ;;
esac
for d in "$root/tests/fuzz/seeds/$name" "$root/tests/fuzz/regressions/$name"; do
  [[ -d "$d" ]] && cp -t "$seeds" --backup=numbered "$d"/*
done
echo "$name: $(find "$seeds" -type f | wc -l) seed files, ${FUZZ_SECONDS:-20} s"

# -malloc_limit_mb above 4 GiB: DCMTK allocates an element's declared 32-bit length (nothrow new)
# before reading it and frees it when the read hits the end of the file; that transient,
# untouched allocation is not a leak or overflow. -rss_limit_mb still catches real growth.
set +e
VOXSEG_FUZZ_SEED_DIR="$seeds" \
ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}" \
LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$root/tests/fuzz/lsan.supp:print_suppressions=0}" \
UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}" \
"$fuzzer" -seed="${FUZZ_SEED:-1}" -max_total_time="${FUZZ_SECONDS:-20}" -max_len="$max_len" -rss_limit_mb=2048 \
  -malloc_limit_mb=4200 -timeout=10 -error_exitcode=1 -timeout_exitcode=1 \
  -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$@" "$corpus" "$seeds" \
  >"$work/log" 2>&1
status=$?
set -e
grep -vE '^(#[0-9]+|INFO:|MS:|.* # Uses: |\s+NEW_FUNC|###### )' "$work/log" | cut -c1-300 | tail -60
grep -E '^#[0-9]+' "$work/log" | tail -1
shopt -s nullglob
found=("$work"/artifacts/crash-* "$work"/artifacts/leak-* "$work"/artifacts/timeout-* \
  "$work"/artifacts/oom-*)
if ((status != 0)) || ((${#found[@]} > 0)); then
  echo "FUZZ FAILURE in $name (exit $status)"
  for f in "${found[@]}"; do
    mkdir -p "$artifacts" && cp "$f" "$artifacts/" && f="$artifacts/$(basename "$f")"
    echo "reproducer: $f ($(stat -c %s "$f") bytes); replay: $fuzzer $f"
    if (($(stat -c %s "$f") <= 65536)); then
      echo "base64:"; base64 -w 100 "$f"
    else
      echo "hex of the first 4096 bytes:"; head -c 4096 "$f" | od -A x -t x1z -v
    fi
  done
  exit 1
fi
