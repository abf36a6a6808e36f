#!/usr/bin/env bash
# A TotalSegmentator package on the node (issue 37: the model loaded once per node process, its
# users' #581). The committed total_fast package of tests/pipeline/data/totalseg (fabricated
# weights, tools/export_totalsegmentator.py) as a route's model; two phantom CT series sent by
# storescu. Both are segmented and delivered as SEG (storescp receives them); the node's log holds
# one "route totalseg: model ... loaded" line (its segmentation worker loads the model once)
# whatever the number of series, and each job's
# run.json names the package and its two stages (roi_crop does not run without --labels).
# Usage: node_totalseg_test.sh <voxseg> <source-dir>
set -euo pipefail
VOXSEG=$1
SRC=$2
T=$(mktemp -d /tmp/voxseg-node-totalseg.XXXXXX)
source "$SRC/tests/node/orthanc_lib.sh"
trap cleanup EXIT
MODEL="$SRC/tests/pipeline/data/totalseg/packages/total_fast"
[ -f "$MODEL/model.json" ] || fail "no package at $MODEL"
for tool in storescu storescp jq; do
  command -v $tool >/dev/null || skip "$tool missing (scripts/deps.sh)"
done
for seed in 31 32; do
  "$VOXSEG" phantom "$T/p$seed" --seed $seed --size 64x64x24 --spacing 5x5x6 \
    --outputs dicom >/dev/null 2>&1 || fail "voxseg phantom failed"
done
NODE_PORT=$(free_port); SCP_PORT=$(free_port)
mkdir -p "$T/scp-out"
storescp -aet STORESCP -od "$T/scp-out" "$SCP_PORT" >"$T/storescp.log" 2>&1 &
PIDS+=($!)
cat >"$T/node.json" <<JSON
{
  "ae_title": "VOXSEG", "port": $NODE_PORT, "allowed_callers": [{"ae_title": "PACS"}],
  "spool_dir": "$T/spool", "quiet_seconds": 1, "min_free_mb": 10,
  "destinations": {"scp": {"ae_title": "STORESCP", "host": "localhost", "port": $SCP_PORT}},
  "routes": [{"name": "totalseg", "model": "$MODEL", "outputs": ["seg", "stats"],
              "send_to": ["scp"], "options": {"device": "cpu"}}]
}
JSON
start_node "$T/node.json" "$T/node.log"
for seed in 31 32; do
  storescu -aet PACS -aec VOXSEG 127.0.0.1 "$NODE_PORT" +sd "$T/p$seed/dicom" ||
    fail "C-STORE of series $seed failed"
done
end=$(( $(date +%s) + 240 ))
while [ "$(date +%s)" -lt "$end" ]; do
  kill -0 "$NODE_PID" 2>/dev/null || { cat "$T/node.log"; fail "the node died"; }
  n=$(find "$T/spool/results" -name run.json 2>/dev/null | wc -l)
  [ "$n" -ge 2 ] && break
  sleep 0.5
done
[ "$n" -ge 2 ] || { tail -30 "$T/node.log"; fail "$n of 2 series segmented after 240 s"; }
for r in $(find "$T/spool/results" -name run.json); do
  jq -e '.model.name == "totalsegmentator-total_fast"' "$r" >/dev/null ||
    fail "$r: not the TotalSegmentator package"
  jq -e '[.stages[].name] == ["total_fast"]' "$r" >/dev/null ||
    fail "$r: stages $(jq -c '[.stages[].name]' "$r"), expected [\"total_fast\"]"
done
loads=$(grep -c "route totalseg: model totalsegmentator-total_fast loaded" "$T/node.log" || true)
echo "model loads in the node's log: $loads for 2 series"
[ "$loads" -eq 1 ] || { grep "model totalseg" "$T/node.log"; fail "model loaded $loads times"; }
grep -q "series .* segmented by route totalseg" "$T/node.log" || fail "no series segmented"
segs=$(grep -l "1.2.840.10008.5.1.4.1.1.66.4" -r "$T/scp-out" 2>/dev/null | wc -l)
echo "SEG instances delivered: $segs"
[ "$segs" -ge 2 ] || fail "expected 2 SEG instances at the destination, got $segs"
echo "PASS"
