#!/usr/bin/env bash
# Configures build-fuzz, the one sanitizer build of CI: clang, RelWithDebInfo (-O2, line tables),
# -DVOXSEG_FUZZ=ON (AddressSanitizer + UBSan + libFuzzer's coverage in every library; only the
# fuzz targets link libFuzzer's main), the viewer included, CUDA off. scripts/test-asan.sh runs
# the whole test suite in it, scripts/test-fuzz.sh the fuzz targets; both call this first.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG" \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG" \
  -DVOXSEG_FUZZ=ON -DVOXSEG_WITH_CUDA=OFF -DVOXSEG_WITH_QT=ON >/dev/null
