#!/usr/bin/env python3
"""Per-label Dice of a voxseg model package on labelled cases, predicted by `voxseg segment`
(the C++ product, not PyTorch), so the figure a model package states is the one users get.

    python3 tools/eval_model.py -m sample_data/models/hippocampus \
        --data ../shared/data/msd-hippocampus-cropped --cases-from sample_data/models/hippocampus/training.json \
        --json /tmp/eval.json

--data holds images/<case>.nii.gz and labels/<case>.nii.gz; --cases-from takes the
"held_out_cases" list of a training.json (default: every case in --data). Extra arguments after
`--` go to `voxseg segment` (e.g. -- --tta). Prints one row per case and the means; --json writes
them. Exit status 0 (figures are reported, not judged).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import nibabel as nib
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def dice(a, b, v):
    x, y = a == v, b == v
    s = int(x.sum() + y.sum())
    return 1.0 if s == 0 else 2.0 * int(np.logical_and(x, y).sum()) / s


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-m", "--model", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--cases-from", help="training.json whose held_out_cases are evaluated")
    p.add_argument("--limit", type=int, default=0, help="evaluate only the first N cases")
    p.add_argument("--voxseg", default=os.path.join(HERE, "../build/app/voxseg"))
    p.add_argument("--json", help="write per-case and mean Dice here")
    p.add_argument("extra", nargs="*", help="arguments for voxseg segment (after --)")
    a = p.parse_args()
    with open(os.path.join(a.model, "model.json")) as f:
        labels = [(l["value"], l["name"]) for l in json.load(f)["labels"]]
    if a.cases_from:
        with open(a.cases_from) as f:
            cases = json.load(f)["held_out_cases"]
    else:
        cases = sorted(n[: -len(".nii.gz")] for n in os.listdir(os.path.join(a.data, "labels")))
    if a.limit:
        cases = cases[: a.limit]
    rows = []
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for c in cases:
            out = os.path.join(tmp, c)
            cmd = [a.voxseg, "segment", os.path.join(a.data, "images", c + ".nii.gz"), "-m", a.model,
                   "-o", out, "--outputs", "nifti", "--quiet"] + a.extra
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"{c}: voxseg segment failed ({r.returncode}): {r.stderr.strip()[-400:]}")
            got = np.asarray(nib.load(os.path.join(out, "segmentation.nii.gz")).dataobj)
            ref = np.asarray(nib.load(os.path.join(a.data, "labels", c + ".nii.gz")).dataobj)
            if got.shape != ref.shape:
                sys.exit(f"{c}: label map {got.shape} vs reference {ref.shape}")
            d = [dice(got, ref, v) for v, _ in labels]
            rows.append({"case": c, "dice": d})
            print(f"{c}: " + "  ".join(f"{n} {x:.4f}" for (_, n), x in zip(labels, d)), flush=True)
    seconds = time.time() - t0
    means = [float(np.mean([r["dice"][i] for r in rows])) for i in range(len(labels))]
    print(f"{len(rows)} cases, mean Dice: " + "  ".join(f"{n} {m:.4f}" for (_, n), m in zip(labels, means))
          + f"  (all labels {np.mean(means):.4f}); {seconds:.1f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": os.path.abspath(a.model), "cases": rows, "labels": [n for _, n in labels],
                       "mean_dice": means, "mean_dice_all": float(np.mean(means)), "seconds": round(seconds, 1),
                       "voxseg_args": a.extra}, f, indent=1)


if __name__ == "__main__":
    main()
