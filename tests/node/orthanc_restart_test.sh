#!/usr/bin/env bash
# voxseg serve survives kill -9 at every stage without losing or duplicating a study (label
# slow, data). Each scenario pushes its own copy of a real CT series (new series and instance
# UIDs) from a real Orthanc by C-STORE and kills the node with SIGKILL:
#   1. after every instance was acknowledged, before the quiet period ended (series in incoming/)
#   2. while receiving (Orthanc's push fails), then Orthanc pushes again after the restart
#   3. during segmentation (the route was chosen, no result yet)
#   4. after segmentation while the destination is down and the result held in the outbox;
#      `voxseg serve --resend` delivers it, with the SOP Instance UID written before the kill
#   5. with the spool encrypted, during segmentation: the restart removes the killed node's
#      plaintext folder in /dev/shm
# After the restarts, each series has exactly one SEG in Orthanc, the journal one line per job,
# no temporary files are left, and a further restart sends or segments nothing again.
# Usage: orthanc_restart_test.sh <voxseg> <source-dir> [shared-data]
set -euo pipefail
VOXSEG=$1
SRC=$2
DATA=${3:-$SRC/../shared/data}
SERIES_DIR="$DATA/dcm_qa_ct/GE_HiSpeedDual_tilt_varspacing"
T=$(mktemp -d /tmp/voxseg-node-restart.XXXXXX)
source "$SRC/tests/node/orthanc_lib.sh"
require_node_test_env 1
trap cleanup EXIT

PACS_DICOM=$(free_port); PACS_HTTP=$(free_port); NODE_PORT=$(free_port); DEAD_PORT=$(free_port)
start_orthanc pacs PACS "$PACS_DICOM" "$PACS_HTTP" VOXSEG "$NODE_PORT"

# node.json with the destination on port $1, $2 send attempts and quiet_seconds $3; $4 extra keys.
write_config() {
  cat >"$T/node.json" <<JSON
{
  ${4:-}
  "ae_title": "VOXSEG", "port": $NODE_PORT,
  "allowed_callers": [{"ae_title": "PACS", "host": "127.0.0.1"}],
  "spool_dir": "spool", "quiet_seconds": $3, "min_free_mb": 10,
  "send": {"attempts": $2, "initial_delay_seconds": 0.2},
  "destinations": {"pacs": {"type": "dicom", "ae_title": "PACS", "host": "127.0.0.1", "port": $1}},
  "routes": [{"name": "ct", "match": {"modality": "CT"},
              "model": "$SRC/sample_data/models/ct-phantom", "send_to": ["pacs"]}]
}
JSON
}
kill_node() { kill -9 "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true; }
declare -A UIDS
prepare() {  # prepare NAME -> UIDS[NAME], ORTHANC id in ORTHANC_IDS[NAME]
  UIDS[$1]=$(make_series "$SERIES_DIR" "$T/series-$1")
  ORTHANC_IDS[$1]=$(upload_series "$PACS_HTTP" "$T/series-$1")
}
declare -A ORTHANC_IDS
for s in received receiving segmenting held encrypted; do prepare $s; done

echo "== 1: kill -9 after the instances were acknowledged, before the quiet period ended"
write_config "$PACS_DICOM" 3 3
start_node "$T/node.json" "$T/node.log"
push "$PACS_HTTP" "${ORTHANC_IDS[received]}" || fail "push 1 failed"
kill_node
[ "$(find "$T/spool/incoming" -name '*.dcm' | wc -l)" = 28 ] || fail "not all 28 acknowledged instances in the spool"
start_node "$T/node.json" "$T/node.log"
wait_for_seg "$PACS_HTTP" "${UIDS[received]}" 60 >/dev/null || { tail -20 "$T/node.log"; fail "1: no SEG after restart"; }

echo "== 2: kill -9 while receiving; Orthanc pushes again after the restart"
push "$PACS_HTTP" "${ORTHANC_IDS[receiving]}" &
PUSH=$!
wait_file "$T/spool/incoming/${UIDS[receiving]}/*.dcm" 20 || fail "2: nothing arrived"
kill_node
wait "$PUSH" 2>/dev/null && echo "   (the push finished before the kill)"
start_node "$T/node.json" "$T/node.log"
push "$PACS_HTTP" "${ORTHANC_IDS[receiving]}" || fail "push 2 (again) failed"
wait_for_seg "$PACS_HTTP" "${UIDS[receiving]}" 60 >/dev/null || fail "2: no SEG after restart"

echo "== 3: kill -9 during segmentation"
push "$PACS_HTTP" "${ORTHANC_IDS[segmenting]}" || fail "push 3 failed"
wait_file "$T/spool/queue/*/route.json" 30 || fail "3: never routed"
kill_node
start_node "$T/node.json" "$T/node.log"
wait_for_seg "$PACS_HTTP" "${UIDS[segmenting]}" 60 >/dev/null || fail "3: no SEG after restart"

echo "== 4: destination down: held in the outbox, kill -9, voxseg serve --resend"
kill_node
write_config "$DEAD_PORT" 2 1
start_node "$T/node.json" "$T/node.log"
push "$PACS_HTTP" "${ORTHANC_IDS[held]}" || fail "push 4 failed"
wait_file "$T/spool/outbox/*/held" 60 || { tail -20 "$T/node.log"; fail "4: result not held"; }
HELD_UID=$(dcmdump +P 0008,0018 "$T"/spool/outbox/*/segmentation.dcm | sed -n 's/.*\[\(.*\)\].*/\1/p')
kill_node
[ "$(count_seg "$PACS_HTTP" "${UIDS[held]}")" = 0 ] || fail "4: sent although the destination was down"
write_config "$PACS_DICOM" 2 1
"$VOXSEG" serve --config "$T/node.json" --resend >>"$T/node.log" 2>&1 || fail "--resend did not deliver"
# 60 s as the other waits: this wait once ran out at 10 s under ctest -j2 although the node's log
# had the result delivered and confirmed by the PACS (cause not found; the failure now shows
# what Orthanc held)
ID=$(wait_for_seg "$PACS_HTTP" "${UIDS[held]}" 60) || {
  echo "SEG instances in Orthanc and the series they reference:"
  for f in "$T"/seg-refs/*; do echo "  ${f##*/}: $(cat "$f")"; done
  fail "4: no SEG for ${UIDS[held]} after --resend"
}
GOT_UID=$(curl -sf "http://127.0.0.1:$PACS_HTTP/instances/$ID/tags?simplify" | jq -r .SOPInstanceUID)
[ "$GOT_UID" = "$HELD_UID" ] || fail "4: resent SEG has another SOP Instance UID ($GOT_UID vs $HELD_UID)"

echo "== 5: encrypted spool, kill -9 during segmentation: the plaintext in /dev/shm goes too"
kill_node 2>/dev/null || true
openssl rand -hex 32 >"$T/spool.key"
write_config "$PACS_DICOM" 2 1 '"spool_key_file": "spool.key",'
start_node "$T/node.json" "$T/node.log"
push "$PACS_HTTP" "${ORTHANC_IDS[encrypted]}" || fail "push 5 failed"
wait_file "$T/spool/queue/*/route.json" 30 || fail "5: never routed"
KILLED=$NODE_PID
kill_node
start_node "$T/node.json" "$T/node.log"
wait_for_seg "$PACS_HTTP" "${UIDS[encrypted]}" 60 >/dev/null || fail "5: no SEG after restart"
[ -z "$(compgen -G "/dev/shm/voxseg-$KILLED-*")" ] || fail "5: plaintext of the killed node left in /dev/shm"
kill_node

echo "== restart once more: nothing is segmented or sent again"
start_node "$T/node.json" "$T/node.log"
sleep 3
kill_node
for s in received receiving segmenting held encrypted; do
  n=$(count_seg "$PACS_HTTP" "${UIDS[$s]}")
  [ "$n" = 1 ] || fail "series '$s' has $n SEG instances in Orthanc (expected exactly 1)"
done
[ "$(wc -l <"$T/spool/state/journal-node.jsonl")" = 5 ] || fail "journal: $(wc -l <"$T/spool/state/journal-node.jsonl") lines, expected 5"
[ "$(jq -r 'select(.event == "segmented") | .series_uid' "$T/spool/audit.jsonl" | sort -u | wc -l)" = 5 ] ||
  fail "audit: not 5 series segmented"
[ -z "$(find "$T/spool" -name '.tmp-*' -o -name '.staging-*')" ] || fail "temporary files left"
[ -z "$(find "$T/spool/queue" "$T/spool/outbox" "$T/spool/incoming" -mindepth 1)" ] || fail "spool not empty"
echo "PASS"
