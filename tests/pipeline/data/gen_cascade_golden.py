"""nnU-Net's own cascade input for tests/pipeline/cascade_regions_test.cpp (CascadeGolden).

nnU-Net v2 feeds a 3d_cascade_fullres network the 3d_lowres prediction as extra channels:
DefaultPreprocessor.run_case_npy crops the previous segmentation with the image
(crop_to_nonzero), resamples it with the configuration's resampling_fn_seg
(resample_data_or_seg_to_shape, is_seg=True, order=1, order_z=0, force_separate_z=None: the
default plans), and data_iterators appends convert_labelmap_to_one_hot(seg[0],
label_manager.foreground_labels). This script runs exactly those nnU-Net functions on two
synthetic label maps (seeded) and writes the inputs and the one-hot channels nnU-Net produces:

  case "aniso": (z, y, x) = (12, 30, 26), spacing (4.0, 0.9, 1.1) -> (3.0, 0.8, 0.8): the
                z axis is more than 3x coarser, so nnU-Net resamples it separately (order 0)
  case "iso":   (14, 16, 18), spacing (1.3, 1.1, 0.9) -> (1.0, 1.0, 1.0): order 1 on every axis

Files: <case>_seg.u8 (the label map, C order (z, y, x) = voxseg's memory order with x fastest),
<case>_onehot.u8 (foreground labels x new shape), index.json (shapes, spacings, labels).

Versions: nnunetv2 2.5.1, batchgenerators 0.25.1, acvl_utils 0.2 (pip --no-deps into a
folder on PYTHONPATH), on Debian 12's /usr/bin/python3 (numpy 1.24.2, scipy 1.10.1,
scikit-image 0.19.3, pandas 1.5.3, torch 1.13.1). nnunetv2 2.5.1's default_resampling.py imports
sklearn without using it: an empty package named sklearn on PYTHONPATH satisfies the import.

    pip install --target /tmp/nnu --no-deps nnunetv2==2.5.1 batchgenerators==0.25.1 acvl_utils==0.2
    mkdir -p /tmp/stub/sklearn && touch /tmp/stub/sklearn/__init__.py
    PYTHONPATH=/tmp/nnu:/tmp/stub /usr/bin/python3 tests/pipeline/data/gen_cascade_golden.py
"""
import json
import os

import numpy as np
from nnunetv2.preprocessing.cropping.cropping import crop_to_nonzero
from nnunetv2.preprocessing.resampling.default_resampling import (
    compute_new_shape, resample_data_or_seg_to_shape)
from nnunetv2.utilities.label_handling.label_handling import convert_labelmap_to_one_hot

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cascade")
LABELS = [1, 2, 3]


def label_map(shape, rng):
    """Overlapping ellipsoids of labels 1..3 plus scattered single voxels (thin structures and
    isolated voxels are where an interpolation rule shows)."""
    z, y, x = np.meshgrid(*[np.arange(n, dtype=float) for n in shape], indexing="ij")
    seg = np.zeros(shape, dtype=np.uint8)
    for label in LABELS:
        for _ in range(3):
            c = [rng.uniform(0, n) for n in shape]
            r = [rng.uniform(1.5, n / 3) for n in shape]
            inside = ((z - c[0]) / r[0]) ** 2 + ((y - c[1]) / r[1]) ** 2 + ((x - c[2]) / r[2]) ** 2
            seg[inside <= 1] = label
    speckle = rng.random_sample(shape) < 0.03
    seg[speckle] = rng.randint(0, 4, size=int(speckle.sum()))
    return seg


def main():
    rng = np.random.RandomState(1234)
    os.makedirs(OUT, exist_ok=True)
    index = {"labels": LABELS, "cases": []}
    for name, shape, spacing, target in [
        ("aniso", (12, 30, 26), (4.0, 0.9, 1.1), (3.0, 0.8, 0.8)),
        ("iso", (14, 16, 18), (1.3, 1.1, 0.9), (1.0, 1.0, 1.0)),
    ]:
        seg = label_map(shape, rng)
        data = np.ones((1, *shape), dtype=np.float32)  # an image without zeros: no crop
        data_c, seg_c, bbox = crop_to_nonzero(data, seg[None].astype(np.int8))
        assert seg_c.shape[1:] == shape
        new_shape = compute_new_shape(shape, spacing, target)
        seg_r = resample_data_or_seg_to_shape(seg_c, new_shape, spacing, target, is_seg=True,
                                              order=1, order_z=0, force_separate_z=None)
        onehot = convert_labelmap_to_one_hot(seg_r[0], LABELS, np.uint8)
        seg.tofile(os.path.join(OUT, name + "_seg.u8"))
        onehot.astype(np.uint8).tofile(os.path.join(OUT, name + "_onehot.u8"))
        index["cases"].append({"name": name, "shape_zyx": list(shape),
                               "spacing_zyx": list(spacing), "target_spacing_zyx": list(target),
                               "new_shape_zyx": [int(n) for n in new_shape]})
        print(name, shape, "->", tuple(new_shape), "voxels per label",
              [int(c.sum()) for c in onehot])
    with open(os.path.join(OUT, "index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
