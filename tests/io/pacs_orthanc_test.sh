#!/usr/bin/env bash
# Starts a real Orthanc (Debian `orthanc` + `orthanc-dicomweb`) on free loopback ports with its
# own temporary storage, that checks the called AE title and knows one C-MOVE destination, runs
# a test executable against it (the ports and AE titles in VOXSEG_TEST_* variables, see
# tests/io/pacs_test_server.h) and stops it. Exit 77 (skipped) without Orthanc.
# Usage: pacs_orthanc_test.sh <source-dir> <test executable> [its arguments...]
set -euo pipefail
SRC=$1
shift
T=$(mktemp -d /tmp/voxseg-pacs.XXXXXX)
source "$SRC/tests/node/orthanc_lib.sh"
command -v Orthanc >/dev/null || skip "Orthanc not installed (scripts/deps.sh)"
[ -f /usr/share/orthanc/plugins/libOrthancDicomWeb.so ] ||
  skip "orthanc-dicomweb not installed (scripts/deps.sh)"
command -v curl >/dev/null || skip "curl missing (scripts/deps.sh)"
trap cleanup EXIT

DICOM=$(free_port); HTTP=$(free_port); MOVE_PORT=$(free_port)
mkdir -p "$T/db"
cat >"$T/orthanc.json" <<JSON
{
  "Name": "voxseg-pacs-test",
  "StorageDirectory": "$T/db",
  "IndexDirectory": "$T/db",
  "DicomAet": "ORTHANC",
  "DicomPort": $DICOM,
  "HttpPort": $HTTP,
  "RemoteAccessAllowed": false,
  "AuthenticationEnabled": false,
  "DicomCheckCalledAet": true,
  "DicomModalities": { "viewer": ["VOXSEGTEST", "127.0.0.1", $MOVE_PORT] },
  "Plugins": ["/usr/share/orthanc/plugins/libOrthancDicomWeb.so"],
  "DicomWeb": { "Enable": true, "Root": "/dicom-web/" },
  "StableAge": 1
}
JSON
Orthanc "$T/orthanc.json" >"$T/orthanc.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$HTTP/system" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$HTTP/system" >/dev/null || { cat "$T/orthanc.log" >&2; fail "Orthanc did not start"; }

export VOXSEG_TEST_ORTHANC_DICOM_PORT=$DICOM VOXSEG_TEST_ORTHANC_HTTP_PORT=$HTTP
export VOXSEG_TEST_ORTHANC_AET=ORTHANC VOXSEG_TEST_MOVE_AET=VOXSEGTEST VOXSEG_TEST_MOVE_PORT=$MOVE_PORT
rc=0
"$@" || rc=$?
if [ $rc -ne 0 ]; then
  echo "--- last 30 lines of the Orthanc log" >&2
  tail -n 30 "$T/orthanc.log" >&2
fi
exit $rc
