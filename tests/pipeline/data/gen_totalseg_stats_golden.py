"""TotalSegmentator 2.18.0's --statistics on small synthetic inputs, for
tests/pipeline/totalseg_statistics_test.cpp.

TotalSegmentator (python_api.py, not --fast) calls statistics.get_basic_statistics(seg, ct_img,
...) on the full-resolution label map and the original image with its defaults
(exclude_masks_at_border=True, metric "mean", normalized_intensities False) and json.dump(...,
indent=4)s what it returns. This script calls that very function (its class map swapped for the
synthetic one below, as the task "synthetic") on seeded inputs that reach every rule:

  - a label touching the border (a voxel in the first or last 3 slices along some axis: 0.0 and
    0.0), and one lying just inside (index 3 and size-4 along every axis: counted);
  - a label listed but absent (volume 0.0, intensity 0.0), and a value in the map that no label
    names (ignored);
  - float image values with fractions, negative ones and some outside int16 (astype(np.int16)
    truncates toward zero and wraps: 40000.5 -> -25536), so the cast matters;
  - means that need the 5-decimal rounding (x/7, x/3);
  - anisotropic float spacing: 0.7421875 x 0.7421875 x 2.5 ("aniso"), and 0.83 x 0.69 x 1.37
    ("float32"), whose product differs in float32 and float64, with the image's first axis
    flipped in the affine;
  - label names out of alphabetical order (the JSON keeps value order) and the roi_subset of
    --labels ("<case>_subset.json").

Files (under totalseg_stats/): <case>_ct.nii.gz (float32), <case>_labels.nii.gz (uint8),
<case>_labels.json (the class map: value -> name), <case>_expected.json and
<case>_subset.json (get_basic_statistics' JSON, whole and for `SUBSET`).

    /tmp/tsvenv/bin/python tests/pipeline/data/gen_totalseg_stats_golden.py

(/tmp/tsvenv: pip install totalsegmentator==2.18.0, which brought numpy 2.4.6, nibabel 5.4.2.)
"""
import json
import os

import nibabel as nib
import numpy as np
import totalsegmentator
import totalsegmentator.statistics as ts_statistics

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "totalseg_stats")
SHAPE = (20, 18, 14)
CLASS_MAP = {1: "zeta_border", 2: "alpha_inside", 3: "mid_empty", 4: "beta_negative",
             5: "gamma_wrap", 6: "delta_thirds", 7: "omega_sevenths"}
SUBSET = ["alpha_inside", "gamma_wrap", "omega_sevenths", "mid_empty"]


def make_inputs(rng):
    ct = rng.uniform(-1100.0, 1600.0, SHAPE).astype(np.float32)
    seg = np.zeros(SHAPE, np.uint8)
    x, y, z = SHAPE
    # 1: a block inside, plus one voxel in the last 3 slices of axis 2 (touches the border).
    seg[6:9, 6:9, 5:8] = 1
    seg[10, 10, z - 3] = 1
    # 2: the corners of the inner box [3, size-4] along every axis: does not touch the border.
    for i in (3, x - 4):
        for j in (3, y - 4):
            for k in (3, z - 4):
                seg[i, j, k] = 2
    seg[4:6, 4:6, 4:6] = 2
    # 4: negative values with fractions (truncated toward zero: -100.7 -> -100).
    seg[10:14, 4:7, 4:7] = 4
    ct[10:14, 4:7, 4:7] = rng.uniform(-1000.0, -0.01, (4, 3, 3)).astype(np.float32)
    # 5: values outside int16 wrap around (numpy's astype on x86-64).
    seg[12:15, 10:13, 8:10] = 5
    ct[12:15, 10:13, 8:10] = rng.choice(
        np.array([40000.5, -40000.7, 32767.9, -32768.9, 65541.5, 99999.0, -1.5, 0.9],
                 np.float32), (3, 3, 2))
    # 6: 3 voxels (a mean of x/3); 7: 7 voxels (x/7).
    seg[5, 12, 9] = seg[6, 12, 9] = seg[7, 12, 9] = 6
    ct[5:8, 12, 9] = np.array([10.2, 11.9, -1.5], np.float32)
    seg[14, 4:11, 10] = 7
    seg[8, 8, 10] = 9  # no label names 9
    return ct, seg


def run_case(name, spacing, affine_sign, rng):
    ct, seg = make_inputs(rng)
    affine = np.diag([affine_sign[0] * spacing[0], affine_sign[1] * spacing[1],
                      affine_sign[2] * spacing[2], 1.0])
    affine[:3, 3] = [12.5, -30.25, 7.0]
    ct_img = nib.Nifti1Image(ct, affine)
    ct_img.header.set_xyzt_units("mm", "sec")
    seg_img = nib.Nifti1Image(seg, affine)
    seg_img.header.set_xyzt_units("mm", "sec")
    nib.save(ct_img, os.path.join(OUT, f"{name}_ct.nii.gz"))
    nib.save(seg_img, os.path.join(OUT, f"{name}_labels.nii.gz"))
    with open(os.path.join(OUT, f"{name}_labels.json"), "w") as f:
        json.dump({str(k): v for k, v in CLASS_MAP.items()}, f, indent=4)

    # As python_api.py: the label map as read back from its file, the image as loaded by nibabel.
    seg_back = nib.load(os.path.join(OUT, f"{name}_labels.nii.gz")).get_fdata()
    ct_back = nib.load(os.path.join(OUT, f"{name}_ct.nii.gz"))
    ts_statistics.get_basic_statistics(seg_back, ct_back, os.path.join(OUT, f"{name}_expected.json"),
                                       quiet=True, task="synthetic")
    ts_statistics.get_basic_statistics(seg_back, ct_back, os.path.join(OUT, f"{name}_subset.json"),
                                       quiet=True, task="synthetic", roi_subset=SUBSET)


def main():
    os.makedirs(OUT, exist_ok=True)
    ts_statistics.class_map = {"synthetic": CLASS_MAP}
    rng = np.random.default_rng(37)
    run_case("aniso", (0.7421875, 0.7421875, 2.5), (1, 1, 1), rng)
    run_case("float32", (0.83, 0.69, 1.37), (-1, 1, 1), rng)
    with open(os.path.join(OUT, "index.json"), "w") as f:
        json.dump({"cases": ["aniso", "float32"], "subset": SUBSET,
                   "totalsegmentator": totalsegmentator.__version__ if hasattr(
                       totalsegmentator, "__version__") else "2.18.0",
                   "numpy": np.__version__, "nibabel": nib.__version__}, f, indent=4)


if __name__ == "__main__":
    main()
