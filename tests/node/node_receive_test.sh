#!/usr/bin/env bash
# voxseg serve refuses at C-STORE time what it cannot use, and audits every refusal with its
# reason (issue 35, items 2, 5 and 7), with DCMTK's storescu/echoscu as senders (label slow, data):
#   - poison pills: an instance with a private sequence nested 10,000 deep (the node died while
#     receiving it) and one nested 5,600 deep (acknowledged, then the node died on it later) are
#     refused with 0xC000 and audited; the node stays up and a good series sent afterwards is
#     segmented;
#   - an instance whose Pixel Data is truncated is refused with 0xA900 (it used to be
#     acknowledged and the whole series failed later);
#   - an association calling another AE title than the node's is rejected ("called AE title not
#     recognized") and audited; "accept_any_called_ae": true accepts it;
#   - connections that carry no association request (HTTP, garbage, a bare connect, an A-ABORT)
#     are audited as what they are (connection_refused), not as "caller not allowed";
#   - kill -9 while an association is sending: the restarted node audits the interrupted series
#     (association_interrupted);
#   - an encrypted spool keeps only ciphertext on disk (received into memory);
#   - a full spool disk (a small tmpfs; skipped where tmpfs cannot be mounted): the C-STORE is
#     answered 0xA700 and audited with "No space left on device", nothing is left behind, and
#     the node stores again once space is freed.
# Usage: node_receive_test.sh <voxseg> <source-dir> [shared-data]
set -euo pipefail
VOXSEG=$1
SRC=$2
DATA=${3:-$SRC/../shared/data}
SERIES_DIR="$DATA/dcm_qa_ct/GE_HiSpeedDual_tilt_varspacing"
T=$(mktemp -d /tmp/voxseg-node-recv.XXXXXX)
MNT=""
source "$SRC/tests/node/orthanc_lib.sh"
require_node_test_env 0
cleanup_mount() { if [ -n "$MNT" ]; then umount "$MNT" 2>/dev/null || true; fi; }
cleanup_all() {  # the node off the tmpfs, the tmpfs unmounted, then the folder removed
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  cleanup_mount
  cleanup
}
trap cleanup_all EXIT
BAD="python3 $SRC/tests/node/make_bad_instance.py"

NODE_PORT=$(free_port)
write_config() {  # write_config SPOOL [EXTRA_JSON_KEYS]
  cat >"$T/node.json" <<JSON
{
  "ae_title": "VOXSEG", "port": $NODE_PORT,
  "allowed_callers": [{"ae_title": "SCANNER"}],
  "spool_dir": "$1", "quiet_seconds": 2, "min_free_mb": 0, "audit_log": "$T/audit.jsonl",
  ${2:-}
  "routes": [{"name": "ct", "match": {"modality": "CT"},
              "model": "$SRC/sample_data/models/ct-phantom"}]
}
JSON
}
audit() { jq -s -e "$1" "$T/audit.jsonl" >/dev/null; }
alive() { kill -0 "$NODE_PID" 2>/dev/null || fail "the node died: $*"; }
stop_node() { kill -9 "$NODE_PID" 2>/dev/null || true; wait "$NODE_PID" 2>/dev/null || true; }
store() { storescu -v -aet SCANNER -aec VOXSEG 127.0.0.1 "$NODE_PORT" "$@"; }
# sop FILE -> its SOP Instance UID
sop() { dcmdump +P 0008,0018 "$1" | sed -n 's/.*\[\(.*\)\].*/\1/p'; }

write_config "$T/spool"
start_node "$T/node.json" "$T/node.log"

echo "== poison pills: sequences nested 10,000 and 5,600 deep"
make_series "$SERIES_DIR" "$T/deep" >/dev/null
$BAD "$T/deep/01.dcm" "$T/deep10000.dcm" nested 10000
$BAD "$T/deep/02.dcm" "$T/deep5600.dcm" nested 5600
for depth in 10000 5600; do
  # storescu parses the file before sending it: DCMTK's recursion needs a larger stack.
  if (ulimit -s unlimited; store "$T/deep$depth.dcm") >"$T/deep$depth.txt" 2>&1; then
    fail "the instance nested $depth deep was acknowledged"
  fi
  alive "after the instance nested $depth deep"
  grep -q "Received Store Response (Error: CannotUnderstand)" "$T/deep$depth.txt" ||
    { cat "$T/deep$depth.txt"; fail "no 0xC000 for the instance nested $depth deep"; }
  audit "any(.[]; .event == \"instance_refused\" and .sop_instance_uid == \"$(sop "$T/deep/0$([ $depth = 10000 ] && echo 1 || echo 2).dcm")\" and (.reason | test(\"nest\")))" ||
    fail "the refusal of the instance nested $depth deep is not audited with its reason"
done
[ -z "$(find "$T/spool/incoming" -name '*.dcm')" ] || fail "a nested instance reached the spool"
GOOD=$(make_series "$SERIES_DIR" "$T/good")
store +sd "$T/good" >"$T/good.txt" 2>&1 || { cat "$T/good.txt"; fail "a good series was refused after the poison pills"; }

echo "== truncated pixel data"
make_series "$SERIES_DIR" "$T/trunc" >/dev/null
$BAD "$T/trunc/10.dcm" "$T/trunc10.dcm" truncate 1000
mv "$T/trunc10.dcm" "$T/trunc/10.dcm"
store -nh +sd "$T/trunc" >"$T/trunc.txt" 2>&1 || true  # -nh: exit 0 whatever the statuses
grep -q "Received Store Response (Error: DataSetDoesNotMatchSOPClass)" "$T/trunc.txt" ||
  { cat "$T/trunc.txt"; fail "no 0xA900 for truncated pixel data"; }
[ "$(grep -c "Received Store Response (Success)" "$T/trunc.txt")" = 27 ] ||
  fail "the 27 good instances of the series were not all stored"
audit "any(.[]; .event == \"instance_refused\" and .sop_instance_uid == \"$(sop "$T/trunc/10.dcm")\" and (.reason | test(\"Pixel Data\")))" ||
  fail "the truncated instance's refusal is not audited with its reason"
[ -z "$(find "$T/spool/incoming" -name "$(sop "$T/trunc/10.dcm").dcm")" ] || fail "the truncated instance reached the spool"

echo "== compressed pixel data that does not decode, fragments that do not make the frames"
dcmcjpeg "$T/trunc/11.dcm" "$T/jpeg.dcm"  # JPEG lossless, process 14 SV1
$BAD "$T/jpeg.dcm" "$T/garbled.dcm" garble 200
cp "$T/jpeg.dcm" "$T/frames.dcm"
dcmodify -nb -i "(0028,0008)=3" -m "(0008,0018)=$(sop "$T/jpeg.dcm").3" "$T/frames.dcm" >/dev/null 2>&1
for f in garbled frames; do
  if store -xs "$T/$f.dcm" >"$T/$f.txt" 2>&1; then fail "$f.dcm was acknowledged"; fi
  alive "after $f.dcm"
  grep -q "Received Store Response (Error: DataSetDoesNotMatchSOPClass)" "$T/$f.txt" ||
    { cat "$T/$f.txt"; fail "no 0xA900 for $f.dcm"; }
  audit "any(.[]; .event == \"instance_refused\" and .sop_instance_uid == \"$(sop "$T/$f.dcm")\" and .reason != \"\")" ||
    fail "the refusal of $f.dcm is not audited with its reason"
done
jq -r 'select(.event == "instance_refused") | .reason' "$T/audit.jsonl" | tail -2 | sed 's/^/  refused: /'

echo "== the good series sent after the poison pills is segmented"
for _ in $(seq 1 600); do
  audit "any(.[]; .event == \"segmented\" and .series_uid == \"$GOOD\")" && break
  alive "while segmenting the good series"
  sleep 0.2
done
audit "any(.[]; .event == \"segmented\" and .series_uid == \"$GOOD\")" || fail "the good series was not segmented"

echo "== called AE title"
if echoscu -aet SCANNER -aec NOTVOXSEG 127.0.0.1 "$NODE_PORT" >"$T/called.txt" 2>&1; then
  fail "an association calling NOTVOXSEG was accepted"
fi
grep -qi "Called AE Title Not Recognized" "$T/called.txt" || { cat "$T/called.txt"; fail "wrong reject reason for a wrong called AE title"; }
audit 'any(.[]; .event == "association_refused" and .called_ae == "NOTVOXSEG" and (.reason | test("called AE title not recognized")))' ||
  fail "the wrong called AE title is not audited"

echo "== bytes that are not DICOM"
before=$(jq -s '[.[] | select(.reason == "caller not allowed")] | length' "$T/audit.jsonl")
exec 3<>"/dev/tcp/127.0.0.1/$NODE_PORT"; printf 'GET / HTTP/1.0\r\n\r\n' >&3 || true; exec 3>&-
exec 3<>"/dev/tcp/127.0.0.1/$NODE_PORT"; printf '\x99\x00\x00\x00\x00\x10garbage garbage ' >&3 || true; exec 3>&-
exec 3<>"/dev/tcp/127.0.0.1/$NODE_PORT"; exec 3>&-
exec 3<>"/dev/tcp/127.0.0.1/$NODE_PORT"; printf '\x07\x00\x00\x00\x00\x04\x00\x00\x00\x00' >&3 || true; exec 3>&-
for _ in $(seq 1 50); do  # 4 connections: HTTP, garbage, nothing, an A-ABORT
  [ "$(jq -s '[.[] | select(.event == "connection_refused")] | length' "$T/audit.jsonl")" -ge 4 ] && break
  sleep 0.1
done
echoscu -aet SCANNER -aec VOXSEG 127.0.0.1 "$NODE_PORT" || fail "the node stopped serving after bytes that are not DICOM"
[ "$(jq -s '[.[] | select(.event == "connection_refused")] | length' "$T/audit.jsonl")" = 4 ] ||
  fail "not every connection without an association request is audited as one"
after=$(jq -s '[.[] | select(.reason == "caller not allowed")] | length' "$T/audit.jsonl")
[ "$after" = "$before" ] || fail "bytes that are not DICOM audited as \"caller not allowed\" ($((after - before)) times)"
echo "not DICOM: $(jq -s -c '[.[] | select(.event == "connection_refused") | .reason] | group_by(.) | map({(.[0]): length}) | add' "$T/audit.jsonl")"
stop_node

echo "== accept_any_called_ae"
write_config "$T/spool" '"accept_any_called_ae": true,'
start_node "$T/node.json" "$T/node.log"
echoscu -aet SCANNER -aec NOTVOXSEG 127.0.0.1 "$NODE_PORT" || fail "accept_any_called_ae: true still refuses"

echo "== kill -9 while an association is sending; the restart audits it"
make_series "$SERIES_DIR" "$T/killed" >/dev/null
# One instance sent again and again in one association: it is still open when the node dies.
storescu -aet SCANNER -aec VOXSEG --repeat 100000 127.0.0.1 "$NODE_PORT" "$T/killed/01.dcm" \
  >/dev/null 2>&1 &
SENDER=$!
PIDS+=($SENDER)
# Its own folder (the spool keys a series by its UID): an earlier section's series can still be
# in incoming/, waiting out its quiet period, when this one starts.
KEY=$(dcmdump +P 0020,000e "$T/killed/01.dcm" | sed -n 's/.*\[\(.*\)\].*/\1/p')
wait_file "$T/spool/incoming/$KEY/*.dcm" 20 || fail "nothing received from the repeating sender"
stop_node
kill -9 "$SENDER" 2>/dev/null || true; wait "$SENDER" 2>/dev/null || true
start_node "$T/node.json" "$T/node.log"
audit "any(.[]; .event == \"association_interrupted\" and (.series | index(\"$KEY\")))" ||
  fail "the series interrupted by kill -9 is not audited at the restart"
stop_node

echo "== encrypted spool: received into memory, only ciphertext on disk"
openssl rand -hex 32 >"$T/spool.key"
write_config "$T/spool-enc" "\"spool_key_file\": \"$T/spool.key\","
start_node "$T/node.json" "$T/node.log"
SOP5=$(sop "$T/good/05.dcm")
store "$T/good/05.dcm" >/dev/null 2>&1 || fail "store into an encrypted spool failed"
STORED=$(find "$T/spool-enc/incoming" -name "$SOP5.dcm")  # before the quiet period queues it
[ -n "$STORED" ] || fail "the instance is not in the encrypted spool"
[ "$(head -c 9 "$STORED")" = VXSEGENC1 ] || fail "the stored instance is not encrypted"
(ulimit -s unlimited; store "$T/deep5600.dcm") >/dev/null 2>&1 && fail "nested instance acknowledged (encrypted spool)"
alive "nested instance, encrypted spool"
[ -z "$(find "$T/spool-enc/tmp" -type f)" ] || fail "files left in the spool's tmp/"
stop_node

echo "== full disk"
MNT="$T/mnt"
mkdir -p "$MNT"
if ! mount -t tmpfs -o size=8m tmpfs "$MNT" 2>/dev/null; then
  MNT=""
  echo "SKIP (full disk part): cannot mount a tmpfs here (needs root / CAP_SYS_ADMIN)"
  echo "PASS"
  exit 0
fi
write_config "$MNT/spool"
start_node "$T/node.json" "$T/node-full.log"
dd if=/dev/zero of="$MNT/pad" bs=64k count=1 2>/dev/null
dd if=/dev/zero of="$MNT/filler" bs=64k 2>/dev/null || true  # until the disk is full
rm "$MNT/pad"  # 64 KiB free: less than one 512 KiB instance
if store "$T/good/07.dcm" >"$T/full.txt" 2>&1; then fail "stored on a full disk"; fi
alive "on a full disk"
grep -q "Received Store Response (Refused: OutOfResources)" "$T/full.txt" ||
  { cat "$T/full.txt"; fail "no 0xA700 on a full disk"; }
audit 'any(.[]; .event == "instance_refused" and (.reason | test("No space left on device")))' ||
  fail "the full disk is not audited as \"No space left on device\""
grep -q "No space left on device" "$T/node-full.log" || fail "the full disk is not logged as such"
[ -z "$(find "$MNT/spool/tmp" "$MNT/spool/incoming" -type f)" ] || fail "a partial file was left on the full disk"
rm "$MNT/filler"
store "$T/good/07.dcm" >/dev/null 2>&1 || fail "not storing after space was freed"
stop_node
echo "PASS"
