#!/usr/bin/env bash
# AddressSanitizer + UBSan configuration of CI for the io tests (malformed DICOM must fail cleanly,
# never corrupt memory). Builds into build-asan and runs every test under tests/io, including the
# table test over every file of pydicom-test-files/pydicom-data (label data; skips without data).
# Usage: scripts/test-asan.sh [extra ctest args]
#   VOXSEG_ASAN_TARGETS="a b" builds and runs only those io test executables (default: every
#   io test through ctest);
#   scripts/test.sh (CI) runs the malformed-file tables this way.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVOXSEG_SANITIZE=ON \
  -DVOXSEG_WITH_CUDA=OFF -DVOXSEG_WITH_QT=OFF >/dev/null
# shellcheck disable=SC2086
nice -n 5 cmake --build build-asan -j"${JOBS:-2}" --target ${VOXSEG_ASAN_TARGETS:-tests/io/all}
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
if [[ -n "${VOXSEG_ASAN_TARGETS:-}" ]]; then
  for t in ${VOXSEG_ASAN_TARGETS}; do
    echo "== $t under AddressSanitizer + UBSan"
    "build-asan/tests/io/$t" --gtest_brief=1 "$@"
  done
else
  ctest --test-dir build-asan/tests/io --output-on-failure --timeout 900 "$@"
fi
