"""nnU-Net's own image resampling for tests/pipeline/resample_test.cpp (ResampleGolden).

nnU-Net v2 resamples a pre-processed image with resample_data_or_seg_to_shape (default plans:
order 3, order_z 0, force_separate_z None): scikit-image's resize(mode="edge",
anti_aliasing=False, clip=True), slice by slice along an axis more than 3x coarser, which is then
resampled with order 0. This script runs exactly that nnU-Net function on two seeded float32
volumes (noise plus a bright block: the spline overshoots at its edges, so the clip to the input
range shows, and the noise reaches the borders, where mirror and edge boundaries differ):

  case "aniso": (z, y, x) = (9, 23, 19), spacing (5.0, 0.8, 0.75) -> (4.2, 0.7, 0.9): the z axis
                is more than 3x coarser, resampled separately with order 0, in-plane order 3
  case "iso":   (12, 14, 16), spacing (1.2, 1.0, 0.9) -> (1.0, 1.3, 0.8): order 3 on every axis

Files: <case>_in.f32 and <case>_out.f32 (C order (z, y, x) = voxseg's memory order with x fastest),
index.json (shapes, spacings).

Versions: nnunetv2 2.5.1 on Debian 12's /usr/bin/python3 (numpy 1.24.2, scipy 1.10.1,
scikit-image 0.19.3); install as tests/pipeline/data/gen_cascade_golden.py says, then

    PYTHONPATH=/tmp/nnu:/tmp/stub /usr/bin/python3 tests/pipeline/data/gen_resample_golden.py
"""
import json
import os

import numpy as np
from nnunetv2.preprocessing.resampling.default_resampling import (
    compute_new_shape, resample_data_or_seg_to_shape)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "resample")


def image(shape, rng):
    img = rng.standard_normal(shape).astype(np.float32)
    sl = tuple(slice(n // 4, n // 4 + max(1, n // 3)) for n in shape)
    img[sl] += 6.0
    return img


def main():
    rng = np.random.RandomState(15)
    os.makedirs(OUT, exist_ok=True)
    index = {"cases": []}
    for name, shape, spacing, target in [
        ("aniso", (9, 23, 19), (5.0, 0.8, 0.75), (4.2, 0.7, 0.9)),
        ("iso", (12, 14, 16), (1.2, 1.0, 0.9), (1.0, 1.3, 0.8)),
    ]:
        img = image(shape, rng)
        new_shape = compute_new_shape(shape, spacing, target)
        out = resample_data_or_seg_to_shape(img[None], new_shape, spacing, target, is_seg=False,
                                            order=3, order_z=0, force_separate_z=None)[0]
        assert out.dtype == np.float32 and out.shape == tuple(new_shape)
        img.tofile(os.path.join(OUT, name + "_in.f32"))
        out.tofile(os.path.join(OUT, name + "_out.f32"))
        index["cases"].append({"name": name, "shape_zyx": list(shape),
                               "spacing_zyx": list(spacing), "target_spacing_zyx": list(target),
                               "new_shape_zyx": [int(n) for n in new_shape]})
        print(name, shape, "->", tuple(new_shape), "range in", img.min(), img.max(),
              "out", out.min(), out.max())
    with open(os.path.join(OUT, "index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
