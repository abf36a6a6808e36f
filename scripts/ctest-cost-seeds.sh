#!/usr/bin/env bash
# ctest starts tests in decreasing order of their cost (seconds, from Testing/Temporary/
# CTestCostData.txt of earlier runs). A fresh CI build has no such file and starts tests in
# declaration order, so a 250 s test that happens to come last runs alone on one of the two cores
# at the end. The seed files tests/ctest-costs-release.txt and tests/ctest-costs-asan.txt hold the
# costs of the tests that took 2 s or more here; scripts/test.sh and scripts/test-asan.sh install
# them into a build that has no cost data yet.
# Usage: scripts/ctest-cost-seeds.sh install <build-dir> <seed-file>
#        scripts/ctest-cost-seeds.sh write <build-dir> > <seed-file>    (after a full run)
set -euo pipefail
mode="$1" build="$2"
data="$build/Testing/Temporary/CTestCostData.txt"
case "$mode" in
  install)
    if [[ ! -s "$data" && -s "$3" ]]; then
      mkdir -p "$(dirname "$data")"
      { cat "$3"; echo ---; } > "$data"
    fi ;;
  write)
    # name runs cost; only lines before the "---" that starts the list of failed tests.
    awk '$0 == "---" {exit} NF == 3 && $3 >= 2 {printf "%s 1 %.1f\n", $1, $3}' "$data" | sort -k3,3nr ;;
  *) echo "usage: $0 install|write <build-dir> [seed-file]" >&2; exit 2 ;;
esac
