#!/usr/bin/env bash
# The clang sanitizer configuration of CI (scripts/test.sh): builds build-fuzz with clang,
# -DVOXSEG_FUZZ=ON (libFuzzer coverage + AddressSanitizer + UBSan in every library) and runs
# every libFuzzer target of tests/fuzz for FUZZ_SECONDS (default 20) each, two at a time
# (ctest label "fuzz"). A crash, leak or sanitizer report fails, printing the reproducer
# (scripts/fuzz.sh). Usage: scripts/test-fuzz.sh [extra ctest args]; VOXSEG_FUZZ_OPEN="" runs
# the targets with open findings too.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG" \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG" \
  -DVOXSEG_FUZZ=ON -DVOXSEG_WITH_CUDA=OFF -DVOXSEG_WITH_QT=OFF >/dev/null
nice -n 5 cmake --build build-fuzz -j"${JOBS:-$(nproc)}" --target fuzzers
# Targets with an open finding (its input in tests/fuzz/open-findings/<target>, docs/security.md)
# are left out until it is fixed, so that CI fails on new crashes, not on known ones.
open_findings="${VOXSEG_FUZZ_OPEN-fuzz_image_mha|fuzz_onnx_import}"
exclude=()
[[ -n "$open_findings" ]] && exclude=(-E "^(${open_findings})_short\$")
ctest --test-dir build-fuzz -L fuzz "${exclude[@]}" -j"${FUZZ_JOBS:-2}" --output-on-failure "$@"
