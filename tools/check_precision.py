#!/usr/bin/env python3
"""Does a model package give the same labels in bf16 as in fp32? For model authors deciding
whether model.json needs "precision": {"requires_fp32": true} (docs/model-package.md).

Runs `voxseg segment` (the C++ product) on each case twice, --precision bf16 and --precision fp32,
and prints per case the voxels whose label differs and the Dice of each label between the two
label maps; with reference labels (--data) also each precision's Dice against them.

    python3 tools/check_precision.py -m sample_data/models/ct-phantom sample_data/ct_phantom/dicom
    python3 tools/check_precision.py -m sample_data/models/hippocampus \\
        --data ../shared/data/msd-hippocampus-cropped \\
        --cases-from sample_data/models/hippocampus/training.json --json /tmp/precision.json

Cases are image files or DICOM folders given as arguments, or --data's images/<case>.nii.gz
(labels/<case>.nii.gz as the reference; --cases-from takes a training.json's held_out_cases).
--device picks the backend (default cpu: a CPU without avx512_bf16 cannot run bf16, and an Intel
one without AMX runs it slower than fp32, which does not matter for agreement). Extra arguments after
`--` go to both `voxseg segment` runs. Exit status 0 when every run succeeded (figures are
reported, not judged), 1 when a run failed.
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
sys.path.insert(0, HERE)
from eval_model import dice  # noqa: E402  (one Dice for all tools)

PRECISIONS = ("bf16", "fp32")


def segment(voxseg, image, model, out, precision, device, extra):
    """Label map (numpy) and run.json's device record of one `voxseg segment` run."""
    cmd = [voxseg, "segment", image, "-m", model, "-o", out, "--outputs", "nifti", "--quiet",
           "--device", device, "--precision", precision] + extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{image}: voxseg segment --precision {precision} failed "
                           f"({r.returncode}): {r.stderr.strip()[-400:]}")
    with open(os.path.join(out, "run.json")) as f:
        device_record = json.load(f)["device"]
    labels = np.asarray(nib.load(os.path.join(out, "segmentation.nii.gz")).dataobj)
    return labels, device_record


def list_cases(a):
    """(name, image path, reference label path or None) per case."""
    if a.data:
        if a.cases_from:
            with open(a.cases_from) as f:
                names = json.load(f)["held_out_cases"]
        else:
            names = sorted(n[: -len(".nii.gz")] for n in os.listdir(os.path.join(a.data, "images")))
        cases = [(n, os.path.join(a.data, "images", n + ".nii.gz"),
                  os.path.join(a.data, "labels", n + ".nii.gz")) for n in names]
    else:
        cases = [(os.path.basename(os.path.normpath(p)), p, None) for p in a.inputs]
    return cases[: a.limit] if a.limit else cases


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-m", "--model", required=True)
    p.add_argument("inputs", nargs="*", help="image files or DICOM folders (or use --data)")
    p.add_argument("--data", help="folder with images/<case>.nii.gz and labels/<case>.nii.gz")
    p.add_argument("--cases-from", help="training.json whose held_out_cases are checked (with --data)")
    p.add_argument("--limit", type=int, default=0, help="only the first N cases")
    p.add_argument("--device", default="cpu", help="voxseg --device (default cpu)")
    p.add_argument("--voxseg", default=os.path.join(HERE, "../build/app/voxseg"))
    p.add_argument("--json", help="write per-case and overall figures here")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    a = p.parse_args(argv[:split])
    extra = argv[split + 1:]  # after --: arguments for voxseg segment
    cases = list_cases(a)
    if not cases:
        sys.exit("no cases: give image files / DICOM folders, or --data")
    with open(os.path.join(a.model, "model.json")) as f:
        labels = [(l["value"], l["name"]) for l in json.load(f)["labels"]]

    rows, differing, voxels = [], 0, 0
    seconds = {q: 0.0 for q in PRECISIONS}
    with tempfile.TemporaryDirectory() as tmp:
        for name, image, reference in cases:
            maps, devices = {}, {}
            for q in PRECISIONS:
                t0 = time.time()
                try:
                    maps[q], devices[q] = segment(a.voxseg, image, a.model, os.path.join(tmp, name + q),
                                                  q, a.device, extra)
                except RuntimeError as e:
                    print(e, file=sys.stderr)
                    return 1
                seconds[q] += time.time() - t0
            bf, fp = maps["bf16"], maps["fp32"]
            diff = int((bf != fp).sum())
            differing += diff
            voxels += bf.size
            row = {"case": name, "voxels": int(bf.size), "differing": diff,
                   "agreement": 1.0 - diff / bf.size,
                   "dice_bf16_vs_fp32": [dice(bf, fp, v) for v, _ in labels],
                   "precision_ran": {q: devices[q]["precision"] for q in PRECISIONS}}
            if reference:
                ref = np.asarray(nib.load(reference).dataobj)
                for q in PRECISIONS:
                    row[f"dice_{q}_vs_reference"] = [dice(maps[q], ref, v) for v, _ in labels]
            rows.append(row)
            line = f"{name}: {diff} of {bf.size} voxels differ ({100 * row['agreement']:.4f} % agree); " \
                   "Dice bf16 vs fp32 " + " ".join(f"{n} {d:.4f}" for (_, n), d in
                                                    zip(labels, row["dice_bf16_vs_fp32"]))
            if reference:
                line += "; vs reference bf16 / fp32 " + " ".join(
                    f"{n} {b:.4f}/{f:.4f}" for (_, n), b, f in
                    zip(labels, row["dice_bf16_vs_reference"], row["dice_fp32_vs_reference"]))
            print(line, flush=True)

    summary = {"model": os.path.abspath(a.model), "device": a.device, "cases": len(rows),
               "labels": [n for _, n in labels], "voxels": voxels, "differing": differing,
               "agreement": 1.0 - differing / voxels, "seconds": {q: round(s, 1) for q, s in seconds.items()},
               "voxseg_args": extra}
    summary["mean_dice_bf16_vs_fp32"] = [float(np.mean([r["dice_bf16_vs_fp32"][i] for r in rows]))
                                         for i in range(len(labels))]
    print(f"{len(rows)} cases: {differing} of {voxels} voxels differ "
          f"({100 * summary['agreement']:.4f} % agree); mean Dice bf16 vs fp32 " +
          " ".join(f"{n} {d:.4f}" for (_, n), d in zip(labels, summary["mean_dice_bf16_vs_fp32"])))
    if all("dice_fp32_vs_reference" in r for r in rows):
        for q in PRECISIONS:
            means = [float(np.mean([r[f"dice_{q}_vs_reference"][i] for r in rows])) for i in range(len(labels))]
            summary[f"mean_dice_{q}_vs_reference"] = means
            print(f"mean Dice vs reference, {q}: " + " ".join(f"{n} {m:.4f}" for (_, n), m in zip(labels, means))
                  + f" (all labels {np.mean(means):.4f})")
    print(f"time: bf16 {seconds['bf16']:.1f} s, fp32 {seconds['fp32']:.1f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({**summary, "per_case": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
