#!/usr/bin/env bash
# Installs the Debian 12 packages voxseg needs, only those missing (needs root or sudo).
# VOXSEG_HEADLESS=1 skips Qt and X (batch servers).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config ccache git
      libinsighttoolkit5-dev libfftw3-dev libdcmtk-dev libdnnl-dev ocl-icd-opencl-dev
      nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev zlib1g-dev libdeflate-dev
      libopenjp2-7-dev libssl-dev libsodium-dev libgtest-dev libgmock-dev libbenchmark-dev libonnx-dev libprotobuf-dev
      protobuf-compiler dcmtk dcm2niix dicom3tools libgdcm-tools clang libclang-rt-14-dev
      plastimatch)
# The clang build of scripts/test-fuzz.sh (build-fuzz): LLVM's OpenMP runtime (clang's
# -fopenmp) and llvm-symbolizer (file and line numbers in sanitizer and libFuzzer reports).
pkgs+=(libomp-14-dev llvm-14)
# Slurm + munge for tests/batch/slurm_array_test.sh (label slow), which starts its own one-node
# cluster; the packages' services are not enabled or started by voxseg.
pkgs+=(slurmctld slurmd slurm-client munge)
# voxseg serve (node/): libcurl for STOW-RS, cpp-httplib for /healthz and /metrics; Orthanc and
# its DICOMweb plugin are the PACS of tests/node (started by the tests on loopback ports; the
# packages' services are not used), jq reads its REST answers.
pkgs+=(libcurl4-openssl-dev libcpp-httplib-dev orthanc orthanc-dicomweb jq)
# The exporter tests (tests/tools): Debian's PyTorch 1.13 and ONNX 1.12 (torchvision for timm),
# nibabel, pip for the pure-Python pins below.
pkgs+=(python3-pip python3-torch python3-onnx python3-torchvision python3-nibabel python3-yaml)
if [ "${VOXSEG_HEADLESS:-0}" != 1 ]; then
  pkgs+=(qt6-base-dev libqt6opengl6-dev xvfb xauth libgl1-mesa-dri)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y --no-install-recommends "${missing[@]}"
fi
# highdicom reads voxseg's DICOM SEGs back in tests/io/highdicom_check.py (best effort: without
# it, or without a reachable package index, those cross-checks say so and skip).
if ! python3 -c "import highdicom" 2>/dev/null; then
  python3 -m pip install --quiet --timeout 30 --retries 1 highdicom ||
    echo "highdicom not installed: SEG cross-check tests will skip"
fi
# Pure-Python packages of the exporter tests (tests/tools, tools/tests), pinned, without their
# dependencies (those come from Debian above), into build/pylib where the tests look
# (VOXSEG_PYLIB to put them elsewhere). Best effort: without a reachable package index the
# tests report themselves skipped, naming the missing modules.
pylib="${VOXSEG_PYLIB:-$(cd "$(dirname "$0")/.." && pwd)/build/pylib}"
pins=(monai==1.4.0 dynamic-network-architectures==0.4.4 timm==1.0.22 einops==0.8.1)
if [ "$(cat "$pylib/.pins" 2>/dev/null)" != "${pins[*]}" ]; then
  mkdir -p "$pylib"
  if python3 -m pip install --quiet --disable-pip-version-check --timeout 30 --retries 1 \
       --no-deps --upgrade --target "$pylib" "${pins[@]}"; then
    echo "${pins[*]}" > "$pylib/.pins"
  else
    echo "exporter test packages not installed into $pylib (package index unreachable?): tests/tools will skip"
  fi
fi
