#!/usr/bin/env bash
# voxseg serve's guards, with DCMTK's own tools as the senders (label slow, data):
#   - DICOM TLS: the node listens with a server certificate and requires client certificates
#     from its trusted CA; storescu --tls with such a certificate stores, one signed by another
#     CA and a plain TCP connection are refused, and the node keeps serving;
#   - a malformed instance (no SeriesInstanceUID) is refused with status 0xA900 and audited with
#     its reason, nothing reaches the spool, the node keeps serving;
#   - four senders at once (one association each) store 4 x 28 instances, series kept apart;
#   - JPEG lossless instances are stored as received, an enhanced MR (96 frames) is accepted
#     and its frames counted for routing; SIGTERM stops the node (exit 0) keeping the spool;
#   - group_by study: a series is completed only when its whole study is quiet, then all of its
#     series together (two series of one study sent 1 s apart, quiet_seconds 3);
#   - STOW-RS over HTTPS (libcurl) to a small HTTPS endpoint: delivered (SEG and RTSTRUCT in one
#     request, bearer token sent) when its certificate chains to ca_file, held with a
#     certificate error and nothing sent when ca_file is another CA;
#   - C-STORE over TLS to DCMTK's storescp requiring client certificates: the node's SEG is
#     stored when the destination has the node's client certificate, refused without one or
#     with one from another CA, where the result is held in the outbox;
#   - every file of ../shared/data/pydicom-test-files offered: the node keeps serving, exactly
#     the acknowledged instances are in the spool, refusals after negotiation carry a reason;
#   - disk guard: with the spool on a small tmpfs, filling it below min_free_mb makes the node
#     refuse associations ("out of resources", logged, metrics, /healthz 503) and accept them
#     again once space is freed (skipped with a message where tmpfs cannot be mounted).
# Usage: node_security_test.sh <voxseg> <source-dir> [shared-data]
set -euo pipefail
VOXSEG=$1
SRC=$2
DATA=${3:-$SRC/../shared/data}
SERIES_DIR="$DATA/dcm_qa_ct/GE_HiSpeedDual_tilt_varspacing"
T=$(mktemp -d /tmp/voxseg-node-sec.XXXXXX)
MNT=""
source "$SRC/tests/node/orthanc_lib.sh"
require_node_test_env 0
cleanup_all() { cleanup_mount; cleanup; }
cleanup_mount() { if [ -n "$MNT" ]; then umount "$MNT" 2>/dev/null || true; fi; }
trap cleanup_all EXIT

# A CA, a server and a client certificate from it, and a client certificate from another CA.
cd "$T"
mkcert() {  # mkcert NAME CA_NAME
  openssl req -new -newkey rsa:2048 -nodes -keyout "$1.key" -subj "/CN=$1" -out "$1.csr" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 2 \
    -sha256 -out "$1.pem" 2>/dev/null
}
for ca in ca otherca; do
  openssl req -x509 -newkey rsa:2048 -nodes -keyout $ca.key -subj "/CN=$ca" -days 2 -sha256 \
    -out $ca.pem 2>/dev/null
done
mkcert server ca; mkcert client ca; mkcert intruder otherca
cd - >/dev/null

NODE_PORT=$(free_port); NODE_HTTP=$(free_port)
write_config() {  # write_config SPOOL MIN_FREE_MB TLS(true|false)
  cat >"$T/node.json" <<JSON
{
  "ae_title": "VOXSEG", "port": $NODE_PORT, "http_port": $NODE_HTTP,
  "allowed_callers": [{"ae_title": "SCANNER"}],
  "spool_dir": "$1", "quiet_seconds": 30, "min_free_mb": $2,
  "tls": {"enabled": $3, "certificate": "server.pem", "private_key": "server.key",
          "trusted": ["ca.pem"]},
  "routes": [{"name": "ct", "match": {"modality": "CT"},
              "model": "$SRC/sample_data/models/ct-phantom"}]
}
JSON
}
FILE="$SERIES_DIR/01.dcm"
SENDERS=()
received() { find "$1/incoming" -name '*.dcm' | wc -l; }

echo "== TLS"
write_config "$T/spool" 10 true
start_node "$T/node.json" "$T/node.log"
storescu +tls "$T/client.key" "$T/client.pem" +cf "$T/ca.pem" -aet SCANNER -aec VOXSEG \
  localhost "$NODE_PORT" "$FILE" || fail "TLS store with a trusted client certificate failed"
[ "$(received "$T/spool")" = 1 ] || fail "TLS store not in the spool"
if storescu +tls "$T/intruder.key" "$T/intruder.pem" +cf "$T/ca.pem" -aet SCANNER -aec VOXSEG \
  localhost "$NODE_PORT" "$SERIES_DIR/02.dcm" 2>/dev/null; then
  fail "a client certificate from an untrusted CA was accepted"
fi
if storescu -aet SCANNER -aec VOXSEG localhost "$NODE_PORT" "$SERIES_DIR/03.dcm" 2>/dev/null; then
  fail "a plain TCP association was accepted by the TLS listener"
fi
storescu +tls "$T/client.key" "$T/client.pem" +cf "$T/ca.pem" -aet SCANNER -aec VOXSEG \
  localhost "$NODE_PORT" "$SERIES_DIR/04.dcm" || fail "node stopped serving TLS after refusals"
[ "$(received "$T/spool")" = 2 ] || fail "refused TLS peers stored something"
kill -9 "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true

echo "== malformed instances"
write_config "$T/spool" 10 false
start_node "$T/node.json" "$T/node.log"
cp "$SERIES_DIR/05.dcm" "$T/no-series.dcm"
dcmodify -nb -e "(0020,000e)" "$T/no-series.dcm"
storescu -v -aet SCANNER -aec VOXSEG 127.0.0.1 "$NODE_PORT" "$T/no-series.dcm" >"$T/bad.txt" 2>&1 || true
grep -q "Received Store Response (Error: DataSetDoesNotMatchSOPClass)" "$T/bad.txt" || { cat "$T/bad.txt"; fail "no failure status for an instance without SeriesInstanceUID"; }
jq -s -e 'any(.[]; .event == "instance_refused" and (.reason | test("SeriesInstanceUID")))' \
  "$T/spool/audit.jsonl" >/dev/null || fail "refused instance not audited with its reason"
echoscu -aet SCANNER -aec VOXSEG 127.0.0.1 "$NODE_PORT" || fail "node stopped serving after a malformed instance"
[ "$(received "$T/spool")" = 2 ] || fail "a malformed instance reached the spool"

echo "== four associations at once"
for i in 1 2 3 4; do make_series "$SERIES_DIR" "$T/par$i" >/dev/null; done
for i in 1 2 3 4; do
  storescu -aet SCANNER -aec VOXSEG 127.0.0.1 "$NODE_PORT" "$T/par$i" +sd >"$T/par$i.txt" 2>&1 &
  SENDERS+=($!)
done
for p in "${SENDERS[@]}"; do wait "$p" || fail "a concurrent sender failed"; done
[ "$(received "$T/spool")" = $((2 + 4 * 28)) ] || fail "concurrent stores: $(received "$T/spool") instances in the spool"
[ "$(find "$T/spool/incoming" -name series.json | wc -l)" = 5 ] || fail "concurrent series not kept apart"

echo "== compressed and enhanced instances are stored as received"
dcmcjpeg "$SERIES_DIR/06.dcm" "$T/jpegll.dcm"  # JPEG lossless, process 14 SV1
storescu -xs -aet SCANNER -aec VOXSEG 127.0.0.1 "$NODE_PORT" "$T/jpegll.dcm" || fail "JPEG lossless refused"
SOP=$(dcmdump +P 0008,0018 "$T/jpegll.dcm" | sed -n 's/.*\[\(.*\)\].*/\1/p')
STORED=$(find "$T/spool/incoming" -name "$SOP.dcm")
[ -n "$STORED" ] || fail "JPEG lossless instance not in the spool"
dcmdump +P 0002,0010 "$STORED" | grep -q JPEGLossless || fail "compressed instance not stored as received"
ENH=$(find "$DATA/dcm_qa_xa30" -type f -name '*.dcm' | head -1)
if [ -n "$ENH" ]; then
  storescu -R -aet SCANNER -aec VOXSEG 127.0.0.1 "$NODE_PORT" "$ENH" || fail "enhanced MR refused"
  jq -s -e 'any(.[]; .frames_per_instance == 96)' "$T"/spool/incoming/*/series.json >/dev/null ||
    fail "enhanced MR's frames not recorded for routing"
fi
kill -TERM "$NODE_PID"
for _ in $(seq 1 100); do kill -0 "$NODE_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$NODE_PID" 2>/dev/null && fail "SIGTERM did not stop the node within 10 s"
wait "$NODE_PID" || fail "SIGTERM: exit code $? (expected 0)"
[ -n "$(find "$T/spool/incoming" -name '*.dcm')" ] || fail "SIGTERM lost the series still arriving"

echo "== group_by study: every series of a study waits for the study to be quiet"
# Two series of one study, the second sent 1 s after the first with quiet_seconds 3: grouped by
# study, the first is completed together with the second, 3 s after the second's last instance
# (grouped by series it would be completed 3 s after its own, at least 1.3 s earlier). No route
# takes CT here: nothing is segmented.
make_series "$SERIES_DIR" "$T/studyA" >"$T/studyA.uid"
make_series "$SERIES_DIR" "$T/studyB" >"$T/studyB.uid"
cat >"$T/study.json" <<JSON
{
  "ae_title": "VOXSEG", "port": $NODE_PORT, "allowed_callers": [{"ae_title": "SCANNER"}],
  "spool_dir": "$T/spool-study", "quiet_seconds": 3, "group_by": "study", "min_free_mb": 10,
  "routes": [{"name": "mr", "match": {"modality": "MR"},
              "model": "$SRC/sample_data/models/ct-phantom"}]
}
JSON
start_node "$T/study.json" "$T/study.log"
storescu -aet SCANNER -aec VOXSEG 127.0.0.1 "$NODE_PORT" +sd "$T/studyA" || fail "store of series A failed"
sleep 1
storescu -aet SCANNER -aec VOXSEG 127.0.0.1 "$NODE_PORT" +sd "$T/studyB" || fail "store of series B failed"
B_DONE=$(now)
for _ in $(seq 1 100); do
  [ "$(grep -c '"event":"series_unmatched"' "$T/spool-study/audit.jsonl")" = 2 ] && break
  sleep 0.1
done
python3 - "$T/spool-study/audit.jsonl" "$(cat "$T/studyA.uid")" "$(cat "$T/studyB.uid")" "$B_DONE" <<'PY' || fail "series of one study not completed together"
import sys, json, datetime as dt
ev = [json.loads(l) for l in open(sys.argv[1])]
ts = lambda e: dt.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
    tzinfo=dt.timezone.utc).timestamp()
got = {e["series_uid"]: ts(e) for e in ev if e["event"] == "series_received"}
a, b, b_done = sys.argv[2], sys.argv[3], float(sys.argv[4])
assert a in got and b in got, "series_received: %s" % got
print("series A completed %.2f s after the last instance of series B, B %.2f s after A" %
      (got[a] - b_done, got[b] - got[a]))
assert got[a] >= b_done + 2.5, "series A did not wait for the quiet period after series B"
assert abs(got[b] - got[a]) < 0.5, "the series of the study were not completed together"
PY
kill -9 "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true

echo "== STOW-RS over HTTPS: the server certificate is checked"
# A minimal HTTPS endpoint (Python's ssl + http.server, certificate for localhost from "ca")
# answering 200 to POSTs and counting the DICOM parts it got.
openssl req -new -newkey rsa:2048 -nodes -keyout "$T/web.key" -subj "/CN=localhost" \
  -addext "subjectAltName=DNS:localhost" -out "$T/web.csr" 2>/dev/null
openssl x509 -req -in "$T/web.csr" -CA "$T/ca.pem" -CAkey "$T/ca.key" -CAcreateserial -days 2 \
  -sha256 -copy_extensions copyall -out "$T/web.pem" 2>/dev/null
WEB_PORT=$(free_port)
python3 - "$WEB_PORT" "$T/web.pem" "$T/web.key" "$T/stow-parts.txt" <<'PY' &
import http.server, ssl, sys
port, cert, key, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with open(out, "a") as f:
            f.write("%d %s\n" % (body.count(b"Content-Type: application/dicom"),
                                 self.headers.get("Authorization", "-")))
        self.send_response(200); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *a): pass
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(cert, key)
srv = http.server.HTTPServer(("127.0.0.1", port), H)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
PY
PIDS+=($!)
echo "token-123" >"$T/token.txt"
stow_config() {  # stow_config SPOOL CA_FILE
  cat >"$T/stow.json" <<JSON
{
  "ae_title": "VOXSEG", "port": $NODE_PORT, "allowed_callers": [{"ae_title": "SCANNER"}],
  "spool_dir": "$1", "quiet_seconds": 1, "min_free_mb": 10,
  "send": {"attempts": 2, "initial_delay_seconds": 0.2},
  "destinations": {"web": {"type": "dicomweb", "url": "https://localhost:$WEB_PORT/dicom-web/studies",
                           "ca_file": "$2", "bearer_token_file": "$T/token.txt"}},
  "routes": [{"name": "ct", "match": {"modality": "CT"},
              "model": "$SRC/sample_data/models/ct-phantom", "outputs": ["seg", "rtstruct"],
              "send_to": ["web"]}]
}
JSON
}
stow_config "$T/spool-https" "$T/ca.pem"
start_node "$T/stow.json" "$T/stow.log"
storescu -aet SCANNER -aec VOXSEG 127.0.0.1 "$NODE_PORT" +sd "$SERIES_DIR" || fail "store for STOW failed"
for _ in $(seq 1 600); do grep -q '"event":"sent"' "$T/spool-https/audit.jsonl" && break; sleep 0.1; done
grep -q '"event":"sent"' "$T/spool-https/audit.jsonl" || { tail "$T/stow.log"; fail "not delivered by HTTPS"; }
grep -q "^2 Bearer token-123$" "$T/stow-parts.txt" || fail "STOW-RS request: $(cat "$T/stow-parts.txt")"
kill -9 "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true
stow_config "$T/spool-untrusted" "$T/otherca.pem"
start_node "$T/stow.json" "$T/stow.log"
storescu -aet SCANNER -aec VOXSEG 127.0.0.1 "$NODE_PORT" +sd "$SERIES_DIR" || fail "store for STOW failed"
wait_file "$T/spool-untrusted/outbox/*/held" 60 || fail "a server certificate from an untrusted CA was accepted"
grep -qi "certificate" "$T"/spool-untrusted/outbox/*/held || fail "held without saying why: $(cat "$T"/spool-untrusted/outbox/*/held)"
[ "$(wc -l <"$T/stow-parts.txt")" = 1 ] || fail "the untrusted server got a request"
kill -9 "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true

echo "== C-STORE over TLS to a destination that requires a client certificate"
# DCMTK's storescp with TLS, its certificate from "ca", requiring a client certificate that
# chains to "ca". The route sends to three destinations that are all this storescp: with the
# node's client certificate (stored), without one and with one from another CA (both refused:
# the result stays held in the outbox, the stored destination is not sent to again).
SCP_PORT=$(free_port)
mkdir -p "$T/scp-out"
storescp +tls "$T/server.key" "$T/server.pem" +cf "$T/ca.pem" --require-peer-cert -dhl \
  -aet STORESCP -od "$T/scp-out" "$SCP_PORT" >"$T/storescp.log" 2>&1 &
PIDS+=($!)
cat >"$T/scu.json" <<JSON
{
  "ae_title": "VOXSEG", "port": $NODE_PORT, "allowed_callers": [{"ae_title": "SCANNER"}],
  "spool_dir": "$T/spool-scu", "quiet_seconds": 1, "min_free_mb": 10,
  "send": {"attempts": 2, "initial_delay_seconds": 0.2},
  "destinations": {
    "with-cert": {"ae_title": "STORESCP", "host": "localhost", "port": $SCP_PORT,
                  "tls": {"certificate": "client.pem", "private_key": "client.key",
                          "trusted": ["ca.pem"]}},
    "no-cert": {"ae_title": "STORESCP", "host": "localhost", "port": $SCP_PORT,
                "tls": {"trusted": ["ca.pem"]}},
    "other-ca": {"ae_title": "STORESCP", "host": "localhost", "port": $SCP_PORT,
                 "tls": {"certificate": "intruder.pem", "private_key": "intruder.key",
                         "trusted": ["ca.pem"]}}},
  "routes": [{"name": "ct", "match": {"modality": "CT"},
              "model": "$SRC/sample_data/models/ct-phantom",
              "send_to": ["with-cert", "no-cert", "other-ca"]}]
}
JSON
start_node "$T/scu.json" "$T/scu.log"
storescu -aet SCANNER -aec VOXSEG 127.0.0.1 "$NODE_PORT" +sd "$SERIES_DIR" || fail "store for TLS C-STORE failed"
wait_file "$T/spool-scu/outbox/*/held" 90 || { tail "$T/scu.log"; fail "the result was not held"; }
JOB_DIR=$(dirname "$(compgen -G "$T/spool-scu/outbox/*/held" | head -1)")
[ "$(find "$T/scp-out" -type f | wc -l)" = 1 ] ||
  fail "storescp holds $(find "$T/scp-out" -type f | wc -l) files (expected the SEG once); $(tail -5 "$T/storescp.log")"
dcmdump +P 0008,0060 "$(find "$T/scp-out" -type f)" | grep -q SEG || fail "storescp did not get the SEG"
[ -f "$JOB_DIR/sent-with-cert.json" ] || fail "no confirmation from the destination with the client certificate"
[ ! -e "$JOB_DIR/sent-no-cert.json" ] && [ ! -e "$JOB_DIR/sent-other-ca.json" ] ||
  fail "a destination without a trusted client certificate confirmed"
[ -n "$(find "$JOB_DIR" -name '*.dcm')" ] || fail "the held result is not kept in the outbox"
for d in no-cert other-ca; do
  jq -s -e --arg d "$d" 'any(.[]; .event == "send_failed" and .destination == $d)' \
    "$T/spool-scu/audit.jsonl" >/dev/null || fail "failed send to $d not audited"
done
echo "held because: $(cat "$JOB_DIR/held")"
kill -9 "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true

echo "== malformed files of pydicom-test-files"
# Every file of the robustness matrix offered by storescu, one association each: the node keeps
# serving, exactly the instances it acknowledged are in the spool (nothing half-written), and
# what it refuses after negotiation is refused with a reason in the audit log. Most files are
# not offered at all: storescu cannot read them, or their SOP class (SC, RT, US, SR, ...) is not
# one the node accepts, which is refused at negotiation.
PYD="$DATA/pydicom-test-files"
if [ -d "$PYD" ]; then
  write_config "$T/spool-pyd" 10 false
  start_node "$T/node.json" "$T/node-pyd.log"
  offered=0 acknowledged=0
  : >"$T/pyd-uids.txt"
  for f in "$PYD"/*.dcm; do
    offered=$((offered + 1))
    if timeout 30 storescu -aet SCANNER -aec VOXSEG 127.0.0.1 "$NODE_PORT" "$f" >>"$T/pyd.txt" 2>&1; then
      acknowledged=$((acknowledged + 1))
      dcmdump +P SOPInstanceUID "$f" | sed 's/.*\[\(.*\)\].*/\1/' >>"$T/pyd-uids.txt"
    fi
    kill -0 "$NODE_PID" 2>/dev/null || fail "the node died on $f"
  done
  echoscu -aet SCANNER -aec VOXSEG 127.0.0.1 "$NODE_PORT" || fail "node stopped serving after pydicom-test-files"
  refused=$(jq -s '[.[] | select(.event == "instance_refused")] | length' "$T/spool-pyd/audit.jsonl")
  jq -s -e 'all(.[] | select(.event == "instance_refused"); (.reason // "") != "")' \
    "$T/spool-pyd/audit.jsonl" >/dev/null || fail "a refusal without its reason"
  stored=$(received "$T/spool-pyd")
  not_negotiated=$(grep -c "No presentation context" "$T/pyd.txt" || true)
  echo "pydicom-test-files: $offered files, $acknowledged acknowledged ($(sort -u "$T/pyd-uids.txt" | wc -l) distinct instances), $stored in the spool, $refused refused by the node with a reason, $not_negotiated SOP classes refused at negotiation"
  # Several files are one instance in other encodings (same SOP Instance UID): stored once.
  unique=$(sort -u "$T/pyd-uids.txt" | wc -l)
  [ "$stored" = "$unique" ] || fail "$unique distinct instances acknowledged but $stored in the spool"
  [ -z "$(find "$T/spool-pyd" -name '.tmp-*'; find "$T/spool-pyd/tmp" -type f 2>/dev/null)" ] ||
    fail "temporary files left in the spool"
  kill -9 "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true
else
  echo "SKIP (pydicom-test-files part): $PYD absent"
fi

echo "== disk guard"
MNT="$T/small"
mkdir -p "$MNT"
if ! mount -t tmpfs -o size=40m tmpfs "$MNT" 2>/dev/null; then
  MNT=""
  echo "SKIP (disk guard part): cannot mount a tmpfs here (needs root / CAP_SYS_ADMIN)"
  echo "PASS"
  exit 0
fi
write_config "$MNT/spool" 20 false
start_node "$T/node.json" "$T/node2.log"
echoscu -aet SCANNER -aec VOXSEG 127.0.0.1 "$NODE_PORT" || fail "echo with free space refused"
dd if=/dev/zero of="$MNT/filler" bs=1M count=25 2>/dev/null
if storescu -aet SCANNER -aec VOXSEG 127.0.0.1 "$NODE_PORT" "$FILE" 2>"$T/full.txt"; then
  fail "stored although the spool was below min_free_mb"
fi
grep -q "out of resources" "$T/node2.log" || fail "refusal for lack of space not logged"
curl -s "http://127.0.0.1:$NODE_HTTP/metrics" |
  grep -q 'voxseg_node_associations_rejected_total{reason="out_of_resources"} 1' || fail "metrics: disk refusal"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$NODE_HTTP/healthz")" = 503 ] ||
  fail "/healthz not 503 while refusing"
rm "$MNT/filler"
storescu -aet SCANNER -aec VOXSEG 127.0.0.1 "$NODE_PORT" "$FILE" || fail "not accepting after space was freed"
[ "$(received "$MNT/spool")" = 1 ] || fail "store after freeing space not in the spool"
kill -9 "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true
echo "PASS"
