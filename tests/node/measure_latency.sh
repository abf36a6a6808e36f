#!/usr/bin/env bash
# Latency of voxseg serve against a real Orthanc (not a ctest; docs/node.md quotes it): N copies
# of a real CT series pushed one after another; prints, per series, the time from the push
# (all instances acknowledged) to the SEG found in Orthanc by REST polling, then medians, and
# from the audit log the time inside the node from queued to send confirmed, with and without
# the segmentation. Usage: measure_latency.sh <voxseg> <source-dir> [N=5] [quiet_seconds=1]
set -euo pipefail
VOXSEG=$1; SRC=$2; N=${3:-5}; QUIET=${4:-1}
SERIES_DIR="$SRC/../shared/data/dcm_qa_ct/GE_HiSpeedDual_tilt_varspacing"
T=$(mktemp -d /tmp/voxseg-node-lat.XXXXXX)
source "$SRC/tests/node/orthanc_lib.sh"
trap cleanup EXIT
PD=$(free_port); PH=$(free_port); NP=$(free_port)
start_orthanc pacs PACS "$PD" "$PH" VOXSEG "$NP"
cat >"$T/node.json" <<JSON
{"ae_title": "VOXSEG", "port": $NP, "allowed_callers": [{"ae_title": "PACS"}],
 "spool_dir": "spool", "quiet_seconds": $QUIET, "min_free_mb": 10,
 "destinations": {"pacs": {"type": "dicom", "ae_title": "PACS", "host": "127.0.0.1", "port": $PD}},
 "routes": [{"name": "ct", "match": {"modality": "CT"}, "model": "$SRC/sample_data/models/ct-phantom", "send_to": ["pacs"]}]}
JSON
declare -a IDS UIDS
for i in $(seq 1 "$N"); do UIDS[$i]=$(make_series "$SERIES_DIR" "$T/s$i"); IDS[$i]=$(upload_series "$PH" "$T/s$i"); done
start_node "$T/node.json" "$T/node.log"
for i in $(seq 1 "$N"); do
  push "$PH" "${IDS[$i]}"; t0=$(now)
  wait_for_seg "$PH" "${UIDS[$i]}" 60 >/dev/null; t1=$(now)
  python3 -c "print('%.3f' % ($t1 - $t0))"
done | tee "$T/lat.txt"
jq -r 'select(.event=="segmented") | .seconds' "$T/spool/audit.jsonl" > "$T/seg.txt"
python3 - "$T/spool/audit.jsonl" <<'PY'
import sys, json, statistics as st, datetime as dt
ev=[json.loads(l) for l in open(sys.argv[1])]
t=lambda e: dt.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
rec={e["job"]: t(e) for e in ev if e["event"]=="series_received"}
seg={e["job"]: e["seconds"] for e in ev if e["event"]=="segmented"}
sent={e["job"]: t(e) for e in ev if e["event"]=="sent"}
d=[sent[j]-rec[j] for j in sent]; o=[sent[j]-rec[j]-seg[j] for j in sent]
print("in the node, queued -> send confirmed: median %.3f s; of it not segmentation: median %.3f s (max %.3f)" % (st.median(d), st.median(o), max(o)))
PY
python3 - "$T/lat.txt" "$T/seg.txt" "$QUIET" <<'PY'
import sys, statistics as st
lat=[float(x) for x in open(sys.argv[1])]; seg=[float(x) for x in open(sys.argv[2])]; q=float(sys.argv[3])
print("latency median %.2f s (min %.2f, max %.2f); segmentation in the node median %.2f s; rest (quiet %.0f s excluded) median %.2f s"
      % (st.median(lat), min(lat), max(lat), st.median(seg), q, st.median([l-s-q for l,s in zip(lat,seg)])))
PY
