#!/usr/bin/env python3
"""Trains voxseg's demo hippocampus model (MSD Task04, CC BY-SA 4.0) and writes a model package.

An nnU-Net-style 3D U-Net (conv3x3x3 -> InstanceNorm -> LeakyReLU(0.01), two per stage, strided
conv down, transposed conv up, deep supervision while training) trained on a fixed held-out
split, with spatial (rotation, scaling, mirroring) and intensity augmentation done on the device.
Runs on CUDA when available, else on the CPU (slow).

    python3 tools/prepare_hippocampus.py --out /tmp/hippo.npz
    python3 tools/train_hippocampus.py --data /tmp/hippo.npz --out sample_data/models/hippocampus \
        --iters 6000 --batch 32

Outputs in --out: model.onnx, model.json (voxseg model package), training.json (split, Dice on the
held-out cases, settings, timings). Fixed seeds; results vary slightly across hardware.
"""
import argparse
import hashlib
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from onnx_init import init_from_onnx

PATCH = (40, 56, 40)  # z, y, x (nnU-Net's 3d_fullres patch for this task)
FEATURES = (24, 48, 96, 192)  # 3.2 M parameters; the ONNX file stays under 13 MB
NUM_CLASSES = 3


def conv_block(cin, cout, stride):
    return nn.Sequential(
        nn.Conv3d(cin, cout, 3, stride, 1), nn.InstanceNorm3d(cout, affine=True), nn.LeakyReLU(0.01, True),
        nn.Conv3d(cout, cout, 3, 1, 1), nn.InstanceNorm3d(cout, affine=True), nn.LeakyReLU(0.01, True))


class UNet(nn.Module):
    def __init__(self, features=FEATURES, num_classes=NUM_CLASSES):
        super().__init__()
        self.enc = nn.ModuleList()
        cin = 1
        for i, f in enumerate(features):
            self.enc.append(conv_block(cin, f, 1 if i == 0 else 2))
            cin = f
        self.up = nn.ModuleList()
        self.dec = nn.ModuleList()
        self.heads = nn.ModuleList()
        for i in range(len(features) - 1, 0, -1):
            self.up.append(nn.ConvTranspose3d(features[i], features[i - 1], 2, 2))
            self.dec.append(conv_block(2 * features[i - 1], features[i - 1], 1))
            self.heads.append(nn.Conv3d(features[i - 1], num_classes, 1))
        self.deep_supervision = False

    def forward(self, x):
        skips = []
        for e in self.enc:
            x = e(x)
            skips.append(x)
        x = skips.pop()
        outs = []
        for up, dec, head in zip(self.up, self.dec, self.heads):
            x = dec(torch.cat([up(x), skips.pop()], 1))
            outs.append(head(x))
        if self.deep_supervision:
            return outs[::-1]  # full resolution first
        return outs[-1]


def load(path):
    d = np.load(path, allow_pickle=False)
    shapes = d["shapes"]
    sizes = [int(np.prod(s)) for s in shapes]
    offs = np.concatenate([[0], np.cumsum(sizes)])
    images, labels = d["images"], d["labels"]  # each access of d[...] decompresses again
    imgs = [images[offs[i]:offs[i + 1]].reshape(shapes[i]) for i in range(len(sizes))]
    labs = [labels[offs[i]:offs[i + 1]].reshape(shapes[i]) for i in range(len(sizes))]
    return list(d["names"]), imgs, labs


def zscore(x):
    # voxseg model.json normalization {"scheme": "zscore"}: per image, all voxels.
    return (x - x.mean()) / max(float(x.std()), 1e-8)


def pad_to(x, shape, value=0.0):
    pads = []
    for s, t in zip(reversed(x.shape[-3:]), reversed(shape)):
        total = max(t - s, 0)
        pads += [total // 2, total - total // 2]
    return F.pad(x, pads, value=value)


class DeviceSampler:
    """Random patches with augmentation, entirely on the device."""

    def __init__(self, imgs, labs, device, seed):
        self.device = device
        self.g = torch.Generator(device="cpu").manual_seed(seed)
        big = [max(max(i.shape[d] for i in imgs), PATCH[d]) + 16 for d in range(3)]
        n = len(imgs)
        self.img = torch.zeros((n, 1, *big), dtype=torch.float32)
        self.lab = torch.zeros((n, 1, *big), dtype=torch.float32)
        self.shape = torch.zeros((n, 3), dtype=torch.long)
        for k, (x, y) in enumerate(zip(imgs, labs)):
            s = x.shape
            self.img[k, 0, :s[0], :s[1], :s[2]] = torch.from_numpy(zscore(x))
            self.lab[k, 0, :s[0], :s[1], :s[2]] = torch.from_numpy(y.astype(np.float32))
            self.shape[k] = torch.tensor(s)
        self.img, self.lab = self.img.to(device), self.lab.to(device)
        self.big = big

    def batch(self, b):
        idx = torch.randint(0, self.img.shape[0], (b,), generator=self.g)
        # Affine: rotation about each axis (+-30 deg, p=0.2 per sample like nnU-Net), scale
        # 0.7..1.4 (p=0.2), centred on a random point of the case.
        theta = torch.zeros(b, 3, 4)
        for i in range(b):
            ang = (torch.rand(3, generator=self.g) * 2 - 1) * math.pi / 6
            if torch.rand(1, generator=self.g) > 0.2:
                ang.zero_()
            sc = 1.0
            if torch.rand(1, generator=self.g) < 0.2:
                sc = float(torch.empty(1).uniform_(0.7, 1.4, generator=self.g))
            cx, cy, cz = [math.cos(a) for a in ang]
            sx, sy, sz = [math.sin(a) for a in ang]
            rx = torch.tensor([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
            ry = torch.tensor([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
            rz = torch.tensor([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
            r = (rz @ ry @ rx) * sc
            # grid coordinates are normalised to [-1, 1] over the padded block (x, y, z order);
            # map the patch extent onto the block and centre on a random voxel of the case.
            s = self.shape[idx[i]].float()
            centre = torch.stack([torch.rand(1, generator=self.g) * (s[d] - 1) for d in range(3)]).squeeze(1)
            # Bias the centre towards the middle of the case (where the hippocampus is).
            centre = 0.5 * centre + 0.5 * (s - 1) / 2
            # theta = diag(1/half_block) R diag(half_patch), in grid (x, y, z) order, so the
            # rotation is isotropic in voxels although block and patch differ per axis.
            half_p = torch.tensor([(PATCH[2] - 1) / 2, (PATCH[1] - 1) / 2, (PATCH[0] - 1) / 2])
            half_b = torch.tensor([(self.big[2] - 1) / 2, (self.big[1] - 1) / 2, (self.big[0] - 1) / 2])
            c_norm = torch.tensor([2 * centre[2] / (self.big[2] - 1) - 1, 2 * centre[1] / (self.big[1] - 1) - 1,
                                   2 * centre[0] / (self.big[0] - 1) - 1])
            theta[i, :, :3] = (r * half_p.unsqueeze(0)) / half_b.unsqueeze(1)
            theta[i, :, 3] = c_norm
        theta = theta.to(self.device)
        grid = F.affine_grid(theta, (b, 1, *PATCH), align_corners=True)
        x = F.grid_sample(self.img[idx.to(self.device)], grid, mode="bilinear", padding_mode="zeros", align_corners=True)
        y = F.grid_sample(self.lab[idx.to(self.device)], grid, mode="nearest", padding_mode="zeros", align_corners=True)
        # Mirroring on every axis, p = 0.5 each.
        for ax in (2, 3, 4):
            m = (torch.rand(b, generator=self.g) < 0.5).to(self.device)
            x = torch.where(m.view(b, 1, 1, 1, 1), x.flip(ax), x)
            y = torch.where(m.view(b, 1, 1, 1, 1), y.flip(ax), y)
        # Intensity: brightness (p=0.15), contrast (p=0.15), gamma (p=0.3), noise (p=0.1).
        r = lambda: torch.rand(b, 1, 1, 1, 1, generator=self.g).to(self.device)
        u = lambda lo, hi: (lo + (hi - lo) * torch.rand(b, 1, 1, 1, 1, generator=self.g)).to(self.device)
        x = torch.where(r() < 0.15, x * u(0.75, 1.25), x)
        mean = x.mean(dim=(2, 3, 4), keepdim=True)
        x = torch.where(r() < 0.15, (x - mean) * u(0.75, 1.25) + mean, x)
        lo = x.amin(dim=(2, 3, 4), keepdim=True)
        hi = x.amax(dim=(2, 3, 4), keepdim=True)
        g = ((x - lo) / (hi - lo + 1e-8)).clamp(0, 1) ** u(0.7, 1.5) * (hi - lo) + lo
        x = torch.where(r() < 0.3, g, x)
        x = torch.where(r() < 0.1, x + torch.randn(x.shape, generator=self.g).to(self.device) * u(0, 0.1).sqrt(), x)
        return x, y.squeeze(1).long()


def dice_ce(logits, target):
    ce = F.cross_entropy(logits, target)
    p = logits.softmax(1)
    oh = F.one_hot(target, NUM_CLASSES).permute(0, 4, 1, 2, 3).float()
    inter = (p * oh).sum((0, 2, 3, 4))
    den = p.sum((0, 2, 3, 4)) + oh.sum((0, 2, 3, 4))
    dice = (2 * inter + 1e-5) / (den + 1e-5)
    return ce + (1 - dice[1:].mean())


@torch.inference_mode()
def predict(model, x, device, tta):
    """Whole-volume prediction (cases are about patch-sized): pad to a multiple of 8 and at
    least the patch, run, crop back. Returns class probabilities."""
    t = torch.from_numpy(zscore(x))[None, None].to(device)
    shape = t.shape[2:]
    target = [max(PATCH[d], int(math.ceil(shape[d] / 8) * 8)) for d in range(3)]
    tp = pad_to(t, target)
    flips = [()] + ([(2,), (3,), (4,), (2, 3), (2, 4), (3, 4), (2, 3, 4)] if tta else [])
    prob = 0
    for f in flips:
        inp = tp.flip(f) if f else tp
        out = model(inp).softmax(1)
        prob = prob + (out.flip(f) if f else out)
    prob = prob / len(flips)
    # undo the centred padding
    sl = [slice(None), slice(None)]
    for d in range(3):
        before = (target[d] - shape[d]) // 2
        sl.append(slice(before, before + shape[d]))
    return prob[tuple(sl)][0].float().cpu().numpy()


def dice_scores(pred, ref):
    out = []
    for c in range(1, NUM_CLASSES):
        a, b = pred == c, ref == c
        den = a.sum() + b.sum()
        out.append(1.0 if den == 0 else 2.0 * np.logical_and(a, b).sum() / den)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=6000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--holdout", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("--minutes", type=float, default=0, help="stop after this many minutes (0: no limit)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=200)
    ap.add_argument("--init-onnx", default="", help="start from this model.onnx's weights (continue training)")
    ap.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd",
                    help="sgd: nnU-Net's SGD (momentum 0.99); adamw converges in fewer iterations (CPU)")
    ap.add_argument("--features", default=",".join(map(str, FEATURES)),
                    help="channels per stage, e.g. 16,32,64,128 (1.4 M parameters, for CPU training)")
    a = ap.parse_args()

    torch.manual_seed(a.seed)
    np.random.seed(a.seed)
    if a.threads:
        torch.set_num_threads(a.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    names, imgs, labs = load(a.data)
    perm = np.random.RandomState(0).permutation(len(names))  # split fixed independent of --seed
    n_val = int(round(len(names) * a.holdout))
    val_idx, train_idx = sorted(perm[:n_val].tolist()), sorted(perm[n_val:].tolist())

    features = tuple(int(f) for f in a.features.split(","))
    model = UNet(features).to(device)
    init = None
    if a.init_onnx:
        init = init_from_onnx(model, a.init_onnx)
    model.deep_supervision = True
    model = model.to(memory_format=torch.channels_last_3d)  # faster on cuDNN and on oneDNN (CPU)
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if a.optimizer == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=1e-4)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.99, nesterov=True, weight_decay=3e-5)
    sampler = DeviceSampler([imgs[i] for i in train_idx], [labs[i] for i in train_idx], device, a.seed)
    ds_weights = np.array([1 / 2 ** i for i in range(len(features) - 1)])
    ds_weights = ds_weights / ds_weights.sum()
    use_amp = device.type == "cuda"
    t0 = time.time()
    it = 0
    losses = []
    for it in range(a.iters):
        # Poly schedule over iterations or, with --minutes, over the time budget (whichever
        # is further along), so a time-limited run still anneals to zero.
        done = it / a.iters
        if a.minutes:
            done = max(done, (time.time() - t0) / (a.minutes * 60))
        lr = a.lr * (1 - min(done, 0.999)) ** 0.9
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = sampler.batch(a.batch)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_amp):
            outs = model(x)
            loss = 0
            for w, o in zip(ds_weights, outs):
                yt = y if o.shape[2:] == y.shape[1:] else F.interpolate(
                    y[:, None].float(), size=o.shape[2:], mode="nearest")[:, 0].long()
                loss = loss + float(w) * dice_ce(o.float(), yt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 12)
        opt.step()
        losses.append(float(loss.detach()))
        if it % a.log_every == 0:
            print(f"iter {it} loss {np.mean(losses[-200:]):.4f} lr {lr:.5f} {time.time() - t0:.0f}s", flush=True)
        if a.minutes and time.time() - t0 > a.minutes * 60:
            print(f"time budget reached at iteration {it}")
            break
    train_s = time.time() - t0

    model.deep_supervision = False
    model.eval()
    per_case = {}
    for tta in (False, True):
        scores = []
        for i in val_idx:
            prob = predict(model, imgs[i], device, tta)
            scores.append(dice_scores(prob.argmax(0), labs[i]))
        per_case["tta" if tta else "plain"] = np.array(scores)
    res = {k: {"anterior": float(v[:, 0].mean()), "posterior": float(v[:, 1].mean()),
               "mean": float(v.mean())} for k, v in per_case.items()}
    print(json.dumps(res, indent=1))

    os.makedirs(a.out, exist_ok=True)
    model = model.float().to(memory_format=torch.contiguous_format).cpu()
    onnx_path = os.path.join(a.out, "model.onnx")
    dummy = torch.zeros(1, 1, *PATCH)
    torch.onnx.export(model, dummy, onnx_path, opset_version=17, input_names=["image"],
                      output_names=["logits"], dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}},
                      dynamo=False)
    sha = hashlib.sha256(open(onnx_path, "rb").read()).hexdigest()
    meta = {
        "name": "hippocampus-demo",
        "version": "1.0.0",
        "description": "Anterior and posterior hippocampus on T1 MR crops (MSD Task04). "
                       "nnU-Net-style 3D U-Net trained by voxseg's tools/train_hippocampus.py.",
        "license": "CC BY-SA 4.0",
        "attribution": "Trained on the Medical Segmentation Decathlon Task04 Hippocampus data "
                       "(Simpson et al., 2019, arXiv:1902.09063; Vanderbilt University Medical "
                       "Center), CC BY-SA 4.0. This model is a derivative work under the same licence.",
        "channels": [{"modality": "MR", "normalization": {"scheme": "zscore"}}],
        "spacing_mm": [1.0, 1.0, 1.0],
        "patch_size": list(PATCH),
        "axis_order": "zyx",
        "orientation": "native",
        "labels": [
            {"value": 1, "name": "Anterior hippocampus", "color": [255, 128, 0],
             "category": {"code": "91723000", "scheme": "SCT", "meaning": "Anatomical structure"},
             "type": {"code": "5366002", "scheme": "SCT", "meaning": "Hippocampus"}},
            {"value": 2, "name": "Posterior hippocampus", "color": [0, 160, 255],
             "category": {"code": "91723000", "scheme": "SCT", "meaning": "Anatomical structure"},
             "type": {"code": "5366002", "scheme": "SCT", "meaning": "Hippocampus"}},
        ],
        "output": "softmax",
        "inference": {"overlap": 0.5, "gaussian_sigma_scale": 0.125, "mirror_axes": []},
        "sha256": sha,
    }
    with open(os.path.join(a.out, "model.json"), "w") as f:
        json.dump(meta, f, indent=2)
    report = {
        "held_out_dice": res, "held_out_cases": [str(names[i]) for i in val_idx],
        "train_cases": len(train_idx), "iterations": it + 1, "batch": a.batch, "train_seconds": round(train_s, 1),
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "torch": torch.__version__, "parameters": params, "patch": PATCH, "features": features, "seed": a.seed,
        "initialised_from": init,
        "command": "python3 tools/train_hippocampus.py " + " ".join(f"--{k} {v}" for k, v in vars(a).items()),
    }
    with open(os.path.join(a.out, "training.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps({k: v for k, v in report.items() if k != "held_out_cases"}, indent=1))


if __name__ == "__main__":
    main()
