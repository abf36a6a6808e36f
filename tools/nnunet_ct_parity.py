#!/usr/bin/env python3
"""Parity on anisotropic CT (issue 15 part 3): nnU-Net's own predictor against `voxseg segment`
on nnU-Net models trained by nnU-Net itself, 3d_fullres and the 3d_lowres -> 3d_cascade_fullres
cascade.

Stages (each can be run alone; `all` runs them in order):
  data     `voxseg phantom --outputs image,labels`: --train training and --test held-out CT
           phantoms (other seeds) over a 200 x 200 x 120 mm field of view, each case with its own
           spacing drawn in 0.74..0.86 mm in-plane and 4.5..5.5 mm between slices (so nnU-Net
           resamples every case, the slice axis separately with order 0, and normalises with
           CTNormalization: channel "CT"); an nnU-Net raw dataset Dataset015_CTAniso under --work.
  plan     nnU-Net's fingerprint, ExperimentPlanner with a small GPU memory target
           (--gpu-memory-gb: nnU-Net itself then plans a small patch and, because that patch covers
           less than a quarter of the image, 3d_lowres and 3d_cascade_fullres), the plans' features
           per stage made small (--features-base), then nnU-Net's preprocessing of 3d_fullres and
           3d_lowres.
  train    nnU-Net's own trainer (nnUNetTrainer_5epochs with --epochs x --iterations) on the CPU:
           3d_fullres fold 0, 3d_lowres fold "all" (its validation then predicts every training case,
           which the cascade trains on: nnU-Net's predicted_next_stage), 3d_cascade_fullres fold 0.
  export   tools/export_nnunet.py: 3d_fullres -> <work>/pkg_fullres (format 1), 3d_lowres ->
           <work>/pkg_lowres (format 1), the cascade -> <work>/pkg_cascade (format 2, one_hot_from).
  compare  nnUNetPredictor (3d_fullres; 3d_lowres; 3d_cascade_fullres fed with its own 3d_lowres
           prediction) against `voxseg segment` with the three packages on the held-out cases:
           voxel agreement and Dice between the two per label; --report writes Markdown.

    PYTHONPATH=/tmp/nnpy /usr/bin/python3 tools/nnunet_ct_parity.py all --work /tmp/nnct \\
        --voxseg build/app/voxseg --report /tmp/nnct/report.md

(--report: the result tables in Markdown, as docs/parity-nnunet-ct.md quotes them; compare
--reuse-nnunet reruns voxseg alone on nnU-Net's predictions of an earlier run).

Needs nnunetv2 2.5.1 and its dependencies on PYTHONPATH (docs/parity-nnunet-ct.md says which).
nnunetv2 2.5.1 imports torch._dynamo (PyTorch >= 2) for an isinstance check only; on PyTorch 1.13
(Debian 12) this script puts a stand-in module there (torch13_shims) before nnU-Net is imported,
and hands one augmentation of batchgeneratorsv2 a torch mask where torch 1.13 refuses a numpy one.
No nnU-Net algorithm is changed. Everything lives under --work; nothing is written into the
repository except --report and, with --fixture DIR, the files of the CI test (below).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import nnunet_ct_phantom  # noqa: E402
import nnunet_parity as parity  # noqa: E402

DATASET = "Dataset015_CTAniso"
DATASET_ID = 15
TRAINER = parity.TRAINER
FOV_MM = (200.0, 200.0, 120.0)  # x, y, z


def torch13_shims():
    """nnunetv2 2.5.1 does `from torch._dynamo import OptimizedModule` (PyTorch >= 2.0) to ask
    whether a network was torch.compile'd; torch 1.13 has no torch._dynamo. A module whose
    OptimizedModule is a class no network is an instance of answers that question as torch 1.13
    would (never compiled). nnUNet_compile=f keeps nnU-Net from calling torch.compile."""
    import torch
    if not hasattr(torch, "_dynamo"):
        try:
            import torch._dynamo  # noqa: F401
        except ImportError:
            dynamo = types.ModuleType("torch._dynamo")

            class OptimizedModule(torch.nn.Module):
                pass

            dynamo.OptimizedModule = OptimizedModule
            sys.modules["torch._dynamo"] = dynamo
            torch._dynamo = dynamo
    os.environ["nnUNet_compile"] = "f"
    # batchgeneratorsv2 0.2.1's RemoveRandomConnectedComponentFromOneHotEncodingTransform (the
    # cascade's augmentation of the one-hot channels) indexes a torch tensor with a numpy
    # boolean mask, which torch >= 2 accepts and 1.13 refuses ("too many indices"): the same
    # component labelling, handed over as a torch tensor, makes that mask a torch one.
    try:
        import batchgeneratorsv2.transforms.nnunet.remove_connected_components as rcc
    except ImportError:
        return
    if not getattr(rcc.label_with_component_sizes, "_voxseg_shim", False):
        label = rcc.label_with_component_sizes

        def label_as_tensor(*args, **kwargs):
            lab, sizes = label(*args, **kwargs)
            return torch.from_numpy(lab), sizes

        label_as_tensor._voxseg_shim = True
        rcc.label_with_component_sizes = label_as_tensor


torch13_shims()  # at import: nnU-Net's spawned export workers re-import this module


def set_env(work):
    parity.set_env(work)
    os.environ.setdefault("nnUNet_def_n_proc", "1")


def case_spacing(rng):
    """(x, y, z) spacing of one case: about 0.8 x 0.8 x 5 mm."""
    s = float(rng.uniform(0.74, 0.86))
    return (s, s, float(rng.uniform(4.5, 5.5)))


def case_list(a):
    """[(split, name, phantom arguments)]: the same cases for every stage (seeded)."""
    rng = np.random.default_rng(15)
    out = []
    for split, n, seed0 in (("Tr", a.train, 715000), ("Ts", a.test, 716000)):
        for i in range(n):
            spacing = case_spacing(rng)
            args = {"seed": seed0 + i,
                    "size": "x".join(str(int(round(f / s))) for f, s in zip(FOV_MM, spacing)),
                    "spacing": "x".join(f"{s:.4f}" for s in spacing)}
            out.append((split, f"ctaniso_{split.lower()}{i:03d}", args))
    return out


def make_phantom(a, folder, args):
    if not os.path.isdir(folder):
        subprocess.run([a.voxseg, "phantom", folder, "--seed", str(args["seed"]), "--size",
                        args["size"], "--spacing", args["spacing"], "--outputs", "image,labels",
                        "--quiet", "--threads", "1"], check=True)
    return os.path.join(folder, "image.nii.gz"), os.path.join(folder, "labels.nii.gz")


def stage_data(a):
    set_env(a.work)
    raw = os.path.join(os.environ["nnUNet_raw"], DATASET)
    if os.path.exists(os.path.join(raw, "dataset.json")):
        return raw
    for d in ("imagesTr", "labelsTr", "imagesTs", "labelsTs"):
        os.makedirs(os.path.join(raw, d), exist_ok=True)
    for split, name, args in case_list(a):
        image, labels = make_phantom(a, os.path.join(a.work, "phantoms", name), args)
        os.symlink(image, os.path.join(raw, "images" + split, name + "_0000.nii.gz"))
        os.symlink(labels, os.path.join(raw, "labels" + split, name + ".nii.gz"))
    nnunet_ct_phantom.write_dataset_json(raw, "CTAniso", a.train)
    print(f"raw dataset: {a.train} training, {a.test} held-out phantoms -> {raw}")
    return raw


def plans_path():
    return os.path.join(os.environ["nnUNet_preprocessed"], DATASET, "nnUNetPlans.json")


def stage_plan(a):
    set_env(a.work)
    from nnunetv2.experiment_planning.plan_and_preprocess_api import (
        extract_fingerprints, plan_experiment_dataset, preprocess)
    if not os.path.isfile(plans_path()):
        extract_fingerprints([DATASET_ID], num_processes=1, check_dataset_integrity=True)
        os.environ["nnUNet_n_proc_DA"] = "1"  # the planner sets torch's threads to it (>= 1)
        plan_experiment_dataset(DATASET_ID, gpu_memory_target_in_gb=a.gpu_memory_gb)
        os.environ["nnUNet_n_proc_DA"] = "0"
        with open(plans_path()) as f:
            plans = json.load(f)
        confs = plans["configurations"]
        for name in ("3d_lowres", "3d_cascade_fullres"):
            if name not in confs:
                raise SystemExit(f"nnU-Net planned no {name} (configurations {sorted(confs)}); "
                                 "lower --gpu-memory-gb so that its patch covers less of the image")
        for name, c in confs.items():
            arch = c.get("architecture", {}).get("arch_kwargs")
            if arch:
                # Small networks: nnU-Net's 32..320 features take hours per epoch on 2 CPU cores.
                arch["features_per_stage"] = [min(a.features_base << i, 8 * a.features_base)
                                              for i in range(arch["n_stages"])]
            if "batch_size" in c:
                c["batch_size"] = 2
        with open(plans_path(), "w") as f:
            json.dump(plans, f, indent=2)
    with open(plans_path()) as f:
        confs = json.load(f)["configurations"]
    for name in ("3d_fullres", "3d_lowres"):
        c = confs[name]
        print(f"{name}: spacing {c['spacing']}, patch {c['patch_size']}, features "
              f"{c['architecture']['arch_kwargs']['features_per_stage']}, strides "
              f"{c['architecture']['arch_kwargs']['strides']}")
    todo = [c for c in ("3d_fullres", "3d_lowres")
            if not os.path.isdir(os.path.join(os.environ["nnUNet_preprocessed"], DATASET,
                                              confs[c]["data_identifier"]))]
    if todo:
        preprocess([DATASET_ID], configurations=todo, num_processes=[1] * len(todo))


def trained_folder(work, configuration):
    return os.path.join(work, "results", DATASET, f"{TRAINER}__nnUNetPlans__{configuration}")


FOLDS = {"3d_fullres": "0", "3d_lowres": "all", "3d_cascade_fullres": "0"}


def stage_train(a):
    set_env(a.work)
    for conf in ("3d_fullres", "3d_lowres", "3d_cascade_fullres"):
        fold = FOLDS[conf]
        if os.path.isfile(os.path.join(trained_folder(a.work, conf), f"fold_{fold}",
                                       "checkpoint_final.pth")):
            print(f"{conf}: trained already")
            continue
        a.features = a.batch_size = a.patch = None  # the plans on disk say it (stage plan)
        parity.train_fold0(DATASET, DATASET_ID, a, configuration=conf,
                           fold=int(fold) if fold.isdigit() else fold,
                           validate=conf == "3d_lowres")


def stage_export(a):
    set_env(a.work)
    mirror = [] if a.mirroring else ["--no-mirroring"]
    exp = os.path.join(HERE, "export_nnunet.py")
    for conf, pkg in (("3d_fullres", "pkg_fullres"), ("3d_lowres", "pkg_lowres")):
        subprocess.run([sys.executable, exp, trained_folder(a.work, conf), "-o",
                        os.path.join(a.work, pkg), "--folds", FOLDS[conf], "--name",
                        f"ct-aniso-{conf.replace('_', '-')}", "--force"] + mirror, check=True)
    subprocess.run([sys.executable, exp, trained_folder(a.work, "3d_cascade_fullres"), "-o",
                    os.path.join(a.work, "pkg_cascade"), "--folds", FOLDS["3d_cascade_fullres"],
                    "--previous-stage-folds", FOLDS["3d_lowres"], "--name", "ct-aniso-cascade",
                    "--force"] + mirror, check=True)


def nnunet_predict(a, conf, images, out, prev=None):
    import torch
    from nnunetv2.inference.predict_from_raw_data import nnUNetPredictor
    shutil.rmtree(out, ignore_errors=True)
    pred = nnUNetPredictor(tile_step_size=0.5, use_gaussian=True, use_mirroring=a.mirroring,
                           perform_everything_on_device=False, device=torch.device("cpu"),
                           verbose=False, allow_tqdm=False)
    pred.initialize_from_trained_model_folder(trained_folder(a.work, conf), use_folds=(FOLDS[conf],))
    t0 = time.time()
    pred.predict_from_files(images, out, save_probabilities=False, overwrite=True,
                            num_processes_preprocessing=1, num_processes_segmentation_export=1,
                            folder_with_segs_from_prev_stage=prev)
    return time.time() - t0


def voxseg_predict(a, pkg, images, cases, out):
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.time()
    for c in cases:
        subprocess.run([a.voxseg, "segment", os.path.join(images, c + "_0000.nii.gz"), "-m", pkg,
                        "-o", os.path.join(out, c), "--device", "cpu", "--threads",
                        os.environ["OMP_NUM_THREADS"], "--outputs", "labels", "--quiet"],
                       check=True, stdout=subprocess.DEVNULL)
    return time.time() - t0


def label_file(folder):
    files = sorted(f for f in os.listdir(folder) if f.endswith(".nii.gz") and "prob" not in f)
    return os.path.join(folder, files[0])


def compare_folders(ref_dir, got_dir, cases, labels):
    """Per case: (case, agreement, [Dice per label]); totals (agreement, pooled Dice)."""
    import nibabel as nib
    rows, agree, n = [], 0, 0
    inter = np.zeros(len(labels))
    sums = np.zeros(len(labels))
    for c in cases:
        ref = np.asarray(nib.load(os.path.join(ref_dir, c + ".nii.gz")).dataobj)
        got = np.asarray(nib.load(label_file(os.path.join(got_dir, c))).dataobj)
        if got.shape != ref.shape:
            raise SystemExit(f"{c}: voxseg label map {got.shape} vs nnU-Net {ref.shape}")
        agree += int((got == ref).sum())
        n += ref.size
        for i, v in enumerate(labels):
            x, y = ref == v, got == v
            inter[i] += np.logical_and(x, y).sum()
            sums[i] += x.sum() + y.sum()
        rows.append((c, float((got == ref).mean()), [parity.dice(ref, got, v) for v in labels]))
    pooled = [1.0 if s == 0 else 2 * i / s for i, s in zip(inter, sums)]
    return rows, agree / n, pooled


def truth_dice(ref_dir, truth_dir, cases, labels):
    """Mean Dice of nnU-Net's prediction against the phantoms' ground truth (what the model learnt)."""
    import nibabel as nib
    out = []
    for v in labels:
        d = []
        for c in cases:
            ref = np.asarray(nib.load(os.path.join(ref_dir, c + ".nii.gz")).dataobj)
            gt = np.asarray(nib.load(os.path.join(truth_dir, c + ".nii.gz")).dataobj)
            d.append(parity.dice(gt, ref, v))
        out.append(float(np.mean(d)))
    return out


def stage_compare(a):
    set_env(a.work)
    import torch
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    raw = os.path.join(os.environ["nnUNet_raw"], DATASET)
    images = os.path.join(raw, "imagesTs")
    cases = sorted(f[: -len("_0000.nii.gz")] for f in os.listdir(images))[: a.cases]
    if a.cases < a.test:
        sub = os.path.join(a.work, "imagesTs_subset")
        shutil.rmtree(sub, ignore_errors=True)
        os.makedirs(sub)
        for c in cases:
            os.symlink(os.path.realpath(os.path.join(images, c + "_0000.nii.gz")),
                       os.path.join(sub, c + "_0000.nii.gz"))
        images = sub
    with open(os.path.join(a.work, "pkg_fullres", "model.json")) as f:
        model = json.load(f)
    labels = [lab["value"] for lab in model["labels"]]
    names = [lab["name"] for lab in model["labels"]]
    results = {}
    runs = [("3d_fullres", "pkg_fullres", None), ("3d_lowres", "pkg_lowres", None),
            ("3d_cascade_fullres", "pkg_cascade", "3d_lowres")]
    for conf, pkg, prev in runs:
        if a.only and conf not in a.only:
            continue
        nn_out = os.path.join(a.work, f"pred_nnunet_{conf}")
        prev_dir = os.path.join(a.work, f"pred_nnunet_{prev}") if prev else None
        done = all(os.path.isfile(os.path.join(nn_out, c + ".nii.gz")) for c in cases)
        if a.reuse_nnunet and done:
            t_nn = float("nan")  # predicted by an earlier run
        else:
            t_nn = nnunet_predict(a, conf, images, nn_out, prev_dir)
        vx_out = os.path.join(a.work, f"pred_voxseg_{conf}")
        t_vx = voxseg_predict(a, os.path.join(a.work, pkg), images, cases, vx_out)
        rows, agreement, pooled = compare_folders(nn_out, vx_out, cases, labels)
        truth = truth_dice(nn_out, os.path.join(raw, "labelsTs"), cases, labels)
        results[conf] = dict(rows=rows, agreement=agreement, pooled=pooled, truth=truth,
                             t_nn=t_nn, t_vx=t_vx, min_case_dice=min(min(r[2]) for r in rows))
        print(f"{conf}: agreement {100 * agreement:.4f} %, Dice per label (pooled) "
              f"{', '.join(f'{d:.4f}' for d in pooled)}; nnU-Net {t_nn:.1f} s, voxseg {t_vx:.1f} s")
    report = render_report(a, results, names, cases)
    print(report)
    if a.report:
        with open(a.report, "w") as f:
            f.write(report)
    ok = all(r["agreement"] >= 0.999 and min(r["pooled"]) >= 0.999 for r in results.values())
    print("PASS" if ok else "FAIL: below the parity targets (agreement >= 99.9 %, Dice >= 0.999)")
    return 0 if ok else 1


def stage_fixture(a):
    """The CI test's files (tests/tools/nnunet_ct_parity_test.py): the 3d_fullres and cascade
    packages, nnU-Net's predictions of the --fixture-cases held-out cases and how to regenerate
    their images (`voxseg phantom` arguments)."""
    out = os.path.abspath(a.fixture)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for pkg in ("pkg_fullres", "pkg_cascade"):
        shutil.copytree(os.path.join(a.work, pkg), os.path.join(out, pkg))
        with open(os.path.join(out, pkg, "model.json")) as f:
            m = json.load(f)
        m["_export"] = {k: v for k, v in m["_export"].items()
                        if k not in ("source", "previous_stage")}  # no /tmp paths
        with open(os.path.join(out, pkg, "model.json"), "w") as f:
            json.dump(m, f, indent=2)
            f.write("\n")
    cases = [c for c in case_list(a) if c[1] in a.fixture_cases]
    index = {"phantom_cases": [], "configurations": {"3d_fullres": "pkg_fullres",
                                                     "3d_cascade_fullres": "pkg_cascade"}}
    for _, name, args in cases:
        for conf in index["configurations"]:
            shutil.copy(os.path.join(a.work, f"pred_nnunet_{conf}", name + ".nii.gz"),
                        os.path.join(out, f"{name}_{conf}.nii.gz"))
        index["phantom_cases"].append(dict(name=name, **args))
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    print(f"fixture: {out}")


def render_report(a, results, names, cases):
    lines = []
    for conf, r in results.items():
        lines.append(f"### {conf}\n")
        lines.append(f"{len(cases)} held-out cases: voxel agreement **{100 * r['agreement']:.4f} %**, "
                     f"Dice between the two per label (pooled over the cases) min "
                     f"**{min(r['pooled']):.4f}**; lowest single-case Dice {r['min_case_dice']:.4f}. "
                     f"nnU-Net predictor {r['t_nn']:.1f} s, voxseg segment (one process per case) "
                     f"{r['t_vx']:.1f} s.\n")
        lines.append("| label | Dice nnU-Net vs voxseg | nnU-Net vs ground truth |")
        lines.append("|---|---|---|")
        for n, d, t in zip(names, r["pooled"], r["truth"]):
            lines.append(f"| {n} | {d:.4f} | {t:.3f} |")
        lines.append("")
        lines.append("| case | voxel agreement | lowest Dice |")
        lines.append("|---|---|---|")
        for c, ag, ds in r["rows"]:
            lines.append(f"| {c} | {100 * ag:.4f} % | {min(ds):.4f} |")
        lines.append("")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("stage", choices=["data", "plan", "train", "export", "compare", "fixture", "all"])
    p.add_argument("--work", default="/tmp/nnct")
    p.add_argument("--voxseg", default=os.path.join(HERE, "../build/app/voxseg"))
    p.add_argument("--train", type=int, default=12, help="training phantoms")
    p.add_argument("--test", type=int, default=10, help="held-out phantoms")
    p.add_argument("--cases", type=int, default=10, help="held-out cases to compare")
    p.add_argument("--gpu-memory-gb", type=float, default=0.25,
                   help="nnU-Net planner's GPU memory target (small: small patches, and a cascade)")
    p.add_argument("--features-base", type=int, default=4,
                   help="features per stage base * 2^i, at most 8 * base")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--iterations", type=int, default=20, help="training iterations per epoch")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--mirroring", action="store_true", help="test-time mirroring in both predictors")
    p.add_argument("--only", nargs="+", help="compare only these configurations")
    p.add_argument("--reuse-nnunet", action="store_true",
                   help="keep nnU-Net's predictions of an earlier compare (voxseg runs again)")
    p.add_argument("--report", help="write the Markdown tables here")
    p.add_argument("--fixture", default=os.path.join(HERE, "../tests/tools/fixtures/nnunet_ct"),
                   help="stage fixture: the CI test's folder")
    p.add_argument("--fixture-cases", nargs="+", default=["ctaniso_ts000", "ctaniso_ts008"],
                   help="held-out cases of the CI test (ts008 has an order-0 tie along z)")
    a = p.parse_args()
    a.work = os.path.abspath(a.work)
    a.voxseg = os.path.abspath(a.voxseg)
    rc = 0
    for stage, fn in (("data", stage_data), ("plan", stage_plan), ("train", stage_train),
                      ("export", stage_export), ("compare", stage_compare),
                      ("fixture", stage_fixture)):
        if a.stage == stage or (a.stage == "all" and stage != "fixture"):
            rc = fn(a) or 0
    return rc


if __name__ == "__main__":
    sys.exit(main())
