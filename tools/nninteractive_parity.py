#!/usr/bin/env python3
"""Parity goldens for voxseg's nnInteractive session (issue 38): the real nninteractive 2.6.0
session, unmodified, on fabricated weights, with every step recorded.

    python3 tools/nninteractive_parity.py fabricate /tmp/nni-fab
    python3 tools/nninteractive_parity.py run /tmp/nni-fab -o tests/edit/data/nninteractive

`fabricate` writes an nnInteractive model folder in 2.6.0's layout (plans.json, dataset.json,
inference_info.json, LICENSE, fold_0/checkpoint_final.pth with trainer_name / init_args /
network_weights, the state dict with its repeated keys as torch saves it) holding a small
ResidualEncoderUNet (8 input channels: the image and 7 interaction channels, patch
PATCH (z, y, x), features FEATURES) with seeded weights: random everywhere (kaiming-like convs,
random instance-norm scales and shifts), except one channel per full-resolution layer that carries
a designed signal so that the prediction is a blob around the positive prompts, limited to bright
image and cut by negative prompts, with the previous segmentation kept (see design_weights). The
final layer reads that channel strongly, so argmax is decisive away from the mask's edge (the
`run` log prints the logit margin distribution).

`run` exports the folder with tools/export_nninteractive.py into <out>/model, writes the phantom
(<out>/image.nii.gz, int16, a zero border and a zero hole inside the nonzero bounding box so the
bbox normalisation differs from a nonzero-mask one), then replays the scripted SESSIONS through
nnInteractiveInferenceSession (device cpu, fp32, 2 torch threads, interactions_storage "tensor";
every session is replayed a second time with "blosc2" and must give the same masks) and writes
sessions.json plus one uint8 mask per step and one per prompt mask, in the axis convention of
docs/interactive.md (arrays (z, y, x), saved transposed so voxseg reads x fastest).

Recorded per step, by wrapping methods of the session instance (the package is not edited):
every network forward (zoom factor as _predict uses it, scaled bbox, the argmax's foreground voxel
count), the refinement bboxes, the paste bbox (_clipped_last_paste_bbox, what the add_* call
returns), undo's return value, the calls of NumPy's random box sampling and the mask.

NumPy's random box sampling (nnInteractive/utils/bboxes.py random_sampling_fallback, global
np.random): generate_bounding_boxes reaches it (a) after the greedy cover when mask voxels are
left that no remaining grid centre covers (centres on a grid of stride round(extent / 4) per axis,
each covering patch - 2 * 24 voxels per axis: with the fabricated patch that is 24, 32 and 40
voxels, so a wide changed region leaves voxels), and (b) past recursion depth 3 when no grid point
lies on the mask. With the real model's 192-voxel patch the core is 144 voxels and (a) is rare.
Our sessions DO reach it in their larger refinement steps (the run prints how many): the
generator seeds np.random.seed(1000 * session + step) right before every step (the step's
np_random_seed) and logs the boxes each call returned (the step's random_fallback); the step's
refinement_bboxes are the complete list in order. voxseg's port reproduces NumPy's legacy
generator draw for draw (edit/interactive refinement boxes), so these steps are compared too;
--no-random-fallback makes the run fail when a step reaches it.

Pinned versions: tools/requirements-nninteractive.txt (python3 -m venv /tmp/nnivenv &&
/tmp/nnivenv/bin/pip install -r tools/requirements-nninteractive.txt).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

SEED = 38
PATCH = [72, 80, 88]                 # (z, y, x); > 2 * 24 per axis (refinement margin)
FEATURES = [8, 16, 24, 32]
STRIDES = [[1, 1, 1], [2, 2, 2], [2, 2, 2], [2, 2, 2]]
CONFIGURATION = "3d_fullres_fab"
DATASET_NAME = "Dataset938_nnInteractiveFabricated"
IMAGE_SHAPE = (80, 96, 160)          # (z, y, x); x > 1.5 * PATCH x: AutoZoom can go past 1.5
# interaction channel -> network input channel is 1 + index (the image is input channel 0)
CHANNEL_MAPPING = {"prev_seg": 0, "bbox2d": [1, 2], "bbox3d": [1, 2], "lasso": [1, 2],
                   "points": [3, 4], "scribble": [-2, -1]}   # negative: resolved against 7
INTERACTION_DECAY = 0.95
# the designed channel's stem weights (design_weights)
DESIGN = {"image": 1.0, "prev": 2.5, "positive": 0.5, "negative": 4.0, "prompt_threshold": 0.5,
          "image_threshold": 2.5, "step": 0.25, "logit_scale": 30.0, "logit_threshold": 0.3,
          "random_logit_weight": 0.1, "texture_weight": 0.01}


def resenc_plans(dataset_name, configuration, patch, features, strides, blocks, shape, batch_size,
                 use_mask, foreground, planner):
    """An nnU-Net plans.json holding one ResidualEncoderUNet configuration, as nnInteractive's
    model folders have (also tools/train_interactive.py's)."""
    n = len(features)
    arch = {
        "network_class_name": "dynamic_network_architectures.architectures.unet.ResidualEncoderUNet",
        "arch_kwargs": {
            "n_stages": n, "features_per_stage": features,
            "conv_op": "torch.nn.modules.conv.Conv3d", "kernel_sizes": [[3, 3, 3]] * n,
            "strides": strides, "n_blocks_per_stage": blocks,
            "n_conv_per_stage_decoder": [1] * (n - 1), "conv_bias": True,
            "norm_op": "torch.nn.modules.instancenorm.InstanceNorm3d",
            "norm_op_kwargs": {"eps": 1e-05, "affine": True}, "dropout_op": None,
            "dropout_op_kwargs": None, "nonlin": "torch.nn.LeakyReLU",
            "nonlin_kwargs": {"inplace": True}},
        "_kw_requires_import": ["conv_op", "norm_op", "dropout_op", "nonlin"]}
    return {
        "dataset_name": dataset_name, "plans_name": "nnUNetResEncUNetPlans",
        "original_median_spacing_after_transp": [1.0, 1.0, 1.0],
        "original_median_shape_after_transp": list(shape),
        "image_reader_writer": "SimpleITKIO", "transpose_forward": [0, 1, 2],
        "transpose_backward": [0, 1, 2],
        "configurations": {configuration: {
            "data_identifier": "nnUNetPlans_3d_fullres", "preprocessor_name": "DefaultPreprocessor",
            "batch_size": batch_size, "patch_size": patch, "median_image_size_in_voxels": list(shape),
            "spacing": [1.0, 1.0, 1.0], "normalization_schemes": ["ZScoreNormalization"],
            "use_mask_for_norm": [use_mask], "resampling_fn_data": "resample_data_or_seg_to_shape",
            "resampling_fn_seg": "resample_data_or_seg_to_shape",
            "resampling_fn_data_kwargs": {"is_seg": False, "order": 3, "order_z": 0,
                                          "force_separate_z": None},
            "resampling_fn_seg_kwargs": {"is_seg": True, "order": 1, "order_z": 0,
                                         "force_separate_z": None},
            "resampling_fn_probabilities": "resample_data_or_seg_to_shape",
            "resampling_fn_probabilities_kwargs": {"is_seg": False, "order": 1, "order_z": 0,
                                                   "force_separate_z": None},
            "architecture": arch, "batch_dice": True}},
        "experiment_planner_used": planner,
        "label_manager": "LabelManager",
        "foreground_intensity_properties_per_channel": {"0": foreground}}


def plans_json():
    return resenc_plans(DATASET_NAME, CONFIGURATION, PATCH, FEATURES, STRIDES, [1] * len(FEATURES),
                        IMAGE_SHAPE, 2, True,
                        {"max": 800.0, "mean": 400.0, "median": 400.0, "min": 0.0,
                         "percentile_00_5": 50.0, "percentile_99_5": 800.0, "std": 150.0},
                        "fabricated by tools/nninteractive_parity.py")


def dataset_json():
    return {"channel_names": {"0": "image"}, "labels": {"background": 0, "object": 1},
            "numTraining": 0, "file_ending": ".nii.gz", "name": DATASET_NAME,
            "description": "fabricated weights for voxseg's nnInteractive parity goldens"}


def inference_info():
    return {"inference_class": "nnInteractiveInferenceSession",
            "inference_class_min_version": "2.0.0",
            "supported_interactions": {"points": True, "bbox2d": True, "bbox3d": True,
                                       "scribble": True, "lasso": True},
            "supports_initial_label": True, "interaction_channels": 6,
            "channel_mapping": CHANNEL_MAPPING, "point_radius": 4,
            "preferred_scribble_thickness": [2, 2, 2], "interaction_decay": INTERACTION_DECAY,
            "pad_mode_image": "constant"}


def build_network():
    from export_nnunet import build_network as build
    conf = plans_json()["configurations"][CONFIGURATION]
    net, _ = build(conf, 8, 2, "nnInteractiveTrainer_stub", None)
    return net


def design_weights(net, seed=SEED):
    """Seeded random weights with four designed channels (0..3) at full resolution.

    Network input channels: 0 image, 1 prev_seg, 2/3 bbox & lasso +/-, 4/5 points +/-,
    6/7 scribble +/- (CHANNEL_MAPPING + 1). Stem channels 0 and 1 compute
    PREV * prev_seg + POSITIVE * (3^3 sums of the positive prompts) - NEGATIVE * (3^3 sums of
    the negative ones), channels 2 and 3 IMAGE * image - NEGATIVE * (the same negative sums).
    Instance norm makes each relative to the patch; its shifts (-threshold, and -threshold - step
    for the second of each pair) and LeakyReLU give two clamped indicators,
    (lrelu(x) - lrelu(x - step)) / step: "near a positive prompt or in the previous mask" and
    "bright for this patch" (an object that is a small part of the patch), both cut by negative
    prompts. Stage 0's residual block passes channels 0..3 on (its second conv's norm scale and
    shift are 0 there); the last decoder conv adds the two indicators (values about 0, 1 or 2),
    and since a nearly binary map stays on either side of 0 under instance norm whatever its
    foreground fraction, the segmentation layer's weight +-LOGIT_SCALE / 2 with threshold
    LOGIT_THRESHOLD makes the argmax decisive. Every other weight is seeded random: kaiming-like
    convs, norm scales U(0.6, 1.4) and shifts N(0, 0.2) (4 random channels at full resolution and
    the whole deeper path), and the segmentation layer's random weights of std
    RANDOM_LOGIT_WEIGHT on the other decoder channels."""
    import torch
    g = torch.Generator().manual_seed(seed)
    sd = net.state_dict()
    with torch.no_grad():
        for name, p in net.named_parameters():
            if p.ndim >= 2:                                  # conv / transposed conv
                fan_in = p.shape[1] * int(np.prod(p.shape[2:]))
                if "transpconv" in name:
                    fan_in = p.shape[0] * int(np.prod(p.shape[2:])) // 8
                p.copy_(torch.randn(p.shape, generator=g) * (2.0 / fan_in) ** 0.5)
            elif name.endswith("norm.weight") or ".all_modules.1.weight" in name:
                p.copy_(0.6 + 0.8 * torch.rand(p.shape, generator=g))
            else:                                            # conv / norm bias
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
        enc, dec = net.encoder, net.decoder
        stem = enc.stem.convs[0]
        w = stem.conv.weight                                  # [F0, 8, 3, 3, 3]
        w[:4].zero_()
        for c in (0, 1):      # the prompts: positives and the previous mask add, negatives cut
            w[c, 1, 1, 1, 1] = DESIGN["prev"]
            for i in (2, 4, 6):
                w[c, i] = DESIGN["positive"]                  # 3^3 sums
        for c in (2, 3):      # the image: bright voxels stand out where they are a small part
            w[c, 0, 1, 1, 1] = DESIGN["image"]
        for c in (0, 1, 2, 3):
            for i in (3, 5, 7):
                w[c, i] = -DESIGN["negative"]
        eps = DESIGN["step"]
        stem.conv.bias[:4] = 0.0
        stem.norm.weight[:4] = 1.0
        stem.norm.bias[:4] = torch.tensor([-DESIGN["prompt_threshold"],
                                           -DESIGN["prompt_threshold"] - eps,
                                           -DESIGN["image_threshold"],
                                           -DESIGN["image_threshold"] - eps])
        block = enc.stages[0].blocks[0]                       # passes channels 0..3 on
        block.conv2.norm.weight[:4] = 0.0
        block.conv2.norm.bias[:4] = 0.0
        last = dec.stages[-1].convs[0]                        # input: [upsampled F0, skip F0]
        f0 = FEATURES[0]
        last.conv.weight[0].zero_()
        # the random full-resolution channels join with small random weights: the instance norm
        # that follows is better conditioned than on a nearly binary map (ONNX Runtime's and
        # torch's differ by 2e-4 relative on that)
        last.conv.weight[0, f0 + 4:] = DESIGN["texture_weight"] / 9 * torch.randn(
            last.conv.weight[0, f0 + 4:].shape, generator=g)
        # (lrelu(x) - lrelu(x - eps)) / eps: a clamped step per indicator; their sum ~ {0, 1, 2}
        for c, sign in ((0, 1.0), (1, -1.0), (2, 1.0), (3, -1.0)):
            last.conv.weight[0, f0 + c, 1, 1, 1] = sign / eps
        last.conv.bias[0] = 0.0
        last.norm.weight[0] = 1.0
        last.norm.bias[0] = 0.0
        seg = dec.seg_layers[-1]
        k, tau = DESIGN["logit_scale"], DESIGN["logit_threshold"]
        seg.weight.copy_(DESIGN["random_logit_weight"] * torch.randn(seg.weight.shape, generator=g))
        seg.weight[0, 0] = -k / 2
        seg.weight[1, 0] = k / 2
        seg.bias[0] = k * tau / 2
        seg.bias[1] = -k * tau / 2
    del sd
    return net


def phantom(seed=SEED):
    """int16 (z, y, x): background ~100 with coarse noise, four ellipsoids (300..800), a zero
    border of different width per side and a zero cylinder inside the nonzero bounding box."""
    rng = np.random.default_rng(seed)
    Z, Y, X = IMAGE_SHAPE
    z, y, x = np.meshgrid(np.arange(Z), np.arange(Y), np.arange(X), indexing="ij")
    img = 100 + 5 * rng.integers(-2, 3, size=IMAGE_SHAPE) + (x // 16)
    for (cz, cy, cx), (rz, ry, rx), v in (((42, 50, 110), (24, 26, 22), 800),
                                          ((28, 30, 30), (10, 13, 15), 450),
                                          ((60, 34, 44), (7, 9, 8), 600),
                                          ((20, 72, 30), (8, 11, 13), 300),
                                          ((16, 80, 82), (6, 7, 72), 700)):   # a tube along x
        inside = ((z - cz) / rz) ** 2 + ((y - cy) / ry) ** 2 + ((x - cx) / rx) ** 2 <= 1
        img[inside] = v + 5 * rng.integers(-2, 3, size=int(inside.sum()))
    img[((y - 40) ** 2 + (x - 136) ** 2 <= 16) & (z >= 50) & (z < 70)] = 0   # hole inside the bbox
    img[:3] = 0
    img[-2:] = 0
    img[:, :4] = 0
    img[:, -1:] = 0
    img[:, :, :5] = 0
    img[:, :, -3:] = 0
    return img.astype(np.int16)


def fabricate(folder):
    import torch
    os.makedirs(os.path.join(folder, "fold_0"), exist_ok=True)
    for name, obj in (("plans.json", plans_json()), ("dataset.json", dataset_json()),
                      ("inference_info.json", inference_info())):
        with open(os.path.join(folder, name), "w") as f:
            json.dump(obj, f, indent=2)
    with open(os.path.join(folder, "LICENSE"), "w") as f:
        f.write("\nApache-2.0\n\nFabricated weights for voxseg's parity tests "
                "(tools/nninteractive_parity.py); no training data.\n")
    net = design_weights(build_network())
    ckpt = {"network_weights": net.state_dict(),            # repeated keys, as torch saves them
            "trainer_name": "nnInteractiveTrainer_stub",
            "init_args": {"plans": plans_json(), "configuration": CONFIGURATION, "fold": 0,
                          "device": "cpu"},
            "current_epoch": 0, "inference_allowed_mirroring_axes": None,
            "_best_ema": None, "grad_scaler_state": None, "logging": {}}
    torch.save(ckpt, os.path.join(folder, "fold_0", "checkpoint_final.pth"))
    print(f"fabricated nnInteractive model folder: {folder}")


# ----------------------------------------------------------------------------- sessions
def ellipsoid_mask(center, radii):
    Z, Y, X = IMAGE_SHAPE
    z, y, x = np.ogrid[:Z, :Y, :X]
    (cz, cy, cx), (rz, ry, rx) = center, radii
    return (((z - cz) / rz) ** 2 + ((y - cy) / ry) ** 2 + ((x - cx) / rx) ** 2 <= 1).astype(np.uint8)


def scribble_mask(z, points, thickness=2):
    """A polyline through (y, x) points in slice z, `thickness` voxels wide in y and x."""
    m = np.zeros(IMAGE_SHAPE, np.uint8)
    for (y0, x0), (y1, x1) in zip(points[:-1], points[1:]):
        n = int(max(abs(y1 - y0), abs(x1 - x0))) + 1
        for t in np.linspace(0.0, 1.0, n):
            y, x = int(round(y0 + t * (y1 - y0))), int(round(x0 + t * (x1 - x0)))
            m[z, y:y + thickness, x:x + thickness] = 1
    return m


def lasso_mask(z, vertices):
    """A filled polygon of (y, x) vertices in slice z (even-odd rule at voxel centres)."""
    Y, X = IMAGE_SHAPE[1:]
    yy, xx = np.mgrid[:Y, :X]
    inside = np.zeros((Y, X), bool)
    n = len(vertices)
    for i in range(n):
        (y0, x0), (y1, x1) = vertices[i], vertices[(i + 1) % n]
        if y0 == y1:
            continue
        cross = ((yy >= min(y0, y1)) & (yy < max(y0, y1)) &
                 (xx < x0 + (yy - y0) * (x1 - x0) / (y1 - y0)))
        inside ^= cross
    m = np.zeros(IMAGE_SHAPE, np.uint8)
    m[z] = inside
    return m


def sessions():
    """The scripted sessions: (name, autozoom, steps). Mask prompts are built by the lambdas.
    Objects of the phantom: A (800) centre (42, 50, 110), B (450) (28, 30, 30), C (600)
    (60, 34, 44), D (300) (20, 72, 30), the tube (700) along x at (16, 80, 82)."""
    return [
        ("autozoom_off", False, [
            {"op": "point", "include": True, "point": [28, 30, 30]},
            {"op": "point", "include": True, "point": [42, 50, 110]},
            {"op": "point", "include": False, "point": [42, 56, 116]},
            {"op": "bbox", "include": True, "bbox": [[60, 61], [26, 43], [36, 53]]},
            {"op": "undo"},
            {"op": "scribble", "include": True,
             "mask": lambda: scribble_mask(16, [(80, 40), (80, 70), (81, 100)])},
            {"op": "lasso", "include": False,
             "mask": lambda: lasso_mask(42, [(40, 100), (40, 120), (60, 120), (60, 100)])},
            {"op": "reset"},
            {"op": "point", "include": True, "point": [20, 72, 30]},
            {"op": "undo"},
            {"op": "undo"},
        ]),
        ("autozoom_on", True, [
            {"op": "point", "include": True, "point": [16, 80, 82]},
            {"op": "bbox", "include": True, "bbox": [[20, 64], [26, 74], [90, 130]]},
            {"op": "point", "include": False, "point": [42, 50, 110]},
            {"op": "undo"},
            {"op": "scribble", "include": False,
             "mask": lambda: scribble_mask(16, [(78, 20), (82, 150)])},
            {"op": "lasso", "include": True,
             "mask": lambda: lasso_mask(28, [(18, 16), (20, 46), (44, 44), (40, 14)])},
            {"op": "point", "include": True, "point": [60, 34, 44]},
        ]),
        ("initial_seg_and_borders", True, [
            {"op": "initial_seg", "run_prediction": False,
             "mask": lambda: ellipsoid_mask((28, 30, 30), (8, 10, 12))},
            {"op": "point", "include": True, "point": [2, 3, 4]},
            {"op": "bbox", "include": False, "bbox": [[-5, 20], [40, 41], [140, 170]]},
            {"op": "initial_seg", "run_prediction": True,
             "mask": lambda: ellipsoid_mask((60, 34, 44), (6, 8, 7))},
            {"op": "point", "include": True, "point": [79, 95, 159]},
            {"op": "undo"},
        ]),
        # Python's round() is half-to-even; 2D vs 3D is decided on the raw (unrounded) sizes; a
        # box partly past the image is clipped (voxseg refuses one wholly outside, which 2.6.0
        # pins to the edge, so none is here); AutoZoom off with an initial mask that needs
        # refinement (force_full_refine) and its undo.
        ("rounding_and_clipping", False, [
            {"op": "point", "include": True, "point": [30.5, 40.5, 61.5]},
            {"op": "bbox", "include": True, "bbox": [[10.4, 11.6], [20.5, 50.5], [100.5, 141.5]]},
            {"op": "bbox", "include": False, "bbox": [[60.5, 61.5], [25, 46], [35, 57]]},
            {"op": "bbox", "include": True, "bbox": [[76, 90], [10, 30], [120, 150]]},
            {"op": "undo"},
            {"op": "initial_seg", "run_prediction": True,
             "mask": lambda: ellipsoid_mask((40, 50, 100), (26, 30, 40))},
            {"op": "undo"},
            {"op": "point", "include": False, "point": [16, 80, 82]},
            {"op": "reset"},
            {"op": "lasso", "include": True,
             "mask": lambda: lasso_mask(20, [(62, 18), (62, 44), (82, 44), (82, 18)])},
            {"op": "scribble", "include": False,
             "mask": lambda: scribble_mask(20, [(70, 20), (74, 40)])},
        ]),
    ]


ACTIVE_RECORDER = [None]


def install_fallback_hook():
    """Wraps nnInteractive.utils.bboxes.random_sampling_fallback once per process: every call
    (the boxes it returns) is logged into the active recorder's current step."""
    import nnInteractive.utils.bboxes as bboxes
    if getattr(bboxes.random_sampling_fallback, "voxseg_logged", False):
        return
    original = bboxes.random_sampling_fallback

    def fallback(mask, bbox_size, margin, n_samples):
        out = original(mask, bbox_size, margin, n_samples)
        rec = ACTIVE_RECORDER[0]
        if rec is not None and rec.step is not None:
            rec.step["random_fallback"].append([[[int(a), int(b)] for a, b in bb] for bb in out])
        return out

    fallback.voxseg_logged = True
    bboxes.random_sampling_fallback = fallback


class Recorder:
    """Wraps methods of one nnInteractiveInferenceSession instance (and bboxes.py's random box
    sampling) to log what every step did."""

    def __init__(self, session):
        install_fallback_hook()
        self.s, self.step = session, None
        self._margins = []
        build, plan, predict = session._build_network_input, session._plan_refinement_bboxes, \
            session._predict
        network = session.network
        self._pending = []

        def build_input(center, zoom):
            out = build(center, zoom)
            self._pending.append({"kind": "coarse", "zoom": float(zoom),
                                  "scaled_bbox": [[int(a), int(b)] for a, b in out[2]]})
            return out

        def plan_boxes(pred, scaled_bbox, force_full_refine):
            boxes = plan(pred, scaled_bbox, force_full_refine)
            boxes = [[[int(a), int(b)] for a, b in bb] for bb in boxes]
            self.step["refinement_bboxes"] = boxes
            self.step["force_full_refine"] = bool(force_full_refine)
            self._pending.extend({"kind": "refine", "zoom": 1.0, "scaled_bbox": bb} for bb in boxes)
            return boxes

        def run_predict(force_full_refine=False):
            if session.new_interaction_centers:
                self.step["center"] = [int(c) for c in session.new_interaction_centers[-1]]
                self.step["initial_zoom"] = float(session.new_interaction_zoom_out_factors[-1])
            return predict(force_full_refine)

        def forward(x):
            import torch
            y = network(x)
            margin = (y[0, 1] - y[0, 0]).abs()
            rec = self._pending.pop(0)
            rec["foreground"] = int((y[0, 1] > y[0, 0]).sum())
            rec["near_tie_voxels"] = int((margin < 1e-3).sum())
            # per input channel: sum and sum of squares (float64) of what the network saw
            xd = x[0].double()
            rec["input_sums"] = [float(v) for v in xd.sum(dim=(1, 2, 3))]
            rec["input_sums_of_squares"] = [float(v) for v in (xd * xd).sum(dim=(1, 2, 3))]
            self._margins.append(margin.flatten()[::97].clone())
            self.step["forwards"].append(rec)
            return y

        session._build_network_input = build_input
        session._plan_refinement_bboxes = plan_boxes
        session._predict = run_predict
        session.network = forward

    def begin(self, step):
        ACTIVE_RECORDER[0] = self
        self.step = step
        step.update(forwards=[], refinement_bboxes=[], random_fallback=[])
        self._pending = []

    def margins(self):
        import torch
        return torch.cat(self._margins) if self._margins else torch.zeros(0)


def save_nifti(path, a):
    """(z, y, x) array -> NIfTI that voxseg reads as nx = X, ny = Y, nz = Z (same memory)."""
    import nibabel as nib
    img = nib.Nifti1Image(np.ascontiguousarray(a.transpose(2, 1, 0)), np.eye(4))
    img.header.set_xyzt_units("mm")
    nib.save(img, path)


def jsonable_bbox(b):
    return None if b is None else [[int(lo), int(hi)] for lo, hi in b]


def normalization_of(image):
    """What 2.6.0's set_image computes (its own function on the image as it receives it): the
    nonzero bbox, mean and unbiased std over it (float32), and the sum of the normalised image."""
    import torch
    from nnInteractive.inference.inference_session import nnInteractiveInferenceSession as S
    t = torch.from_numpy(np.ascontiguousarray(image[None], dtype=np.float32))
    bbox = S._nonzero_spatial_bbox(t)
    crop = t[(slice(0, 1), *[slice(lo, hi) for lo, hi in bbox])]
    mean, std = crop.mean(), crop.std()
    normed = (t - mean) / std
    return {"bbox": bbox, "mean": float(mean), "std": float(std),
            "normalized_sum": float(normed.double().sum())}


def new_session(model_folder, storage, autozoom):
    import torch
    from nnInteractive.inference.inference_session import nnInteractiveInferenceSession
    s = nnInteractiveInferenceSession(device=torch.device("cpu"), use_torch_compile=False,
                                      verbose=False, torch_n_threads=2, do_autozoom=autozoom,
                                      interactions_storage=storage, enable_undo=True)
    s.initialize_from_trained_model_folder(model_folder)
    return s


def replay(model_folder, image, index, name, autozoom, steps, storage, out=None):
    """Runs one scripted session; returns (steps as logged, masks after each step, margins)."""
    s = new_session(model_folder, storage, autozoom)
    rec = Recorder(s)
    s.set_image(image[None])
    target = np.zeros(image.shape, np.uint8)
    s.set_target_buffer(target)
    logged, masks = [], []
    for k, spec in enumerate(steps):
        step = {key: v for key, v in spec.items() if key != "mask"}
        rec.begin(step)
        step["np_random_seed"] = 1000 * index + k
        np.random.seed(step["np_random_seed"])
        op = spec["op"]
        prompt = spec["mask"]() if "mask" in spec else None
        if prompt is not None:
            step["mask"] = f"s{index}_step{k}_prompt.nii.gz"
            if out:
                save_nifti(os.path.join(out, step["mask"]), prompt)
        if op == "point":
            ret = s.add_point_interaction(tuple(spec["point"]), spec["include"])
        elif op == "bbox":
            sizes = [hi - lo for lo, hi in spec["bbox"]]
            step["op"] = "bbox2d" if any(n == 1 for n in sizes) else "bbox3d"
            ret = s.add_bbox_interaction(spec["bbox"], spec["include"])
        elif op == "scribble":
            ret = s.add_scribble_interaction(prompt, spec["include"])
        elif op == "lasso":
            ret = s.add_lasso_interaction(prompt, spec["include"])
        elif op == "initial_seg":
            ret = s.add_initial_seg_interaction(prompt, run_prediction=spec["run_prediction"])
        elif op == "undo":
            step["undo_returned"] = bool(s.undo())
            ret = s._last_paste_bbox if step["undo_returned"] else None
        elif op == "reset":
            s.reset_interactions()
            ret = None
        else:
            raise ValueError(op)
        step["paste_bbox"] = jsonable_bbox(ret)
        step["intensity"] = float(s.current_interaction_intensity)
        step["mask_voxels"] = int(target.sum())
        step["result"] = f"s{index}_step{k}.nii.gz"
        masks.append(target.copy())
        logged.append(step)
        zooms = ", ".join(f"{f['kind'][0]}{f['zoom']:.3g}" for f in step["forwards"])
        print(f"  [{storage}] {name} step {k} {step['op']}: {len(step['forwards'])} forwards ({zooms}), "
              f"{len(step['refinement_bboxes'])} refinement boxes, mask {step['mask_voxels']}, "
              f"paste {step['paste_bbox']}" + (f", RANDOM FALLBACK x{len(step['random_fallback'])}"
                                               if step["random_fallback"] else ""), flush=True)
    return logged, masks, rec.margins()


def run(a):
    import torch
    torch.manual_seed(SEED)
    out = os.path.abspath(a.out)
    if os.path.exists(out):
        if not a.force:
            raise SystemExit(f"error: {out} exists; pass --force to replace it")
        shutil.rmtree(out)
    os.makedirs(out)
    subprocess.run([sys.executable, os.path.join(HERE, "export_nninteractive.py"), a.folder, "-o",
                    os.path.join(out, "model"), "--force"], check=True)
    image = phantom()
    save_nifti(os.path.join(out, "image.nii.gz"), image)
    norm = normalization_of(image)
    chosen = sessions()
    if a.sessions:
        chosen = [c for c in chosen if c[0] in a.sessions]
    result, all_margins, fallbacks = [], [], 0
    for index, (name, autozoom, steps) in enumerate(chosen):
        logged, masks, margins = replay(a.folder, image, index, name, autozoom, steps, "tensor", out)
        all_margins.append(margins)
        for step, mask in zip(logged, masks):
            save_nifti(os.path.join(out, step["result"]), mask)
            fallbacks += len(step["random_fallback"])
        if not a.skip_blosc2:
            logged2, masks2, _ = replay(a.folder, image, index, name, autozoom, steps, "blosc2")
            for k, (s1, s2, m1, m2) in enumerate(zip(logged, logged2, masks, masks2)):
                if not np.array_equal(m1, m2) or s1["forwards"] != s2["forwards"] or \
                        s1["refinement_bboxes"] != s2["refinement_bboxes"]:
                    raise SystemExit(f"error: session {name} step {k}: blosc2 storage differs from "
                                     "tensor storage")
            print(f"  {name}: blosc2 storage gives the same masks and logs at every step")
        result.append({"name": name, "autozoom": autozoom, "steps": logged})
    m = torch.cat(all_margins)
    q = torch.quantile(m, torch.tensor([0.001, 0.01, 0.05, 0.5])).tolist()
    summary = {"generator": "tools/nninteractive_parity.py", "nninteractive": "2.6.0",
               "device": "cpu", "torch_threads": 2, "interactions_storage": ["tensor", "blosc2"],
               "image": "image.nii.gz", "image_shape_zyx": list(IMAGE_SHAPE), "model": "model",
               "normalization": norm,
               "logit_margin_quantiles": {"p0.1": q[0], "p1": q[1], "p5": q[2], "p50": q[3]},
               "logit_margin_below_1e-3": float((m < 1e-3).float().mean()),
               "random_fallback_steps": fallbacks, "sessions": result}
    with open(os.path.join(out, "sessions.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    print(f"logit margin |l1 - l0| over every forward (1 in 97 voxels): p0.1 {q[0]:.3g}, p1 "
          f"{q[1]:.3g}, p5 {q[2]:.3g}, median {q[3]:.3g}; below 1e-3: "
          f"{summary['logit_margin_below_1e-3']:.2e}")
    if fallbacks:
        print(f"{fallbacks} step(s) used NumPy's random box sampling (seeded; sessions.json "
              "random_fallback has the boxes it returned)")
        if a.no_random_fallback:
            raise SystemExit("error: --no-random-fallback")
    size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(out) for f in fs)
    print(f"goldens written: {out} ({size / 1e6:.2f} MB)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fabricate", help="write the fabricated nnInteractive model folder")
    f.add_argument("folder")
    r = sub.add_parser("run", help="export the folder and record the scripted sessions")
    r.add_argument("folder")
    r.add_argument("-o", "--out", required=True)
    r.add_argument("--force", action="store_true")
    r.add_argument("--sessions", nargs="+", help="only these sessions (by name)")
    r.add_argument("--skip-blosc2", action="store_true", help="do not replay with blosc2 storage")
    r.add_argument("--no-random-fallback", action="store_true",
                   help="fail when a step uses NumPy's random box sampling")
    a = p.parse_args()
    if a.cmd == "fabricate":
        fabricate(a.folder)
    else:
        run(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
