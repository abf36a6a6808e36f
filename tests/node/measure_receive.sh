#!/usr/bin/env bash
# Receive throughput of voxseg serve alone (not a ctest; docs/node.md quotes it): N copies of a
# real CT series (28 slices of 512x512, 514 KiB each) pushed by S storescu senders at once (one
# association per series) into a node whose quiet period is longer than the run, so nothing is
# segmented meanwhile. Prints instances/s and MiB/s from the first association to the last
# instance acknowledged, and the node's CPU time per instance (user + system, less sensitive to
# other load on the machine), for each of R rounds (a fresh spool each), and the medians.
# JPEG=1: the instances JPEG lossless compressed first (dcmcjpeg), sent as such (storescu -xs):
# the node then decodes the first frame of each at receipt.
# Usage: [JPEG=1] measure_receive.sh <voxseg> <source-dir> [N=16] [S=4] [R=3] [shared-data]
set -euo pipefail
VOXSEG=$1; SRC=$2; N=${3:-16}; S=${4:-4}; R=${5:-3}; DATA=${6:-$SRC/../shared/data}
SERIES_DIR="$DATA/dcm_qa_ct/GE_HiSpeedDual_tilt_varspacing"
T=$(mktemp -d /tmp/voxseg-node-rx.XXXXXX)
source "$SRC/tests/node/orthanc_lib.sh"
require_node_test_env 0
trap cleanup EXIT
NP=$(free_port)
for i in $(seq 1 "$N"); do make_series "$SERIES_DIR" "$T/s$i" >/dev/null; done
XS=""
if [ "${JPEG:-0}" = 1 ]; then
  XS=-xs
  for f in "$T"/s*/*.dcm; do dcmcjpeg "$f" "$f.jpg" && mv "$f.jpg" "$f"; done
fi
bytes=$(du -cb "$T"/s*/*.dcm | tail -1 | cut -f1)
instances=$(ls "$T"/s*/*.dcm | wc -l)
rates=(); cpus=()
for round in $(seq 1 "$R"); do
  rm -rf "$T/spool"
  cat >"$T/node.json" <<JSON
{"ae_title": "VOXSEG", "port": $NP, "allowed_callers": [{"ae_title": "CT1"}],
 "spool_dir": "spool", "quiet_seconds": 3600, "min_free_mb": 10,
 "routes": [{"name": "ct", "match": {"modality": "CT"}, "model": "$SRC/sample_data/models/ct-phantom"}]}
JSON
  start_node "$T/node.json" "$T/node.log"
  t0=$(now)
  SENDERS=()
  for s in $(seq 0 $((S - 1))); do
    ( for i in $(seq $((s + 1)) "$S" "$N"); do
        storescu $XS -aet CT1 -aec VOXSEG 127.0.0.1 "$NP" +sd "$T/s$i" || exit 1
      done ) &
    SENDERS+=($!)
  done
  for p in "${SENDERS[@]}"; do wait "$p" || fail "a sender failed"; done
  t1=$(now)
  stored=$(find "$T/spool/incoming" -name '*.dcm' | wc -l)
  [ "$stored" = "$instances" ] || fail "$stored of $instances instances in the spool"
  rate=$(python3 -c "print('%.1f' % ($instances / ($t1 - $t0)))")
  rates+=("$rate")
  ticks=$(awk '{print $14 + $15}' "/proc/$NODE_PID/stat")
  cpu=$(python3 -c "import os; print('%.2f' % ($ticks * 1000.0 / os.sysconf('SC_CLK_TCK') / $instances))")
  cpus+=("$cpu")
  python3 -c "print('round $round: $instances instances (%.0f MiB) in %.2f s: %.1f instances/s, %.1f MiB/s; node CPU $cpu ms per instance (start-up included)' % ($bytes / 2**20, $t1 - $t0, $instances / ($t1 - $t0), $bytes / 2**20 / ($t1 - $t0)))"
  kill -9 "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true
done
python3 -c "import statistics as s; r=[float(x) for x in '${rates[*]}'.split()]; c=[float(x) for x in '${cpus[*]}'.split()]; print('median %.1f instances/s (%.1f MiB/s), node CPU %.2f ms per instance; %d senders, load %s' % (s.median(r), s.median(r) * $bytes / 2**20 / $instances, s.median(c), $S, open('/proc/loadavg').read().split()[0]))"
