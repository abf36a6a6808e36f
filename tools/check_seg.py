#!/usr/bin/env python3
"""Independent check of a DICOM SEG with pydicom and highdicom (not DCMTK).

Usage: tools/check_seg.py SEG.dcm [--labels LABELMAP.nii.gz|.nrrd]

Prints segments (number, label, category/type codes, algorithm), frames, and foreground voxels per
segment as pydicom decodes them; highdicom must parse the object (Segmentation.from_dataset).
With --labels (a NIfTI label map, read with nibabel) the voxel count of each label is compared with
the SEG's per-segment counts. No empty frames allowed. Exit status 0 when every check passes.
"""
import argparse
import sys

import numpy as np
import pydicom


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seg")
    parser.add_argument("--labels", help="label map the SEG was written from (NIfTI)")
    args = parser.parse_args()

    ds = pydicom.dcmread(args.seg)
    ok = True
    print(f"SOP class {ds.SOPClassUID} ({ds.SOPClassUID.name}), type {ds.SegmentationType}, "
          f"frames {int(ds.NumberOfFrames)}, {ds.Rows}x{ds.Columns}")
    pixels = ds.pixel_array
    if pixels.ndim == 2:
        pixels = pixels[None]
    frame_segments = [int(f.SegmentIdentificationSequence[0].ReferencedSegmentNumber)
                      for f in ds.PerFrameFunctionalGroupsSequence]
    counts = {}
    for segment, frame in zip(frame_segments, pixels):
        counts[segment] = counts.get(segment, 0) + int((frame > 0).sum())
    for item in ds.SegmentSequence:
        n = int(item.SegmentNumber)
        cat = item.SegmentedPropertyCategoryCodeSequence[0]
        typ = item.SegmentedPropertyTypeCodeSequence[0]
        print(f"segment {n} '{item.SegmentLabel}': {cat.CodingSchemeDesignator} {cat.CodeValue} "
              f"{cat.CodeMeaning} / {typ.CodingSchemeDesignator} {typ.CodeValue} {typ.CodeMeaning}, "
              f"{item.SegmentAlgorithmType} '{getattr(item, 'SegmentAlgorithmName', '')}', "
              f"CIELab {list(item.RecommendedDisplayCIELabValue)}, voxels {counts.get(n, 0)}")
    refs = ds.ReferencedSeriesSequence[0]
    print(f"references series {refs.SeriesInstanceUID} "
          f"({len(refs.ReferencedInstanceSequence)} instances), "
          f"frame of reference {ds.FrameOfReferenceUID}")
    empty = [i + 1 for i, frame in enumerate(pixels) if not frame.any()]
    if empty:
        print(f"FAIL: empty frames {empty}")
        ok = False

    try:
        import highdicom as hd
        seg = hd.seg.Segmentation.from_dataset(ds)
        print(f"highdicom {hd.__version__}: parsed, {len(seg.segment_numbers)} segments, "
              f"{len(seg.get_source_image_uids())} source images")
    except Exception as e:  # noqa: BLE001 - report any failure to parse
        print(f"FAIL: highdicom: {e!r}")
        ok = False

    if args.labels:
        import nibabel as nib
        labels = np.asarray(nib.load(args.labels).dataobj)
        values = sorted(int(v) for v in np.unique(labels) if v != 0)
        label_counts = [int((labels == v).sum()) for v in values]
        seg_counts = [counts.get(n, 0) for n in sorted(counts)]
        print(f"label map voxels per label {label_counts}, SEG voxels per segment {seg_counts}")
        if label_counts != seg_counts:
            print("FAIL: voxel counts differ")
            ok = False
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
