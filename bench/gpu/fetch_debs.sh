#!/usr/bin/env bash
# Run HERE (Debian 12 build host, with internet): fills the git-ignored .debs/ folder that travels
# to the GPU machine (carry: [".debs"]) with the Debian 12 packages the engine-only build needs
# (oneDNN, protobuf/ONNX, fmt, nlohmann-json, GoogleTest, OpenCL loader for oneDNN's CMake
# config) and the cuDNN headers (the GPU machine may have cuDNN only as PyTorch's pip package,
# possibly without headers). About 14 MiB.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$root/.debs/pkgs" "$root/.debs/cudnn-include"
cd "$root/.debs/pkgs"
apt-get download \
  libdnnl-dev libdnnl2 ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-c-headers opencl-clhpp-headers \
  libprotobuf-dev libprotobuf32 libprotobuf-lite32 protobuf-compiler libprotoc32 zlib1g-dev \
  libonnx-dev libonnx1 libonnxifi libfmt-dev libfmt9 nlohmann-json3-dev \
  libgtest-dev libgmock-dev googletest
cp /usr/local/cuda/include/cudnn*.h "$root/.debs/cudnn-include/"
du -sh "$root/.debs"
