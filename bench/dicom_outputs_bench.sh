#!/usr/bin/env bash
# DICOM outputs of `voxseg segment` on the 512x512x300 CT (issue 16, results in
# docs/perf-segment.md): the outputs stage with the DICOM SEG alone against SEG + RTSTRUCT
# (labels mapped onto the acquired images, then both written side by side), runs interleaved so
# both see the same machine. Also the Label Map SEG. Seconds from run.json's timings_s.outputs.
#
#   bench/dicom_outputs_bench.sh [--runs 3] [--threads N]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=3
threads=0
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
voxseg="${VOXSEG:-build/app/voxseg}"
model=sample_data/models/ct-phantom
[ -x "$voxseg" ] || { echo "build voxseg first (scripts/build.sh)" >&2; exit 2; }
work="$(mktemp -d "${TMPDIR:-/tmp}/voxseg-dicom-outputs-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
echo "# DICOM outputs benchmark, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "host: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); voxseg $("$voxseg" --version); threads $threads"
"$voxseg" phantom "$work/ct" --quiet --seed 512 --size 512x512x300 --spacing 0.75x0.75x1.0 --outputs dicom
outputs_s() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['timings_s']['outputs'])" "$1/run.json"; }
declare -A sums
variants=("seg|seg|" "seg,rtstruct|seg,rtstruct|" "labelmap seg|seg|--seg-type labelmap"
          "rtstruct|rtstruct|")
printf '| run |'; for v in "${variants[@]}"; do printf ' %s |' "${v%%|*}"; done; echo
printf '|---:|'; for v in "${variants[@]}"; do printf -- '---:|'; done; echo
for r in $(seq 1 "$runs"); do
  printf '| %d |' "$r"
  for v in "${variants[@]}"; do
    IFS='|' read -r name outputs extra <<<"$v"
    out="$work/out"
    rm -rf "$out"
    # shellcheck disable=SC2086
    "$voxseg" segment "$work/ct" -m "$model" -o "$out" --quiet --threads "$threads" \
      --outputs "$outputs" $extra >/dev/null
    s=$(outputs_s "$out")
    printf ' %.2f |' "$s"
    sums[$name]+="$s "
  done
  echo
done
printf '| median |'
for v in "${variants[@]}"; do
  name="${v%%|*}"
  # shellcheck disable=SC2086
  printf ' %s |' "$(python3 -c "import statistics,sys; print('%.2f' % statistics.median(map(float, sys.argv[1:])))" ${sums[$name]})"
done
echo
