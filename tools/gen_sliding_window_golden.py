#!/usr/bin/env python3
"""Golden data for voxseg's sliding-window tests (tests/engine/sliding_window_test.cpp).

Writes tests/engine/data/sliding_window/:
  grid_gaussian.json  window start positions and importance maps from the reference frameworks:
                      nnU-Net v2 (compute_steps_for_sliding_window, compute_gaussian) and MONAI
                      (_get_scan_interval + dense_patch_slices, compute_importance_map).
  monai_unet.onnx, monai_case.json (+ .bin arrays)
                      a small MONAI UNet (fixed seed) exported to ONNX, one input volume that is
                      not a multiple of the patch, and MONAI's sliding_window_inference output
                      (mode="gaussian", sigma_scale=0.125) on it, for two overlaps.

Versions used to produce the committed files (checked below; others may differ in the last bits):
  python 3.11, torch 2.15.0, monai 1.6.1, onnx 1.23.2, nnunetv2 2.8.1, scipy 1.17.1, numpy 2.4.6
Install: pip install torch==2.15.0 monai==1.6.1 onnx==1.23.2 scipy==1.17.1 numpy==2.4.6 \
         && pip install --no-deps nnunetv2==2.8.1 acvl-utils==0.2.6

Run from the repository root:  python3 tools/gen_sliding_window_golden.py [--part grid|model|all]
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

PINNED = {"torch": "2.15.0", "monai": "1.6.1", "onnx": "1.23.2", "nnunetv2": "2.8.1",
          "scipy": "1.17.1", "numpy": "2.4.6"}
OUT_DIR = os.path.join("tests", "engine", "data", "sliding_window")


def check_versions():
    import importlib.metadata as md
    for name, want in PINNED.items():
        have = md.version(name)
        if have.split("+")[0] != want:
            print(f"warning: {name} {have} installed, goldens were made with {want}", file=sys.stderr)


def grid_cases():
    # (image, patch, overlap): odd sizes, image == patch, image barely larger, 2D and 3D.
    return [
        ((110, 64, 70), (64, 64, 32), 0.5),
        ((37, 41, 29), (16, 16, 16), 0.5),
        ((37, 41, 29), (16, 16, 16), 0.25),
        ((100, 100, 100), (96, 96, 96), 0.5),
        ((128, 129, 255), (128, 128, 128), 0.5),
        ((50, 33), (20, 32), 0.5),
        ((203, 17, 64), (80, 16, 64), 0.2),
        ((301, 301, 301), (32, 48, 64), 0.75),
        ((17, 19, 23), (7, 8, 9), 0.6),
    ]


def monai_starts(image, patch, overlap):
    from monai.data.utils import dense_patch_slices
    from monai.inferers.utils import _get_scan_interval
    interval = _get_scan_interval(image, patch, len(image), [overlap] * len(image))
    slices = dense_patch_slices(image, patch, interval)
    return [sorted({int(s[d].start) for s in slices}) for d in range(len(image))]


def gen_grid():
    from monai.data.utils import compute_importance_map
    from nnunetv2.inference.sliding_window_prediction import (compute_gaussian,
                                                              compute_steps_for_sliding_window)
    steps = []
    for image, patch, overlap in grid_cases():
        steps.append({
            "image": list(image), "patch": list(patch), "overlap": overlap,
            # nnU-Net's argument is the step as a fraction of the patch: 1 - overlap.
            "nnunet": [[int(v) for v in axis]
                       for axis in compute_steps_for_sliding_window(image, patch, 1.0 - overlap)],
            "monai": monai_starts(image, patch, overlap),
        })
    maps = []
    for patch, sigma_scale in [((8, 9, 10), 0.125), ((16, 16, 16), 0.125), ((12, 7), 0.125),
                               ((16, 15, 6), 0.05), ((5, 6, 7), 0.25)]:
        nn = compute_gaussian(tuple(patch), sigma_scale, 1, torch.float32, torch.device("cpu"))
        mo = compute_importance_map(patch, mode="gaussian", sigma_scale=sigma_scale,
                                    device="cpu", dtype=torch.float32)
        maps.append({"patch": list(patch), "sigma_scale": sigma_scale,
                     "nnunet": [float(v) for v in nn.numpy().ravel()],
                     "monai": [float(v) for v in mo.numpy().ravel()]})
    with open(os.path.join(OUT_DIR, "grid_gaussian.json"), "w") as f:
        json.dump({"generator": "tools/gen_sliding_window_golden.py", "versions": PINNED,
                   "steps": steps, "maps": maps}, f)
        f.write("\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["grid", "model", "all"], default="all")
    args = parser.parse_args()
    check_versions()
    os.makedirs(OUT_DIR, exist_ok=True)
    torch.manual_seed(0)
    np.random.seed(0)
    if args.part in ("grid", "all"):
        gen_grid()
    if args.part in ("model", "all"):
        gen_model()


# The MONAI case: a UNet of the kind users bring (Conv/ConvTranspose, InstanceNorm, PReLU,
# residual units, skip concatenations), small enough for the reference backend.
MODEL_PATCH = (16, 20, 24)
MODEL_VOLUMES = {"odd": (29, 23, 37),        # not a multiple of the patch on any axis
                 "small": (11, 23, 37)}      # smaller than the patch along z: padded
MODEL_OVERLAPS = (0.5, 0.25)


def gen_model():
    import onnx
    from monai.inferers import sliding_window_inference
    from monai.networks.nets import UNet

    torch.manual_seed(0)
    net = UNet(spatial_dims=3, in_channels=1, out_channels=3, channels=(4, 8, 16),
               strides=(2, 2), num_res_units=1).eval()
    # Non-trivial weights everywhere (freshly initialised biases are small).
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.05 * torch.randn_like(p))
    onnx_path = os.path.join(OUT_DIR, "monai_unet.onnx")
    example = torch.zeros((1, 1) + MODEL_PATCH)
    torch.onnx.export(net, example, onnx_path, input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}},
                      opset_version=17, dynamo=False)
    onnx.checker.check_model(onnx.load(onnx_path))

    meta = {"generator": "tools/gen_sliding_window_golden.py", "versions": PINNED,
            "model": "monai_unet.onnx", "patch": list(MODEL_PATCH), "sigma_scale": 0.125,
            "mode": "gaussian", "cases": []}
    gen = torch.Generator().manual_seed(1)
    for name, shape in MODEL_VOLUMES.items():
        image = torch.randn((1, 1) + shape, generator=gen)
        image.numpy().astype("<f4").tofile(os.path.join(OUT_DIR, f"monai_{name}_input.bin"))
        for overlap in MODEL_OVERLAPS:
            with torch.inference_mode():
                out = sliding_window_inference(image, MODEL_PATCH, sw_batch_size=3, predictor=net,
                                               overlap=overlap, mode="gaussian", sigma_scale=0.125,
                                               padding_mode="constant", cval=0.0)
            tag = f"monai_{name}_overlap{int(overlap * 100)}_output.bin"
            out.numpy().astype("<f4").tofile(os.path.join(OUT_DIR, tag))
            meta["cases"].append({"volume": list(shape), "overlap": overlap,
                                  "input": f"monai_{name}_input.bin", "output": tag,
                                  "output_shape": list(out.shape[1:])})
    with open(os.path.join(OUT_DIR, "monai_case.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
