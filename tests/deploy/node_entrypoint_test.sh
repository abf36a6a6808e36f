#!/usr/bin/env bash
# deploy/node: the systemd unit passes `systemd-analyze verify` (with voxseg at the path the unit
# names replaced by the build's), and the container entry point runs the real node: a missing
# configuration exits 3 naming it, a bad key stops it naming the key before the node starts, a
# valid one serves (C-ECHO answered by DCMTK's echoscu) and SIGTERM ends it with exit 0.
# Usage: node_entrypoint_test.sh <voxseg binary> <source dir>; exit 77 = skipped.
set -euo pipefail
VOXSEG=$1 SRC=$2
T=$(mktemp -d); NODE_PID=
cleanup() { [ -n "$NODE_PID" ] && kill -9 "$NODE_PID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v echoscu >/dev/null || { echo "echoscu missing (scripts/deps.sh: dcmtk)"; exit 77; }
mkdir -p "$T/bin"; ln -s "$(readlink -f "$VOXSEG")" "$T/bin/voxseg"
export PATH="$T/bin:$PATH"
ENTRY="$SRC/deploy/node/entrypoint-serve.sh"

echo "== systemd unit"
if command -v systemd-analyze >/dev/null; then
  sed "s#/usr/local/bin/voxseg#$T/bin/voxseg#g" "$SRC/deploy/node/voxseg-serve.service" \
    >"$T/voxseg-serve.service"
  # verify complains about the User= it cannot resolve on a build machine only through
  # warnings; errors (bad keys, bad values, missing executables) fail it.
  out=$(systemd-analyze verify "$T/voxseg-serve.service" 2>&1) || fail "systemd-analyze: $out"
  echo "$out" | grep -i -E "unknown|invalid|failed to parse" && fail "systemd-analyze: $out"
else
  echo "systemd-analyze missing: unit not verified"
fi

echo "== missing configuration"
set +e
VOXSEG_NODE_CONFIG="$T/none.json" sh "$ENTRY" >"$T/out" 2>&1; rc=$?
set -e
[ "$rc" = 3 ] || fail "missing config: exit $rc: $(cat "$T/out")"
grep -q "no configuration at $T/none.json" "$T/out" || fail "message: $(cat "$T/out")"

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
PORT=$(port)
write() {  # write MATCH_KEY
  cat >"$T/node.json" <<JSON
{"ae_title": "VOXSEG", "port": $PORT, "allowed_callers": [{"ae_title": "PACS"}],
 "spool_dir": "$T/spool", "min_free_mb": 1,
 "routes": [{"name": "ct", "match": {"$1": "CT"}, "model": "$SRC/sample_data/models/ct-phantom"}]}
JSON
}

echo "== bad key"
write modalty
set +e
VOXSEG_NODE_CONFIG="$T/node.json" sh "$ENTRY" >"$T/out" 2>&1; rc=$?
set -e
[ "$rc" != 0 ] || fail "a bad key was accepted"
grep -q "routes\[0\].match.modalty" "$T/out" || fail "bad key not named: $(cat "$T/out")"
[ ! -e "$T/spool" ] || fail "the node started although the configuration is bad"

echo "== serve, C-ECHO, SIGTERM"
write modality
VOXSEG_NODE_CONFIG="$T/node.json" VOXSEG_GRACE=5 sh "$ENTRY" >"$T/node.log" 2>&1 &
NODE_PID=$!
for _ in $(seq 1 100); do
  echoscu -aet PACS -aec VOXSEG 127.0.0.1 "$PORT" 2>/dev/null && break
  kill -0 "$NODE_PID" 2>/dev/null || fail "node exited: $(cat "$T/node.log")"
  sleep 0.2
done
echoscu -aet PACS -aec VOXSEG 127.0.0.1 "$PORT" || fail "no C-ECHO answer: $(cat "$T/node.log")"
# exec: the shell was replaced, so the PID is voxseg's own and receives the signal itself.
exe=$(readlink -f /proc/$NODE_PID/exe)
[ "$exe" = "$(readlink -f "$VOXSEG")" ] || fail "entry point did not exec voxseg (PID $NODE_PID runs $exe)"
kill -TERM "$NODE_PID"
set +e
wait "$NODE_PID"; rc=$?
set -e
NODE_PID=
[ "$rc" = 0 ] || fail "SIGTERM: exit $rc: $(tail -5 "$T/node.log")"
echo "ok"
