#!/usr/bin/env python3
"""Packs the MSD hippocampus crops (../shared/data/msd-hippocampus-cropped) into one .npz for
training (no pickle: flat arrays + shapes). Arrays are stored in (z, y, x) order, the C-order of
an ITK buffer, which is the "zyx" axis order of voxseg model packages.

    python3 tools/prepare_hippocampus.py --data ../shared/data/msd-hippocampus-cropped --out /tmp/hippo.npz
"""
import argparse
import os

import nibabel as nib
import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "../../shared/data/msd-hippocampus-cropped"))
    p.add_argument("--out", required=True)
    a = p.parse_args()
    names = sorted(f[: -len(".nii.gz")] for f in os.listdir(os.path.join(a.data, "images"))
                   if f.endswith(".nii.gz") and os.path.exists(os.path.join(a.data, "labels", f)))
    images, labels, shapes = [], [], []
    for n in names:
        img = nib.load(os.path.join(a.data, "images", n + ".nii.gz"))
        lab = nib.load(os.path.join(a.data, "labels", n + ".nii.gz"))
        x = np.asarray(img.dataobj).astype(np.float32).transpose(2, 1, 0)
        y = np.asarray(lab.dataobj).astype(np.uint8).transpose(2, 1, 0)
        assert x.shape == y.shape, n
        images.append(x.ravel())
        labels.append(y.ravel())
        shapes.append(x.shape)
    np.savez_compressed(a.out, images=np.concatenate(images), labels=np.concatenate(labels),
                        shapes=np.array(shapes, dtype=np.int64), names=np.array(names))
    print(f"{len(names)} cases -> {a.out}")


if __name__ == "__main__":
    main()
