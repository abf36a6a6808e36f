#!/usr/bin/python3
"""Writes monai/spacing_golden.json: what MONAI 1.4.0 computes for pipeline/monai_spacing.h.

Two cases (a down- and an up-sampling mix per axis, one with an odd rounding): an image on a
RAS grid resampled by monai.transforms.Spacing (mode bilinear, MONAI's defaults: padding border,
align_corners False, float64), and random logits on that grid taken back as MONAI's spleen
postprocessing does (softmax, SpatialResample onto the original affine and shape in bilinear,
as Invertd with nearest_interp=False, then argmax).

    PYTHONPATH=build/pylib /usr/bin/python3 tests/pipeline/data/gen_monai_spacing_golden.py

Arrays are stored flattened: images i-fastest (numpy order "F" of MONAI's (x, y, z) arrays,
voxseg's Volume layout), logits in C order of [K, x, y, z] (a tensor in axis order "xyz").
"""
import json
import os

import numpy as np
import torch
from monai.data import MetaTensor
from monai.transforms import SpatialResample, Spacing

CASES = [
    {"name": "mixed", "shape": [7, 5, 4], "spacing": [1.3, 0.9, 2.5], "pixdim": [1.0, 1.25, 1.7]},
    {"name": "coarse", "shape": [9, 6, 5], "spacing": [0.8, 2.6, 3.3], "pixdim": [1.9, 2.1, 3.0]},
]


def main():
    rng = np.random.default_rng(15)
    out = {"monai": "1.4.0", "cases": []}
    for c in CASES:
        img = rng.normal(0, 100, c["shape"]).round(1).astype(np.float32)
        affine = np.diag(c["spacing"] + [1.0])
        affine[:3, 3] = [-20.0, 15.5, 3.25]
        x = MetaTensor(torch.from_numpy(img)[None], affine=torch.from_numpy(affine))
        y = Spacing(pixdim=c["pixdim"], mode="bilinear")(x)
        res = y[0].numpy()
        logits = rng.normal(0, 2, (3,) + res.shape).astype(np.float32)
        prob = torch.softmax(torch.from_numpy(logits), 0)
        pm = MetaTensor(prob, affine=y.affine)
        back = SpatialResample(mode="bilinear", padding_mode="border", align_corners=False,
                               dtype=torch.float64)(pm, dst_affine=torch.from_numpy(affine),
                                                    spatial_size=c["shape"])
        labels = back.argmax(0).numpy()
        out["cases"].append(dict(c, origin=affine[:3, 3].tolist(),
                                 image=img.flatten(order="F").tolist(),
                                 resampled_shape=list(res.shape),
                                 resampled_affine=np.asarray(y.affine).tolist(),
                                 resampled=res.flatten(order="F").astype(float).tolist(),
                                 logits=logits.flatten().astype(float).tolist(),
                                 labels=labels.flatten(order="F").astype(int).tolist()))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "monai", "spacing_golden.json")
    with open(path, "w") as f:
        json.dump(out, f)
        f.write("\n")
    print(f"written: {path}")


if __name__ == "__main__":
    main()
