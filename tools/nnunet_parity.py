#!/usr/bin/env python3
"""Peer parity (issue 4): voxseg against nnU-Net's own predictor on the same nnU-Net model.

Stages (each can be run alone; `all` runs them in order):
  train    converts ../shared/data/msd-hippocampus-cropped into an nnU-Net raw dataset
           (Dataset004_Hippocampus, --holdout cases kept out as imagesTs), runs
           nnUNetv2_plan_and_preprocess (3d_fullres) and trains fold 0 on the CPU for a few short
           epochs (nnU-Net's own nnUNetTrainer_5epochs with fewer iterations per epoch).
  export   tools/export_nnunet.py on the trained folder -> <work>/package
  compare  predicts the held-out cases with nnUNetPredictor (same fold, mirroring as in the
           package) and with `voxseg segment`, then reports voxel agreement, per-label Dice and
           the wall time of both; --report writes the table as Markdown.

    python3 tools/nnunet_parity.py all --work /tmp/nnunet-parity --voxseg build/app/voxseg \
        --report docs/parity-nnunet.md

Everything (nnUNet_raw / preprocessed / results, the package, predictions) lives under --work;
nothing is written into the repository except the --report file.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DATA = next((d for d in (os.path.join(HERE, "../../shared/data/msd-hippocampus-cropped"),
                                 "/work/shared/data/msd-hippocampus-cropped") if os.path.isdir(d)),
                    os.path.join(HERE, "../../shared/data/msd-hippocampus-cropped"))
DATASET = "Dataset004_Hippocampus"
TRAINER = "nnUNetTrainer_5epochs"


def set_env(work):
    for k, sub in (("nnUNet_raw", "raw"), ("nnUNet_preprocessed", "preprocessed"),
                   ("nnUNet_results", "results")):
        os.environ[k] = os.path.join(work, sub)
        os.makedirs(os.environ[k], exist_ok=True)
    os.environ.setdefault("nnUNet_n_proc_DA", "0")
    os.environ.setdefault("nnUNet_compile", "f")
    os.environ.setdefault("OMP_NUM_THREADS", "2")


def case_names(data):
    imgs = os.path.join(data, "images")
    return sorted(f[: -len(".nii.gz")] for f in os.listdir(imgs)
                  if f.endswith(".nii.gz") and os.path.exists(os.path.join(data, "labels", f)))


def make_raw(work, data, holdout):
    raw = os.path.join(os.environ["nnUNet_raw"], DATASET)
    if os.path.exists(os.path.join(raw, "dataset.json")):
        return raw
    names = case_names(data)
    rng = np.random.default_rng(4)
    held = sorted(rng.choice(names, size=holdout, replace=False).tolist())
    for d in ("imagesTr", "labelsTr", "imagesTs", "labelsTs"):
        os.makedirs(os.path.join(raw, d), exist_ok=True)
    for n in names:
        split = "Ts" if n in held else "Tr"
        os.symlink(os.path.join(data, "images", n + ".nii.gz"),
                   os.path.join(raw, "images" + split, n + "_0000.nii.gz"))
        os.symlink(os.path.join(data, "labels", n + ".nii.gz"),
                   os.path.join(raw, "labels" + split, n + ".nii.gz"))
    ds = {"channel_names": {"0": "MRI"}, "labels": {"background": 0, "anterior": 1, "posterior": 2},
          "numTraining": len(names) - len(held), "file_ending": ".nii.gz",
          "name": "Hippocampus", "license": "CC-BY-SA-4.0",
          "reference": "Medical Segmentation Decathlon Task04 Hippocampus"}
    with open(os.path.join(raw, "dataset.json"), "w") as f:
        json.dump(ds, f, indent=2)
    print(f"raw dataset: {len(names) - len(held)} training, {len(held)} held out -> {raw}")
    return raw


def stage_train(a):
    set_env(a.work)
    make_raw(a.work, a.data, a.holdout)
    init = None
    if a.init_from:
        def init(network, features):
            init_from_package(network, os.path.abspath(a.init_from), features)
    train_fold0(DATASET, 4, a, init=init)


def train_fold0(dataset, dataset_id, a, init=None, default_features=None,
                configuration="3d_fullres", fold=0, validate=False):
    """Plans and pre-processes nnU-Net raw dataset `dataset` (3d_fullres) and trains fold 0 on the
    CPU with nnU-Net's own trainer for a.epochs x a.iterations; a.features / a.batch_size override
    the plans (default_features(n_stages) when a.features is not given), and so does a.patch
    ("ZxYxX") where the caller has one; init(network, features)
    may load starting weights. Another `configuration` / `fold` (e.g. "all") may be trained on
    plans already pre-processed for it; `validate` runs nnU-Net's validation afterwards (which
    also predicts the next stage of a cascade)."""
    pre = os.path.join(os.environ["nnUNet_preprocessed"], dataset, "nnUNetPlans_3d_fullres")
    t0 = time.time()
    if not os.path.isdir(pre):
        subprocess.run(["nnUNetv2_plan_and_preprocess", "-d", str(dataset_id), "-c", "3d_fullres",
                        "-np", "1", "-npfp", "1", "--verify_dataset_integrity"], check=True,
                       env=dict(os.environ, nnUNet_n_proc_DA="1"))  # its planner needs >= 1
    print(f"plan+preprocess: {time.time() - t0:.0f} s")
    import torch
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    torch.manual_seed(0)
    from batchgenerators.utilities.file_and_folder_operations import load_json
    from nnunetv2.training.nnUNetTrainer.variants.training_length.nnUNetTrainer_Xepochs import \
        nnUNetTrainer_5epochs
    pdir = os.path.join(os.environ["nnUNet_preprocessed"], dataset)
    plans = load_json(os.path.join(pdir, "nnUNetPlans.json"))
    ds = load_json(os.path.join(pdir, "dataset.json"))
    conf = plans["configurations"][configuration]
    while "architecture" not in conf and "inherits_from" in conf:  # e.g. 3d_cascade_fullres
        conf = plans["configurations"][conf["inherits_from"]]
    arch = conf["architecture"]["arch_kwargs"]
    features = a.features or (default_features(arch["n_stages"]) if default_features else None)
    if features:
        # A smaller network than nnU-Net plans (the plans' 32..320 takes hours per epoch on 2
        # CPU cores); the trainer saves these plans with the checkpoint, so the predictor and
        # the exporter build the same network.
        arch["features_per_stage"] = [int(f) for f in str(features).split(",")]
        if len(arch["features_per_stage"]) != arch["n_stages"]:
            raise SystemExit(f"--features needs {arch['n_stages']} values for these plans")
    if a.batch_size:
        conf["batch_size"] = a.batch_size
    if getattr(a, "patch", None):  # zyx, divisible by the network's total stride per axis
        conf["patch_size"] = [int(v) for v in a.patch.split("x")]
    print(f"{configuration} fold {fold}: network features {arch['features_per_stage']}, patch "
          f"{conf['patch_size']}, batch {conf['batch_size']}")
    plans["continue_training"] = False  # nnUNetTrainer.__init__ pops it (set by run_training.py)
    trainer = nnUNetTrainer_5epochs(plans, configuration, fold, ds, device=torch.device("cpu"))
    trainer.num_epochs = a.epochs
    trainer.num_iterations_per_epoch = a.iterations
    trainer.num_val_iterations_per_epoch = max(1, a.iterations // 5)
    if init:
        trainer.initialize()
        init(trainer.network, ",".join(map(str, arch["features_per_stage"])))
        trainer.initial_lr = a.lr
    t0 = time.time()
    trainer.run_training()
    print(f"training {a.epochs} epochs x {a.iterations} iterations on the CPU: {time.time() - t0:.0f} s")
    if validate:
        trainer.perform_actual_validation(False)


def init_from_package(network, package, features):
    """Copies the weights of a voxseg hippocampus package (tools/train_hippocampus.py: the same
    PlainConvUNet topology, 2 convs per stage, transposed-conv up-sampling, one 1x1x1 head per
    decoder stage) into nnU-Net's network, then checks both give the same output."""
    import onnx
    import onnxruntime as ort
    import torch
    from onnx import numpy_helper
    path = os.path.join(package, "model.onnx")
    src = {i.name: numpy_helper.to_array(i) for i in onnx.load(path).graph.initializer}
    part = {0: "conv", 1: "norm", 3: "conv", 4: "norm"}
    conv = {0: 0, 1: 0, 3: 1, 4: 1}
    names = {}
    for k in src:
        f = k.split(".")
        if f[0] == "enc":
            names[k] = f"encoder.stages.{f[1]}.0.convs.{conv[int(f[2])]}.{part[int(f[2])]}.{f[3]}"
        elif f[0] == "dec":
            names[k] = f"decoder.stages.{f[1]}.convs.{conv[int(f[2])]}.{part[int(f[2])]}.{f[3]}"
        elif f[0] == "up":
            names[k] = f"decoder.transpconvs.{f[1]}.{f[2]}"
        elif f[0] == "heads":
            names[k] = f"decoder.seg_layers.{f[1]}.{f[2]}"
    dst = network.state_dict()
    last_head = f"decoder.seg_layers.{len(network.decoder.seg_layers) - 1}."
    # The exported ONNX keeps only the full-resolution head; the deep-supervision heads are
    # used for the training loss only and keep nnU-Net's initialisation.
    missing = [k for k in dst if "all_modules" not in k and not k.startswith("decoder.encoder")
               and k not in names.values()
               and not (k.startswith("decoder.seg_layers.") and not k.startswith(last_head))]
    if missing or len(names) != len(src):
        raise SystemExit(f"{package}: not the same network (unmapped: {missing[:3]}...); "
                         f"train it with --features {features}")
    with torch.no_grad():
        for k, n in names.items():
            if tuple(dst[n].shape) != src[k].shape:
                raise SystemExit(f"{package}: {k} {src[k].shape} vs nnU-Net {n} {tuple(dst[n].shape)}")
            dst[n].copy_(torch.from_numpy(src[k]))
    x = np.random.default_rng(0).standard_normal((1, 1, 40, 56, 40)).astype(np.float32)
    ds = getattr(network, "decoder").deep_supervision
    network.decoder.deep_supervision = False
    network.eval()
    with torch.no_grad():
        y = network(torch.from_numpy(x)).numpy()
    network.decoder.deep_supervision = ds
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"image": x})[0]
    err = float(np.abs(y - ref).max())
    print(f"initialised from {package}: {len(names)} tensors, max |nnU-Net - ONNX| = {err:.2e}")
    if err > 1e-3:
        raise SystemExit("weight transfer does not reproduce the package's output")


def trained_folder(work):
    return os.path.join(work, "results", DATASET, f"{TRAINER}__nnUNetPlans__3d_fullres")


def stage_export(a):
    set_env(a.work)
    out = os.path.join(a.work, "package")
    cmd = [sys.executable, os.path.join(HERE, "export_nnunet.py"), trained_folder(a.work), "-o", out,
           "--folds", "0", "--name", "hippocampus-nnunet-parity", "--force"]
    if a.no_mirroring:
        cmd.append("--no-mirroring")
    subprocess.run(cmd, check=True)


def dice(a, b, v):
    x, y = a == v, b == v
    s = x.sum() + y.sum()
    return 1.0 if s == 0 else 2.0 * np.logical_and(x, y).sum() / s


def stage_compare(a):
    set_env(a.work)
    import nibabel as nib
    import torch
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    raw = os.path.join(os.environ["nnUNet_raw"], DATASET)
    cases = sorted(f[: -len("_0000.nii.gz")] for f in os.listdir(os.path.join(raw, "imagesTs")))
    pkg = os.path.join(a.work, "package")
    with open(os.path.join(pkg, "model.json")) as f:
        model = json.load(f)
    mirror = tuple(model.get("inference", {}).get("mirror_axes", []))
    # nnU-Net's predictor
    from nnunetv2.inference.predict_from_raw_data import nnUNetPredictor
    nn_out = os.path.join(a.work, "pred_nnunet")
    shutil.rmtree(nn_out, ignore_errors=True)
    pred = nnUNetPredictor(tile_step_size=1.0 - model["inference"]["overlap"], use_gaussian=True,
                           use_mirroring=bool(mirror), perform_everything_on_device=False,
                           device=torch.device("cpu"), verbose=False, allow_tqdm=False)
    pred.initialize_from_trained_model_folder(trained_folder(a.work), use_folds=(0,))
    t0 = time.time()
    pred.predict_from_files(os.path.join(raw, "imagesTs"), nn_out, save_probabilities=False,
                            overwrite=True, num_processes_preprocessing=1,
                            num_processes_segmentation_export=1)
    t_nn = time.time() - t0
    # voxseg
    vx_out = os.path.join(a.work, "pred_voxseg")
    shutil.rmtree(vx_out, ignore_errors=True)
    t0 = time.time()
    for c in cases:
        od = os.path.join(vx_out, c)
        subprocess.run([a.voxseg, "segment", os.path.join(raw, "imagesTs", c + "_0000.nii.gz"),
                        "-m", pkg, "-o", od, "--device", "cpu",
                        "--threads", os.environ["OMP_NUM_THREADS"]], check=True,
                       stdout=subprocess.DEVNULL)
    t_vx = time.time() - t0
    rows, agree_all, n_all = [], 0, 0
    labels = [l["value"] for l in model["labels"]]
    for c in cases:
        ref = np.asarray(nib.load(os.path.join(nn_out, c + ".nii.gz")).dataobj)
        cand_files = [f for f in os.listdir(os.path.join(vx_out, c))
                      if f.endswith(".nii.gz") and "prob" not in f]
        got = np.asarray(nib.load(os.path.join(vx_out, c, sorted(cand_files)[0])).dataobj)
        if got.shape != ref.shape:
            raise SystemExit(f"{c}: voxseg label map {got.shape} vs nnU-Net {ref.shape}")
        agree = int((got == ref).sum())
        agree_all += agree
        n_all += ref.size
        rows.append((c, agree / ref.size, [dice(ref, got, v) for v in labels]))
    mean_dice = [float(np.mean([r[2][i] for r in rows])) for i in range(len(labels))]
    agreement = agree_all / n_all
    lines = ["| case | voxel agreement | " + " | ".join(f"Dice {l['name']}" for l in model["labels"]) + " |",
             "|---|---|" + "---|" * len(labels)]
    for c, ag, ds in rows:
        lines.append(f"| {c} | {100 * ag:.3f} % | " + " | ".join(f"{d:.4f}" for d in ds) + " |")
    lines.append(f"| **all** | **{100 * agreement:.3f} %** | " +
                 " | ".join(f"**{d:.4f}**" for d in mean_dice) + " |")
    table = "\n".join(lines)
    summary = (f"{len(cases)} held-out cases, mirroring {'axes ' + str(list(mirror)) if mirror else 'off'}, "
               f"CPU. nnU-Net predictor: {t_nn:.2f} s; voxseg segment (one process per case): "
               f"{t_vx:.2f} s; ratio voxseg/nnU-Net {t_vx / t_nn:.2f}. Voxel agreement "
               f"{100 * agreement:.3f} % (target >= 99.5 %), per-label Dice (mean over cases) "
               f"{', '.join(f'{d:.4f}' for d in mean_dice)} (target >= 0.99).")
    print(table)
    print(summary)
    if a.report:
        with open(a.report, "w") as f:
            f.write(REPORT.format(summary=summary, table=table, cmd=" ".join(sys.argv),
                                  training=training_description(a)))
    ok = agreement >= 0.995 and min(mean_dice) >= 0.99
    print("PASS" if ok else "FAIL: below the parity targets")
    return 0 if ok else 1


def training_description(a):
    """What the trained folder is, from the plans nnU-Net saved with it."""
    try:
        with open(os.path.join(trained_folder(a.work), "plans.json")) as f:
            c = json.load(f)["configurations"]["3d_fullres"]
        arch = c["architecture"]["arch_kwargs"]
        net = (f"PlainConvUNet, features {arch['features_per_stage']}, patch {c['patch_size']}, "
               f"batch {c['batch_size']}")
    except (OSError, KeyError, ValueError):
        net = "plans.json not found"
    return (f"{net}; nnU-Net's own trainer ({TRAINER}) for the epochs and iterations given on the "
            f"command line below. With --init-from, nnU-Net started from the weights of a "
            f"voxseg package of the same topology (tools/train_hippocampus.py; the transfer is "
            f"checked against that package's ONNX output) and fine-tuned them, because training "
            f"nnU-Net from scratch until it segments takes hours on these 2 CPU cores.")


REPORT = """# Parity with nnU-Net's own predictor (issue 4)

A small nnU-Net v2 (3d_fullres, fold 0) trained on the CPU on the MSD hippocampus crops
(../shared/data/msd-hippocampus-cropped, CC BY-SA 4.0), exported with tools/export_nnunet.py,
and the held-out cases predicted by nnU-Net's `nnUNetPredictor` and by `voxseg segment` on the
same CPU. What is measured is whether voxseg reproduces nnU-Net's output on the same model, not
the model's accuracy.

Training: {training}

{summary}

{table}

Produced by (training takes most of the time; the stages can be run one by one):

    {cmd}

Timing notes: nnU-Net's predictor runs in one process for all cases (model loaded once, times
include its preprocessing and export); voxseg is started once per case, so its time includes
loading and compiling the model for every case.
"""


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("stage", choices=["train", "export", "compare", "all"])
    p.add_argument("--work", default="/tmp/nnunet-parity")
    p.add_argument("--data", default=DEFAULT_DATA)
    p.add_argument("--holdout", type=int, default=6)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--iterations", type=int, default=40, help="training iterations per epoch")
    p.add_argument("--features", help="override the plans' features per stage, e.g. 8,16,32,64")
    p.add_argument("--batch-size", type=int, help="override the plans' batch size")
    p.add_argument("--init-from", help="start from the weights of a voxseg package made by "
                   "tools/train_hippocampus.py with the same --features (nnU-Net then fine-tunes)")
    p.add_argument("--lr", type=float, default=0.01, help="nnU-Net's initial learning rate")
    p.add_argument("--voxseg", default=os.path.join(HERE, "../build/app/voxseg"))
    p.add_argument("--no-mirroring", action="store_true", help="both predictors without mirroring TTA")
    p.add_argument("--report", help="write a Markdown report here")
    a = p.parse_args()
    a.work = os.path.abspath(a.work)
    a.data = os.path.abspath(a.data)
    rc = 0
    if a.stage in ("train", "all"):
        stage_train(a)
    if a.stage in ("export", "all"):
        stage_export(a)
    if a.stage in ("compare", "all"):
        rc = stage_compare(a)
    return rc


if __name__ == "__main__":
    sys.exit(main())
