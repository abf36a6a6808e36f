#!/usr/bin/env python3
"""Trains voxseg's open promptable 3-D segmentation model (issue 38 item 6) on generated data only,
and writes it as an nnInteractive 2.6.0 model folder (plans.json, dataset.json, inference_info.json,
LICENSE, fold_0/checkpoint_final.pth) that tools/export_nninteractive.py turns into a package.

    python3 tools/train_interactive.py pool --voxseg build/app/voxseg -o /tmp/itrain/pool
    nice -n 10 python3 tools/train_interactive.py train --pool /tmp/itrain/pool \
        -o /tmp/itrain/model --minutes 40
    # the shipped model: four runs, each `--resume`-ing the last (docs/interactive-model.md), the last
    # with --crop 48 --lr 1.5e-3 --image-gain 10 --bf16-clicks

Data (no patient data): CT phantoms from `voxseg phantom` (organ labels: liver, spleen, kidneys,
lungs, spine, aorta; seeds 1000-1059 train, 9001-9006 are held out for tools/eval_interactive.py)
at several grids, plus volumes of random ellipsoids/blobs with random contrasts. Half of the
phantoms are remapped through a random non-monotonic intensity curve with a smooth bias field
(MR-like contrasts), so the model is not CT-only.

Input, as 2.6.0's session builds it at zoom 1 with the legacy channel mapping (8 channels):
0 the image z-scored over the whole volume, 1 prev_seg, 2/3 box +/-, 4/5 point +/- (2.6.0's
point ball: a ball of radius 4 whose values are its distance transform normalised to 1),
6/7 scribble +/-; older interactions are scaled by decay^age (the session's decay scaling,
newest = 1). Training simulates sessions: a first prompt (point, 2-D box or scribble) on a random
target structure (TARGET_WEIGHTS favours the soft-tissue organs), then 0 to --max-corrections
(4) corrective points at the largest error component (its deepest voxel, positive on a miss,
negative on a false positive) with the previous prediction as prev_seg; a
quarter of the samples start from a degraded mask in prev_seg (AutoZoom's refinement pass).
Crops are taken at 1x-2x zoom-out (AutoZoom). Network: ResidualEncoderUNet (nnInteractive's
family), trained on --crop crops (32^3 by default, 48^3 for the shipped model: the machine has 2
shared cores), run on 64^3 patches.
Loss: cross-entropy + soft Dice. Seeded; CPU torch (tools/requirements-nninteractive.txt).
"""
import argparse
import contextlib
import functools
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nninteractive_parity import resenc_plans  # noqa: E402

SEED = 38
TRAIN_SEEDS = list(range(1000, 1060))
HELDOUT_SEEDS = list(range(9001, 9007))
FEATURES = [8, 16, 32, 64]
BLOCKS = [1, 1, 2, 2]
PATCH = [64, 64, 64]           # what the session runs (plans.json)
CROP = 32                      # what training sees
POINT_RADIUS = 4
DECAY = 0.9
CONFIGURATION = "3d_fullres_ps64"
DATASET_NAME = "Dataset938_voxsegInteractivePhantom"
TRAINER = "nnInteractiveTrainer_stub"   # 2.6.0 builds the network from plans.json with it
LABELS = {1: "liver", 2: "spleen", 3: "kidney_left", 4: "kidney_right", 5: "lung_left",
          6: "lung_right", 7: "spine", 8: "aorta"}
# How often each phantom structure is the target, relative: the soft-tissue organs, whose borders
# are 5-20 HU against noise of 10-20 HU, most; the lungs, which intensity alone separates, least.
TARGET_WEIGHTS = {1: 3.0, 2: 2.0, 3: 1.5, 4: 1.5, 5: 0.5, 6: 0.5, 7: 1.0, 8: 1.0}


# ----------------------------------------------------------------------------- model folder
def plans_json():
    n = len(FEATURES)
    return resenc_plans(DATASET_NAME, CONFIGURATION, PATCH, FEATURES,
                        [[1, 1, 1]] + [[2, 2, 2]] * (n - 1), BLOCKS, [64, 128, 128], 4, False,
                        {"max": 1.0, "mean": 0.0, "median": 0.0, "min": -1.0,
                         "percentile_00_5": -1.0, "percentile_99_5": 1.0, "std": 1.0},
                        "tools/train_interactive.py (voxseg)")


def dataset_json():
    return {"channel_names": {"0": "image"}, "labels": {"background": 0, "object": 1},
            "numTraining": 0, "file_ending": ".nii.gz", "name": DATASET_NAME,
            "description": "voxseg's promptable segmentation model, trained on generated "
                           "phantoms and random shapes (tools/train_interactive.py)"}


def inference_info():
    return {"inference_class": "nnInteractiveInferenceSession",
            "inference_class_min_version": "2.0.0",
            "supported_interactions": {"points": True, "bbox2d": True, "bbox3d": False,
                                       "scribble": True, "lasso": True},
            "supports_initial_label": True, "interaction_channels": 6,   # 2.6.0 adds prev_seg
            "channel_mapping": {"prev_seg": 0, "bbox2d": [1, 2], "bbox3d": [1, 2],
                                "lasso": [1, 2], "points": [3, 4], "scribble": [5, 6]},
            "point_radius": POINT_RADIUS, "preferred_scribble_thickness": [2, 2, 2],
            "interaction_decay": DECAY, "pad_mode_image": "constant"}


def build_network():
    import torch
    from dynamic_network_architectures.architectures.unet import ResidualEncoderUNet
    n = len(FEATURES)
    return ResidualEncoderUNet(
        8, n, FEATURES, torch.nn.Conv3d, 3, [1] + [2] * (n - 1), BLOCKS, 2, [1] * (n - 1), True,
        torch.nn.InstanceNorm3d, {"eps": 1e-5, "affine": True}, None, None, torch.nn.LeakyReLU,
        {"inplace": True}, deep_supervision=False)


def write_folder(folder, net, epoch, log):
    import torch
    os.makedirs(os.path.join(folder, "fold_0"), exist_ok=True)
    for name, obj in (("plans.json", plans_json()), ("dataset.json", dataset_json()),
                      ("inference_info.json", inference_info())):
        with open(os.path.join(folder, name), "w") as f:
            json.dump(obj, f, indent=2)
    with open(os.path.join(folder, "LICENSE"), "w") as f:
        f.write("Apache-2.0\n\nvoxseg's promptable segmentation model, trained by voxseg on "
                "generated phantoms (tools/train_interactive.py); no patient data. Not a clinical "
                "model.\n")
    weights, seen = {}, {}          # repeated keys keep naming one tensor (a small checkpoint)
    for k, v in plain_state_dict(net).items():
        key = (v.data_ptr(), tuple(v.shape))
        if key not in seen:
            seen[key] = v.detach().contiguous().clone()
        weights[k] = seen[key]
    ckpt = {"network_weights": weights, "trainer_name": TRAINER,
            "init_args": {"plans": plans_json(), "configuration": CONFIGURATION, "fold": 0,
                          "device": "cpu"},
            "current_epoch": epoch, "inference_allowed_mirroring_axes": None,
            "_best_ema": None, "grad_scaler_state": None, "logging": log}
    tmp = os.path.join(folder, "fold_0", "checkpoint_final.pth.tmp")
    torch.save(ckpt, tmp)
    os.replace(tmp, os.path.join(folder, "fold_0", "checkpoint_final.pth"))


# ----------------------------------------------------------------------------- data
def pool_grid(seed):
    """The phantom grid of a seed: 96-144 columns over 400 mm, 2.5-5 mm slices over 320 mm."""
    rng = np.random.default_rng(seed)
    size = [96, 112, 128, 144][seed % 4]
    zs = round(float(rng.uniform(2.5, 5.0)), 2)
    return size, round(400.0 / size, 3), zs, int(320 / zs)


def make_pool(voxseg, out):
    for s in TRAIN_SEEDS + HELDOUT_SEEDS:
        d = os.path.join(out, str(s))
        if os.path.isfile(os.path.join(d, "labels.nii.gz")):
            continue
        size, sp, zs, nz = pool_grid(s)
        subprocess.run([voxseg, "phantom", "--seed", str(s), "--size", f"{size}x{size}x{nz}",
                        "--spacing", f"{sp}x{sp}x{zs}", "--outputs", "labels,image",
                        "--threads", "1", d], check=True, stdout=subprocess.DEVNULL)
    print(f"pool: {out}")


def load_nifti(path):
    """(z, y, x) array."""
    import nibabel as nib
    return np.asarray(nib.load(path).dataobj).transpose(2, 1, 0)


def load_pool(folder, seeds):
    vols = []
    for s in seeds:
        img = load_nifti(os.path.join(folder, str(s), "image.nii.gz")).astype(np.int16)
        lab = load_nifti(os.path.join(folder, str(s), "labels.nii.gz")).astype(np.uint8)
        vols.append((img, lab))
    return vols


def resize(a, shape):
    """Trilinear resampling to the shape (torch's interpolate: an order of magnitude faster than
    scipy's zoom on these sizes)."""
    import torch
    t = torch.from_numpy(np.ascontiguousarray(a, np.float32))[None, None]
    return torch.nn.functional.interpolate(t, size=tuple(shape), mode="trilinear",
                                           align_corners=True)[0, 0].numpy()


def smooth_field(rng, shape, cells=4):
    """A smooth random field in [0, 1] (trilinear upsampling of a coarse random grid)."""
    return resize(rng.random([cells] * 3), shape)


KNOTS = np.array([-1100, -600, -150, -50, 20, 50, 80, 150, 400, 1000, 2500], np.float32)


def mr_like(rng, img, vals):
    """The random non-monotonic intensity curve `vals` (at KNOTS, over HU), a bias field and
    noise."""
    out = np.interp(img.astype(np.float32), KNOTS, vals).astype(np.float32)
    out *= 0.6 + 0.8 * smooth_field(rng, img.shape, 3).astype(np.float32)
    out += rng.normal(0, rng.uniform(0.01, 0.06), img.shape).astype(np.float32)
    return out


def blob_volume(rng, shape):
    """Random ellipsoids and thresholded smooth blobs with random intensities on a textured
    background, sized to the shape; returns (image, labels)."""
    zz, yy, xx = np.meshgrid(*[np.arange(s, dtype=np.float32) for s in shape], indexing="ij")
    img = rng.normal(0, 1) + 0.5 * smooth_field(rng, shape, 5).astype(np.float32)
    lab = np.zeros(shape, np.uint8)
    scale = shape[0] / 64.0
    for k in range(1, int(rng.integers(3, 9)) + 1):
        c = [rng.uniform(0.12 * s, 0.88 * s) for s in shape]
        r = [rng.uniform(3, 18) * scale for _ in range(3)]
        d = ((zz - c[0]) / r[0]) ** 2 + ((yy - c[1]) / r[1]) ** 2 + ((xx - c[2]) / r[2]) ** 2
        if rng.random() < 0.4:   # bumpy blob
            d = d + 0.8 * (smooth_field(rng, shape, 8).astype(np.float32) - 0.5)
        m = d < 1
        lab[m] = k
        img = np.where(m, rng.normal(0, 1.5) + 0.2 * rng.normal(0, 1, shape).astype(np.float32) *
                       rng.random(), img)
    img = img + rng.normal(0, rng.uniform(0.05, 0.4), shape).astype(np.float32)
    return img.astype(np.float32), lab


@functools.lru_cache(maxsize=16)
def point_ball(radius):
    """2.6.0's point (build_point with use_distance_transform): a ball of the radius, its distance
    transform normalised to a maximum of 1."""
    from scipy.ndimage import distance_transform_edt
    r = int(math.ceil(radius))
    g = np.mgrid[-r:r + 1, -r:r + 1, -r:r + 1].astype(np.float32)
    ball = (np.sqrt((g ** 2).sum(0)) <= radius)
    d = distance_transform_edt(ball)
    return (d / d.max()).astype(np.float32)


def place(channel, mask_or_point, value, radius=None):
    """In-place maximum, as 2.6.0 writes interactions."""
    if radius is None:
        np.maximum(channel, mask_or_point.astype(np.float32) * value, out=channel)
        return
    ball = point_ball(radius) * value
    r = ball.shape[0] // 2
    lo = [p - r for p in mask_or_point]
    sl = tuple(slice(max(0, l), min(s, l + ball.shape[0])) for l, s in zip(lo, channel.shape))
    bs = tuple(slice(s.start - l, s.stop - l) for s, l in zip(sl, lo))
    np.maximum(channel[sl], ball[bs], out=channel[sl])


def deepest_voxel(mask, rng):
    """The voxel of the mask farthest from its border (ties: random)."""
    from scipy.ndimage import distance_transform_edt
    d = distance_transform_edt(np.pad(mask, 1))[1:-1, 1:-1, 1:-1]
    best = np.argwhere(d >= d.max() * 0.9)
    return tuple(int(v) for v in best[rng.integers(len(best))])


def random_inside(mask, rng):
    pts = np.argwhere(mask)
    return tuple(int(v) for v in pts[rng.integers(len(pts))])


def box2d_prompt(gt, rng):
    """A 2-D box around the target's section on one slice (any axis), as bbox2d fills it."""
    axis = int(rng.integers(3))
    idx = np.nonzero(gt.any(axis=tuple(a for a in range(3) if a != axis)))[0]
    k = int(rng.choice(idx))
    sec = np.take(gt, k, axis=axis)
    ys, xs = np.nonzero(sec)
    m = np.zeros(gt.shape, bool)
    sl = [slice(None)] * 3
    sl[axis] = k
    j = lambda: int(rng.integers(0, 3))
    view = m[tuple(sl)]
    view[max(0, ys.min() - j()):ys.max() + 1 + j(), max(0, xs.min() - j()):xs.max() + 1 + j()] = True
    return m


def scribble_prompt(gt, rng):
    """Thick line segments between random points of the target's section on one slice."""
    from scipy.ndimage import binary_dilation
    axis = int(rng.integers(3))
    idx = np.nonzero(gt.any(axis=tuple(a for a in range(3) if a != axis)))[0]
    k = int(rng.choice(idx))
    sec = np.take(gt, k, axis=axis)
    pts = np.argwhere(sec)
    line = np.zeros(sec.shape, bool)
    chosen = pts[rng.integers(len(pts), size=int(rng.integers(2, 5)))]
    for a, b in zip(chosen[:-1], chosen[1:]):
        for t in np.linspace(0, 1, 2 * int(np.abs(b - a).max()) + 2):
            p = np.round(a + t * (b - a)).astype(int)
            line[p[0], p[1]] = True
    line = binary_dilation(line, iterations=1) & sec
    m = np.zeros(gt.shape, bool)
    sl = [slice(None)] * 3
    sl[axis] = k
    m[tuple(sl)] = line
    return m


def degraded(gt, rng):
    """A coarse mask like AutoZoom's zoomed-out prediction: down/up-sampled, maybe eroded or
    dilated."""
    from scipy.ndimage import binary_dilation, binary_erosion, zoom
    f = rng.uniform(2, 4)
    small = zoom(gt.astype(np.float32), 1 / f, order=1)
    m = zoom(small, [a / b for a, b in zip(gt.shape, small.shape)], order=1) > rng.uniform(0.3, 0.7)
    m = m[:gt.shape[0], :gt.shape[1], :gt.shape[2]]
    out = np.zeros(gt.shape, bool)
    out[:m.shape[0], :m.shape[1], :m.shape[2]] = m
    r = rng.random()
    if r < 0.25:
        out = binary_dilation(out)
    elif r < 0.5:
        out = binary_erosion(out)
    return out


class Sampler:
    """Draws (image crop, target crop, zoom) samples. Every draw costs crop-sized work: each
    phantom's labelled voxels are indexed once, intensity transforms apply to the crop only, and
    the normalisation (2.6.0 z-scores the whole image) comes from a cached subsample of the
    volume put through the same curve."""

    def __init__(self, pool, seed, crop, blob_share=0.25, mr_share=0.5):
        self.pool = pool
        self.crop = crop
        self.blob_share = blob_share
        self.mr_share = mr_share
        self.rng = np.random.default_rng(seed)
        self.index, self.sub = [], []
        for img, lab in pool:
            flat = lab.ravel()
            order = np.argsort(flat, kind="stable").astype(np.int32)
            counts = np.bincount(flat, minlength=256)
            starts = np.concatenate([[0], np.cumsum(counts)])
            self.index.append({k: order[starts[k]:starts[k + 1]].copy()
                               for k in LABELS if counts[k] >= 8})
            self.sub.append(img[::3, ::3, ::3].astype(np.float32))

    def _blob(self, c):
        rng = self.rng
        img, lab = blob_volume(rng, (c, c, c))
        present = [k for k in range(1, int(lab.max()) + 1) if (lab == k).sum() >= 8]
        if not present:
            return None
        k = int(rng.choice(present))
        mean, std = float(img.mean()), float(img.std()) + 1e-6
        return (img - mean) / std, lab == k

    def _phantom(self, c):
        rng = self.rng
        v = int(rng.integers(len(self.pool)))
        img, lab = self.pool[v]
        ids = list(self.index[v])
        w = np.array([TARGET_WEIGHTS[k] for k in ids], float)
        target = int(rng.choice(ids, p=w / w.sum()))
        vox = self.index[v][target]
        centre = np.unravel_index(int(vox[rng.integers(len(vox))]), lab.shape)
        centre = [int(p) + int(rng.integers(-c // 4, c // 4 + 1)) for p in centre]
        lo = [min(max(0, p - c // 2), max(0, s - c)) for p, s in zip(centre, img.shape)]
        sl = tuple(slice(l, l + c) for l in lo)
        part = img[sl]
        if rng.random() < self.mr_share:
            vals = rng.random(len(KNOTS)).astype(np.float32)
            part = mr_like(rng, part, vals)
            sub = np.interp(self.sub[v], KNOTS, vals)
        else:
            part = np.clip(part.astype(np.float32), -1024, 3000)
            sub = np.clip(self.sub[v], -1024, 3000)
        mean, std = float(sub.mean()), float(sub.std()) + 1e-6
        ic = np.zeros((c, c, c), np.float32) + (0 - mean) / std   # zero padding, normalised
        gc = np.zeros((c, c, c), bool)
        ic[:part.shape[0], :part.shape[1], :part.shape[2]] = (part - mean) / std
        gc[:part.shape[0], :part.shape[1], :part.shape[2]] = lab[sl] == target
        return ic, gc

    def sample(self):
        rng = self.rng
        crop = self.crop
        while True:
            f = float(rng.choice([1.0, 1.0, 1.5, 2.0]))
            c = int(round(crop * f))
            got = self._blob(c) if rng.random() < self.blob_share else self._phantom(c)
            if got is None:
                continue
            ic, gc = got
            if f != 1.0:
                ic = resize(ic, (crop,) * 3)
                gc = resize(gc, (crop,) * 3) > 0.5
            if gc.sum() < 8:
                continue
            return ic, gc, f


def first_prompt(gt, f, rng):
    """The initial interaction: (channel, mask or point, radius)."""
    r = rng.random()
    radius = max(1.5, POINT_RADIUS / f)
    if r < 0.6:
        p = deepest_voxel(gt, rng) if rng.random() < 0.5 else random_inside(gt, rng)
        return 3, p, radius
    if r < 0.8:
        return 1, box2d_prompt(gt, rng), None
    return 5, scribble_prompt(gt, rng), None


def corrective_click(pred, gt, rng, f):
    """A point at the deepest voxel of the largest error component; its channel."""
    from scipy.ndimage import label
    err = pred != gt
    if not err.any():
        return None
    comps, n = label(err)
    sizes = np.bincount(comps.ravel())[1:]
    big = comps == (int(np.argmax(sizes)) + 1)
    p = deepest_voxel(big, rng)
    return (3 if gt[p] else 4), p, max(1.5, POINT_RADIUS / f)


def render(image, prev, interactions):
    """8 x CROP^3 network input: image, prev_seg, then the interaction channels with decay."""
    x = np.zeros((8,) + image.shape, np.float32)
    x[0] = image
    x[1] = prev
    n = len(interactions)
    for i, (ch, what, radius) in enumerate(interactions):
        place(x[1 + ch], what, DECAY ** (n - 1 - i), radius)
    return x


# ----------------------------------------------------------------------------- training
def scale_image_channel(net, gain):
    """Trains the stem's image-channel weights as w / gain (the network computes the same
    function): AdamW's steps then move them `gain` times faster relative to the prompt channels'.
    The phantom's organs differ by 0.02-0.04 z-score units, so the image weights must grow far
    beyond the prompt weights; the saved checkpoint holds the plain product (a parametrisation)."""
    import torch
    from torch.nn.utils import parametrize

    class ImageGain(torch.nn.Module):
        def __init__(self, channels):
            super().__init__()
            g = torch.ones(1, channels, 1, 1, 1)
            g[:, 0] = gain
            self.register_buffer("g", g)

        def forward(self, w):
            return w * self.g

        def right_inverse(self, w):
            return w / self.g

    conv = net.encoder.stem.convs[0].conv
    parametrize.register_parametrization(conv, "weight", ImageGain(conv.in_channels))


def plain_state_dict(net):
    """The state dict with parametrised weights evaluated (the nnU-Net checkpoint's keys)."""
    out, evaluated = {}, {}
    for k, v in net.state_dict().items():
        if ".parametrizations." in k:
            if not k.endswith(".original"):
                continue
            mod, rest = k.split(".parametrizations.")
            name = rest.split(".")[0]
            sub = net.get_submodule(mod)
            if id(sub) not in evaluated:      # repeated keys name one module: one tensor
                evaluated[id(sub)] = getattr(sub, name).detach()
            out[f"{mod}.{name}"] = evaluated[id(sub)]
        else:
            out[k] = v
    return out


def train(a):
    import torch
    torch.manual_seed(SEED)
    torch.set_num_threads(a.threads)
    pool = load_pool(a.pool, TRAIN_SEEDS[:a.volumes])
    print(f"pool: {len(pool)} phantoms", flush=True)
    net = build_network().to(memory_format=torch.channels_last_3d)
    step, log = 0, {"loss": []}
    if a.resume:
        ck = torch.load(os.path.join(a.resume, "fold_0", "checkpoint_final.pth"), weights_only=True)
        net.load_state_dict(ck["network_weights"])
        step, log = int(ck.get("current_epoch", 0)), ck.get("logging") or log
    if a.image_gain != 1.0:
        scale_image_channel(net, a.image_gain)
    sampler = Sampler(pool, SEED + step, a.crop, a.blob_share, a.mr_share)  # a resumed run draws anew
    rng = np.random.default_rng(SEED + step)
    opt = torch.optim.AdamW(net.parameters(), lr=a.lr, weight_decay=1e-4)
    t0 = time.time()
    budget = a.minutes * 60
    last_save = t0
    ema = None
    data_s = net_s = 0.0
    bf16 = lambda: torch.autocast("cpu", dtype=torch.bfloat16)
    autocast = bf16 if a.bf16 else contextlib.nullcontext
    sim_autocast = bf16 if (a.bf16 or a.bf16_clicks) else contextlib.nullcontext
    while time.time() - t0 < budget:
        td = time.time()
        samples = [sampler.sample() for _ in range(a.batch)]
        k = int(rng.integers(0, a.max_corrections + 1))
        states = []
        for img, gt, f in samples:
            if rng.random() < 0.25:       # refinement pass: a coarse mask plus a point
                prev = degraded(gt, rng).astype(np.float32)
                inter = [(3, random_inside(gt, rng), max(1.5, POINT_RADIUS / f))]
            else:
                prev = np.zeros(gt.shape, np.float32)
                inter = [first_prompt(gt, f, rng)]
            states.append([img, gt, f, prev, inter])
        for _ in range(k):                # simulated corrective clicks with feedback
            x = np.stack([render(s[0], s[3], s[4]) for s in states])
            with torch.no_grad(), sim_autocast():
                out = net(torch.from_numpy(x).to(memory_format=torch.channels_last_3d))
            pred = out.argmax(1).numpy().astype(bool)
            for s, p in zip(states, pred):
                click = corrective_click(p, s[1], rng, s[2])
                s[3] = p.astype(np.float32)
                if click is not None:
                    s[4].append(click)
        x = torch.from_numpy(np.stack([render(s[0], s[3], s[4]) for s in states]))
        y = torch.from_numpy(np.stack([s[1] for s in states]).astype(np.int64))
        lr = a.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, (time.time() - t0) / budget)))
        for g in opt.param_groups:
            g["lr"] = max(lr, a.lr * 0.02)
        tn = time.time()
        data_s += tn - td
        with autocast():
            out = net(x.to(memory_format=torch.channels_last_3d)).float()
        ce = torch.nn.functional.cross_entropy(out, y)
        prob = out.softmax(1)[:, 1]
        yf = y.float()
        dice = 1 - (2 * (prob * yf).sum() + 1) / (prob.sum() + yf.sum() + 1)
        loss = ce + dice
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 12)
        opt.step()
        net_s += time.time() - tn
        step += 1
        lv = loss.item()
        ema = lv if ema is None else 0.98 * ema + 0.02 * lv
        if step % 10 == 0:
            log["loss"].append([step, round(time.time() - t0), round(ema, 4)])
            print(f"step {step} {time.time() - t0:.0f}s loss {ema:.4f} (ce {float(ce):.3f} "
                  f"dice {float(dice):.3f}) k {k} lr {lr:.2e} data {data_s:.0f}s "
                  f"net {net_s:.0f}s", flush=True)
        if time.time() - last_save > a.save_every * 60:
            write_folder(a.out, net, step, log)
            last_save = time.time()
            print(f"saved {a.out} at step {step}", flush=True)
    write_folder(a.out, net, step, log)
    print(f"done: {step} steps in {time.time() - t0:.0f} s -> {a.out}", flush=True)


def with_patch(folder, patch, tmp):
    """A copy of the model folder whose plans.json runs the session with a `patch`^3 window: the
    network is fully convolutional, so the window is a deployment choice (a larger one sees a large
    organ whole and needs fewer of 2.6.0's refinement boxes, each of which refines only the box
    less a 24-voxel margin; docs/interactive-model.md)."""
    import shutil
    dst = os.path.join(tmp, os.path.basename(os.path.normpath(folder)))
    shutil.copytree(folder, dst)
    path = os.path.join(dst, "plans.json")
    with open(path) as f:
        plans = json.load(f)
    for cfg in plans["configurations"].values():
        if "patch_size" in cfg:
            cfg["patch_size"] = [patch] * 3
    with open(path, "w") as f:
        json.dump(plans, f, indent=1)
    return dst


def package(a):
    """Exports the folder with tools/export_nninteractive.py, adds the model's identity, and ships
    the nnInteractive folder itself under <package>/nninteractive (2.6.0 loads it as it is)."""
    import shutil
    import tempfile
    here = os.path.dirname(os.path.abspath(__file__))
    tmp = tempfile.mkdtemp(prefix="voxseg-package-")
    if a.patch:
        a.folder = with_patch(a.folder, a.patch, tmp)
    subprocess.run([sys.executable, os.path.join(here, "export_nninteractive.py"), a.folder,
                    "-o", a.out, "--name", "voxseg-interactive", "--version", a.version,
                    "--refinement-margin", a.refinement_margin, "--force"], check=True)
    path = os.path.join(a.out, "model.json")
    with open(path) as f:
        model = json.load(f)
    model["description"] = (
        "voxseg's open promptable 3-D segmentation model (points, 2-D boxes, scribbles, lassos, "
        "previous-mask feedback), nnInteractive 2.6.0's network family and input layout. Trained "
        "only on generated data (voxseg phantom CT phantoms, random shapes, random MR-like "
        "contrasts) by tools/train_interactive.py. Intended use: trying voxseg's interactive "
        "session and viewer; NOT a clinical model, it has never seen a patient image in training.")
    model["attribution"] = "trained by voxseg on generated phantoms (tools/train_interactive.py)"
    model["license"] = "Apache-2.0"
    # What voxseg edit and the viewer warn about (pipeline/input_checks.h): the pool's grids
    # (pool_grid: 2.8-4.2 mm columns, 2.5-5 mm slices) with a margin.
    model["intended_input"] = {
        "body_region": "any structure a prompt marks; trained only on generated trunk phantoms "
                       "(voxseg phantom) and random shapes at 2.8-4.2 mm columns and 2.5-5 mm "
                       "slices, never a real scan: on finer images (a 0.75 mm CT) its first click "
                       "marks almost nothing",
        "spacing_mm": [1.5, 6.0]}
    if a.eval_json:
        with open(a.eval_json) as f:
            model["_export"]["evaluation"] = json.load(f)["summary"]
    with open(path, "w") as f:
        json.dump(model, f, indent=2)
        f.write("\n")
    dst = os.path.join(a.out, "nninteractive")
    shutil.copytree(a.folder, dst, dirs_exist_ok=True)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"package {a.out} (nnInteractive folder: {dst})")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("pool", help="generate the phantom pool (training and held-out seeds)")
    q.add_argument("--voxseg", default="build/app/voxseg")
    q.add_argument("-o", "--out", required=True)
    t = sub.add_parser("train", help="train and write the nnInteractive model folder")
    t.add_argument("--pool", required=True)
    t.add_argument("-o", "--out", required=True)
    t.add_argument("--minutes", type=float, default=40)
    t.add_argument("--batch", type=int, default=4)
    t.add_argument("--bf16", action="store_true", help="bf16 autocast (AMX / AVX512-BF16 CPUs)")
    t.add_argument("--bf16-clicks", action="store_true",
                   help="bf16 autocast only for the forward passes that place the simulated "
                        "corrective clicks (the trained pass stays fp32)")
    t.add_argument("--max-corrections", type=int, default=4,
                   help="simulated corrective clicks per sample: 0..N, uniform")
    t.add_argument("--mr-share", type=float, default=0.5,
                   help="share of phantom samples put through the MR-like intensity curve")
    t.add_argument("--blob-share", type=float, default=0.25,
                   help="share of samples drawn from random shapes instead of phantoms")
    t.add_argument("--crop", type=int, default=CROP, help="training crop edge (voxels)")
    t.add_argument("--lr", type=float, default=3e-3)
    t.add_argument("--image-gain", type=float, default=1.0,
                   help="train the stem's image-channel weights this many times faster")
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--volumes", type=int, default=len(TRAIN_SEEDS))
    t.add_argument("--save-every", type=float, default=3, help="minutes between checkpoints")
    t.add_argument("--resume", help="model folder to start from")
    k = sub.add_parser("package", help="export the model folder as a voxseg package")
    k.add_argument("folder")
    k.add_argument("-o", "--out", required=True)
    k.add_argument("--version", default="0.2.0")
    k.add_argument("--eval-json", help="tools/eval_interactive.py's output, summarised in model.json")
    k.add_argument("--patch", type=int,
                   help="the session's window edge (plans.json patch_size); default: as trained")
    k.add_argument("--refinement-margin", default="scaled",
                   help="model.json interactive.refinement_margin (export_nninteractive.py): "
                   "default 'scaled', 8 at 64^3 (2.6.0's 24 of 192); at 24 a 64^3 box counts "
                   "16^3 voxels and a zoomed box prompt took 88 network calls, at 8 seven")
    a = p.parse_args()
    if a.cmd == "pool":
        make_pool(a.voxseg, a.out)
    elif a.cmd == "package":
        package(a)
    else:
        train(a)


if __name__ == "__main__":
    sys.exit(main())
