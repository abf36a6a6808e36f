#!/usr/bin/env bash
# voxseg convert vs dcm2niix, side by side in one run (results go to docs/perf-io.md).
#
#   bench/convert_bench.sh [--slices 500] [--runs 3] [--threads N]
#
# Cases: a generated 512x512xSLICES uncompressed CT series (voxseg synth, DCMTK writer) and the
# compressed dcm_qa_frag series (JPEG lossless 5001, JPEG 2000 6001) from ../shared/data.
# Each tool writes .nii (uncompressed) and .nii.gz; every combination runs RUNS times under
# /usr/bin/time -v; the table shows the median wall time and the median peak RSS, and peak RSS
# relative to the output volume's voxel bytes. A failed run is reported with its exit status and
# the tool's last message line. Needs: build/app/voxseg (scripts/build.sh), dcm2niix, GNU time.
set -euo pipefail
cd "$(dirname "$0")/.."
slices=500
runs=3
threads=0
while [ $# -gt 0 ]; do
  case "$1" in
    --slices) slices="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
voxseg="${VOXSEG:-build/app/voxseg}"
data="${VOXSEG_SHARED_DATA:-../shared/data}"
[ -x "$voxseg" ] || { echo "build voxseg first (scripts/build.sh)" >&2; exit 2; }
command -v dcm2niix >/dev/null || { echo "dcm2niix not installed (apt-get install dcm2niix)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "GNU time not installed (apt-get install time)" >&2; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/voxseg-convert-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT

echo "# convert benchmark, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "host: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "voxseg: $("$voxseg" --version), dcm2niix: $(dcm2niix -v 2>&1 | grep -o 'v1[0-9.]*' | head -1)"
echo

# Cases: name|input folder|voxel bytes of the output volume
cases=()
"$voxseg" synth "$work/ct" --quiet --size "512x512x$slices" --spacing 0.7x0.7x1.0
cases+=("synthetic CT 512x512x$slices (uncompressed DICOM)|$work/ct|$((512 * 512 * slices * 2))")
if [ -d "$data/dcm_qa_frag/In" ]; then
  for s in 5001 6001; do
    d="$(ls -d "$data"/dcm_qa_frag/In/${s}_* | head -1)"
    codec=$([ $s = 5001 ] && echo "JPEG lossless" || echo "JPEG 2000")
    cases+=("dcm_qa_frag $s 128x128x96 ($codec, fragmented)|$d|$((128 * 128 * 96 * 2))")
  done
else
  echo "note: $data/dcm_qa_frag absent: compressed cases skipped"
fi

# run_one TOOL EXT INPUT -> prints "wall_s rss_kb exit_status durable_s|last message"
# durable_s = wall + the `sync` that follows: voxseg fsyncs its output before renaming it into
# place (inside its wall time), dcm2niix leaves dirty pages; without the sync the next run pays
# for the previous one's write-back.
run_one() {
  local tool="$1" ext="$2" in="$3" out="$work/out" tf="$work/time.txt" log="$work/log.txt"
  rm -rf "$out"; mkdir -p "$out"
  sync
  set +e
  if [ "$tool" = voxseg ]; then
    /usr/bin/time -v -o "$tf" "$voxseg" convert --quiet --threads "$threads" "$in" -o "$out/v$ext" >"$log" 2>&1
  else
    local z=n; [ "$ext" = .nii.gz ] && z=y
    /usr/bin/time -v -o "$tf" dcm2niix -z "$z" -f v -o "$out" "$in" >"$log" 2>&1
  fi
  local rc=$?
  local s0 s1
  s0=$(date +%s.%N); sync; s1=$(date +%s.%N)
  set -e
  # dcm2niix exits 0 after "Unable to decode" style failures: no output file is a failure too.
  if [ $rc -eq 0 ] && ! ls "$out"/v*"$ext" >/dev/null 2>&1; then rc=99; fi
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,a,":"); s=0; for(i=1;i<=n;i++) s=s*60+a[i]; print s}' "$tf")
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tf")
  local msg=""
  [ $rc -ne 0 ] && msg="$(grep -v '^\s*$' "$log" | grep -iE 'error|unable|unsupported|not' | tail -1 | cut -c1-90)"
  echo "$wall $rss $rc $(awk -v w="$wall" -v a="$s0" -v b="$s1" 'BEGIN {print w + b - a}')|$msg"
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "| case | tool | output | median wall (s) | median wall + sync to disk (s) | median peak RSS (MB) | RSS / output voxels | runs ok |"
echo "|---|---|---|---:|---:|---:|---:|---|"
notes=()
for c in "${cases[@]}"; do
  IFS='|' read -r name in bytes <<<"$c"
  for ext in .nii .nii.gz; do
    for tool in voxseg dcm2niix; do
      walls=(); durs=(); rsss=(); ok=0; last=""
      for ((r = 0; r < runs; r++)); do
        IFS='|' read -r res msg <<<"$(run_one "$tool" "$ext" "$in")"
        read -r w m rc d <<<"$res"
        walls+=("$w"); durs+=("$d"); rsss+=("$m")
        if [ "$rc" -eq 0 ]; then ok=$((ok + 1)); else last="exit $rc: $msg"; fi
      done
      mw=$(printf '%s\n' "${walls[@]}" | median)
      md=$(printf '%s\n' "${durs[@]}" | median)
      mr=$(printf '%s\n' "${rsss[@]}" | median)
      ratio=$(awk -v r="$mr" -v b="$bytes" 'BEGIN {printf "%.2fx", r * 1024 / b}')
      status="$ok/$runs"
      [ -n "$last" ] && { status="$status (failed)"; notes+=("$name, $tool $ext: $last"); }
      printf '| %s | %s | %s | %.2f | %.2f | %.0f | %s | %s |\n' "$name" "$tool" "$ext" "$mw" "$md" \
        "$(awk -v r="$mr" 'BEGIN {print r / 1024}')" "$ratio" "$status"
    done
  done
done
if [ ${#notes[@]} -gt 0 ]; then
  echo
  echo "failures:"
  for n in "${notes[@]}"; do echo "- $n"; done
fi
