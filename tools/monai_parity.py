#!/usr/bin/python3
"""MONAI's own pipeline vs `voxseg segment` on CT phantoms the bundle was not trained on.

  1. --cases phantoms from `voxseg phantom --outputs image,labels` (seeds from 710000; training
     used 700000..), each with its own size and spacing so that Spacingd's output grid, its
     rounding and the sliding-window borders differ from case to case;
  2. MONAI: the bundle's configs/inference.json run by `python -m monai.bundle run` (LoadImaged
     ... SlidingWindowInferer ... Invertd, AsDiscreted, SaveImaged) over the cases (NIfTI, or
     with --dicom their DICOM series through LoadImaged's PydicomReader);
  3. voxseg: tools/export_monai.py writes the package, `voxseg segment` runs it on each case
     (fp32, no test-time augmentation; --accumulator as given);
  4. per case: the share of voxels with the same label, Dice per label between the two, and each
     one's Dice against the phantom's own labels (merged as the bundle's labels).

    PYTHONPATH=build/pylib:<ignite, fire> /usr/bin/python3 tools/monai_parity.py \\
        --bundle tests/tools/fixtures/monai/ct_phantom_bundle --work /tmp/monai-parity

Writes <work>/parity.json and prints a Markdown table (docs/parity-monai.md). With --commit DIR it
also copies the first --commit-cases cases' images and MONAI's predictions there (the committed
outputs tests/tools/monai_parity_test.py compares with).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import nibabel as nib
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from monai_ct_phantom import LABELS, PHANTOM_TO_BUNDLE  # noqa: E402

SEED0 = 710000


def case_geometry(i):
    """Size and spacing of case i: varied, never a multiple of the bundle's pixdim."""
    size = f"{100 + 8 * (i % 4)}x{96 + 6 * (i % 3)}x{34 + 2 * (i % 5)}"
    spacing = f"{2.35 + 0.1 * (i % 5):.2f}x{2.45 + 0.1 * (i % 4):.2f}x{3.3 + 0.35 * (i % 4):.2f}"
    return size, spacing


def make_cases(a):
    folder = os.path.join(a.work, "cases")
    truth = os.path.join(a.work, "truth")
    os.makedirs(folder, exist_ok=True)
    os.makedirs(truth, exist_ok=True)
    names = []
    for i in range(a.cases):
        name = f"case_{i:02d}"
        gen = os.path.join(a.work, "phantoms", name)
        if not os.path.isdir(os.path.join(gen, "dicom")):
            size, spacing = case_geometry(i)
            subprocess.run([a.voxseg, "phantom", gen, "--seed", str(SEED0 + i), "--size", size,
                            "--spacing", spacing, "--outputs", "image,labels,dicom", "--quiet",
                            "--threads", "1"], check=True)
        shutil.copyfile(os.path.join(gen, "image.nii.gz"), os.path.join(folder, name + ".nii.gz"))
        if a.dicom:  # one folder per series, named as the case (MONAI names its output so)
            shutil.rmtree(os.path.join(folder, name), ignore_errors=True)
            shutil.copytree(os.path.join(gen, "dicom"), os.path.join(folder, name))
        shutil.copyfile(os.path.join(gen, "labels.nii.gz"), os.path.join(truth, name + ".nii.gz"))
        names.append(name)
    return folder, truth, names


def run_monai(a, folder, names):
    out = os.path.join(a.work, "monai")
    shutil.rmtree(out, ignore_errors=True)
    bundle = os.path.abspath(a.bundle)
    cmd = [sys.executable, "-m", "monai.bundle", "run", "--config_file",
           os.path.join(bundle, "configs", "inference.json"), "--bundle_root", bundle,
           "--dataset_dir", folder, "--output_dir", out]
    if a.dicom:  # the DICOM series folders, read by MONAI's PydicomReader
        cmd += ["--datalist", repr([os.path.join(folder, n) for n in names]),
                "--preprocessing#transforms#0#reader", "PydicomReader"]
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"MONAI failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return out, time.time() - t, cmd


def run_voxseg(a, folder, names):
    pkg = os.path.join(a.work, "package")
    r = subprocess.run([sys.executable, os.path.join(HERE, "export_monai.py"), a.bundle, "-o", pkg,
                        "--force", "--format-version", str(a.format_version)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"export_monai.py failed:\n{r.stderr}")
    out, secs = os.path.join(a.work, "voxseg"), {}
    for name in names:
        o = os.path.join(out, name)
        src = os.path.join(folder, name) if a.dicom else os.path.join(folder, name + ".nii.gz")
        cmd = [a.voxseg, "segment", src, "-m", pkg, "-o", o,
               "--device", "cpu", "--precision", "fp32", "--no-tta", "--accumulator",
               a.accumulator, "--outputs", "nifti", "--threads", str(a.threads)]
        t = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"voxseg segment failed on {name}:\n{r.stderr}")
        secs[name] = time.time() - t
    return pkg, out, secs


def dice(x, y, v):
    p, t = x == v, y == v
    d = int(p.sum() + t.sum())
    return 2.0 * int((p & t).sum()) / d if d else None


def compare(monai_seg, voxseg_seg, truth):
    """-> dict of the figures for one case (label arrays on the same grid)."""
    r = {"voxels": int(monai_seg.size),
         "differ": int((monai_seg != voxseg_seg).sum()),
         "agreement": float((monai_seg == voxseg_seg).mean()),
         "dice_between": {}, "dice_monai_truth": {}, "dice_voxseg_truth": {}}
    for v, name in LABELS.items():
        if v == 0:
            continue
        r["dice_between"][name] = dice(monai_seg, voxseg_seg, v)
        r["dice_monai_truth"][name] = dice(monai_seg, truth, v)
        r["dice_voxseg_truth"][name] = dice(voxseg_seg, truth, v)
    return r


def load_same_grid(path, ref):
    img = nib.load(path)
    if not np.allclose(img.affine, ref.affine, atol=1e-3) or img.shape[:3] != ref.shape[:3]:
        sys.exit(f"{path}: grid {img.shape} {img.affine.tolist()} differs from the input's")
    return np.asarray(img.dataobj).reshape(img.shape[:3]).astype(np.int32)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bundle", required=True)
    p.add_argument("--work", default="/tmp/monai-parity")
    p.add_argument("--voxseg", default=os.path.join(HERE, "../build/app/voxseg"))
    p.add_argument("--cases", type=int, default=10)
    p.add_argument("--accumulator", default="fp32", choices=("fp32", "fp16"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--format-version", type=int, default=2, choices=(1, 2),
                   help="export_monai.py's package format (1: the approximate version 1 package)")
    p.add_argument("--skip-monai", action="store_true", help="reuse <work>/monai from a last run")
    p.add_argument("--dicom", action="store_true",
                   help="both read the cases' DICOM series (MONAI: LoadImaged reader PydicomReader)")
    p.add_argument("--commit", help="folder for the committed CI outputs (images + MONAI's labels)")
    p.add_argument("--commit-cases", type=int, default=1)
    a = p.parse_args()
    a.work = os.path.abspath(a.work)
    a.voxseg = os.path.abspath(a.voxseg)
    folder, truth_dir, names = make_cases(a)
    if a.skip_monai:
        monai_out, monai_secs, monai_cmd = os.path.join(a.work, "monai"), 0.0, ["(reused)"]
    else:
        monai_out, monai_secs, monai_cmd = run_monai(a, folder, names)
    pkg, vox_out, vox_secs = run_voxseg(a, folder, names)
    lut = np.zeros(256, np.int32)
    for k, v in PHANTOM_TO_BUNDLE.items():
        lut[k] = v
    results = {}
    for name in names:
        ref = nib.load(os.path.join(folder, name + ".nii.gz"))
        m = load_same_grid(os.path.join(monai_out, name + "_seg.nii.gz"), ref)
        v = load_same_grid(os.path.join(vox_out, name, "segmentation.nii.gz"), ref)
        t = lut[load_same_grid(os.path.join(truth_dir, name + ".nii.gz"), ref)]
        results[name] = compare(m, v, t)
        results[name]["shape"] = list(ref.shape)
        results[name]["spacing"] = [round(float(x), 4) for x in ref.header.get_zooms()[:3]]
        results[name]["voxseg_seconds"] = round(vox_secs[name], 2)
    summary = {
        "monai_command": " ".join(monai_cmd), "monai_seconds_all_cases": round(monai_secs, 1),
        "accumulator": a.accumulator, "format_version": a.format_version, "dicom": a.dicom,
        "cases": results,
        "min_agreement": min(r["agreement"] for r in results.values()),
        "min_dice_between": {n: min(r["dice_between"][n] for r in results.values()
                                    if r["dice_between"][n] is not None)
                             for n in LABELS.values() if n != "background"},
    }
    with open(os.path.join(a.work, "parity.json"), "w") as f:
        json.dump(summary, f, indent=2)
    names_l = [n for n in LABELS.values() if n != "background"]
    print("| case | shape | spacing mm | voxels differing | agreement % | Dice between ("
          + ", ".join(names_l) + ") | MONAI Dice vs truth | voxseg Dice vs truth |")
    print("|---|---|---|---|---|---|---|---|")
    fmt = lambda d: " / ".join("-" if d[n] is None else f"{d[n]:.4f}" for n in names_l)  # noqa: E731
    for name, r in results.items():
        print(f"| {name} | {'x'.join(map(str, r['shape']))} | {'x'.join(map(str, r['spacing']))} | "
              f"{r['differ']} of {r['voxels']} | {100 * r['agreement']:.4f} | {fmt(r['dice_between'])} | "
              f"{fmt(r['dice_monai_truth'])} | {fmt(r['dice_voxseg_truth'])} |")
    print(f"min agreement {100 * summary['min_agreement']:.4f} %; min Dice between "
          f"{summary['min_dice_between']}; MONAI {monai_secs:.1f} s for all cases")
    if a.commit:
        os.makedirs(a.commit, exist_ok=True)
        for name in names[:a.commit_cases]:
            shutil.copyfile(os.path.join(folder, name + ".nii.gz"),
                            os.path.join(a.commit, name + "_image.nii.gz"))
            shutil.copyfile(os.path.join(monai_out, name + "_seg.nii.gz"),
                            os.path.join(a.commit, name + "_monai.nii.gz"))
        print(f"committed outputs: {a.commit}")
    ok = summary["min_agreement"] >= 0.999 and all(v >= 0.999 for v in summary["min_dice_between"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
