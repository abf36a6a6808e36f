# Helpers for the node tests against a real Orthanc (Debian's `orthanc`, `orthanc-dicomweb`):
# free loopback ports, an Orthanc with its own temporary configuration and storage, REST calls,
# and `voxseg serve` started and stopped in the background. Sourced by the test scripts; every
# process started here is stopped by cleanup (trap EXIT).

# require_node_test_env NEEDS_ORTHANC: exits 77 (ctest: skipped) with the reason, removing $T,
# when the test data ($SERIES_DIR), the DCMTK tools, jq, openssl or (1) Orthanc are missing.
skip() { echo "SKIP: $*"; rm -rf "${T:-/nonexistent}"; exit 77; }
require_node_test_env() {
  [ -d "$SERIES_DIR" ] || skip "test data absent: $SERIES_DIR"
  if [ "$1" = 1 ]; then
    command -v Orthanc >/dev/null || skip "Orthanc not installed (scripts/deps.sh)"
    [ -f /usr/share/orthanc/plugins/libOrthancDicomWeb.so ] ||
      skip "orthanc-dicomweb not installed (scripts/deps.sh)"
  fi
  for tool in storescu storescp echoscu dcmodify dcmdump jq openssl curl; do
    command -v $tool >/dev/null || skip "$tool missing (scripts/deps.sh)"
  done
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "${KEEP_TMP:-0}" != 1 ]; then rm -rf "$T"; fi
}

# A failure shows the end of the last started node's log: CI keeps only the test's output.
fail() {
  echo "FAIL: $*" >&2
  if [ -n "${NODE_LOG:-}" ] && [ -f "$NODE_LOG" ]; then
    echo "--- last 40 lines of $NODE_LOG" >&2
    tail -n 40 "$NODE_LOG" >&2
  fi
  exit 1
}

# start_orthanc NAME AET DICOM_PORT HTTP_PORT MODALITY_AET MODALITY_PORT -> sets ORTHANC_<NAME>_PID
start_orthanc() {
  local name=$1 aet=$2 dport=$3 hport=$4 mod_aet=$5 mod_port=$6
  local dir="$T/orthanc-$name"
  mkdir -p "$dir/db"
  cat >"$dir/orthanc.json" <<JSON
{
  "Name": "voxseg-test-$name",
  "StorageDirectory": "$dir/db",
  "IndexDirectory": "$dir/db",
  "DicomAet": "$aet",
  "DicomPort": $dport,
  "HttpPort": $hport,
  "RemoteAccessAllowed": false,
  "AuthenticationEnabled": false,
  "HttpServerEnabled": true,
  "DicomCheckCalledAet": false,
  "DicomAlwaysAllowStore": true,
  "DicomModalities": { "voxseg": ["$mod_aet", "127.0.0.1", $mod_port] },
  "Plugins": ["/usr/share/orthanc/plugins/libOrthancDicomWeb.so"],
  "DicomWeb": { "Enable": true, "Root": "/dicom-web/" },
  "StableAge": 1,
  "ConcurrentJobs": 2
}
JSON
  Orthanc "$dir/orthanc.json" >"$dir/log.txt" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$hport/system" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  cat "$dir/log.txt" >&2
  fail "Orthanc $name did not start"
}

# upload_series HTTP_PORT FOLDER -> prints the Orthanc series id
upload_series() {
  local hport=$1 folder=$2 id=""
  for f in "$folder"/*; do
    id=$(curl -sf -X POST "http://127.0.0.1:$hport/instances" --data-binary @"$f" | jq -r .ParentSeries) ||
      fail "upload of $f to Orthanc failed"
  done
  echo "$id"
}

# seg_instances HTTP_PORT SERIES_UID -> Orthanc instance ids of SEG instances referencing it.
# One /tools/find per call; each SEG's referenced series is fetched once and kept in $T/seg-refs
# (an Orthanc instance id is a hash of the instance's UIDs: its content does not change).
seg_instances() {
  local hport=$1 uid=$2 cache="$T/seg-refs" i ref
  mkdir -p "$cache"
  for i in $(curl -sf -X POST "http://127.0.0.1:$hport/tools/find" \
               -d '{"Level": "Instance", "Query": {"Modality": "SEG"}}' | jq -r '.[]'); do
    if [ ! -s "$cache/$i" ]; then
      curl -sf "http://127.0.0.1:$hport/instances/$i/tags?simplify" |
        jq -r '.ReferencedSeriesSequence[0].SeriesInstanceUID // "none"' >"$cache/$i.$$" &&
        mv "$cache/$i.$$" "$cache/$i" || continue
    fi
    read -r ref <"$cache/$i" || true
    [ "$ref" = "$uid" ] && echo "$i"
  done
  return 0  # the last test may have failed: not an error (set -e in the callers)
}

# wait_for_seg HTTP_PORT SERIES_UID TIMEOUT_S -> prints the first SEG instance id, or fails
wait_for_seg() {
  local hport=$1 uid=$2 timeout=$3 end ids
  end=$(( $(date +%s) + timeout ))
  while [ "$(date +%s)" -lt "$end" ]; do
    ids=$(seg_instances "$hport" "$uid")
    if [ -n "$ids" ]; then echo "$ids" | head -1; return 0; fi
    sleep 0.1
  done
  return 1
}

# push HTTP_PORT ORTHANC_SERIES_ID: C-STORE from Orthanc to modality "voxseg" (synchronous)
push() {
  curl -sf -X POST "http://127.0.0.1:$1/modalities/voxseg/store" \
    -d "{\"Resources\": [\"$2\"], \"Synchronous\": true}" >/dev/null
}

# start_node CONFIG LOG -> NODE_PID
start_node() {
  touch "$2"
  NODE_LOG=$2
  local before
  before=$(grep -c "listening as" "$2" || true)
  "$VOXSEG" serve --config "$1" >>"$2" 2>&1 &
  NODE_PID=$!
  PIDS+=($NODE_PID)
  for _ in $(seq 1 100); do
    [ "$(grep -c "listening as" "$2" || true)" -gt "$before" ] && return 0
    kill -0 "$NODE_PID" 2>/dev/null || fail "voxseg serve exited"
    sleep 0.1
  done
  fail "voxseg serve did not start listening"
}

now() { date +%s.%N; }

# make_series SRC DEST -> copies a series with a new SeriesInstanceUID and new SOP Instance UIDs
# (so that each scenario of a test has a series of its own); prints the series UID.
make_series() {
  local src=$1 dest=$2 uid
  uid="2.25.$(python3 -c 'import uuid; print(uuid.uuid4().int)')"
  mkdir -p "$dest"
  cp "$src"/*.dcm "$dest/"
  dcmodify -nb -m "(0020,000e)=$uid" -gin "$dest"/*.dcm >/dev/null 2>&1 ||
    fail "dcmodify failed on $dest"
  echo "$uid"
}

# count_seg HTTP_PORT SERIES_UID -> number of SEG instances referencing the series
count_seg() { seg_instances "$1" "$2" | grep -c . || true; }

# wait_file GLOB TIMEOUT_S: waits until a path matching GLOB exists
wait_file() {
  local end=$(( $(date +%s) + $2 ))
  while [ "$(date +%s)" -lt "$end" ]; do
    compgen -G "$1" >/dev/null && return 0
    sleep 0.05
  done
  return 1
}
