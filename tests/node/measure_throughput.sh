#!/usr/bin/env bash
# Throughput and memory of voxseg serve (not a ctest; docs/perf-node.md quotes it): N copies
# of a real CT series (28 slices) sent by 4 storescu senders at once (N/4 series each, one
# association per series), segmented with sample_data/models/ct-phantom and sent to a real
# Orthanc by C-STORE. Prints studies per minute from the first instance sent to the last SEG
# confirmed, the node's resident memory after every 10 series, and its peak; then the latency
# of each series, median and p95 (nearest rank): from its last instance acknowledged (its
# storescu finished) to its SEG stored in Orthanc (the node's audit "sent" event, written when
# Orthanc's C-STORE response confirmed it), split into the quiet period and the wait in the
# queue, the segmentation, and the hand-off and send (audit times). Per-series times in
# latency.tsv (kept with KEEP_TMP=1). PACE: seconds each sender waits between its series (0:
# back to back, a burst that queues up; above 4 x the segmentation time the queue stays short).
# Usage: measure_throughput.sh <voxseg> <source-dir> [N=40] [PACE=0]
set -euo pipefail
VOXSEG=$1; SRC=$2; N=${3:-40}; PACE=${4:-0}
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
for i in $(seq 1 "$N"); do make_series "$SERIES_DIR" "$T/s$i" >"$T/s$i.uid"; done
start_node "$T/node.json" "$T/node.log"
t0=$(now)
SENDERS=()
for s in 0 1 2 3; do
  ( for i in $(seq $((s + 1)) 4 "$N"); do
      storescu -aet CT1 -aec VOXSEG 127.0.0.1 "$NP" +sd "$T/s$i" || exit 1
      echo "$(cat "$T/s$i.uid") $(now)" >>"$T/acked.txt"  # every instance acknowledged
      sleep "$PACE"
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
python3 -c "print('%d series in %.1f s: %.1f studies/min (4 senders, pace $PACE s, 2 cores); node peak RSS %d MiB' % ($N, $t1 - $t0, $N * 60 / ($t1 - $t0), $peak / 1024))"
python3 - "$T/acked.txt" "$T/spool/audit.jsonl" "$T/latency.tsv" <<'PY'
import sys, json, math, statistics as st, datetime as dt
acked = dict((u, float(t)) for u, t in (l.split() for l in open(sys.argv[1])))
ev = [json.loads(l) for l in open(sys.argv[2])]
ts = lambda e: dt.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
    tzinfo=dt.timezone.utc).timestamp()
job_uid = {e["job"]: e["series_uid"] for e in ev if e["event"] == "series_received"}
queued = {e["job"]: ts(e) for e in ev if e["event"] == "series_received"}
seg = {e["job"]: (ts(e), e["seconds"]) for e in ev if e["event"] == "segmented"}
sent = {e["job"]: ts(e) for e in ev if e["event"] == "sent"}
rows = []
for j, t_sent in sent.items():
    u = job_uid[j]; t_end, secs = seg[j]
    rows.append((u, t_sent - acked[u], t_end - secs - acked[u], secs, t_sent - t_end))
with open(sys.argv[3], "w") as f:
    f.write("series_uid\tlatency_s\tquiet_and_queue_s\tsegmentation_s\thandoff_and_send_s\n")
    for r in rows: f.write("%s\t%.3f\t%.3f\t%.3f\t%.3f\n" % r)
p95 = lambda v: sorted(v)[math.ceil(0.95 * len(v)) - 1]
print("per-series latency over %d series (median / p95 / max, s):" % len(rows))
for i, name in enumerate(["last instance acknowledged -> SEG stored in Orthanc",
                          "  quiet period + wait in the queue", "  segmentation",
                          "  hand-off + C-STORE to Orthanc"], start=1):
    v = [r[i] for r in rows]
    print("  %-52s %6.2f %6.2f %6.2f" % (name, st.median(v), p95(v), max(v)))
PY
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
