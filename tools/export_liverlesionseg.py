#!/usr/bin/env python3
"""Rebuild pyliverlesionseg 0.3's liver and lesion U-Nets in PyTorch, check them, export ONNX.

pyliverlesionseg (PyPI, Apache-2.0, https://github.com/KUL-recon-lab/pyliverlesionseg) ships Keras
HDF5 files that hold weights only (no model config). The networks are built in Python by
`pyliverlesionseg/architectures/unet_generalized.py: create_unet_like_model` with the arguments
in `cnn_liver_lesion_seg_CT_MR_functions.py: unet_liver_predict` and `unet_lesion_predict` (see
docs/liver-model.md).

This tool
  1. reads the HDF5 weights by layer name with h5py (no Keras or TensorFlow),
  2. builds each network twice: `LiverUNet` / `LesionUNet`, explicit PyTorch modules, and
     `reference_forward`, an independent float64 numpy re-implementation of the Keras layers
     (Conv3D 'same' and 'valid', MaxPooling3D, UpSampling3D, AveragePooling3D 'valid',
     Cropping3D, Concatenate, Add, the instance-normalisation Lambda, LeakyReLU) that walks the
     generic builder's loops (residual connections included),
  3. compares both on the same seeded random input (logits, relative max error),
  4. exports ONNX (opset 17) and compares ONNX Runtime with PyTorch.

Usage:
  python tools/export_liverlesionseg.py --wheel pyliverlesionseg-0.3-py3-none-any.whl \
      --out /tmp/liver [--check-only] [--package sample_data/models/liver]

model.onnx (liver) is the network with a zero border of 13 voxels per side (folded into
conv3d_1's padding): input and output [1, 1, 163, 136, 136] (the original's output segment; its
input segment is 189 x 162 x 162). lesion.onnx is one input segment of the lesion network:
input [1, 1, 180, 172, 86], output [1, 1, 92, 84, 42] ('valid' convolutions: the output is the
input's centred crop, 44, 44, 22 voxels less per side). --package writes model.json, model.onnx,
lesion.onnx and LICENSE.

Needs numpy, h5py; torch, onnx, onnxruntime for the rebuild and export.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import zipfile
from pathlib import Path

import numpy as np

LIVER_HDF5 = ("pyliverlesionseg/trained_models/model_unet_ct_mr_liv_seg_resize_1.5mm_med_3_"
              "resize_3mm_20201011_dice_loss_val_binary_dice_mean.hdf5")
LESION_HDF5 = ("pyliverlesionseg/trained_models/model_unet_ct_mr_lesion_seg_resize_1mm_1mm_3mm_"
               "20220207_dice_loss_val_binary_dice_mean.hdf5")

# create_unet_like_model arguments used by unet_liver_predict (pyliverlesionseg 0.3); the
# remaining arguments keep the builder's defaults: pooling 'max', activation 'lrelu' (alpha 0.01),
# instance_normalization True, final activation 'sigmoid', one 1x1x1 common conv to 1 feature.
LIVER_CONFIG = {
    "subsample_factors": [(1, 1, 1), (3, 3, 3), (9, 9, 9), (27, 27, 27)],
    "kernel_sizes": [
        [[(3, 3, 1), (3, 3, 3)], [(3, 3, 3), (3, 3, 1)]],
        [[(3, 3, 1), (3, 3, 3)], [(3, 3, 3), (3, 3, 1)]],
        [[(3, 3, 1), (3, 3, 3)], [(3, 3, 3), (3, 3, 1)]],
        [[(3, 3, 3), (3, 3, 3)], []],
    ],
    "features": [
        [[20, 40], [40, 20]],
        [[40, 80], [80, 40]],
        [[80, 160], [160, 80]],
        [[160, 160], []],
    ],
    "common_kernel_sizes": [(1, 1, 1)],
    "common_features": [1],
    "padding": "same",
    "upsampling": "linear",
    "lrelu_alpha": 0.01,
    "epsilon": 1e-7,  # keras.backend.epsilon()
}
LIVER_SEGMENT_SIZE = [163, 136, 136]  # output size used by cnn_liver_lesion_seg_CT_MR_main
# create_unet_like_model arguments used by unet_lesion_predict: the same kernels and features as
# the liver network but pathways at 1, 2, 4, 8 times the 1 x 1 x 3 mm grid, 'valid' convolutions,
# copy upsampling (UpSampling3D alone) and residual connections (a 1x1x1 shortcut convolution
# where the features change), 21 Conv3D layers.
LESION_CONFIG = dict(
    LIVER_CONFIG,
    subsample_factors=[(1, 1, 1), (2, 2, 2), (4, 4, 4), (8, 8, 8)],
    kernel_sizes=[
        [[(3, 3, 1), (3, 3, 3)], [(3, 3, 3), (3, 3, 1)]],
        [[(3, 3, 1), (3, 3, 3)], [(3, 3, 3), (3, 3, 1)]],
        [[(3, 3, 1), (3, 3, 3)], [(3, 3, 3), (3, 3, 1)]],
        [[(3, 3, 1), (3, 3, 3)], []],
    ],
    padding="valid",
    upsampling="copy",
    residual_connections=True,
)
LESION_SEGMENT_SIZE = [92, 84, 42]  # output segments of cnn_liver_lesion_seg_CT_MR_main (tiled)
KERAS_TO_TORCH_KERNEL = (4, 3, 0, 1, 2)  # (k0, k1, k2, in, out) -> (out, in, k0, k1, k2)


# --------------------------------------------------------------------------------------------
# Weights


def read_wheel_member(wheel: Path, member: str) -> bytes:
    with zipfile.ZipFile(wheel) as z:
        return z.read(member)


def load_hdf5_weights(data: bytes) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict]:
    """{layer name: (kernel, bias)} in Keras layout, plus the 'header' group's datasets."""
    import h5py

    with h5py.File(io.BytesIO(data), "r") as f:
        group = f["model_weights"] if "model_weights" in f else f
        weights = {}
        for name in group.attrs["layer_names"]:
            name = name.decode() if isinstance(name, bytes) else name
            layer = group[name]
            names = [n.decode() if isinstance(n, bytes) else n
                     for n in layer.attrs.get("weight_names", [])]
            if not names:
                continue
            arrays = {n.split("/")[-1].split(":")[0]: np.array(layer[n]) for n in names}
            weights[name] = (arrays["kernel"], arrays["bias"])
        header = {k: np.array(v) for k, v in f["header"].items()} if "header" in f else {}
    return weights, header


# --------------------------------------------------------------------------------------------
# Size arithmetic (port of create_unet_like_model's "possible input and output sizes" block)


def plan_sizes(config: dict, output_size: list[int]) -> dict:
    """Input size for `output_size` and the alignment average-pool sizes per level.

    Follows the original literally, including its positional bookkeeping: with
    upsampling='linear' each upsampling is UpSampling3D(s) + AveragePooling3D(s, strides 1,
    'valid'), and before each concatenation an AveragePooling3D(|left - right position| + 1)
    aligns the two paths."""
    sfs = [np.array(s) for s in config["subsample_factors"]]
    kss = config["kernel_sizes"]
    valid = config["padding"] == "valid"
    linear = config["upsampling"] == "linear"
    input_sizes = output_sizes = np.stack([np.arange(500)] * 3, axis=-1)
    left_pos, left_sizes, right_pos = [], [], []
    prev_s, prev_pos = np.ones(3, dtype=int), np.zeros(3)
    for sf, ks in zip([np.ones(3, dtype=int)] + sfs, [[[], []]] + kss):
        s_f = sf // prev_s
        prev_s = sf
        prev_pos = np.abs(prev_pos - (1 - (sf * (s_f - 1) + 1) % 2))
        output_sizes = (output_sizes // s_f) * ((output_sizes % s_f) == 0)
        for k in ks[0]:
            output_sizes = output_sizes - ((np.array(k) - 1) if valid else 0)
            prev_pos = np.abs(prev_pos - (1 - (sf * (np.array(k) - 1) + 1) % 2))
        left_pos.append(prev_pos)
        left_sizes.append(output_sizes)
    prev_s = sfs[-1]
    ups = [np.ones(3, dtype=int)] * 2 + sfs[:-1]
    for i, (sf, ks) in reversed(list(enumerate(zip(ups, [[[], []]] + kss)))):
        right_pos.append(prev_pos)
        output_sizes = output_sizes - np.abs(left_pos[i] - prev_pos)
        output_sizes = output_sizes * (((left_sizes[i] - output_sizes) % 2) == 0)
        prev_pos = left_pos[i]
        for k in ks[1]:
            output_sizes = output_sizes - ((np.array(k) - 1) if valid else 0)
            prev_pos = np.abs(prev_pos - (1 - (sf * (np.array(k) - 1) + 1) % 2))
        s_f = prev_s // sf
        prev_s = sf
        output_sizes = output_sizes * s_f
        if linear:
            output_sizes = output_sizes - s_f + 1
    for k in config["common_kernel_sizes"]:
        output_sizes = output_sizes - ((np.array(k) - 1) if valid else 0)
    right_pos.reverse()
    possible_out = [list(output_sizes[output_sizes[:, d] > 0, d].astype(int)) for d in range(3)]
    possible_in = [list(input_sizes[output_sizes[:, d] > 0, d]) for d in range(3)]
    for d, o in enumerate(output_size):
        if o not in possible_out[d]:
            raise ValueError(f"output size {o} impossible on axis {d}; closest: "
                             f"{sorted(possible_out[d], key=lambda v: abs(v - o))[:4]}")
    input_size = [int(possible_in[d][possible_out[d].index(o)]) for d, o in enumerate(output_size)]
    align = [tuple(int(v) for v in np.abs(left_pos[i] - right_pos[i]) + 1)
             for i in range(len(left_pos))]
    return {"input_size": input_size, "align_pool": align, "possible_output": possible_out}


# --------------------------------------------------------------------------------------------
# Independent numpy reference of the Keras layers (channels-last, float64, batch of one)


def np_conv3d(x: np.ndarray, kernel: np.ndarray, bias: np.ndarray, padding: str) -> np.ndarray:
    """keras Conv3D(padding=..., strides 1): cross-correlation; 'same': odd kernels, zero padding
    (k - 1) // 2 on each side; 'valid': no padding, every axis shrinks by k - 1.
    x: (X, Y, Z, C), kernel: (k0, k1, k2, C, O)."""
    k = kernel.shape[:3]
    if padding == "same":
        pads = [((kk - 1) // 2, kk - 1 - (kk - 1) // 2) for kk in k] + [(0, 0)]
        xp = np.pad(x, pads)
        sx, sy, sz = x.shape[:3]
    else:
        xp = x
        sx, sy, sz = (x.shape[d] - k[d] + 1 for d in range(3))
    out = np.zeros((sx, sy, sz, kernel.shape[4]), dtype=np.float64)
    for a in range(k[0]):
        for b in range(k[1]):
            for c in range(k[2]):
                out += xp[a:a + sx, b:b + sy, c:c + sz, :] @ kernel[a, b, c].astype(np.float64)
    return out + bias.astype(np.float64)


def np_max_pool(x: np.ndarray, s: tuple) -> np.ndarray:
    """keras MaxPooling3D(pool_size=s, strides=s, padding='valid')."""
    n = [x.shape[d] // s[d] for d in range(3)]
    x = x[:n[0] * s[0], :n[1] * s[1], :n[2] * s[2]]
    x = x.reshape(n[0], s[0], n[1], s[1], n[2], s[2], x.shape[3])
    return x.max(axis=(1, 3, 5))


def np_avg_pool_stride1(x: np.ndarray, p: tuple) -> np.ndarray:
    """keras AveragePooling3D(pool_size=p, strides=(1, 1, 1), padding='valid')."""
    from numpy.lib.stride_tricks import sliding_window_view

    if tuple(p) == (1, 1, 1):
        return x
    w = sliding_window_view(x, tuple(p), axis=(0, 1, 2))
    return w.mean(axis=(-3, -2, -1))


def np_upsample(x: np.ndarray, s: tuple) -> np.ndarray:
    """keras UpSampling3D(size=s): repeat each voxel s times per axis."""
    for d in range(3):
        x = np.repeat(x, s[d], axis=d)
    return x


def np_crop_to(x: np.ndarray, shape: tuple) -> np.ndarray:
    """keras Cropping3D(int((l - r) / 2) per axis), symmetric."""
    c = [int((x.shape[d] - shape[d]) / 2) for d in range(3)]
    return x[c[0]:x.shape[0] - c[0], c[1]:x.shape[1] - c[1], c[2]:x.shape[2] - c[2]]


def np_instance_norm(x: np.ndarray, eps: float) -> np.ndarray:
    """The builder's Lambda: (x - mean) / (std + K.epsilon()), spatial axes, population std."""
    m = x.mean(axis=(0, 1, 2), keepdims=True)
    s = np.sqrt(((x - m) ** 2).mean(axis=(0, 1, 2), keepdims=True))
    return (x - m) / (s + eps)


def reference_forward(weights: dict, x: np.ndarray, config: dict, align: list) -> np.ndarray:
    """Walk create_unet_like_model's construction loops with the numpy layers above.

    Conv layers are taken in construction order (conv3d_1, conv3d_2, ...), as Keras names them:
    in a residual block the path's convolutions come first, then the 1x1x1 shortcut convolution
    (only where the features differ), as the builder creates them. Handles 'same' and 'valid'
    padding, 'copy' and 'linear' upsampling, residual connections (the block's input, cropped
    symmetrically to the block's output, added to it). Returns the final conv's pre-sigmoid
    output (the logits), shape (X, Y, Z, 1)."""
    conv_i = [0]
    eps, alpha = config["epsilon"], config["lrelu_alpha"]
    padding = config["padding"]
    residual = config.get("residual_connections", False)

    def conv(h):
        conv_i[0] += 1
        kernel, bias = weights[f"conv3d_{conv_i[0]}"]
        return np_conv3d(h, kernel, bias, padding)

    def act(h):
        return np.where(h >= 0, h, alpha * h)

    def block(path, kernel_sizes, first_plain):
        """One side of a pathway: its convolutions (norm + act before each, except the network's
        very first), plus the residual shortcut."""
        shortcut = path
        for j, _ in enumerate(kernel_sizes):
            if not (first_plain and j == 0):
                path = act(np_instance_norm(path, eps))
            path = conv(path)
        if residual and kernel_sizes:
            shortcut = np_crop_to(shortcut, path.shape)
            if shortcut.shape[-1] != path.shape[-1]:
                kernel, bias = weights[f"conv3d_{conv_i[0] + 1}"]
                conv_i[0] += 1
                shortcut = np_conv3d(shortcut, kernel, bias, padding)
            path = path + shortcut
        return path

    sfs = [np.ones(3, dtype=int)] + [np.array(s) for s in config["subsample_factors"]]
    kss = [[[], []]] + config["kernel_sizes"]
    path = x.astype(np.float64)
    left_out = []
    prev = np.ones(3, dtype=int)
    for i, (sf, ks) in enumerate(zip(sfs, kss)):
        path = np_max_pool(path, tuple(sf // prev))
        prev = sf
        if i > 0:
            path = block(path, ks[0], first_plain=i == 1)
        left_out.append(path)
    n_path = len(config["subsample_factors"])
    ups = [np.ones(3, dtype=int)] * 2 + [np.array(s) for s in config["subsample_factors"][:-1]]
    prev = np.array(config["subsample_factors"][-1])
    for i, (sf, ks) in reversed(list(enumerate(zip(ups, kss)))):
        path = np_avg_pool_stride1(path, align[i])
        if 0 < i < n_path:
            path = np.concatenate([np_crop_to(left_out[i], path.shape), path], axis=-1)
        if i > 0:
            path = block(path, ks[1], first_plain=False)
        s = tuple(prev // sf)
        prev = sf
        path = np_upsample(path, s)
        if config["upsampling"] == "linear":
            path = np_avg_pool_stride1(path, s)
    for _ in config["common_features"]:
        path = conv(act(np_instance_norm(path, eps)))
    if f"conv3d_{conv_i[0] + 1}" in weights:
        raise ValueError(f"reference used {conv_i[0]} conv layers; the HDF5 has more")
    return path


# --------------------------------------------------------------------------------------------
# PyTorch module


def build_torch_model(weights: dict, align: list):
    """LiverUNet: the liver network written out layer by layer, weights loaded by layer name."""
    import torch
    from torch import nn
    import torch.nn.functional as F

    convs = {  # name: (in, out, kernel), from the construction order in docs/liver-model.md
        "conv3d_1": (1, 20, (3, 3, 1)), "conv3d_2": (20, 40, (3, 3, 3)),
        "conv3d_3": (40, 40, (3, 3, 1)), "conv3d_4": (40, 80, (3, 3, 3)),
        "conv3d_5": (80, 80, (3, 3, 1)), "conv3d_6": (80, 160, (3, 3, 3)),
        "conv3d_7": (160, 160, (3, 3, 3)), "conv3d_8": (160, 160, (3, 3, 3)),
        "conv3d_9": (320, 160, (3, 3, 3)), "conv3d_10": (160, 80, (3, 3, 1)),
        "conv3d_11": (160, 80, (3, 3, 3)), "conv3d_12": (80, 40, (3, 3, 1)),
        "conv3d_13": (80, 40, (3, 3, 3)), "conv3d_14": (40, 20, (3, 3, 1)),
        "conv3d_15": (20, 1, (1, 1, 1)),
    }

    class LiverUNet(nn.Module):
        """Input [N, 1, X, Y, Z] (pyliverlesionseg's RAS-flipped array axes, 3 mm), output the
        logits [N, 1, X', Y', Z'] (sigmoid gives the liver probability)."""

        def __init__(self):
            super().__init__()
            self.conv = nn.ModuleDict({
                n: nn.Conv3d(i, o, k, padding=tuple((kk - 1) // 2 for kk in k))
                for n, (i, o, k) in convs.items()})
            self.align = [tuple(a) for a in align]

        @staticmethod
        def spatial_mean(h):
            # one axis at a time: the same mean, but ONNX Runtime's float32 ReduceMean over all
            # ~10^6 voxels at once loses ~1e-4 of it (logits 5e-4 off float64), per axis ~1e-6
            return h.mean(dim=4, keepdim=True).mean(dim=3, keepdim=True).mean(dim=2, keepdim=True)

        def norm_act(self, h):
            m = self.spatial_mean(h)
            s = self.spatial_mean((h - m) ** 2).sqrt()
            return F.leaky_relu((h - m) / (s + 1e-7), 0.01)

        def c(self, name, h, norm=True):
            return self.conv[name](self.norm_act(h) if norm else h)

        @staticmethod
        def pool_align(h, p):
            return h if p == (1, 1, 1) else F.avg_pool3d(h, p, stride=1)

        @staticmethod
        def up3(h):
            # UpSampling3D(3) (nearest copy; ONNX Resize with constant scales) + the 'linear'
            # AveragePooling3D(3, strides 1, 'valid'): 3n -> 3n - 2
            h = F.interpolate(h, scale_factor=3.0, mode="nearest")
            return F.avg_pool3d(h, 3, stride=1)

        @staticmethod
        def crop_cat(left, h, c):
            # Cropping3D by the constant c per side: for inputs of 27k voxels the skip paths are
            # 3k, 9k, 27k and the upsampled paths 3k - 2, 9k - 8, 27k - 26 (c = 1, 4, 13), so
            # the graph needs no shape arithmetic
            return torch.cat([left[:, :, c:-c, c:-c, c:-c], h], dim=1)

        def forward(self, x):
            a = self.align
            l1 = self.c("conv3d_2", self.c("conv3d_1", x, norm=False))
            l2 = self.c("conv3d_4", self.c("conv3d_3", F.max_pool3d(l1, 3)))
            l3 = self.c("conv3d_6", self.c("conv3d_5", F.max_pool3d(l2, 3)))
            h = self.c("conv3d_8", self.c("conv3d_7", F.max_pool3d(l3, 3)))
            h = self.up3(self.pool_align(h, a[4]))
            h = self.crop_cat(l3, self.pool_align(h, a[3]), 1)
            h = self.up3(self.c("conv3d_10", self.c("conv3d_9", h)))
            h = self.crop_cat(l2, self.pool_align(h, a[2]), 4)
            h = self.up3(self.c("conv3d_12", self.c("conv3d_11", h)))
            h = self.crop_cat(l1, self.pool_align(h, a[1]), 13)
            h = self.c("conv3d_14", self.c("conv3d_13", h))
            h = self.pool_align(h, a[0])
            return self.c("conv3d_15", h)

    if any(tuple(a) != (1, 1, 1) for a in align):
        raise ValueError(f"alignment pools {align}: the constant crops assume none")
    return load_convs(LiverUNet(), weights, convs)


def build_lesion_model(weights: dict, align: list):
    """LesionUNet: the lesion network (unet_lesion_predict) written out layer by layer, weights
    loaded by layer name. 'valid' convolutions: every output voxel sees only real input, the
    output is the centred crop of the input smaller by 44, 44, 22 voxels per side."""
    import torch
    from torch import nn
    import torch.nn.functional as F

    convs = {  # name: (in, out, kernel), Keras construction order (path convs, then shortcut)
        "conv3d_1": (1, 20, (3, 3, 1)), "conv3d_2": (20, 40, (3, 3, 3)),
        "conv3d_3": (1, 40, (1, 1, 1)),
        "conv3d_4": (40, 40, (3, 3, 1)), "conv3d_5": (40, 80, (3, 3, 3)),
        "conv3d_6": (40, 80, (1, 1, 1)),
        "conv3d_7": (80, 80, (3, 3, 1)), "conv3d_8": (80, 160, (3, 3, 3)),
        "conv3d_9": (80, 160, (1, 1, 1)),
        "conv3d_10": (160, 160, (3, 3, 1)), "conv3d_11": (160, 160, (3, 3, 3)),
        "conv3d_12": (320, 160, (3, 3, 3)), "conv3d_13": (160, 80, (3, 3, 1)),
        "conv3d_14": (320, 80, (1, 1, 1)),
        "conv3d_15": (160, 80, (3, 3, 3)), "conv3d_16": (80, 40, (3, 3, 1)),
        "conv3d_17": (160, 40, (1, 1, 1)),
        "conv3d_18": (80, 40, (3, 3, 3)), "conv3d_19": (40, 20, (3, 3, 1)),
        "conv3d_20": (80, 20, (1, 1, 1)),
        "conv3d_21": (20, 1, (1, 1, 1)),
    }

    class LesionUNet(nn.Module):
        """Input [N, 1, X, Y, Z] (RAS array axes, 1 x 1 x 3 mm), output the logits
        [N, 1, X - 88, Y - 88, Z - 44]; X, Y = 8k + 92 and Z = 8k + 46 (k >= -11)."""

        def __init__(self):
            super().__init__()
            self.conv = nn.ModuleDict({n: nn.Conv3d(i, o, k) for n, (i, o, k) in convs.items()})

        @staticmethod
        def spatial_mean(h):
            # one axis at a time, as LiverUNet (ONNX Runtime's float32 ReduceMean precision)
            return h.mean(dim=4, keepdim=True).mean(dim=3, keepdim=True).mean(dim=2, keepdim=True)

        def norm_act(self, h):
            m = self.spatial_mean(h)
            s = self.spatial_mean((h - m) ** 2).sqrt()
            return F.leaky_relu((h - m) / (s + 1e-7), 0.01)

        def c(self, name, h, norm=True):
            return self.conv[name](self.norm_act(h) if norm else h)

        @staticmethod
        def crop(h, like):
            # Cropping3D(int((l - r) / 2)) per side; python ints: constants in the ONNX graph
            c = [(int(h.shape[d]) - int(like.shape[d])) // 2 for d in (2, 3, 4)]
            return h[:, :, c[0]:int(h.shape[2]) - c[0], c[1]:int(h.shape[3]) - c[1],
                     c[2]:int(h.shape[4]) - c[2]]

        def residual(self, h, names, shortcut_conv, first_plain=False):
            x = h
            for j, n in enumerate(names):
                h = self.c(n, h, norm=not (first_plain and j == 0))
            s = self.crop(x, h)
            return h + (self.conv[shortcut_conv](s) if shortcut_conv else s)

        @staticmethod
        def up2(h):
            return F.interpolate(h, scale_factor=2.0, mode="nearest")  # UpSampling3D(2)

        def forward(self, x):
            l1 = self.residual(x, ["conv3d_1", "conv3d_2"], "conv3d_3", first_plain=True)
            l2 = self.residual(F.max_pool3d(l1, 2), ["conv3d_4", "conv3d_5"], "conv3d_6")
            l3 = self.residual(F.max_pool3d(l2, 2), ["conv3d_7", "conv3d_8"], "conv3d_9")
            h = self.residual(F.max_pool3d(l3, 2), ["conv3d_10", "conv3d_11"], None)
            h = self.up2(h)
            h = torch.cat([self.crop(l3, h), h], dim=1)
            h = self.up2(self.residual(h, ["conv3d_12", "conv3d_13"], "conv3d_14"))
            h = torch.cat([self.crop(l2, h), h], dim=1)
            h = self.up2(self.residual(h, ["conv3d_15", "conv3d_16"], "conv3d_17"))
            h = torch.cat([self.crop(l1, h), h], dim=1)
            h = self.residual(h, ["conv3d_18", "conv3d_19"], "conv3d_20")
            return self.c("conv3d_21", h)

    if any(tuple(a) != (1, 1, 1) for a in align):
        raise ValueError(f"alignment pools {align}: LesionUNet assumes none")
    return load_convs(LesionUNet(), weights, convs)


def load_convs(model, weights: dict, convs: dict):
    """Copies each conv3d_N's Keras kernel and bias into the module (shapes checked); a weighted
    HDF5 layer the module does not use is an error."""
    import torch

    with torch.no_grad():
        for name, conv in model.conv.items():
            kernel, bias = weights[name]
            want = tuple(conv.weight.shape)
            w = torch.from_numpy(np.ascontiguousarray(kernel.transpose(KERAS_TO_TORCH_KERNEL)))
            if tuple(w.shape) != want:
                raise ValueError(f"{name}: HDF5 kernel {kernel.shape} does not fit {want}")
            conv.weight.copy_(w)
            conv.bias.copy_(torch.from_numpy(bias))
    unused = sorted(set(weights) - set(convs))
    if unused:
        raise ValueError(f"HDF5 layers with weights that the rebuild does not use: {unused}")
    return model.eval()


def padded_model(model, pad: int):
    """The network with `pad` zero voxels added on every side of its input, so that the output
    has the input's shape (the network itself shrinks every axis by 2 * pad; its output is the
    centred crop). Zero is what pyliverlesionseg's ExtractSegment3D2 fills outside the image
    (default_value 0, after normalisation). Done by widening conv3d_1's own zero padding (the
    first layer, no normalisation before it): padding the input by `pad` and then by conv3d_1's
    'same' padding is the same zero border, and the ONNX graph keeps no Pad arithmetic."""
    import copy

    padded = copy.deepcopy(model)
    conv = padded.conv["conv3d_1"]
    conv.padding = tuple(p + pad for p in conv.padding)
    return padded.eval()


# --------------------------------------------------------------------------------------------


def rel_err(a: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(a - ref)) / max(np.max(np.abs(ref)), 1e-30))


def check_against_reference(model, weights, plan, output_size, config=LIVER_CONFIG,
                            seed=0) -> dict:
    import torch

    rng = np.random.default_rng(seed)
    x = rng.uniform(-0.5, 0.5, size=plan["input_size"]).astype(np.float32)
    ref = reference_forward(weights, x[..., None], config, plan["align_pool"])[..., 0]
    with torch.no_grad():
        out = model(torch.from_numpy(x)[None, None]).numpy()[0, 0]
    if out.shape != ref.shape or list(ref.shape) != list(output_size):
        raise ValueError(f"shapes: torch {out.shape}, reference {ref.shape}, want {output_size}")
    return {"input": plan["input_size"], "output": list(ref.shape), "seed": seed,
            "logit_rel_err": rel_err(out.astype(np.float64), ref),
            "logit_abs_max": float(np.max(np.abs(ref))),
            "prob_abs_err": float(np.max(np.abs(1 / (1 + np.exp(-out)) - 1 / (1 + np.exp(-ref)))))}


def export_onnx(model, input_size, path: Path, seed=1) -> dict:
    """Export `model` for input [1, 1, *input_size] and compare ONNX Runtime with PyTorch."""
    import onnxruntime as ort
    import torch

    x = torch.from_numpy(np.random.default_rng(seed).uniform(
        -0.5, 0.5, size=[1, 1] + list(input_size)).astype(np.float32))
    torch.onnx.export(model, (x,), str(path), opset_version=17, input_names=["input"],
                      output_names=["logits"], dynamo=False)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"input": x.numpy()})[0]
    with torch.no_grad():
        want = model(x).numpy()
    return {"onnx_input": [1, 1] + list(input_size), "onnx_output": list(got.shape),
            "ort_vs_torch_rel_err": rel_err(got.astype(np.float64), want.astype(np.float64))}


ATTRIBUTION = (
    "pyliverlesionseg 0.3 (https://github.com/KUL-recon-lab/pyliverlesionseg, PyPI "
    "pyliverlesionseg), Apache License 2.0, Xikai Tang and Georg Schramm, KU Leuven; liver "
    "network model_unet_ct_mr_liv_seg_resize_1.5mm_med_3_resize_3mm_20201011 (model.onnx) and "
    "lesion network model_unet_ct_mr_lesion_seg_resize_1mm_1mm_3mm_20220207 (lesion.onnx) rebuilt "
    "in PyTorch from their Keras HDF5 weights and exported to ONNX by voxseg's "
    "tools/export_liverlesionseg.py (changed: Keras graphs re-implemented, the liver network's "
    "zero input border folded into its first convolution)")
CITATION = ("Tang X. et al. Whole liver segmentation based on deep learning and manual adjustment "
            "for clinical use in SIRT. European Journal of Nuclear Medicine and Molecular Imaging "
            "47 (2020). doi:10.1007/s00259-020-04800-3")


LESION_MASK_DILATIONS = 2  # binary_dilation with iterate_structure(18-neighbourhood, 2)
LESION_OUTSIDE = -0.5  # img_mask_liv[liv_vol_dil == 0] = -0.5


def package_json(liver_sha256: str, lesion_sha256: str, patch: list[int],
                 lesion_input: list[int]) -> dict:
    """model.json (format_version 2): the liver stage, then the lesion stage inside the liver, with
    what voxseg can express of pyliverlesionseg's pre-processing (the differences are listed in
    docs/liver-model.md)."""
    return {
        "format_version": 2,
        "name": "liver-pyliverlesionseg",
        "version": "0.3.1",
        "description": ("Liver and liver lesions on CT: pyliverlesionseg 0.3's two 3-D U-Nets. "
                        "Liver at 3 mm (4 pathways at 3, 9, 27 and 81 mm), then lesions at "
                        "1 x 1 x 3 mm inside the liver dilated by two voxels (valid convolutions, "
                        "residual connections, tiled 92 x 84 x 42 segments); HU window "
                        "[-200, 200]. Trained on CT and MR of SIRT patients (KU Leuven). "
                        "Pre-processing simplified: no abdomen crop, no median filter "
                        "(docs/liver-model.md)."),
        "license": "Apache-2.0",
        "disclaimer": ("Not a clinical model: a research network (pyliverlesionseg) converted by "
                       "voxseg with simplified pre-processing, not a certified medical device; "
                       "check every result before use."),
        "attribution": ATTRIBUTION,
        "citation": CITATION,
        "intended_input": {
            "modality": ["CT"],
            "body_region": "abdomen: a CT covering the liver",
            "spacing_mm": [0.4, 6.0],
        },
        "channels": [{"modality": "CT"}],
        "axis_order": "xyz",
        "orientation": "RAS",
        "labels": [{
            "value": 1, "name": "Liver", "color": [221, 130, 101],
            "category": {"code": "123037004", "scheme": "SCT",
                         "meaning": "Anatomical Structure"},
            "type": {"code": "10200004", "scheme": "SCT", "meaning": "Liver"},
            "plausible_volume_ml": [300.0, 5000.0],
        }, {
            "value": 2, "name": "Liver lesion", "color": [255, 255, 0],
            "category": {"code": "49755003", "scheme": "SCT",
                         "meaning": "Morphologically Altered Structure"},
            "type": {"code": "52988006", "scheme": "SCT", "meaning": "Lesion"},
        }],
        "stages": [{
            "name": "liver",
            "file": "model.onnx",
            "sha256": liver_sha256,
            "result": True,
            "spacing_mm": [3.0, 3.0, 3.0],
            "patch_size": list(patch),
            "interpolation": "linear",
            "normalization": {"scheme": "window", "window": [-200, 200], "range": [-0.5, 0.5]},
            "inference": {"overlap": 0.5},
            "output": {"kind": "sigmoid", "labels": [1], "threshold": 0.5},
            "postprocess": {"largest_component": True},
        }, {
            "name": "lesion",
            "file": "lesion.onnx",
            "sha256": lesion_sha256,
            # the region to resample: the liver's box plus 12 mm (the mask below is at most
            # 2 voxels = 6 mm beyond the liver; the mask's own box is what the network sees)
            "crop_to": {"stage": "liver", "label": 1, "margin_mm": 12.0},
            "mask": {"stage": "liver", "label": 1, "dilate": LESION_MASK_DILATIONS,
                     "outside": LESION_OUTSIDE},
            "spacing_mm": [1.0, 1.0, 3.0],
            "patch_size": list(lesion_input),
            "interpolation": "linear",
            # clip(HU / 1000, +-0.2) * 2.5 on the input grid, then zoom3d (the main function's
            # order): the clip does not commute with the interpolation
            "normalize_first": True,
            "normalization": {"scheme": "window", "window": [-200, 200], "range": [-0.5, 0.5]},
            "inference": {"output_size": list(LESION_SEGMENT_SIZE)},
            "output": {"kind": "sigmoid", "labels": [2], "threshold": 0.5},
        }],
    }


def write_package(folder: Path, out: Path, patch: list[int], lesion_input: list[int],
                  wheel: Path) -> None:
    import hashlib
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    sha = {}
    for name in ("model.onnx", "lesion.onnx"):
        shutil.copyfile(out / name, folder / name)
        sha[name] = hashlib.sha256((folder / name).read_bytes()).hexdigest()
    (folder / "model.json").write_text(json.dumps(
        package_json(sha["model.onnx"], sha["lesion.onnx"], patch, lesion_input), indent=2) + "\n")
    licence = read_wheel_member(wheel, "pyliverlesionseg-0.3.dist-info/LICENSE").decode()
    (folder / "LICENSE").write_text(
        "model.onnx and lesion.onnx: " + ATTRIBUTION + ".\n\nThe weights' licence, as shipped "
        "in pyliverlesionseg-0.3.dist-info/LICENSE:\n\n" + licence)


def liver_network(args, report: dict) -> bool:
    """Liver: reference check, then model.onnx with its zero border folded in."""
    weights, header = load_hdf5_weights(read_wheel_member(args.wheel, LIVER_HDF5))
    report.update({"hdf5": LIVER_HDF5,
                   "voxel_size": header.get("voxel_size", np.array([])).tolist()})
    plan = plan_sizes(LIVER_CONFIG, args.check_output)
    report["align_pool"] = plan["align_pool"]
    model = build_torch_model(weights, plan["align_pool"])
    report["reference"] = check_against_reference(model, weights, plan, args.check_output)
    print("liver", json.dumps(report["reference"]))
    ok = report["reference"]["logit_rel_err"] < 1e-4
    if not args.check_only:
        export_plan = plan_sizes(LIVER_CONFIG, args.export_output)
        if export_plan["align_pool"] != plan["align_pool"]:
            raise ValueError("alignment pools differ between check and export sizes")
        pad = (export_plan["input_size"][0] - args.export_output[0]) // 2
        if any(i - o != 2 * pad for i, o in zip(export_plan["input_size"], args.export_output)):
            raise ValueError(f"uneven shrink: {export_plan['input_size']} -> {args.export_output}")
        report["onnx_pad"] = pad
        report["onnx"] = export_onnx(padded_model(model, pad), args.export_output,
                                     args.out / "model.onnx")
        print("liver", json.dumps(report["onnx"]))
        ok = ok and report["onnx"]["ort_vs_torch_rel_err"] < 1e-4
    return ok


def lesion_network(args, report: dict) -> bool:
    """Lesion: reference check, then lesion.onnx for one input segment (valid convolutions: the
    input is larger than the output; no border folded in, the tiling supplies the context)."""
    weights, header = load_hdf5_weights(read_wheel_member(args.wheel, LESION_HDF5))
    report.update({"hdf5": LESION_HDF5,
                   "voxel_size": header.get("voxel_size", np.array([])).tolist()})
    plan = plan_sizes(LESION_CONFIG, args.lesion_check_output)
    report["align_pool"] = plan["align_pool"]
    model = build_lesion_model(weights, plan["align_pool"])
    report["reference"] = check_against_reference(model, weights, plan, args.lesion_check_output,
                                                  LESION_CONFIG)
    print("lesion", json.dumps(report["reference"]))
    ok = report["reference"]["logit_rel_err"] < 1e-4
    if not args.check_only:
        export_plan = plan_sizes(LESION_CONFIG, LESION_SEGMENT_SIZE)
        report["segment_input"] = export_plan["input_size"]
        report["segment_output"] = LESION_SEGMENT_SIZE
        report["onnx"] = export_onnx(model, export_plan["input_size"], args.out / "lesion.onnx")
        print("lesion", json.dumps(report["onnx"]))
        ok = ok and report["onnx"]["ort_vs_torch_rel_err"] < 1e-4
        ok = ok and report["onnx"]["onnx_output"] == [1, 1] + LESION_SEGMENT_SIZE
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wheel", type=Path, required=True, help="pyliverlesionseg-0.3 wheel")
    ap.add_argument("--out", type=Path, required=True,
                    help="output folder (model.onnx, lesion.onnx, check.json)")
    ap.add_argument("--check-output", type=int, nargs=3, default=[55, 28, 82],
                    help="liver: output size of the reference check (small: the reference is slow)")
    ap.add_argument("--lesion-check-output", type=int, nargs=3, default=[12, 20, 10],
                    help="lesion: output size of the reference check (input 88, 88, 44 larger)")
    ap.add_argument("--export-output", type=int, nargs=3, default=LIVER_SEGMENT_SIZE,
                    help="liver: output size the ONNX file is exported for (fixed shape)")
    ap.add_argument("--check-only", action="store_true", help="no ONNX export")
    ap.add_argument("--package", type=Path, help="also write the voxseg package to this folder")
    args = ap.parse_args(argv)

    args.out.mkdir(parents=True, exist_ok=True)
    report = {"liver": {}, "lesion": {}}
    ok = liver_network(args, report["liver"])
    ok = lesion_network(args, report["lesion"]) and ok
    if ok and args.package and not args.check_only:
        write_package(args.package, args.out, args.export_output,
                      report["lesion"]["segment_input"], args.wheel)
    (args.out / "check.json").write_text(json.dumps(report, indent=1) + "\n")
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
