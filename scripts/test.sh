#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (README command 2; .ci/run calls this).
# Tests labelled "data" use ../shared/data and skip when it is absent; "gpu" tests skip without
# a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's wall time, printed at the end, also when a step fails (CI keeps this output of a
# failed run: where its time went).
step_times=()
mark=$SECONDS
step_done() { step_times+=("$1 $((SECONDS - mark)) s"); mark=$SECONDS; }
trap 'echo "scripts/test.sh step times: ${step_times[*]:-none}; total $SECONDS s"' EXIT
scripts/deps.sh
step_done deps
scripts/build.sh
step_done build
# Test binaries run side by side (-j): OpenMP threads that spin while they wait would steal the
# cores the other tests need (voxseg and voxseg-viewer set this themselves, core/openmp_wait.h).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
# Longest tests first also in a fresh build (scripts/ctest-cost-seeds.sh).
scripts/ctest-cost-seeds.sh install build tests/ctest-costs-release.txt
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900 "$@"
step_done tests

# The sanitizer configuration: everything built again with clang + AddressSanitizer + UBSan in
# build-fuzz and the test suite run there, but for the tests of tests/sanitizer-heavy.txt (40 s
# or more sanitized; VOXSEG_ASAN_SCOPE=all runs those too) and label noasan
# (scripts/test-asan.sh, docs/sanitizers.md). Skip with VOXSEG_SKIP_ASAN=1.
if [[ "${VOXSEG_SKIP_ASAN:-0}" != 1 ]]; then
  scripts/test-asan.sh
  step_done "sanitized build and tests"
fi

# Every parser fuzzed: the libFuzzer targets of tests/fuzz, from the same build-fuzz (built
# already unless VOXSEG_SKIP_ASAN=1), run FUZZ_SECONDS (20) each, two at a time
# (scripts/test-fuzz.sh; a crash fails and prints the reproducer). Skip with VOXSEG_SKIP_FUZZ=1.
if [[ "${VOXSEG_SKIP_FUZZ:-0}" != 1 ]]; then
  scripts/test-fuzz.sh
  step_done fuzz
fi
