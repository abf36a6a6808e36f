#!/usr/bin/env python3
"""An nnU-Net v2 model for CT studies, trained by nnU-Net itself on generated phantoms.

For the batch benchmark (issue 6, bench/batch_bench.sh --scenario nnunet-ct): nnU-Net's own
folder prediction against `voxseg batch` on CT studies needs one network both can run, and the
CT demo model (tools/train_ct_phantom.py) is not an nnU-Net checkpoint. This trains one:

  1. `voxseg phantom --outputs image,labels` writes --cases training studies (seeds from 500000;
     the benchmark's studies use other seeds) at --size / --spacing, the same field of view as
     the benchmark's 256x256x150 studies at 1.5x1.5x2 mm by default, on a 3 mm grid so nnU-Net's
     3d_fullres plans a network that trains on 2 CPU cores;
  2. an nnU-Net raw dataset (Dataset005_CTPhantom, channel "CT": nnU-Net's CT normalisation)
     under --work, planned and pre-processed by nnU-Net (3d_fullres);
  3. fold 0 trained by nnU-Net's trainer for --epochs x --iterations with features
     min(8 * 2^i, 64) per stage unless --features says otherwise and a 64x96x96 patch
     (tools/nnunet_parity.py's train_fold0);
  4. exported by tools/export_nnunet.py (no mirroring) to <work>/package.

The model is barely trained (the defaults: 16 x 25 iterations, 22 min on 2 cores; it finds the
liver): the benchmark measures throughput on the same network, not accuracy. Everything lives under --work; nothing is written into the repository.

    python3 tools/nnunet_ct_phantom.py --work /tmp/nnunet-ct --voxseg build/app/voxseg
    NNUNET_MODEL_FOLDER=/tmp/nnunet-ct/results/Dataset005_CTPhantom/nnUNetTrainer_5epochs__nnUNetPlans__3d_fullres \\
        bench/batch_bench.sh --scenario nnunet-ct --cases 10
"""
import argparse
import json
import os
import subprocess
import sys

import nnunet_parity as parity

HERE = os.path.dirname(os.path.abspath(__file__))
DATASET = "Dataset005_CTPhantom"
DATASET_ID = 5


def phantom_labels():
    """Label names of `voxseg phantom`, read from the CT demo model's package (same phantoms)."""
    with open(os.path.join(HERE, "../sample_data/models/ct-phantom/model.json")) as f:
        labels = json.load(f)["labels"]
    out = {"background": 0}
    for lab in labels:
        out[lab["name"]] = lab["value"]
    return out


def make_raw(a):
    raw = os.path.join(os.environ["nnUNet_raw"], DATASET)
    if os.path.exists(os.path.join(raw, "dataset.json")):
        return raw
    for d in ("imagesTr", "labelsTr"):
        os.makedirs(os.path.join(raw, d), exist_ok=True)
    gen = os.path.join(a.work, "phantoms")
    for i in range(a.cases):
        name = f"phantom_{i:03d}"
        folder = os.path.join(gen, name)
        if not os.path.isdir(folder):
            subprocess.run([a.voxseg, "phantom", folder, "--seed", str(500000 + i), "--size", a.size,
                            "--spacing", a.spacing, "--outputs", "image,labels", "--quiet"],
                           check=True)
        image = next(f for f in os.listdir(folder) if f.startswith("image") and f.endswith(".nii.gz"))
        labels = next(f for f in os.listdir(folder) if f.startswith("label") and f.endswith(".nii.gz"))
        os.symlink(os.path.join(folder, image), os.path.join(raw, "imagesTr", name + "_0000.nii.gz"))
        os.symlink(os.path.join(folder, labels), os.path.join(raw, "labelsTr", name + ".nii.gz"))
    write_dataset_json(raw, "CTPhantom", a.cases)
    print(f"raw dataset: {a.cases} generated phantoms -> {raw}")
    return raw


def write_dataset_json(raw, name, n_training):
    """nnU-Net's dataset.json of a raw dataset of phantoms: channel "CT" (CTNormalization)."""
    ds = {"channel_names": {"0": "CT"}, "labels": phantom_labels(),
          "numTraining": n_training, "file_ending": ".nii.gz", "name": name,
          "license": "Apache-2.0", "reference": "voxseg phantom (synthetic, no patient)"}
    with open(os.path.join(raw, "dataset.json"), "w") as f:
        json.dump(ds, f, indent=2)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="/tmp/nnunet-ct")
    p.add_argument("--voxseg", default=os.path.join(HERE, "../build/app/voxseg"))
    p.add_argument("--cases", type=int, default=8, help="training phantoms")
    p.add_argument("--size", default="128x128x100", help="phantom voxels (voxseg phantom --size)")
    p.add_argument("--spacing", default="3.0x3.0x3.0", help="phantom spacing, mm")
    p.add_argument("--epochs", type=int, default=16)
    p.add_argument("--iterations", type=int, default=25, help="training iterations per epoch")
    p.add_argument("--features", help="features per stage (default min(8 * 2^i, 64))")
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--patch", default="64x96x96", help="patch ZxYxX at 3 mm (nnU-Net plans the "
                   "whole 100x128x128 image: one window per study, and 10 s per iteration here)")
    a = p.parse_args()
    a.work = os.path.abspath(a.work)
    a.voxseg = os.path.abspath(a.voxseg)
    a.lr = 0.01
    parity.set_env(a.work)
    make_raw(a)
    parity.train_fold0(DATASET, DATASET_ID, a,
                       default_features=lambda n: ",".join(str(min(8 << i, 64)) for i in range(n)))
    folder = os.path.join(a.work, "results", DATASET, f"{parity.TRAINER}__nnUNetPlans__3d_fullres")
    subprocess.run([sys.executable, os.path.join(HERE, "export_nnunet.py"), folder, "-o",
                    os.path.join(a.work, "package"), "--folds", "0", "--name", "ct-phantom-nnunet",
                    "--no-mirroring", "--force"], check=True)
    print(f"model folder: {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
