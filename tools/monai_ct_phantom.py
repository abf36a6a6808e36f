#!/usr/bin/python3
"""A MONAI bundle shaped like MONAI's spleen_ct_segmentation, trained briefly on CT phantoms.

For the MONAI parity check (docs/parity-monai.md, tools/monai_parity.py): MONAI's own pipeline
(the bundle's configs/inference.json run by `python -m monai.bundle run`) against `voxseg
segment` of the package tools/export_monai.py makes from it needs a bundle whose network
segments something. This writes one:

  1. `voxseg phantom --outputs image,labels` writes --cases training studies (seeds from 700000;
     the parity cases use other seeds) at --size / --spacing;
  2. they are pre-processed by MONAI's own transforms, the bundle's `preprocessing` (LoadImaged,
     EnsureChannelFirstd, Orientationd RAS, Spacingd bilinear to PIXDIM, ScaleIntensityRanged
     clip; labels with nearest), labels merged into LABELS (both kidneys one label, both lungs
     one; vertebrae and aorta background);
  3. a small monai.networks.nets.UNet (spleen_ct_segmentation's network, narrower: channels
     CHANNELS, batch norm, 2 residual units) is trained on random ROI crops (half centred on a
     foreground voxel) with DiceCELoss and Adam for --minutes on --threads cores;
  4. the bundle is written to --out: configs/inference.json (spleen_ct_segmentation's layout:
     dataset, dataloader, SlidingWindowInferer, postprocessing Activationsd softmax, Invertd,
     AsDiscreted argmax, SaveImaged; evaluator, handlers), configs/metadata.json (channel_def),
     models/model.pt (the state dict, float32).

    nice -n 10 /usr/bin/python3 tools/monai_ct_phantom.py --work /tmp/monai-ct \\
        --out tests/tools/fixtures/monai/ct_phantom_bundle --minutes 6

Needs torch, nibabel, monai 1.4.0 (scripts/deps.sh: build/pylib) and pytorch-ignite only to run
the bundle (tools/monai_parity.py).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
LABELS = {0: "background", 1: "liver", 2: "spleen", 3: "kidney", 4: "lung"}
# voxseg phantom label -> bundle label (io/ct_phantom.h: 1 liver, 2 spleen, 3/4 kidneys,
# 5/6 lungs, 7 vertebral column, 8 aorta).
PHANTOM_TO_BUNDLE = {1: 1, 2: 2, 3: 3, 4: 3, 5: 4, 6: 4}
PIXDIM = [3.0, 3.0, 3.5]
ROI = [64, 64, 32]
WINDOW = {"a_min": -1000, "a_max": 400, "b_min": 0.0, "b_max": 1.0, "clip": True}
CHANNELS = [8, 16, 32, 64]
STRIDES = [2, 2, 2]
TRAIN_SEED0 = 700000


def network_def():
    return {"_target_": "UNet", "spatial_dims": 3, "in_channels": 1, "out_channels": len(LABELS),
            "channels": CHANNELS, "strides": STRIDES, "num_res_units": 2, "norm": "batch"}


def preprocessing(keys):
    """The bundle's transforms for `keys` (image first; any second key is a label map)."""
    many = isinstance(keys, list)
    modes = ["bilinear"] + ["nearest"] * (len(keys) - 1) if many else "bilinear"
    return {"_target_": "Compose", "transforms": [
        {"_target_": "LoadImaged", "keys": keys},
        {"_target_": "EnsureChannelFirstd", "keys": keys},
        {"_target_": "Orientationd", "keys": keys, "axcodes": "RAS"},
        {"_target_": "Spacingd", "keys": keys, "pixdim": PIXDIM, "mode": modes},
        dict({"_target_": "ScaleIntensityRanged", "keys": "image"}, **WINDOW),
        {"_target_": "EnsureTyped", "keys": keys},
    ]}


def inference_config():
    """spleen_ct_segmentation's configs/inference.json with this model's network and transforms."""
    return {
        "imports": ["$import glob", "$import os"],
        "bundle_root": ".",
        "output_dir": "$@bundle_root + '/eval'",
        "dataset_dir": "/workspace/data/ct_phantoms",
        "datalist": "$list(sorted(glob.glob(@dataset_dir + '/*.nii.gz')))",
        "device": "$torch.device('cuda:0' if torch.cuda.is_available() else 'cpu')",
        "network_def": network_def(),
        "network": "$@network_def.to(@device)",
        "preprocessing": preprocessing("image"),
        "dataset": {"_target_": "Dataset", "data": "$[{'image': i} for i in @datalist]",
                    "transform": "@preprocessing"},
        "dataloader": {"_target_": "DataLoader", "dataset": "@dataset", "batch_size": 1,
                       "shuffle": False, "num_workers": 0},
        "inferer": {"_target_": "SlidingWindowInferer", "roi_size": ROI, "sw_batch_size": 4,
                    "overlap": 0.5},
        "postprocessing": {"_target_": "Compose", "transforms": [
            {"_target_": "Activationsd", "keys": "pred", "softmax": True},
            {"_target_": "Invertd", "keys": "pred", "transform": "@preprocessing",
             "orig_keys": "image", "meta_key_postfix": "meta_dict", "nearest_interp": False,
             "to_tensor": True},
            {"_target_": "AsDiscreted", "keys": "pred", "argmax": True},
            {"_target_": "SaveImaged", "keys": "pred", "output_dir": "@output_dir",
             "output_postfix": "seg", "separate_folder": False, "output_dtype": "$np.uint8",
             "resample": False},
        ]},
        "handlers": [
            {"_target_": "CheckpointLoader", "load_path": "$@bundle_root + '/models/model.pt'",
             "load_dict": {"model": "@network"}},
            {"_target_": "StatsHandler", "iteration_log": False},
        ],
        "evaluator": {"_target_": "SupervisedEvaluator", "device": "@device",
                      "val_data_loader": "@dataloader", "network": "@network",
                      "inferer": "@inferer", "postprocessing": "@postprocessing",
                      "val_handlers": "@handlers", "amp": False},
        "initialize": ["$monai.utils.set_determinism(seed=0)"],
        "run": ["$@evaluator.run()"],
    }


def metadata(dice):
    return {
        "version": "0.1.0", "name": "ct-phantom-monai",
        "description": "MONAI UNet (spleen_ct_segmentation's pipeline) trained briefly on voxseg "
                       f"CT phantoms by tools/monai_ct_phantom.py; held-out Dice {dice}",
        "license": "Apache-2.0", "monai_version": "1.4.0",
        "network_data_format": {
            "inputs": {"image": {"type": "image", "format": "hounsfield", "modality": "CT",
                                 "num_channels": 1, "spatial_shape": ROI}},
            "outputs": {"pred": {"type": "image", "format": "segmentation",
                                 "num_channels": len(LABELS),
                                 "channel_def": {str(k): v for k, v in LABELS.items()}}}},
    }


def make_phantoms(a, seeds, folder):
    out = []
    for s in seeds:
        d = os.path.join(folder, f"phantom_{s}")
        if not os.path.isfile(os.path.join(d, "labels.nii.gz")):
            subprocess.run([a.voxseg, "phantom", d, "--seed", str(s), "--size", a.size,
                            "--spacing", a.spacing, "--outputs", "image,labels", "--quiet",
                            "--threads", "1"], check=True)
        out.append({"image": os.path.join(d, "image.nii.gz"),
                    "label": os.path.join(d, "labels.nii.gz")})
    return out


def load_cases(items):
    from monai.bundle import ConfigParser
    parser = ConfigParser({"pre": preprocessing(["image", "label"])})
    pre = parser.get_parsed_content("pre")
    lut = np.zeros(256, np.int64)
    for k, v in PHANTOM_TO_BUNDLE.items():
        lut[k] = v
    cases = []
    for it in items:
        d = pre(dict(it))
        img = np.asarray(d["image"], np.float32)[0]
        lab = lut[np.asarray(d["label"], np.int64)[0]]
        cases.append((img, lab))
    return cases


def random_crop(img, lab, rng):
    shape = np.array(img.shape)
    roi = np.array(ROI)
    pad = np.maximum(roi - shape, 0)
    if pad.any():
        img = np.pad(img, [(0, p) for p in pad])
        lab = np.pad(lab, [(0, p) for p in pad])
        shape = np.array(img.shape)
    if rng.random() < 0.5:
        fg = np.argwhere(lab > 0)
        c = fg[rng.integers(len(fg))]
        start = np.clip(c - roi // 2, 0, shape - roi)
    else:
        start = np.array([rng.integers(0, s - r + 1) for s, r in zip(shape, roi)])
    sl = tuple(slice(b, b + r) for b, r in zip(start, roi))
    return img[sl], lab[sl]


def dice_per_label(pred, truth):
    out = {}
    for v, name in LABELS.items():
        if v == 0:
            continue
        p, t = pred == v, truth == v
        denom = p.sum() + t.sum()
        out[name] = round(float(2 * (p & t).sum() / denom), 3) if denom else None
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="/tmp/monai-ct")
    p.add_argument("--out", required=True, help="bundle folder to write")
    p.add_argument("--voxseg", default=os.path.join(HERE, "../build/app/voxseg"))
    p.add_argument("--cases", type=int, default=10, help="training phantoms")
    p.add_argument("--size", default="112x112x40")
    p.add_argument("--spacing", default="2.6x2.6x4.0")
    p.add_argument("--minutes", type=float, default=6.0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=2)
    a = p.parse_args()
    a.voxseg = os.path.abspath(a.voxseg)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    from monai.losses import DiceCELoss
    from monai.networks.nets import UNet
    from monai.inferers import sliding_window_inference

    items = make_phantoms(a, range(TRAIN_SEED0, TRAIN_SEED0 + a.cases), os.path.join(a.work, "train"))
    held = make_phantoms(a, [TRAIN_SEED0 + 999], os.path.join(a.work, "train"))
    cases, held_cases = load_cases(items), load_cases(held)
    kw = {k: v for k, v in network_def().items() if k != "_target_"}
    net = UNet(**kw)
    loss_fn = DiceCELoss(to_onehot_y=True, softmax=True)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    t0, step = time.time(), 0
    net.train()
    while time.time() - t0 < a.minutes * 60:
        xs, ys = [], []
        for _ in range(a.batch):
            img, lab = cases[rng.integers(len(cases))]
            x, y = random_crop(img, lab, rng)
            xs.append(x)
            ys.append(y)
        x = torch.from_numpy(np.stack(xs)[:, None].astype(np.float32))
        y = torch.from_numpy(np.stack(ys)[:, None])
        opt.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        step += 1
        if step % 25 == 0:
            print(f"step {step} ({time.time() - t0:.0f} s): loss {loss.item():.3f}", flush=True)
    net.eval()
    with torch.no_grad():
        img, lab = held_cases[0]
        pred = sliding_window_inference(torch.from_numpy(img)[None, None], ROI, 4, net, overlap=0.5)
        dice = dice_per_label(pred[0].argmax(0).numpy(), lab)
    print(f"{step} steps; held-out Dice on the network grid: {dice}")

    os.makedirs(os.path.join(a.out, "configs"), exist_ok=True)
    os.makedirs(os.path.join(a.out, "models"), exist_ok=True)
    torch.save(net.state_dict(), os.path.join(a.out, "models", "model.pt"))
    with open(os.path.join(a.out, "configs", "inference.json"), "w") as f:
        json.dump(inference_config(), f, indent=2)
        f.write("\n")
    with open(os.path.join(a.out, "configs", "metadata.json"), "w") as f:
        json.dump(metadata(dice), f, indent=2)
        f.write("\n")
    print(f"bundle written: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
