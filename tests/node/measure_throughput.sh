#!/usr/bin/env bash
# Throughput and memory of voxseg serve (not a ctest; docs/perf-node.md quotes it): N copies
# of a real CT series (28 slices) sent by 4 storescu senders at once (N/4 series each, one
# association per series), segmented with sample_data/models/ct-phantom and sent to a real
# Orthanc by C-STORE. Prints studies per minute from the first instance sent to the last SEG
# confirmed, the node's resident memory after every 10 series, and its peak.
# Usage: measure_throughput.sh <voxseg> <source-dir> [N=40]
set -euo pipefail
VOXSEG=$1; SRC=$2; N=${3:-40}
SERIES_DIR="$SRC/../shared/data/dcm_qa_ct/GE_HiSpeedDual_tilt_varspacing"
T=$(mktemp -d /tmp/voxseg-node-tp.XXXXXX)
source "$SRC/tests/node/orthanc_lib.sh"
require_node_test_env 1
trap cleanup EXIT
PD=$(free_port); PH=$(free_port); NP=$(free_port)
start_orthanc pacs PACS "$PD" "$PH" VOXSEG "$NP"
cat >"$T/node.json" <<JSON
{"ae_title": "VOXSEG", "port": $NP, "allowed_callers": [{"ae_title": "CT1"}],
 "spool_dir": "spool", "quiet_seconds": 1, "min_free_mb": 10,
 "destinations": {"pacs": {"type": "dicom", "ae_title": "PACS", "host": "127.0.0.1", "port": $PD}},
 "routes": [{"name": "ct", "match": {"modality": "CT"}, "model": "$SRC/sample_data/models/ct-phantom", "send_to": ["pacs"]}]}
JSON
for i in $(seq 1 "$N"); do make_series "$SERIES_DIR" "$T/s$i" >/dev/null; done
start_node "$T/node.json" "$T/node.log"
t0=$(now)
SENDERS=()
for s in 0 1 2 3; do
  ( for i in $(seq $((s + 1)) 4 "$N"); do
      storescu -aet CT1 -aec VOXSEG 127.0.0.1 "$NP" +sd "$T/s$i" || exit 1
    done ) &
  SENDERS+=($!)
done
peak=0; last=0
while :; do
  done_n=$(grep -c . "$T/spool/state/journal-node.jsonl" 2>/dev/null || true)
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$NODE_PID/status")
  [ "$rss" -gt "$peak" ] && peak=$rss
  if [ "$done_n" -ge $((last + 10)) ]; then last=$((done_n / 10 * 10)); echo "after $last series: RSS $((rss / 1024)) MiB"; fi
  [ "$done_n" -ge "$N" ] && break
  sleep 0.2
done
t1=$(now)
for p in "${SENDERS[@]}"; do wait "$p"; done
python3 -c "print('%d series in %.1f s: %.1f studies/min (4 senders, 2 cores); node peak RSS %d MiB' % ($N, $t1 - $t0, $N * 60 / ($t1 - $t0), $peak / 1024))"
