#!/usr/bin/env python3
"""Prints what nibabel (and Python's gzip) see in a NIfTI file, as one JSON object.

Used by tests/io/image_io_test.cpp as an independent reader of voxseg's .nii.gz output
(multi-member gzip written in parallel). Exit code 3 when nibabel is not installed.
"""
import gzip
import json
import sys

try:
    import nibabel as nib
    import numpy as np
except ImportError:
    sys.exit(3)

path = sys.argv[1]
img = nib.load(path)
data = np.asarray(img.dataobj)
raw = gzip.open(path, "rb").read() if path.endswith(".gz") else open(path, "rb").read()
print(json.dumps({
    "shape": list(data.shape),
    "dtype": str(data.dtype),
    "affine": img.affine.tolist(),
    "sum": int(data.astype(np.int64).sum()) if data.dtype.kind in "iu" else float(data.sum()),
    "first": data.flatten(order="F")[:8].tolist(),
    "decompressed_bytes": len(raw),
}))
