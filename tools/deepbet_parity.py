#!/usr/bin/env python3
"""deepbet's own run_bet vs `voxseg segment` with sample_data/models/brain-extraction, on every
T1-weighted series in ../shared/data: Dice between the two brain masks, TIV difference, seconds.

    PYTHONPATH=/path/with/deepbet /usr/bin/python3 tools/deepbet_parity.py \\
        [--voxseg build/app/voxseg] [--threads 2] [--work /tmp/deepbet-parity] [--json out.json]

deepbet reads NIfTI only: DICOM series are converted with `voxseg convert` first (deepbet gets the
NIfTI, voxseg reads the DICOM series itself, as a user would run it). Both run on `--threads`
cores (torch.set_num_threads; voxseg --threads). deepbet's seconds are BrainExtraction.run per
case after the models are loaded (its first case includes PyTorch's warm-up, so every case is run
twice and the second time is reported); voxseg's are the wall time of the whole `voxseg segment`
process (model load, DICOM read, outputs included) and, in brackets, its stages.

Needs deepbet 1.0.2 (pip install deepbet==1.0.2 --no-deps) with torch, nibabel, cc3d, fill_voids,
pandas, tqdm. Prints one line per case and exits 1 when a case misses Dice >= 0.995 or
|TIV difference| <= 0.5 %.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")
# (case, path under ../shared/data, series selector for DICOM folders)
CASES = [
    ("ge_3d_t1_mprage", "dcm_qa_ge/05_3D_Ax_T1_MP_RAGE_R22", ""),
    ("siemens_xa30_enhanced_t1", "dcm_qa_xa30/5_anat-T1w_acq-tfl", ""),
    ("siemens_xa30_jpeg_lossless_t1", "dcm_qa_frag/In", "0"),
    ("siemens_xa30_jpeg2000_t1", "dcm_qa_frag/In", "1"),
    ("siemens_decubitus_2d_t1", "dcm_qa_decubitus/HFS_3_t1_fl2d_sag", ""),
    ("pyradiomics_brain1", "pyradiomics-data/brain1_image.nrrd", ""),
    ("pyradiomics_brain2", "pyradiomics-data/brain2_image.nrrd", ""),
]
MIN_DICE = 0.995
MAX_TIV_DIFF = 0.5  # percent


def run(cmd):
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return time.perf_counter() - t


def mask_on_canonical(path):
    import nibabel as nib
    img = nib.as_closest_canonical(nib.load(path))
    return np.asarray(img.dataobj) > 0, img.affine, float(np.prod(img.header.get_zooms()[:3]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    ap.add_argument("--voxseg", default=os.path.join(root, "build", "app", "voxseg"))
    ap.add_argument("--model", default=os.path.join(root, "sample_data", "models",
                                                    "brain-extraction"))
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", default="/tmp/deepbet-parity")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--cases", nargs="*", help="only these case names")
    args = ap.parse_args()

    import torch
    torch.set_num_threads(args.threads)
    from deepbet.bet import BrainExtraction
    import deepbet
    bet = BrainExtraction(no_gpu=True)

    os.makedirs(args.work, exist_ok=True)
    results, failed = [], False
    for name, rel, series in CASES:
        if args.cases and name not in args.cases:
            continue
        src = os.path.join(args.data, rel)
        if not os.path.exists(src):
            print(f"{name}: {src} absent, skipped")
            continue
        case_dir = os.path.join(args.work, name)
        os.makedirs(case_dir, exist_ok=True)
        nii = os.path.join(case_dir, "input.nii.gz")
        cmd = [args.voxseg, "convert", src, "-o", nii, "--quiet"]
        if series:
            cmd += ["--series", series]
        run(cmd)

        mask_path = os.path.join(case_dir, "deepbet_mask.nii.gz")
        times = []
        for _ in range(2):
            t = time.perf_counter()
            _, mask_img, tiv_deepbet = bet.run(nii, mask_path=mask_path)
            times.append(time.perf_counter() - t)
        deepbet_s = times[-1]

        out = os.path.join(case_dir, "voxseg")
        cmd = [args.voxseg, "segment", src, "-m", args.model, "-o", out, "--device", "cpu",
               "--threads", str(args.threads), "--quiet"]
        if series:
            cmd += ["--series", series]
        voxseg_s = run(cmd)
        with open(os.path.join(out, "run.json")) as f:
            run_json = json.load(f)
        with open(os.path.join(out, "statistics.json")) as f:
            stats = json.load(f)
        tiv_voxseg = next(m["value"] for m in stats["measurements"] if m["name"] == "tiv_ml")

        a, aff_a, _ = mask_on_canonical(mask_path)
        b, aff_b, _ = mask_on_canonical(os.path.join(out, "segmentation.nii.gz"))
        if a.shape != b.shape or not np.allclose(aff_a, aff_b, atol=1e-3):
            sys.exit(f"{name}: deepbet's and voxseg's masks are on different grids "
                     f"({a.shape} vs {b.shape})")
        inter = int(np.logical_and(a, b).sum())
        dice = 2.0 * inter / max(1, int(a.sum()) + int(b.sum()))
        tiv_diff = 100.0 * (tiv_voxseg - tiv_deepbet) / tiv_deepbet if tiv_deepbet else float("nan")
        differ = int(np.logical_xor(a, b).sum())
        stages = run_json.get("timings_s", {}).get("stages", float("nan"))
        ok = dice >= MIN_DICE and abs(tiv_diff) <= MAX_TIV_DIFF
        failed |= not ok
        print(f"{name}: {a.shape} Dice {dice:.5f}, TIV deepbet {tiv_deepbet:.1f} mL voxseg "
              f"{tiv_voxseg:.1f} mL ({tiv_diff:+.3f} %), {differ} voxels differ; deepbet "
              f"{deepbet_s:.2f} s, voxseg {voxseg_s:.2f} s (stages {stages:.2f} s)"
              f"{'' if ok else '  <-- FAILS'}")
        results.append({"case": name, "input": rel, "series": series, "shape": list(a.shape),
                        "dice": dice, "tiv_deepbet_ml": float(tiv_deepbet),
                        "tiv_voxseg_ml": tiv_voxseg, "tiv_diff_percent": tiv_diff,
                        "voxels_differ": differ, "deepbet_seconds": deepbet_s,
                        "voxseg_seconds": voxseg_s, "voxseg_stage_seconds": stages})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"deepbet": getattr(deepbet, "__version__", "1.0.2"),
                       "torch": torch.__version__, "threads": args.threads, "cases": results},
                      f, indent=2)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
