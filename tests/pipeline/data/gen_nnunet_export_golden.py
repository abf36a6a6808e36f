#!/usr/bin/env python3
"""Goldens for the export of float16 logits as nnU-Net 2.5.1 does it (pipeline/prediction_export.h
ExportSpec::round_to_half): nnU-Net's own resample_data_or_seg_to_shape (order 1, order_z 0,
force_separate_z None: the plans' resampling_fn_probabilities) on float16 logits, then
apply_inference_nonlin (softmax in float32) and the argmax, as
convert_predicted_logits_to_segmentation_with_correct_shape does.

  nnunet_export/<case>.logits.u16   float16 bit patterns [K, z, y, x]
  nnunet_export/<case>.labels.u8    nnU-Net's label map [z, y, x]
  nnunet_export/index.json          shapes and spacings (z, y, x)

The channels are one shared field plus a few float16 steps each, so that many voxels have two
channels within a float16 step of each other after interpolation (the argmax then depends on
the rounding).

    PYTHONPATH=/tmp/nnpy /usr/bin/python3 tests/pipeline/data/gen_nnunet_export_golden.py
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "nnunet_export")
sys.path.insert(0, os.path.join(HERE, "../../../tools"))
import nnunet_ct_parity  # noqa: E402,F401  (torch 1.13 shims for nnunetv2 2.5.1)

import torch  # noqa: E402
from nnunetv2.preprocessing.resampling.default_resampling import resample_data_or_seg_to_shape  # noqa: E402
from nnunetv2.utilities.label_handling.label_handling import LabelManager  # noqa: E402

# name, network shape (z, y, x), output shape, network spacing, output spacing, channels
CASES = [
    ("aniso", (6, 17, 15), (7, 23, 19), (4.655, 0.8, 0.8), (4.0, 0.59, 0.63), 4),
    ("aniso_down", (9, 20, 22), (8, 13, 25), (4.655, 0.8, 0.8), (5.2, 1.23, 0.7), 3),
    ("iso", (10, 12, 11), (13, 15, 8), (1.2, 1.0, 1.1), (0.92, 0.8, 1.5), 3),
]


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(1)
    rng = np.random.default_rng(1515)
    index = {"generator": "tests/pipeline/data/gen_nnunet_export_golden.py", "cases": []}
    for name, shape, out_shape, spacing, out_spacing, k in CASES:
        # One shared field plus a few float16 steps per channel: the channels stay close.
        base = rng.integers(-6, 7, size=(1,) + shape) * 0.5
        logits = (base + rng.integers(-3, 4, size=(k,) + shape) * 2.0 ** -9).astype(np.float16)
        resampled = resample_data_or_seg_to_shape(torch.from_numpy(logits), out_shape, spacing,
                                                  out_spacing, is_seg=False, order=1, order_z=0,
                                                  force_separate_z=None)
        assert resampled.dtype == np.float16
        lm = LabelManager({"background": 0, **{f"l{i}": i for i in range(1, k)}},
                          regions_class_order=None)
        seg = lm.convert_probabilities_to_segmentation(lm.apply_inference_nonlin(resampled))
        seg = np.asarray(seg).astype(np.uint8)
        # float32 resampling then argmax: what the export did without the rounding.
        plain = resample_data_or_seg_to_shape(torch.from_numpy(logits.astype(np.float32)),
                                              out_shape, spacing, out_spacing, is_seg=False,
                                              order=1, order_z=0, force_separate_z=None)
        differ = int((plain.argmax(0) != seg).sum())
        logits.view(np.uint16).astype("<u2").tofile(os.path.join(OUT, name + ".logits.u16"))
        seg.tofile(os.path.join(OUT, name + ".labels.u8"))
        index["cases"].append({"name": name, "channels": k, "network_shape": list(shape),
                               "shape": list(out_shape), "network_spacing": list(spacing),
                               "spacing": list(out_spacing),
                               "float32_export_differs": differ})
        print(name, "labels", np.bincount(seg.ravel()), "float32 export differs at", differ)
    with open(os.path.join(OUT, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
