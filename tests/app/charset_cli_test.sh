#!/usr/bin/env bash
# Character sets end to end (issue 35 item 1): the corpus of tools/make_charset_corpus.py (28
# series, every character set voxseg handles, undeclared and wrongly declared ones) through
# `voxseg info --json --show-phi` (each string shown in UTF-8 as the manifest says, the JSON valid
# UTF-8) and `convert` (exit 0, valid sidecar); then a Latin-1 (ISO_IR 100, "Schädel nativ": the
# series of the issue, on which `segment` exited 1) and a Japanese ISO 2022 IR 87 phantom series
# through `segment` (exit 0; run.json and statistics.json valid UTF-8; SEG and RTSTRUCT declare
# ISO_IR 192 and carry the strings in UTF-8, read back by pydicom where installed) and `batch`
# (both cases done, journal and summary valid UTF-8).
# Usage: charset_cli_test.sh <voxseg> <source-dir>
set -euo pipefail
VOXSEG=$1
SRC=$2
T=$(mktemp -d /tmp/voxseg-charset-cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v python3 >/dev/null || { echo "SKIP: python3 missing"; exit 77; }
command -v dcmodify >/dev/null || { echo "SKIP: dcmodify missing (scripts/deps.sh)"; exit 77; }
source "$SRC/tests/node/charset_series.sh"
MODEL="$SRC/sample_data/models/ct-phantom"

echo "== corpus: info --json --show-phi, convert"
python3 "$SRC/tools/make_charset_corpus.py" "$T/corpus" || fail "corpus script failed"
mkdir -p "$T/info" "$T/convert"
for dir in "$T"/corpus/*/; do
  name=$(basename "$dir")
  "$VOXSEG" info --json --show-phi "$dir" >"$T/info/$name.json" 2>"$T/info/$name.err" ||
    fail "info $name exited $?: $(tail -3 "$T/info/$name.err")"
  "$VOXSEG" convert "$dir" -o "$T/convert/$name.nii.gz" >/dev/null 2>"$T/convert/$name.err" ||
    fail "convert $name exited $?: $(tail -3 "$T/convert/$name.err")"
done
python3 - "$T" <<'PY' || fail "info or convert show strings other than the manifest's"
import glob, json, os, sys
t = sys.argv[1]
manifest = json.load(open(os.path.join(t, "corpus", "manifest.json"), encoding="utf-8"))
bad = 0
for case in manifest["cases"]:
    name = case["name"]
    info = json.loads(open(os.path.join(t, "info", name + ".json"), "rb").read().decode("utf-8"))
    (volume,) = info["volumes"]
    shown = {"SeriesDescription": volume["description"], "PatientName": volume["patient"]["name"]}
    for field, value in shown.items():
        if value != case[field]:
            print("%s %s: %r, expected %r" % (name, field, value, case[field]))
            bad += 1
    for sidecar in glob.glob(os.path.join(t, "convert", name + "*.json")):
        json.loads(open(sidecar, "rb").read().decode("utf-8"))
print("info: %d cases, %d wrong fields" % (len(manifest["cases"]), bad))
sys.exit(1 if bad else 0)
PY

check_outputs() {  # check_outputs OUTDIR KIND: valid UTF-8 JSON; SEG/RTSTRUCT declared UTF-8
  local out=$1 kind=$2
  mapfile -t expected < <(charset_expected "$kind")
  python3 - "$out" "${expected[@]}" <<'PY'
import json, os, sys
out, name, study, series = sys.argv[1:5]
for f in ("run.json", "statistics.json"):
    json.loads(open(os.path.join(out, f), "rb").read().decode("utf-8"))
for f in ("segmentation.dcm", "rtstruct.dcm"):
    data = open(os.path.join(out, f), "rb").read()
    assert b"ISO_IR 192" in data, "%s: no SpecificCharacterSet ISO_IR 192" % f
    for s in (name, study):
        assert s.encode("utf-8") in data, "%s: %r not in UTF-8" % (f, s)
    try:
        import pydicom
    except ImportError:
        continue
    ds = pydicom.dcmread(os.path.join(out, f))
    assert str(ds.PatientName) == name, "%s: pydicom reads %r" % (f, str(ds.PatientName))
    assert ds.StudyDescription == study, "%s: pydicom reads %r" % (f, ds.StudyDescription)
    print("%s: pydicom reads %s / %s" % (f, str(ds.PatientName), ds.StudyDescription))
PY
}

echo "== segment"
mkdir -p "$T/cases"
charset_series latin1 "$T/cases/latin1" 21 || fail "cannot make the Latin-1 series"
charset_series jis "$T/cases/jis" 22 || fail "cannot make the Japanese series"
for kind in latin1 jis; do
  "$VOXSEG" segment "$T/cases/$kind" -m "$MODEL" -o "$T/seg-$kind" --device cpu \
    --outputs nifti,seg,rtstruct,stats >/dev/null 2>"$T/seg-$kind.err" ||
    fail "segment $kind exited $?: $(tail -3 "$T/seg-$kind.err")"
  check_outputs "$T/seg-$kind" "$kind" || fail "segment $kind outputs"
done
# The RTSTRUCT written in UTF-8 read back onto its series (ROI names into convert's sidecar).
"$VOXSEG" convert "$T/seg-latin1/rtstruct.dcm" --referenced "$T/cases/latin1" \
  -o "$T/rt-latin1.nii.gz" >/dev/null 2>"$T/rt.err" || fail "convert RTSTRUCT: $(tail -3 "$T/rt.err")"
for f in "$T"/rt-latin1*.json; do
  python3 -c 'import json, sys; json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))' "$f" ||
    fail "sidecar $f is not valid UTF-8 JSON"
done

echo "== batch"
"$VOXSEG" batch "$T/cases" -m "$MODEL" -o "$T/batch" --device cpu \
  --outputs seg,rtstruct,stats >/dev/null 2>"$T/batch.err" ||
  fail "batch exited $?: $(tail -5 "$T/batch.err")"
for kind in latin1 jis; do
  check_outputs "$T/batch/$kind" "$kind" || fail "batch $kind outputs"
done
python3 - "$T/batch/.voxseg-batch" <<'PY' || fail "batch journal or summary"
import glob, json, os, sys
states = {}
for path in glob.glob(os.path.join(sys.argv[1], "journal-*.jsonl")):
    for line in open(path, "rb").read().decode("utf-8").splitlines():
        entry = json.loads(line)
        states[entry["case_id"]] = entry["state"]
for path in glob.glob(os.path.join(sys.argv[1], "summary-*.json")):
    json.loads(open(path, "rb").read().decode("utf-8"))
assert states == {"latin1": "done", "jis": "done"}, states
print("batch journal:", states)
PY
echo "PASS"
