"""scipy.ndimage.zoom as TotalSegmentator 2.18.0 calls it, for tests/pipeline/scipy_zoom_test.cpp.

TotalSegmentator's change_spacing (resampling.py) reads the NIfTI as float64 (get_fdata), calls
ndimage.zoom(data, zoom, mode="nearest", order=order) (grid_mode False: corner-aligned) and casts
the result with .astype(dtype): the CT with order 1 to int32, label maps with order 0 to uint8.
This script runs that call on small seeded volumes:

  order 1 ("ct_*"): int16 CT-like values (-1024..2000) and one float32 volume; the float64 result
      scipy returns (<name>_out.f64) and its .astype(np.int32) (<name>_out.i32)
  order 0 ("lab_*"): uint8 / uint16 label maps; the result cast back to the input's type

with shapes chosen for odd sizes, up- and down-sampling, steps below 0.5, exact ties (per-axis factor
(in-1)/(out-1) of 0.5, 1.5, 2.5 or 3.5: order 0 rounds source coordinates k+0.5 up), an axis of
1 voxel in and one of 1 voxel out, and TotalSegmentator's two ways of choosing the zoom: the
spacing ratio (float32 pixdim / target spacing) and target_shape / shape.
"shapes" lists output lengths scipy gives for (length, zoom) pairs (int(round(n * zoom)), half to
even), some of them exactly k+0.5.

Files (under scipy_zoom/): index.json; <name>_in.<type>, <name>_out.<type>: raw little-endian,
i fastest (numpy order "F" of nibabel's (i, j, k) arrays = voxseg's Volume layout).

    /tmp/tsvenv/bin/python tests/pipeline/data/gen_scipy_zoom_golden.py

(/tmp/tsvenv: pip install totalsegmentator==2.18.0, which brought numpy 2.4.6, scipy 1.17.1.)
"""
import json
import os

import numpy as np
import scipy
from scipy import ndimage

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scipy_zoom")
EXT = {np.dtype(np.int16): "i16", np.dtype(np.float32): "f32", np.dtype(np.uint8): "u8",
       np.dtype(np.uint16): "u16", np.dtype(np.int32): "i32", np.dtype(np.float64): "f64"}


def save(name, arr):
    fname = f"{name}.{EXT[arr.dtype]}"
    arr.astype(arr.dtype.newbyteorder("<")).ravel(order="F").tofile(os.path.join(OUT, fname))
    return fname


def zoom_for(shape, *, spacing=None, target_spacing=None, target_shape=None):
    """TotalSegmentator change_spacing's zoom: float32 pixdim / new spacing, or target / shape."""
    if target_shape is not None:
        return np.array(target_shape) / np.array(shape)
    return np.array(spacing, dtype=np.float32) / np.array(target_spacing)


def zoom_case(name, data, zoom, order):
    f64 = ndimage.zoom(data.astype(np.float64), zoom, mode="nearest", order=order)
    case = {"name": name, "order": order, "shape_in": list(data.shape),
            "zoom": [float(z) for z in zoom], "shape_out": list(f64.shape),
            "in": save(name + "_in", data)}
    if order == 1:
        case["out_f64"] = save(name + "_out", f64)
        case["out_i32"] = save(name + "_out", f64.astype(np.int32))
    else:
        case["out"] = save(name + "_out", f64.astype(data.dtype))
    print(name, data.shape, "->", f64.shape, "zoom", zoom)
    return case


def main():
    rng = np.random.default_rng(37)
    os.makedirs(OUT, exist_ok=True)

    def ct(shape):
        return rng.integers(-1024, 2001, shape).astype(np.int16)

    def labels(shape, n, dtype=np.uint8):
        return rng.integers(0, n + 1, shape).astype(dtype)

    cases = [
        zoom_case("ct_spacing", ct((31, 29, 11)),
                  zoom_for((31, 29, 11), spacing=(0.8, 0.85, 2.5), target_spacing=(1.5,) * 3), 1),
        zoom_case("ct_up", ct((7, 9, 5)), np.array([1.9, 1.5, 2.2]), 1),
        zoom_case("ct_ties_up", ct((3, 5, 9)), zoom_for((3, 5, 9), target_shape=(5, 3, 17)), 1),
        zoom_case("ct_ties_down", ct((4, 8, 6)), zoom_for((4, 8, 6), target_shape=(3, 3, 3)), 1),
        zoom_case("ct_one", ct((1, 6, 7)), zoom_for((1, 6, 7), target_shape=(3, 1, 7)), 1),
        zoom_case("ct_float", (rng.standard_normal((7, 9, 5)) * 300).astype(np.float32),
                  np.array([0.7, 1.3, 0.6]), 1),
        # Steps of 1/3: source coordinates in (0, 1) whose weights 1 - x and 1 - (1 - x) differ
        # from x, so scipy's weight formula shows in the float64 bits.
        zoom_case("ct_up_third", ct((7, 5, 4)), zoom_for((7, 5, 4), target_shape=(19, 13, 10)), 1),
        zoom_case("lab_back", labels((17, 16, 7), 12),
                  zoom_for((17, 16, 7), target_shape=(31, 29, 11)), 0),
        zoom_case("lab_ties_up", labels((3, 5, 9), 9), zoom_for((3, 5, 9), target_shape=(5, 3, 17)),
                  0),
        zoom_case("lab_ties_down", labels((4, 8, 6), 9),
                  zoom_for((4, 8, 6), target_shape=(3, 3, 3)), 0),
        zoom_case("lab_one", labels((1, 6, 7), 5), zoom_for((1, 6, 7), target_shape=(3, 1, 7)), 0),
        zoom_case("lab_u16", labels((9, 7, 5), 1000, np.uint16), np.array([1.45, 0.55, 1.6]), 0),
    ]

    # Output lengths: exact halves (half to even), TotalSegmentator-like spacing ratios, random.
    pairs = [(5, 0.5), (7, 0.5), (3, 0.5), (1, 0.5), (5, 1.5), (9, 1.5), (11, 1.5), (13, 2.5),
             (1, 0.4), (2, 0.25)]
    for _ in range(60):
        n = int(rng.integers(1, 700))
        pixdim = rng.choice([0.5, 0.68359375, 0.7421875, 0.8, 1.0, 1.25, 2.0, 2.5, 3.0, 5.0])
        target = rng.choice([1.5, 3.0, 6.0])
        pairs.append((n, float(zoom_for((n,), spacing=(pixdim,), target_spacing=(target,))[0])))
    for _ in range(30):
        pairs.append((int(rng.integers(1, 700)), float(rng.uniform(0.1, 4.0))))
    shapes = [{"n": n, "zoom": z, "out": ndimage.zoom(np.zeros(n), z, order=0).shape[0]}
              for n, z in pairs]

    index = {"scipy": scipy.__version__, "numpy": np.__version__, "cases": cases,
             "shapes": shapes}
    with open(os.path.join(OUT, "index.json"), "w") as f:
        json.dump(index, f, indent=1)


if __name__ == "__main__":
    main()
