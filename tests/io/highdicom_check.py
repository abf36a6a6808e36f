#!/usr/bin/env python3
"""Cross-check a DICOM SEG written by voxseg with highdicom, per source image, voxel for voxel.

usage: highdicom_check.py SEG SOURCE_DIR EXPECTED.raw

EXPECTED.raw holds the expected label planes, one per source image, C order
(plane, row, column), little-endian, dtype and order given by EXPECTED.raw.json:
  {"dtype": "uint8" | "uint16", "rows": R, "columns": C,
   "planes": [{"sop_instance_uid": "1.2...", "frame": 0}, ...]}
("frame": 1-based frame of a multi-frame source, 0 for a single-frame one).

LABELMAP SEGs: pixel values are the SegmentNumbers (= label values) as highdicom returns them.
BINARY/FRACTIONAL SEGs: highdicom combines the segments; segment n is taken to be the n-th
smallest label value present in EXPECTED (voxseg's BINARY writer numbers segments so).
A source image no frame references (empty planes are omitted) must be all background.
Every instance the SEG references must be a file in SOURCE_DIR.

Prints one JSON line with the figures. Exit codes: 0 match, 1 mismatch, 2 usage / unreadable
input, 3 highdicom (or numpy/pydicom) not installed ("pip install highdicom").
"""
import json
import os
import sys


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import highdicom as hd
        import numpy as np
        import pydicom
    except ImportError as e:
        print(f"highdicom not installed ({e}): pip install highdicom", file=sys.stderr)
        return 3
    seg_path, source_dir, expected_path = argv[1:]
    with open(expected_path + ".json") as f:
        meta = json.load(f)
    rows, cols, planes = meta["rows"], meta["columns"], meta["planes"]
    expected = np.fromfile(expected_path, dtype=np.dtype(meta["dtype"]).newbyteorder("<"))
    expected = expected.reshape(len(planes), rows, cols)

    seg = hd.seg.segread(seg_path)
    seg_type = seg.segmentation_type.value
    problems = []

    # References: every referenced instance is a source file.
    source_uids = {}
    for root, _, names in os.walk(source_dir):
        for name in names:
            try:
                ds = pydicom.dcmread(os.path.join(root, name), stop_before_pixels=True)
            except Exception:
                continue
            source_uids[str(ds.SOPInstanceUID)] = str(ds.SOPClassUID)
    for series in seg.ReferencedSeriesSequence:
        for ref in series.ReferencedInstanceSequence:
            uid = str(ref.ReferencedSOPInstanceUID)
            if uid not in source_uids:
                problems.append(f"referenced instance {uid} is not in {source_dir}")
            elif source_uids[uid] != str(ref.ReferencedSOPClassUID):
                problems.append(f"referenced instance {uid}: SOP class differs")

    if seg_type == "LABELMAP":
        value_of = None
    else:
        present = sorted(int(v) for v in np.unique(expected) if v != 0)
        value_of = {n + 1: v for n, v in enumerate(present)}

    compared = mismatches = labelled = unreferenced = 0
    for k, plane in enumerate(planes):
        uid, frame = plane["sop_instance_uid"], int(plane.get("frame", 0))
        try:
            if frame > 0:
                got = seg.get_pixels_by_source_frame(
                    source_sop_instance_uid=uid, source_frame_numbers=[frame],
                    combine_segments=True, relabel=False)[0]
            else:
                got = seg.get_pixels_by_source_instance(
                    source_sop_instance_uids=[uid], combine_segments=True, relabel=False)[0]
        except (KeyError, ValueError, IndexError):
            got = np.zeros((rows, cols), dtype=np.uint16)  # no frame on this source image
            unreferenced += 1
        except RuntimeError as e:  # e.g. frames not marked SpatialLocationsPreserved
            problems.append(f"plane {k} ({uid}): highdicom refuses to index it: {e}")
            continue
        got = np.asarray(got).astype(np.int64)
        if value_of is not None:
            mapped = np.zeros_like(got)
            for n, v in value_of.items():
                mapped[got == n] = v
            got = mapped
        want = expected[k].astype(np.int64)
        if got.shape != want.shape:
            problems.append(f"plane {k} ({uid}): shape {got.shape} vs {want.shape}")
            continue
        diff = int(np.count_nonzero(got != want))
        if diff and len(problems) < 20:
            problems.append(f"plane {k} ({uid}): {diff} voxels differ")
        mismatches += diff
        compared += want.size
        labelled += int(np.count_nonzero(want))

    print(json.dumps({
        "segmentation_type": seg_type,
        "sop_class_uid": str(seg.SOPClassUID),
        "segments": [int(d.SegmentNumber) for d in seg.SegmentSequence],
        "planes": len(planes),
        "frames": int(seg.get("NumberOfFrames", 1)),
        "planes_without_frame": unreferenced,
        "voxels_compared": compared,
        "voxels_labelled": labelled,
        "voxels_differing": mismatches,
        "problems": problems,
    }))
    return 1 if problems or mismatches else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
