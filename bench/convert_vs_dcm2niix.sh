#!/usr/bin/env bash
# `voxseg convert` vs dcm2niix on a warm cache, interleaved run by run (results: docs/perf-io.md).
#
#   bench/convert_vs_dcm2niix.sh [--slices 300] [--runs 11] [--series DIR] [--ext .nii|.nii.gz]
#                                [--other NAME=BINARY]...
#
# Unlike convert_bench.sh (which syncs before and after every run and reports peak memory), this
# measures what a user sees when converting one series after another on a warm page cache: no
# `sync` between runs, each run writes a fresh output file into an emptied folder, and the tools
# alternate (voxseg, dcm2niix, voxseg, ...) so load from other processes and the write-back of
# earlier outputs fall on every tool alike. One untimed warm-up round reads the series into the
# page cache. Reports each tool's median wall time and CPU time (user + system, all threads: the
# steadier figure on a shared machine) and their ratios to dcm2niix's medians.
# --other adds more voxseg binaries to the rotation (e.g. a baseline build: old=/tmp/voxseg.old).
# dcm2niix compresses .nii.gz with pigz when it finds one on PATH (-z y), with its internal
# single-threaded deflate otherwise; the header line says which.
set -euo pipefail
cd "$(dirname "$0")/.."
slices=300
runs=11
series=""
exts=(.nii .nii.gz)
others=()
while [ $# -gt 0 ]; do
  case "$1" in
    --slices) slices="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --series) series="$2"; shift 2 ;;
    --ext) exts=("$2"); shift 2 ;;
    --other) others+=("$2"); shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
voxseg="${VOXSEG:-build/app/voxseg}"
[ -x "$voxseg" ] || { echo "build voxseg first (scripts/build.sh)" >&2; exit 2; }
command -v dcm2niix >/dev/null || { echo "dcm2niix not installed (scripts/deps.sh)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "GNU time not installed (apt-get install time)" >&2; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/voxseg-vs-dcm2niix.XXXXXX")"
trap 'rm -rf "$work"' EXIT
if [ -z "$series" ]; then
  series="$work/ct"
  "$voxseg" synth "$series" --quiet --size "512x512x$slices" --spacing 0.7x0.7x1.0
fi

tools=("voxseg=$voxseg" "${others[@]}" "dcm2niix=dcm2niix")
pigz_note="internal deflate (no pigz on PATH)"
command -v pigz >/dev/null && pigz_note="pigz $(pigz --version 2>&1 | awk '{print $2}')"
echo "# convert vs dcm2niix, warm cache, no sync, interleaved; $(date -u +%Y-%m-%dT%H:%MZ)"
echo "host: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "series: $series ($(find "$series" -type f | wc -l) files, $(du -sh "$series" | cut -f1))"
echo "voxseg: $("$voxseg" --version); dcm2niix $(dcm2niix -v 2>&1 | grep -o 'v1[0-9.]*' | head -1), .nii.gz via $pigz_note"

# run TOOL_BINARY EXT OUTDIR -> "wall_s cpu_s" on stdout (cpu = user + system, all threads)
run() {
  local bin="$1" ext="$2" out="$3" t0 t1
  rm -rf "$out"; mkdir -p "$out"
  t0=$(date +%s.%N)
  if [ "$bin" = dcm2niix ]; then
    local z=n; [ "$ext" = .nii.gz ] && z=y
    /usr/bin/time -f "%U %S" -o "$work/cpu" dcm2niix -z "$z" -f v -o "$out" "$series" >"$work/log" 2>&1
  else
    /usr/bin/time -f "%U %S" -o "$work/cpu" "$bin" convert --quiet "$series" -o "$out/v$ext" >"$work/log" 2>&1
  fi
  t1=$(date +%s.%N)
  ls "$out"/v*"$ext" >/dev/null 2>&1 || { echo "no output from $bin:" >&2; cat "$work/log" >&2; exit 1; }
  awk -v a="$t0" -v b="$t1" '{printf "%.3f %.2f\n", b - a, $1 + $2}' "$work/cpu"
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

for ext in "${exts[@]}"; do
  for t in "${tools[@]}"; do run "${t#*=}" "$ext" "$work/out" >/dev/null; done  # warm-up
  declare -A times=() cpus=()
  for ((r = 0; r < runs; r++)); do
    for t in "${tools[@]}"; do
      read -r w c <<<"$(run "${t#*=}" "$ext" "$work/out")"
      times[${t%%=*}]+="$w "; cpus[${t%%=*}]+="$c "
    done
  done
  ref=$(printf '%s\n' ${times[dcm2niix]} | median)
  ref_cpu=$(printf '%s\n' ${cpus[dcm2niix]} | median)
  echo
  echo "| output | tool | median wall (s) | vs dcm2niix | median CPU (s) | CPU vs dcm2niix | runs, wall (s) |"
  echo "|---|---|---:|---:|---:|---:|---|"
  for t in "${tools[@]}"; do
    n=${t%%=*}
    m=$(printf '%s\n' ${times[$n]} | median)
    mc=$(printf '%s\n' ${cpus[$n]} | median)
    printf '| %s | %s | %.3f | %.2fx | %.2f | %.2fx | %s|\n' "$ext" "$n" "$m" \
      "$(awk -v a="$m" -v b="$ref" 'BEGIN {print a / b}')" "$mc" \
      "$(awk -v a="$mc" -v b="$ref_cpu" 'BEGIN {print (b > 0 ? a / b : 0)}')" "${times[$n]}"
  done
  unset times cpus
done
