#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (README command 2; .ci/run calls this).
# Tests labelled "data" use ../shared/data and skip when it is absent; "gpu" tests skip without
# a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
# Test binaries run side by side (-j): OpenMP threads that spin while they wait would steal the
# cores the other tests need (voxseg and voxseg-viewer set this themselves, core/openmp_wait.h).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900 "$@"

# The AddressSanitizer + UBSan configuration: every file of the DICOM tables (malformed ones
# from pydicom-test-files included) decoded under the sanitizers. Skip with VOXSEG_SKIP_ASAN=1.
if [[ "${VOXSEG_SKIP_ASAN:-0}" != 1 ]]; then
  VOXSEG_ASAN_TARGETS="dicom_pixels_table_test test_dicom_series_data" scripts/test-asan.sh
fi

# Every parser fuzzed: the libFuzzer targets of tests/fuzz, built with clang + ASan + UBSan in
# build-fuzz and run FUZZ_SECONDS (20) each, two at a time (scripts/test-fuzz.sh; a crash fails
# and prints the reproducer). Skip with VOXSEG_SKIP_FUZZ=1.
if [[ "${VOXSEG_SKIP_FUZZ:-0}" != 1 ]]; then
  scripts/test-fuzz.sh
fi
