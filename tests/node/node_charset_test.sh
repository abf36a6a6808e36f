#!/usr/bin/env bash
# voxseg serve with non-ASCII character sets (issue 35 item 1): a Latin-1 series (ISO_IR 100,
# "Schädel nativ", which killed the node on C-STORE with an uncaught JSON "invalid UTF-8"
# exception from the spool's series.json) and a Japanese ISO 2022 IR 87 series (PS3.5 H.3.1's
# name, escape sequences) are sent with DCMTK's storescu. Expected: every instance acknowledged,
# the node stays up, one SEG per series arrives at a DCMTK storescp destination, declared as
# ISO_IR 192 with the strings in UTF-8; series.json, the audit log and the job records are valid
# UTF-8 JSON. No shared data needed (the series come from `voxseg phantom`).
# Usage: node_charset_test.sh <voxseg> <source-dir>
set -euo pipefail
VOXSEG=$1
SRC=$2
T=$(mktemp -d /tmp/voxseg-node-charset.XXXXXX)
source "$SRC/tests/node/orthanc_lib.sh"
source "$SRC/tests/node/charset_series.sh"
for tool in storescu storescp dcmodify dcmdump python3; do
  command -v $tool >/dev/null || skip "$tool missing (scripts/deps.sh)"
done
trap cleanup EXIT

charset_series latin1 "$T/latin1" 11 || fail "cannot make the Latin-1 series"
charset_series jis "$T/jis" 12 || fail "cannot make the Japanese series"
uid_of() { dcmdump +P 0020,000e "$(ls "$1"/* | head -1)" | sed -n 's/.*\[\(.*\)\].*/\1/p'; }

NODE_PORT=$(free_port); SCP_PORT=$(free_port)
mkdir -p "$T/scp-out"
storescp -aet STORESCP -od "$T/scp-out" "$SCP_PORT" >"$T/storescp.log" 2>&1 &
PIDS+=($!)
cat >"$T/node.json" <<JSON
{
  "ae_title": "VOXSEG", "port": $NODE_PORT, "allowed_callers": [{"ae_title": "SCANNER"}],
  "spool_dir": "$T/spool", "quiet_seconds": 1, "min_free_mb": 10,
  "destinations": {"scp": {"ae_title": "STORESCP", "host": "localhost", "port": $SCP_PORT}},
  "routes": [{"name": "ct", "match": {"modality": "CT"},
              "model": "$SRC/sample_data/models/ct-phantom", "send_to": ["scp"]}]
}
JSON
start_node "$T/node.json" "$T/node.log"

for kind in latin1 jis; do
  echo "== $kind"
  storescu -aet SCANNER -aec VOXSEG 127.0.0.1 "$NODE_PORT" +sd "$T/$kind" ||
    fail "C-STORE of the $kind series failed"
  kill -0 "$NODE_PID" 2>/dev/null || fail "the node died receiving the $kind series"
done

# Both SEGs at the destination (the node segments each series once it is quiet).
seg_for() {  # seg_for SERIES_UID -> path of the SEG referencing it, if any
  local f
  for f in "$T"/scp-out/*; do
    [ -f "$f" ] || continue
    dcmdump +P 0008,0060 "$f" 2>/dev/null | grep -q "\[SEG\]" || continue
    grep -qaF "$1" "$f" && { echo "$f"; return 0; }
  done
  return 1
}
for kind in latin1 jis; do
  uid=$(uid_of "$T/$kind")
  end=$(( $(date +%s) + 120 ))
  until seg=$(seg_for "$uid"); do
    kill -0 "$NODE_PID" 2>/dev/null || fail "the node died processing the $kind series"
    [ "$(date +%s)" -lt "$end" ] || fail "no SEG for the $kind series ($uid) after 120 s"
    sleep 0.5
  done
  echo "$kind: SEG $(basename "$seg")"
  mapfile -t expected < <(charset_expected "$kind")
  python3 - "$seg" "${expected[0]}" "${expected[1]}" <<'PY' || fail "the $kind SEG does not carry its strings in a declared UTF-8"
import sys
data = open(sys.argv[1], "rb").read()
assert b"ISO_IR 192" in data, "no SpecificCharacterSet ISO_IR 192"
for s in sys.argv[2:]:
    assert s.encode("utf-8") in data, "missing %r" % s
PY
done
kill -0 "$NODE_PID" 2>/dev/null || fail "the node is not running"

# Every JSON the node wrote is valid UTF-8 (strict decoding) and parses.
python3 - "$T/spool" <<'PY' || fail "the spool holds JSON that is not valid UTF-8"
import json, os, sys
count = 0
for root, _, files in os.walk(sys.argv[1]):
    for name in files:
        path = os.path.join(root, name)
        if name.endswith(".json"):
            json.loads(open(path, "rb").read().decode("utf-8"))
            count += 1
        elif name.endswith(".jsonl"):
            for line in open(path, "rb").read().decode("utf-8").splitlines():
                json.loads(line)
            count += 1
print("valid UTF-8 JSON files in the spool:", count)
PY
echo "PASS"
