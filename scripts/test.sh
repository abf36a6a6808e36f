#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (README command 2; .ci/run calls this).
# Tests labelled "data" use ../shared/data and skip when it is absent; "gpu" tests skip without
# a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900 "$@"
