#!/usr/bin/env bash
# The sanitizer configuration of CI (scripts/test.sh): the whole test suite, the viewer and every
# test that runs the voxseg or voxseg-viewer binary included, built with clang + AddressSanitizer
# + UBSan in build-fuzz (scripts/configure-sanitizers.sh; the same build gives the fuzz targets
# that scripts/test-fuzz.sh runs next) and run there. Left out: label fuzz (scripts/test-fuzz.sh),
# gpu (no device in CI), noasan (what cannot run under ASan or takes it past its timeout) and, in
# CI's scope, the tests of tests/sanitizer-heavy.txt (40 s or more sanitized: docs/sanitizers.md).
# Any sanitizer report fails, also one from a child process whose exit status a test ignores:
# reports go to files (log_path), printed at the end.
# Usage: scripts/test-asan.sh [extra ctest args, e.g. -R Dicom]
#   VOXSEG_ASAN_SCOPE=ci (default, what CI runs): everything built, every test run but those of
#     tests/sanitizer-heavy.txt; =all: those too (the whole suite; about 20 more minutes on two
#     cores); =io: only the io tests (tests/io: every reader and writer, the DICOM tables with
#     pydicom's malformed files, SEG/RTSTRUCT, bombs) and the fuzzers' regression inputs.
#   VOXSEG_ASAN_TARGETS="a b"  builds only those targets (scopes ci and all; default: all); with
#     -R runs a part.
#   VOXSEG_ASAN_BUILD=0        configures and builds nothing: runs the tests of what is built.
#   JOBS (build) and CTEST_JOBS (tests) default to the number of cores.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
scope="${VOXSEG_ASAN_SCOPE:-ci}"
io_targets=$(sed -n 's/^voxseg_add_test(\([a-z_0-9]*\).*/\1/p' tests/io/CMakeLists.txt | tr '\n' ' ')
case "$scope" in
  io) targets="$io_targets fuzz_regressions_test" ;;
  ci | all) targets="${VOXSEG_ASAN_TARGETS:-all}" ;;
  *) echo "VOXSEG_ASAN_SCOPE must be ci, all or io, not '$scope'" >&2; exit 2 ;;
esac
if [[ "${VOXSEG_ASAN_BUILD:-1}" != 0 ]]; then
  scripts/configure-sanitizers.sh
  # shellcheck disable=SC2086
  nice -n 5 cmake --build build-fuzz -j"${JOBS:-$(nproc)}" --target $targets
  echo "scripts/test-asan.sh: sanitized build $SECONDS s"
fi

reports="$(mktemp -d /tmp/voxseg-sanitizer-reports.XXXXXX)"
# allocator_may_return_null: malloc and nothrow new that cannot be met return null as glibc's do
# (DCMTK allocates a damaged element's declared length so). A throwing new that cannot be met
# still ends the process under ASan instead of throwing std::bad_alloc.
asan_default=detect_leaks=1:halt_on_error=1:allocator_may_return_null=1:check_initialization_order=1
export ASAN_OPTIONS="${ASAN_OPTIONS:-$asan_default}:log_path=$reports/asan"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:suppressions=$root/tests/fuzz/ubsan.supp}:log_path=$reports/ubsan"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$root/tests/fuzz/lsan.supp:print_suppressions=0}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
status=0
# Longest tests first also in a fresh build (scripts/ctest-cost-seeds.sh).
scripts/ctest-cost-seeds.sh install build-fuzz tests/ctest-costs-asan.txt
run_ctest() {
  ctest --test-dir "$1" -LE '^(fuzz|gpu|noasan)$' --output-on-failure -j"${CTEST_JOBS:-$(nproc)}" \
    --timeout 1800 "${@:2}" || status=$?
}
if [[ "$scope" == io ]]; then
  run_ctest build-fuzz/tests/io "$@"
  run_ctest build-fuzz/tests/security -R '^FuzzRegressions[.]' "$@"
elif [[ "$scope" == ci ]]; then
  # tests/sanitizer-heavy.txt: one regular expression per line, '#' starts a comment.
  heavy=$(sed 's/#.*//; s/[[:space:]]*$//; /^$/d' tests/sanitizer-heavy.txt | paste -sd '|')
  # (a parameterised gtest is named with its "  # GetParam() = ..." suffix)
  run_ctest build-fuzz -E "^($heavy)( +# GetParam.*)?\$" "$@"
else
  run_ctest build-fuzz "$@"
fi
shopt -s nullglob
found=("$reports"/*)
if ((${#found[@]} > 0)); then
  echo "SANITIZER REPORTS (${#found[@]}; the pid is in the file name):"
  for f in "${found[@]}"; do
    echo "== $f"
    head -c 20000 "$f"
  done
  status=1
fi
rm -rf "$reports"
exit "$status"
