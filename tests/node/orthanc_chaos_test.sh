#!/usr/bin/env bash
# Chaos for the DICOM node (issue 19 part 6; label slow, data): a real Orthanc pushes copies of a
# real CT series (each with its own UIDs) to `voxseg serve` and repeats a push that failed, as a
# PACS does. In 10 campaigns of CHAOS_SERIES series each, the node is stopped 4 times at seeded
# random points of the campaign's work, 40 times in all (20 SIGKILL, 20 SIGTERM in a seeded
# order), and restarted each time; then it finishes the campaign. At the end:
#   - every series has exactly one SEG in Orthanc (0 lost, 0 duplicates), and every SEG's pixel
#     data is byte-identical to the one of an uninterrupted run (0 partial results);
#   - the job journal has exactly one line per series; no temporary or staging file is left
#     and the spool is empty; a further restart segments and sends nothing;
#   - at most 10 of the 40 signals came after their campaign's work was done (each such signal
#     halves the delays of the signals after it, unless CHAOS_MAX_DELAY_MS is set).
# A series whose association a signal cut waits for Orthanc's repeat (interrupted_wait_seconds
# 15 here): Orthanc's push reports success before it closes the association (its
# DicomAssociationCloseDelay), so a kill in that gap delays the series by 15 s, no more.
# Usage: orthanc_chaos_test.sh <voxseg> <source-dir> [shared-data]
# Environment: CHAOS_SEED (default 19), CHAOS_SERIES per campaign (default 2),
# CHAOS_MAX_DELAY_MS (default: a quarter of a campaign's uninterrupted time).
set -euo pipefail
VOXSEG=$1
SRC=$2
DATA=${3:-$SRC/../shared/data}
SERIES_DIR="$DATA/dcm_qa_ct/GE_HiSpeedDual_tilt_varspacing"
T=$(mktemp -d /tmp/voxseg-node-chaos.XXXXXX)
source "$SRC/tests/node/orthanc_lib.sh"
require_node_test_env 1
trap cleanup EXIT

SEED=${CHAOS_SEED:-19}
N=${CHAOS_SERIES:-2}
RANDOM=$SEED

PACS_DICOM=$(free_port); PACS_HTTP=$(free_port); NODE_PORT=$(free_port)
start_orthanc pacs PACS "$PACS_DICOM" "$PACS_HTTP" VOXSEG "$NODE_PORT"
cat >"$T/node.json" <<JSON
{
  "ae_title": "VOXSEG", "port": $NODE_PORT,
  "allowed_callers": [{"ae_title": "PACS", "host": "127.0.0.1"}],
  "spool_dir": "spool", "quiet_seconds": 1, "interrupted_wait_seconds": 15, "min_free_mb": 10,
  "send": {"attempts": 3, "initial_delay_seconds": 0.2},
  "destinations": {"pacs": {"type": "dicom", "ae_title": "PACS", "host": "127.0.0.1", "port": $PACS_DICOM}},
  "routes": [{"name": "ct", "match": {"modality": "CT"},
              "model": "$SRC/sample_data/models/ct-phantom", "send_to": ["pacs"]}]
}
JSON

# pixel_md5 ORTHANC_INSTANCE_ID: md5 of the SEG's PixelData as Orthanc stores it
pixel_md5() {
  curl -sf "http://127.0.0.1:$PACS_HTTP/instances/$1/content/7fe0-0010" | md5sum | cut -d' ' -f1
}

echo "== reference: one series through an uninterrupted node"
REF_UID=$(make_series "$SERIES_DIR" "$T/series-ref")
REF_ID=$(upload_series "$PACS_HTTP" "$T/series-ref")
start_node "$T/node.json" "$T/node.log"
t0=$(date +%s%N)
push "$PACS_HTTP" "$REF_ID" || fail "reference push failed"
REF_SEG=$(wait_for_seg "$PACS_HTTP" "$REF_UID" 120) || { tail -20 "$T/node.log"; fail "no reference SEG"; }
REF_MS=$(( ($(date +%s%N) - t0) / 1000000 ))
# A campaign's 4 signals come 0.1 s to a quarter of its uninterrupted time apart: most land
# while a series is received, waits out its quiet period, is segmented or sent.
MAX_DELAY_MS=${CHAOS_MAX_DELAY_MS:-$(( REF_MS * N / 4 ))}
echo "   one series, push to SEG in Orthanc: $REF_MS ms"
REF_MD5=$(pixel_md5 "$REF_SEG")
[ -n "$REF_MD5" ] || fail "reference SEG has no pixel data"

# 10 campaigns of 4 signals: each pushes CHAOS_SERIES fresh series and stops the node 4 times at
# random points of that work, then lets it finish (so that every campaign's signals land on
# work of its own). 20 SIGKILL and 20 SIGTERM in all, in a seeded order (Fisher-Yates).
SIGNALS=()
for _ in $(seq 1 20); do SIGNALS+=(KILL TERM); done
for ((i = ${#SIGNALS[@]} - 1; i > 0; i--)); do
  j=$((RANDOM % (i + 1)))
  tmp=${SIGNALS[i]}; SIGNALS[i]=${SIGNALS[j]}; SIGNALS[j]=$tmp
done
CAMPAIGNS=10
TOTAL=$((CAMPAIGNS * N))
declare -a UIDS IDS
for i in $(seq 1 "$TOTAL"); do
  UIDS[i]=$(make_series "$SERIES_DIR" "$T/series-$i")
  IDS[i]=$(upload_series "$PACS_HTTP" "$T/series-$i")
done

# The PACS side: pushes series FIRST..LAST one after the other, each until Orthanc reports
# success (a push the node did not acknowledge fully fails and is repeated half a second later).
pusher() {
  for i in $(seq "$1" "$2"); do
    local tries=0
    until push "$PACS_HTTP" "${IDS[i]}"; do
      tries=$((tries + 1))
      [ "$tries" -lt 400 ] || { echo "pusher: series $i never acknowledged" >&2; exit 1; }
      sleep 0.5
    done
  done
}
journaled() { wc -l <"$T/spool/state/journal-node.jsonl"; }

echo "== chaos: $CAMPAIGNS campaigns of $N series and 4 signals (seed $SEED, delays up to $MAX_DELAY_MS ms)"
declare -A HIT
for c in $(seq 0 $((CAMPAIGNS - 1))); do
  first=$((c * N + 1)); last=$(((c + 1) * N))
  pusher "$first" "$last" &
  PUSHER=$!
  PIDS+=($PUSHER)
  for k in $(seq $((c * 4)) $((c * 4 + 3))); do
    sig=${SIGNALS[k]}
    delay_ms=$((100 + (RANDOM * 32768 + RANDOM) % MAX_DELAY_MS))
    sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
    # What the node had in hand when the signal came: a series being received (instances in
    # incoming/), one queued or in segmentation, a result in the outbox; "done" once every
    # series of the campaign is journaled. Most signals must land on work (checked below).
    stage=waiting
    compgen -G "$T/spool/incoming/*/*.dcm" >/dev/null && stage=receiving
    compgen -G "$T/spool/queue/*" >/dev/null && stage=queued-or-segmenting
    compgen -G "$T/spool/outbox/*" >/dev/null && stage=sending
    [ "$stage" = waiting ] && [ "$(journaled)" -gt "$last" ] && stage=done
    HIT[$stage]=$(( ${HIT[$stage]:-0} + 1 ))
    # The work went faster than the reference run (measured while other tests loaded the
    # machine, say): shorter delays from here on keep the later signals on work.
    if [ "$stage" = done ] && [ -z "${CHAOS_MAX_DELAY_MS:-}" ] && [ "$MAX_DELAY_MS" -gt 400 ]; then
      MAX_DELAY_MS=$((MAX_DELAY_MS / 2))
      echo "   signal $((k + 1)) came after the campaign's work: delays up to $MAX_DELAY_MS ms from now on"
    fi
    kill -"$sig" "$NODE_PID" 2>/dev/null || true
    if [ "$sig" = TERM ]; then
      for _ in $(seq 1 600); do kill -0 "$NODE_PID" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$NODE_PID" 2>/dev/null && fail "signal $((k + 1)): SIGTERM did not stop the node in 60 s"
    fi
    wait "$NODE_PID" 2>/dev/null || true
    start_node "$T/node.json" "$T/node.log"
  done
  wait "$PUSHER" || fail "campaign $((c + 1)): the pusher gave up"
  for i in $(seq "$first" "$last"); do
    wait_for_seg "$PACS_HTTP" "${UIDS[i]}" 240 >/dev/null || { tail -30 "$T/node.log"; fail "series $i: no SEG"; }
  done
done
STAGES=$(for s in "${!HIT[@]}"; do printf "%s=%s " "$s" "${HIT[$s]}"; done | sed "s/ $//")
echo "   signals by stage: $STAGES"
[ "${HIT[done]:-0}" -le 10 ] || fail "${HIT[done]} of 40 signals came after the campaign's work was done: lower CHAOS_MAX_DELAY_MS"

echo "== after the chaos: every series has its result"
# Let the node finish what it may still be sending (a duplicate would arrive now), then stop it.
sleep 3
kill -TERM "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true

for i in $(seq 1 "$TOTAL"); do
  ids=$(seg_instances "$PACS_HTTP" "${UIDS[i]}")
  n=$(echo "$ids" | grep -c . || true)
  [ "$n" = 1 ] || fail "series $i has $n SEG instances in Orthanc (expected exactly 1)"
  [ "$(pixel_md5 "$ids")" = "$REF_MD5" ] || fail "series $i: SEG pixel data differs from the uninterrupted run"
done
lines=$(wc -l <"$T/spool/state/journal-node.jsonl")
[ "$lines" = $((TOTAL + 1)) ] || fail "journal: $lines lines, expected $((TOTAL + 1)) (one per series)"
[ "$(jq -r .case_id "$T/spool/state/journal-node.jsonl" | sort -u | wc -l)" = $((TOTAL + 1)) ] ||
  fail "journal: a series journaled twice"
[ -z "$(find "$T/spool" -name '.tmp-*' -o -name '.staging-*')" ] || fail "temporary files left: $(find "$T/spool" -name '.tmp-*' -o -name '.staging-*')"
[ -z "$(find "$T/spool/queue" "$T/spool/outbox" "$T/spool/incoming" -mindepth 1)" ] ||
  fail "spool not empty: $(find "$T/spool/queue" "$T/spool/outbox" "$T/spool/incoming" -mindepth 1 | head)"

echo "== restart once more: nothing is segmented or sent again"
before=$(jq -c 'select(.event == "segmented" or .event == "sent")' "$T/spool/audit.jsonl" | wc -l)
start_node "$T/node.json" "$T/node.log"
sleep 3
kill -TERM "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true
after=$(jq -c 'select(.event == "segmented" or .event == "sent")' "$T/spool/audit.jsonl" | wc -l)
[ "$before" = "$after" ] || fail "the restart segmented or sent again ($before -> $after audit events)"
echo "PASS: $TOTAL series, 40 signals (20 SIGKILL, 20 SIGTERM; by stage: $STAGES), $(grep -c 'listening as' "$T/node.log") node starts"
