#!/usr/bin/env python3
"""Evaluates a promptable model with the UNMODIFIED nninteractive 2.6.0 session (its
nnInteractiveInferenceSession, CPU, AutoZoom on, as a user runs it) and simulated clicks.

    python3 tools/eval_interactive.py /tmp/itrain/model --pool /tmp/itrain/pool2 \
        --data ../shared/data -o eval.json

Each structure gets a session of its own: click 1 is a positive point at the structure's deepest
voxel (farthest from its border); every later click is a point at the deepest voxel of the
largest error component of the current mask (positive on a miss, negative on a false positive),
as tools/train_interactive.py simulates. Reported: Dice after 1, 3 and 5 clicks, and the clicks
needed to reach Dice >= 0.9 (up to --clicks).

Structures: held-out phantoms (tools/train_interactive.py's seeds 9001-9006, never trained on:
liver on all, spleen and kidneys on the first --organ-phantoms), MSD Task04 hippocampus
(../shared/data/msd-hippocampus-cropped: anterior and posterior labels of the first --hippo
cases) and TotalSegmentator's example CT (example_ct_sm.nii.gz with example_seg.nii.gz:
spleen, kidneys, liver, stomach; those labels are TotalSegmentator's output, not manual).
"""
import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

HELDOUT = list(range(9001, 9007))
PHANTOM_LABELS = {1: "liver", 2: "spleen", 3: "kidney_left", 4: "kidney_right"}
TOTALSEG_LABELS = {5: "liver", 1: "spleen", 2: "kidney_right", 3: "kidney_left", 6: "stomach"}


def load_nifti(path):
    import nibabel as nib
    return np.asarray(nib.load(path).dataobj).transpose(2, 1, 0)


def deepest_voxel(mask):
    from scipy.ndimage import distance_transform_edt
    d = distance_transform_edt(np.pad(mask, 1))[1:-1, 1:-1, 1:-1]
    return tuple(int(v) for v in np.unravel_index(int(np.argmax(d)), d.shape))


def dice(a, b):
    s = a.sum() + b.sum()
    return 1.0 if s == 0 else float(2 * (a & b).sum() / s)


def new_session(folder, threads):
    import torch
    from nnInteractive.inference.inference_session import nnInteractiveInferenceSession
    s = nnInteractiveInferenceSession(device=torch.device("cpu"), use_torch_compile=False,
                                      verbose=False, torch_n_threads=threads, do_autozoom=True)
    s.initialize_from_trained_model_folder(folder)
    return s


def run_structure(session, image, gt, clicks):
    """Dice after each click."""
    from scipy.ndimage import label
    session.reset_interactions()
    session.set_image(image[None].astype(np.float32))
    target = np.zeros(image.shape, np.uint8)
    session.set_target_buffer(target)
    dices = []
    point, include = deepest_voxel(gt), True
    for _ in range(clicks):
        session.add_point_interaction(point, include)
        pred = target > 0
        dices.append(dice(pred, gt))
        err = pred != gt
        if not err.any():
            point = deepest_voxel(gt)
            continue
        comps, _ = label(err)
        big = comps == (int(np.argmax(np.bincount(comps.ravel())[1:])) + 1)
        point = deepest_voxel(big)
        include = bool(gt[point])
    return dices


def structures(a):
    for seed in HELDOUT:
        d = os.path.join(a.pool, str(seed))
        image = load_nifti(os.path.join(d, "image.nii.gz")).astype(np.float32)
        lab = load_nifti(os.path.join(d, "labels.nii.gz"))
        for k, name in PHANTOM_LABELS.items():
            if k == 1 or seed < HELDOUT[0] + a.organ_phantoms:
                yield "phantom", f"phantom {seed} {name}", name, image, lab == k
    hip = os.path.join(a.data, "msd-hippocampus-cropped")
    if os.path.isdir(hip):
        for f in sorted(os.listdir(os.path.join(hip, "labels")))[:a.hippo]:
            image = load_nifti(os.path.join(hip, "images", f)).astype(np.float32)
            lab = load_nifti(os.path.join(hip, "labels", f))
            for k, name in ((1, "hippocampus anterior"), (2, "hippocampus posterior")):
                yield "hippocampus", f"{f.split('.')[0]} {name}", name, image, lab == k
    ts = os.path.join(a.data, "totalsegmentator-tests")
    if os.path.isfile(os.path.join(ts, "example_ct_sm.nii.gz")):
        image = load_nifti(os.path.join(ts, "example_ct_sm.nii.gz")).astype(np.float32)
        lab = load_nifti(os.path.join(ts, "example_seg.nii.gz"))
        for k, name in TOTALSEG_LABELS.items():
            yield "totalseg", f"example_ct_sm {name}", name, image, lab == k


def summary(rows, clicks):
    out = {}
    for group in sorted({r["group"] for r in rows}):
        for organ in [None] + sorted({r["structure"] for r in rows if r["group"] == group}):
            sel = [r for r in rows if r["group"] == group and (organ is None or r["structure"] == organ)]
            key = group if organ is None else f"{group}/{organ}"
            d = np.array([r["dice"] for r in sel])
            need = [r["clicks_to_0.9"] for r in sel]
            out[key] = {"n": len(sel), **{f"dice@{c}": round(float(d[:, c - 1].mean()), 3)
                                           for c in (1, 3, 5) if c <= clicks},
                        "reached_0.9": sum(n is not None for n in need),
                        "median_clicks_to_0.9": (float(np.median([n for n in need if n is not None]))
                                                 if any(n is not None for n in need) else None)}
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", help="nnInteractive model folder")
    p.add_argument("--pool", required=True, help="tools/train_interactive.py pool folder")
    p.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared", "data"))
    p.add_argument("--clicks", type=int, default=5)
    p.add_argument("--organ-phantoms", type=int, default=3)
    p.add_argument("--hippo", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", help="only this group (phantom, hippocampus, totalseg)")
    p.add_argument("-o", "--out", help="JSON with every structure's Dice per click and the summary")
    a = p.parse_args()
    import torch
    torch.manual_seed(38)
    np.random.seed(38)
    session = new_session(a.folder, a.threads)
    rows = []
    for group, name, structure, image, gt in structures(a):
        if a.only and group != a.only or gt.sum() == 0:
            continue
        t = time.time()
        d = run_structure(session, image, gt, a.clicks)
        need = next((i + 1 for i, v in enumerate(d) if v >= 0.9), None)
        rows.append({"group": group, "name": name, "structure": structure, "shape": list(gt.shape),
                     "voxels": int(gt.sum()), "dice": [round(v, 4) for v in d],
                     "clicks_to_0.9": need, "seconds": round(time.time() - t, 1)})
        print(f"{name:40s} {' '.join(f'{v:.3f}' for v in d)}  (0.9 at {need}, "
              f"{time.time() - t:.1f} s)", flush=True)
    s = summary(rows, a.clicks)
    for k, v in s.items():
        print(k, v)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"model": os.path.abspath(a.folder), "clicks": a.clicks,
                       "summary": s, "structures": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
