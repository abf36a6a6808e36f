#!/usr/bin/env bash
# voxseg segment end to end on the CPU: wall time and peak memory per stage (results go to
# docs/perf-segment.md).
#
#   bench/segment_bench.sh [--runs 1] [--threads N] [--model sample_data/models/ct-phantom]
#
# Cases: the demo phantom study (256x256x150, 1.5x1.5x2 mm) and a generated 512x512x300 CT
# (0.75x0.75x1 mm), both `voxseg phantom` DICOM series, segmented with the CT phantom model and
# every output (nifti, seg, stats, preview). Per run: /usr/bin/time -v gives wall time and the
# process's peak RSS; run.json gives each stage's seconds and the peak RSS (high-water mark) at
# the end of each stage. The budget checked is peak RSS <= 4 x the float32 input volume + the
# model files, as issue 4 asks; "after load" is the peak minus the RSS once the input and the
# model are loaded (libraries, the int16 input, the compiled model), as a multiple of the float32
# input: what the pipeline itself adds. Needs build/app/voxseg (scripts/build.sh) and GNU time.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=1
threads=0
model=sample_data/models/ct-phantom
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
voxseg="${VOXSEG:-build/app/voxseg}"
[ -x "$voxseg" ] || { echo "build voxseg first (scripts/build.sh)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "GNU time not installed (apt-get install time)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 needed to read run.json" >&2; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/voxseg-segment-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT

model_bytes=$(cat "$model"/*.onnx | wc -c)
echo "# segment benchmark, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "host: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "voxseg: $("$voxseg" --version), model: $model ($(python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print(m['name'], m['version'], 'patch', 'x'.join(map(str, m['patch_size'])), 'spacing', 'x'.join(map(str, m['spacing_mm'])))" "$model/model.json"), $((model_bytes / 1024)) KiB ONNX), threads: $threads (0 = all)"
echo

# case: name|size|spacing|seed
cases=("phantom study 256x256x150|256x256x150|1.5x1.5x2.0|2026"
       "CT 512x512x300|512x512x300|0.75x0.75x1.0|2027")
printf "| case | run | wall s | peak RSS MiB | budget MiB | met | after load MiB (x input) | load | preprocess | inference | export | postprocess | outputs | patches |\n"
printf "|---|---:|---:|---:|---:|---|---:|---|---|---|---|---|---|---:|\n"
for c in "${cases[@]}"; do
  IFS='|' read -r name size spacing seed <<<"$c"
  study="$work/study"
  rm -rf "$study"
  "$voxseg" phantom "$study" --quiet --seed "$seed" --size "$size" --spacing "$spacing" --outputs dicom
  IFS=x read -r nx ny nz <<<"$size"
  input_bytes=$((nx * ny * nz * 4))
  budget_mib=$(((4 * input_bytes + model_bytes) / 1048576))
  for r in $(seq 1 "$runs"); do
    out="$work/out"
    rm -rf "$out"
    /usr/bin/time -v -o "$work/time.txt" "$voxseg" segment "$study/dicom" -m "$model" -o "$out" \
      --outputs nifti,seg,stats,preview --threads "$threads" --quiet
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,t,":"); s=0; for(i=1;i<=n;i++) s=s*60+t[i]; printf "%.1f", s}' "$work/time.txt")
    rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time.txt")
    rss_mib=$((rss_kb / 1024))
    met=$([ "$rss_mib" -le "$budget_mib" ] && echo yes || echo NO)
    # Stage cells: "seconds s / peak MiB" from run.json.
    stages=$(python3 - "$out/run.json" "$rss_mib" "$input_bytes" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
t, p = r["timings_s"], r.get("peak_rss_mib", {})
added = int(sys.argv[2]) - p.get("before_run", 0)
cells = [f"{added:.0f} ({added / (int(sys.argv[3]) / 1048576):.1f}x)"]
cells.append(f"{t['input_load'] + t['model_load']:.1f} s / {p.get('before_run', 0):.0f}")
for s in ("preprocess", "inference", "export", "postprocess", "outputs"):
    cells.append(f"{t[s]:.1f} s / {p.get(s, 0):.0f}")
cells.append(str(r["inference"]["patches"]))
print(" | ".join(cells))
EOF
)
    printf "| %s | %d | %s | %d | %d | %s | %s |\n" "$name" "$r" "$wall" "$rss_mib" "$budget_mib" "$met" "$stages"
  done
done
echo
echo "Stage cells: seconds / peak RSS (MiB, high-water mark of the process) at the end of the stage;"
echo "load = reading the DICOM series + importing the model. Budget = 4 x float32 input + ONNX bytes."
