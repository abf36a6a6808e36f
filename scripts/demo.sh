#!/usr/bin/env bash
# README command 1: installs what is missing, builds, and runs the main job on sample data.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
