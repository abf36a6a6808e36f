#!/usr/bin/env python3
"""Goldens for the sliding window's "nnunet-fp16" accumulation (engine/inference/sliding_window_nnunet.h),
computed by nnU-Net 2.5.1's own code:

  nnunet_fp16/gaussian_<p0>x<p1>x<p2>.u16   compute_gaussian(patch, 1/8, value_scaling_factor=10,
                                           float16) bit patterns, row-major
  nnunet_fp16/<case>.input.f32             the image [C, spatial] (float32)
  nnunet_fp16/<case>.ramp<i>.f32           network i's additive ramp [C, patch]
  nnunet_fp16/<case>.output.u16            nnUNetPredictor.predict_logits_from_preprocessed_data
                                           (float16 bit patterns [C, spatial])
  nnunet_fp16/index.json                   shapes, settings and versions

The network is `x * scale + ramp` per channel (scale dyadic, so the product is exact in float32
whatever the arithmetic): not flip-equivariant, so test-time mirroring averages different
outputs; an ensemble lists several ramps (nnU-Net's folds, loaded with load_state_dict).

Run with Debian 12's /usr/bin/python3 and nnunetv2 2.5.1 on the path:
    PYTHONPATH=/tmp/nnpy /usr/bin/python3 tools/gen_nnunet_fp16_golden.py
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "../tests/engine/data/sliding_window/nnunet_fp16")
sys.path.insert(0, HERE)
import nnunet_ct_parity  # noqa: E402,F401  (torch 1.13 shims for nnunetv2 2.5.1)

import torch  # noqa: E402
import nnunetv2  # noqa: E402
import scipy  # noqa: E402
from nnunetv2.inference.predict_from_raw_data import nnUNetPredictor  # noqa: E402
from nnunetv2.inference.sliding_window_prediction import compute_gaussian  # noqa: E402

GAUSSIAN_PATCHES = [(8, 80, 80), (16, 64, 56), (5, 12, 9)]
SCALES = [0.5, -1.25, 2.0]

# name, image [C, spatial], patch, mirror axes, ensemble members, gaussian
CASES = [
    ("odd", (3, 11, 37, 29), (4, 16, 12), None, 1, True),
    ("mirror", (3, 9, 21, 17), (4, 8, 8), (0, 1, 2), 1, True),
    ("pad_folds", (3, 3, 20, 15), (4, 16, 12), None, 3, True),
    ("constant", (3, 7, 19, 14), (4, 8, 8), (1,), 1, False),
]


class RampNet(torch.nn.Module):
    def __init__(self, channels, patch):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(SCALES[:channels]).view(1, channels, 1, 1, 1))
        self.ramp = torch.nn.Parameter(torch.zeros((1, channels) + tuple(patch)))

    def forward(self, x):
        return x * self.scale + self.ramp


class Holder:
    pass


def predictor(net, patch, mirror_axes, gaussian, channels):
    p = nnUNetPredictor(tile_step_size=0.5, use_gaussian=gaussian,
                        use_mirroring=mirror_axes is not None, perform_everything_on_device=False,
                        device=torch.device("cpu"), verbose=False, allow_tqdm=False)
    p.network = net
    p.configuration_manager = Holder()
    p.configuration_manager.patch_size = list(patch)
    p.label_manager = Holder()
    p.label_manager.num_segmentation_heads = channels
    p.allowed_mirroring_axes = mirror_axes
    return p


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(1)
    index = {"generator": "tools/gen_nnunet_fp16_golden.py",
             "versions": {"nnunetv2": nnunetv2.__version__ if hasattr(nnunetv2, "__version__")
                          else "2.5.1", "torch": torch.__version__, "numpy": np.__version__,
                          "scipy": scipy.__version__},
             "tile_step_size": 0.5, "sigma_scale": 0.125, "scales": SCALES,
             "gaussians": [], "cases": []}
    for patch in GAUSSIAN_PATCHES:
        g = compute_gaussian(patch, sigma_scale=1. / 8, value_scaling_factor=10,
                             device=torch.device("cpu"))
        assert g.dtype == torch.float16
        name = "gaussian_" + "x".join(map(str, patch)) + ".u16"
        g.numpy().view(np.uint16).astype("<u2").tofile(os.path.join(OUT, name))
        index["gaussians"].append({"patch": list(patch), "file": name})
    rng = np.random.default_rng(15)
    for name, shape, patch, mirror, members, gaussian in CASES:
        channels = shape[0]
        image = (rng.standard_normal(shape) * 8).astype(np.float32)
        image.astype("<f4").tofile(os.path.join(OUT, name + ".input.f32"))
        net = RampNet(channels, patch)
        params = []
        for m in range(members):
            ramp = (rng.standard_normal((1, channels) + patch) * 4).astype(np.float32)
            ramp.astype("<f4").tofile(os.path.join(OUT, f"{name}.ramp{m}.f32"))
            sd = {k: v.clone() for k, v in net.state_dict().items()}
            sd["ramp"] = torch.from_numpy(ramp)
            params.append(sd)
        p = predictor(net, patch, mirror, gaussian, channels)
        p.list_of_parameters = params
        with torch.no_grad():
            logits = p.predict_logits_from_preprocessed_data(torch.from_numpy(image))
        assert logits.dtype == torch.float16 and tuple(logits.shape) == shape
        logits.numpy().view(np.uint16).astype("<u2").tofile(os.path.join(OUT, name + ".output.u16"))
        index["cases"].append({"name": name, "shape": list(shape), "patch": list(patch),
                               "mirror_axes": list(mirror) if mirror else [],
                               "members": members, "gaussian": gaussian})
        print(name, shape, "members", members, "mirror", mirror, "logits range",
              float(logits.float().min()), float(logits.float().max()))
    with open(os.path.join(OUT, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
