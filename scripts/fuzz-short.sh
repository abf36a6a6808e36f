#!/usr/bin/env bash
# Short libFuzzer run of the DICOM header + pixel reader (ctest fuzz_dicom_pixels_short).
# Usage: scripts/fuzz-short.sh <fuzz_dicom_pixels binary> [shared data dir] [extra libFuzzer args]
# Seeds: files up to 64 KiB from pydicom-test-files and pydicom-data, copied to a temporary
# folder (the data folder is never written). Exits 77 (skip) when the data is absent.
# Longer runs: FUZZ_SECONDS=600 scripts/fuzz-short.sh build-fuzz/tests/io/fuzz_dicom_pixels
set -euo pipefail
fuzzer="$1"
data="${2:-${VOXSEG_SHARED_DATA:-$(dirname "$0")/../../shared/data}}"
shift $(( $# >= 2 ? 2 : 1 ))
if [[ -n "${VOXSEG_SHARED_DATA:-}" ]]; then data="$VOXSEG_SHARED_DATA"; fi
if [[ ! -d "$data/pydicom-test-files" ]]; then
  echo "test data absent: $data/pydicom-test-files (set VOXSEG_SHARED_DATA)"; exit 77
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/seeds" "$work/artifacts"
find "$data/pydicom-test-files" "$data/pydicom-data" -type f -size -64k \
  ! -name 'LICENSE*' ! -name 'README*' ! -name '*.txt' -exec cp -t "$work/seeds" --backup=numbered {} +
echo "seeds: $(ls "$work/seeds" | wc -l) files"
# -malloc_limit_mb above 4 GiB: DCMTK allocates an element's declared 32-bit length (nothrow new)
# before reading it and frees it when the read hits the end of the file; that transient,
# untouched allocation is not a leak or overflow. -rss_limit_mb still catches real memory growth.
set +e
ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1}" \
UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}" \
"$fuzzer" -runs="${FUZZ_RUNS:-20000}" -max_total_time="${FUZZ_SECONDS:-20}" -max_len=65536 \
  -rss_limit_mb=2048 -malloc_limit_mb=4200 -timeout=10 -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
  "$@" "$work/corpus" "$work/seeds" 2>&1 | grep -vE '^(#[0-9]+|INFO:)' | tail -40
status=${PIPESTATUS[0]}
set -e
if ls "$work/artifacts/"* >/dev/null 2>&1; then
  mkdir -p /tmp/voxseg-fuzz-artifacts && cp "$work/artifacts/"* /tmp/voxseg-fuzz-artifacts/
  echo "crash inputs copied to /tmp/voxseg-fuzz-artifacts"
fi
exit "$status"
