#!/usr/bin/env bash
# A node.json route's "options" (issue 36 item 3): every segment option of the schema
# (pipeline/segment_options_schema.h) by its key, validated at start-up and used by the run.
#  1. `voxseg serve --check` refuses a bad option naming the route and the key, with the schema's
#     message (an unknown key, a value out of range), exit code 2.
#  2. Two routes on one node, picked by the calling AE title: "opts" with
#     {"precision": "fp32", "tta": true, "overlap": 0.25}, "plain" without options. One phantom
#     series is sent to each (DCMTK storescu); the run.json the node keeps per job
#     (spool/results/<job>/, outputs seg + stats) shows that the "opts" run used them: precision
#     fp32 as asked for (not the backend's auto choice), mirroring on all three axes, overlap
#     0.25; the "plain" run shows the model's own settings (no mirroring, overlap 0.5, auto
#     precision), so the difference is the route's options and nothing else.
# No shared data (the series come from `voxseg phantom`).
# Usage: node_route_options_test.sh <voxseg> <source-dir>
set -euo pipefail
VOXSEG=$1
SRC=$2
T=$(mktemp -d /tmp/voxseg-node-options.XXXXXX)
source "$SRC/tests/node/orthanc_lib.sh"
trap cleanup EXIT
MODEL="$SRC/sample_data/models/ct-phantom"

# 1. --check names a bad option with its route.
check_bad() {  # check_bad OPTIONS_JSON EXPECTED_FRAGMENT
  cat >"$T/bad.json" <<JSON
{
  "spool_dir": "$T/bad-spool", "allowed_callers": [{"ae_title": "PACS"}],
  "routes": [{"name": "a", "model": "$MODEL"},
             {"name": "b", "model": "$MODEL", "options": $1}]
}
JSON
  local rc=0
  "$VOXSEG" serve --config "$T/bad.json" --check >"$T/check.out" 2>&1 || rc=$?
  [ "$rc" = 2 ] || { cat "$T/check.out"; fail "--check with options $1: exit $rc, expected 2"; }
  grep -qF -- "$2" "$T/check.out" ||
    { cat "$T/check.out"; fail "--check with options $1 does not say: $2"; }
  echo "--check: $(grep -F -- "$2" "$T/check.out" | head -1)"
}
check_bad '{"precison": "fp32"}' 'routes[1].options.precison: unknown option'
check_bad '{"overlap": 1.5}' 'routes[1].options.overlap: 1.5 is not a number in [0, 0.95]'
check_bad '{"tta": true, "no_tta": true}' '--tta and --no-tta exclude each other'
cat >"$T/good.json" <<JSON
{"spool_dir": "$T/good-spool", "allowed_callers": [{"ae_title": "PACS"}],
 "routes": [{"name": "a", "model": "$MODEL", "options": {"precision": "fp32", "tta": true}}]}
JSON
"$VOXSEG" serve --config "$T/good.json" --check || fail "--check refuses valid options"

# 2. The options reach the run.
for tool in storescu storescp dcmodify jq python3; do
  command -v $tool >/dev/null || skip "$tool missing (scripts/deps.sh)"
done
for kind in opts plain; do
  seed=21; [ $kind = plain ] && seed=22
  "$VOXSEG" phantom "$T/$kind.phantom" --seed $seed --size 64x64x24 --spacing 6x6x6 \
    --outputs dicom >/dev/null 2>&1 || fail "voxseg phantom failed"
  mv "$T/$kind.phantom/dicom" "$T/$kind"
done
NODE_PORT=$(free_port); SCP_PORT=$(free_port)
mkdir -p "$T/scp-out"
storescp -aet STORESCP -od "$T/scp-out" "$SCP_PORT" >"$T/storescp.log" 2>&1 &
PIDS+=($!)
cat >"$T/node.json" <<JSON
{
  "ae_title": "VOXSEG", "port": $NODE_PORT,
  "allowed_callers": [{"ae_title": "SENDOPTS"}, {"ae_title": "SENDPLAIN"}],
  "spool_dir": "$T/spool", "quiet_seconds": 1, "min_free_mb": 10,
  "destinations": {"scp": {"ae_title": "STORESCP", "host": "localhost", "port": $SCP_PORT}},
  "routes": [
    {"name": "opts", "match": {"calling_ae": "SENDOPTS"}, "model": "$MODEL",
     "outputs": ["seg", "stats"], "send_to": ["scp"],
     "options": {"precision": "fp32", "tta": true, "overlap": 0.25}},
    {"name": "plain", "match": {"calling_ae": "SENDPLAIN"}, "model": "$MODEL",
     "outputs": ["seg", "stats"], "send_to": ["scp"]}
  ]
}
JSON
start_node "$T/node.json" "$T/node.log"
storescu -aet SENDOPTS -aec VOXSEG 127.0.0.1 "$NODE_PORT" +sd "$T/opts" ||
  fail "C-STORE of the opts series failed"
storescu -aet SENDPLAIN -aec VOXSEG 127.0.0.1 "$NODE_PORT" +sd "$T/plain" ||
  fail "C-STORE of the plain series failed"

# The run.json kept for the job the route segmented (results/ once every destination has it).
run_json_of() {  # run_json_of ROUTE -> path
  local end=$(( $(date +%s) + 180 )) job
  while [ "$(date +%s)" -lt "$end" ]; do
    kill -0 "$NODE_PID" 2>/dev/null || fail "the node died"
    job=$(jq -r "select(.event == \"segmented\" and .route == \"$1\") | .job" \
      "$T/spool/audit.jsonl" 2>/dev/null | head -1)
    if [ -n "$job" ] && [ -f "$T/spool/results/$job/run.json" ]; then
      echo "$T/spool/results/$job/run.json"; return 0
    fi
    sleep 0.5
  done
  fail "no run.json for route $1 after 180 s"
}
opts=$(run_json_of opts)
plain=$(run_json_of plain)
for r in "$opts" "$plain"; do
  jq -c '{precision: .device.precision, reason: .device.precision_reason,
          mirror_axes: .inference.mirror_axes, overlap: .inference.overlap}' "$r"
done
jq -e '.device.precision == "fp32"' "$opts" >/dev/null || fail "opts: precision is not fp32"
jq -e '.device.precision_reason | startswith("asked for")' "$opts" >/dev/null ||
  fail "opts: fp32 was not the route's choice ($(jq -r .device.precision_reason "$opts"))"
jq -e '.inference.mirror_axes == [0, 1, 2]' "$opts" >/dev/null || fail "opts: tta not used"
jq -e '.inference.overlap == 0.25' "$opts" >/dev/null || fail "opts: overlap not used"
jq -e '.device.precision_reason | startswith("auto")' "$plain" >/dev/null ||
  fail "plain: precision was not the backend's choice"
jq -e '.inference.mirror_axes == []' "$plain" >/dev/null || fail "plain: mirrored without tta"
jq -e '.inference.overlap == 0.5' "$plain" >/dev/null || fail "plain: overlap is not the model's"
echo "PASS"
