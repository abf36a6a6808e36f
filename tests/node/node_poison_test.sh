#!/usr/bin/env bash
# A poison pill for `voxseg serve` (issue 35 item 3; label slow, data): a series whose
# segmentation crashes a library (SIGSEGV; made here by the test-only hook VOXSEG_TEST_CRASH_ON,
# batch/child_process.h) costs that series, not the node. Two series, one poisoned, sent with
# DCMTK's storescu:
#   - the node keeps running (same process, still answering C-ECHO) and the good series is
#     segmented and journaled;
#   - the poisoned job is retried once in a new worker, then moved to failed/ with reason.txt
#     (the signal, naming no queue/ path), audited (worker_crashed twice, segmentation_failed)
#     and logged;
#   - kill -9 of the whole node while a poisoned job is in work, then a restart: the job ends in
#     failed/, the node does not crash-loop, and a good series sent afterwards is segmented.
# Before issue 35 the node died with the job and died again on every restart.
# Usage: node_poison_test.sh <voxseg> <source-dir> [shared-data]
set -euo pipefail
VOXSEG=$1
SRC=$2
DATA=${3:-$SRC/../shared/data}
SERIES_DIR="$DATA/dcm_qa_ct/GE_HiSpeedDual_tilt_varspacing"
T=$(mktemp -d /tmp/voxseg-node-poison.XXXXXX)
source "$SRC/tests/node/orthanc_lib.sh"
require_node_test_env 0
trap cleanup EXIT

NODE_PORT=$(free_port)
cat >"$T/node.json" <<JSON
{
  "ae_title": "VOXSEG", "port": $NODE_PORT,
  "allowed_callers": [{"ae_title": "SCANNER"}],
  "spool_dir": "spool", "quiet_seconds": 1, "min_free_mb": 10,
  "routes": [{"name": "ct", "match": {"modality": "CT"},
              "model": "$SRC/sample_data/models/ct-phantom"}]
}
JSON
AUDIT="$T/spool/audit.jsonl"
send() { storescu -aet SCANNER -aec VOXSEG localhost "$NODE_PORT" "$1"/*.dcm || fail "storescu $1 failed"; }
# events EVENT SERIES_UID -> how many audit events of that kind name the series
events() { jq -r "select(.event == \"$1\" and .series_uid == \"$2\") | .event" "$AUDIT" 2>/dev/null | wc -l; }
wait_event() {  # wait_event EVENT SERIES_UID COUNT TIMEOUT_S
  local end=$(( $(date +%s) + $4 ))
  while [ "$(date +%s)" -lt "$end" ]; do
    [ "$(events "$1" "$2")" -ge "$3" ] && return 0
    kill -0 "$NODE_PID" 2>/dev/null || fail "the node died (waiting for $1 of $2)"
    sleep 0.1
  done
  return 1
}
failed_job_of() { grep -l "$1" "$T"/spool/failed/*/series.json 2>/dev/null | head -1 | xargs -r dirname; }

GOOD=$(make_series "$SERIES_DIR" "$T/good")
BAD=$(make_series "$SERIES_DIR" "$T/bad")
BAD2=$(make_series "$SERIES_DIR" "$T/bad2")
GOOD2=$(make_series "$SERIES_DIR" "$T/good2")
export VOXSEG_TEST_CRASH_ON="$BAD"  # the poisoned series

echo "== a poisoned and a good series: the node survives, the good one is segmented"
start_node "$T/node.json" "$T/node.log"
send "$T/bad"
send "$T/good"
wait_event segmented "$GOOD" 1 120 || fail "the good series was not segmented"
wait_event segmentation_failed "$BAD" 1 120 || fail "the poisoned series never failed"
kill -0 "$NODE_PID" || fail "the node died"
echoscu -aet SCANNER -aec VOXSEG localhost "$NODE_PORT" || fail "the node no longer answers C-ECHO"
[ "$(events worker_crashed "$BAD")" = 2 ] || fail "expected 2 worker_crashed events, got $(events worker_crashed "$BAD")"
[ "$(events segmented "$BAD")" = 0 ] || fail "the poisoned series was segmented"
JOB=$(failed_job_of "$BAD")
[ -n "$JOB" ] || fail "the poisoned job is not in failed/"
grep -q "died of signal 11 (SIGSEGV) while segmenting this series (2 times" "$JOB/reason.txt" ||
  fail "reason.txt: $(cat "$JOB/reason.txt")"
! grep -q "/queue/" "$JOB/reason.txt" || fail "reason.txt names the old queue/ path: $(cat "$JOB/reason.txt")"
grep -q "trying it once more in a new worker" "$T/node.log" || fail "the retry is not logged"
grep -q "died of signal 11 (SIGSEGV) while segmenting this series (2 times" "$T/node.log" ||
  fail "the failure is not logged"
[ "$(jq -r .case_id "$T/spool/state/journal-node.jsonl" | wc -l)" = 1 ] || fail "journal: not 1 line"
[ "$(grep -c 'listening as' "$T/node.log")" = 1 ] || fail "the node restarted"

echo "== kill -9 of the node while a poisoned job is in work, then a restart: no crash loop"
kill -TERM "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true
export VOXSEG_TEST_CRASH_ON="$BAD2"
start_node "$T/node.json" "$T/node.log"
send "$T/bad2"
# The first crash is audited and the job retried in a new worker: kill the node while the
# retry is in work (work.json, written before the work starts, says so).
wait_event worker_crashed "$BAD2" 1 60 || fail "no first crash of the second poisoned series"
for _ in $(seq 1 200); do
  grep -qs '"in_work": true' "$T"/spool/queue/*/work.json && break
  sleep 0.02
done
kill -9 "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true
start_node "$T/node.json" "$T/node.log"
wait_event segmentation_failed "$BAD2" 1 60 || fail "the second poisoned series never failed"
send "$T/good2"
wait_event segmented "$GOOD2" 1 120 || fail "a good series after the restart was not segmented"
kill -0 "$NODE_PID" || fail "the node died after the restart"
[ "$(grep -c 'listening as' "$T/node.log")" = 3 ] || fail "the node restarted by itself"
JOB2=$(failed_job_of "$BAD2")
[ -n "$JOB2" ] && [ -f "$JOB2/reason.txt" ] || fail "the second poisoned job is not in failed/ with reason.txt"
[ -z "$(find "$T/spool" -name '.staging-*' -o -name '.tmp-*')" ] || fail "staging or temporary files left"
kill -TERM "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true
echo "PASS"
