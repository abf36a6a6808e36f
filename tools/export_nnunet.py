#!/usr/bin/env python3
"""nnU-Net v2 trained model folder -> voxseg model package (docs/model-package.md).

    python3 tools/export_nnunet.py \\
        $nnUNet_results/Dataset004_Hippocampus/nnUNetTrainer__nnUNetPlans__3d_fullres \\
        -o hippocampus-pkg [--folds 0 1 2 3 4] [--configuration 3d_fullres] [--codes codes.json]

The folder holds plans.json, dataset.json and fold_*/checkpoint_final.pth (what nnUNetv2_train
writes). The network is rebuilt from the plans with nnU-Net's own get_network_from_plans (deep
supervision off), the fold weights are loaded, and each fold is exported to ONNX (opset 17,
dynamic batch, static patch) and checked against PyTorch with ONNX Runtime. Several folds become
an ensemble (model.json "models", logits averaged as nnU-Net does).

Checkpoints are Python pickles: loading one can run code. This tool loads them with
torch.load(weights_only=True) (tensors and plain containers only) and refuses otherwise unless
--allow-pickle is given for a checkpoint you trust. voxseg itself never loads pickles: a package
holds only JSON and ONNX.
"""
import argparse
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import (PackageWriter, export_onnx, fail, load_codes, make_labels,  # noqa: E402
                           model_files_entry, warn)

DEFAULT_NORMALIZERS = {"CTNormalization", "ZScoreNormalization", "NoNormalization"}
DEFAULT_RESAMPLING = "resample_data_or_seg_to_shape"


def modality_of(channel_name):
    n = channel_name.upper()
    if n == "CT" or n.startswith("CT"):
        return "CT"
    if n.startswith(("PET", "PT")):
        return "PT"
    if any(k in n for k in ("MR", "T1", "T2", "FLAIR", "ADC", "DWI", "PD")):
        return "MR"
    return channel_name


def load_checkpoint(path, allow_pickle):
    import numpy as np
    import torch
    safe = [np.dtype, np.ndarray, np.core.multiarray.scalar, np.core.multiarray._reconstruct,
            type(np.dtype(np.float64)), type(np.dtype(np.float32)), type(np.dtype(np.int64))]
    try:
        with torch.serialization.safe_globals(safe):
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - report and decide below
        if not allow_pickle:
            fail(f"{path} cannot be loaded with torch.load(weights_only=True) ({str(e).splitlines()[0]}). "
                 "It is a pickle and may run code when loaded; if you trust it, rerun with --allow-pickle")
        warn(f"{path}: loading as a full pickle (--allow-pickle)")
        return torch.load(path, map_location="cpu", weights_only=False)


def network_weights(ckpt, path):
    w = ckpt.get("network_weights") if isinstance(ckpt, dict) else None
    if w is None:
        fail(f"{path}: no 'network_weights' (not an nnU-Net v2 checkpoint?)")
    out = {}
    for k, v in w.items():
        for prefix in ("_orig_mod.", "module."):
            if k.startswith(prefix):
                k = k[len(prefix):]
        out[k] = v
    return out


def normalization(scheme, use_mask, props, channel):
    if scheme == "CTNormalization":
        if props is None:
            fail(f"channel {channel}: CTNormalization but plans.json has no "
                 "foreground_intensity_properties_per_channel")
        return {"scheme": "ct", "clip": [float(props["percentile_00_5"]), float(props["percentile_99_5"])],
                "mean": float(props["mean"]), "std": float(max(props["std"], 1e-8))}
    if scheme == "ZScoreNormalization":
        n = {"scheme": "zscore"}
        if use_mask:
            n["mask"] = "nonzero"
        return n
    if scheme == "NoNormalization":
        return {"scheme": "none"}
    fail(f"channel {channel}: normalization '{scheme}' has no voxseg equivalent "
         f"(supported: {sorted(DEFAULT_NORMALIZERS)})")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", help="trained model folder (plans.json, dataset.json, fold_*/)")
    p.add_argument("-o", "--out", required=True, help="package folder to write")
    p.add_argument("--configuration", help="plans configuration (default: the one the checkpoint "
                   "was trained with, else 3d_fullres)")
    p.add_argument("--folds", nargs="+", help="folds to export (default: every fold_* with a checkpoint)")
    p.add_argument("--checkpoint", default="checkpoint_final.pth")
    p.add_argument("--codes", help="JSON with SNOMED codes/colours per label name (docs/models.md)")
    p.add_argument("--name", help="package name (default: dataset name + configuration)")
    p.add_argument("--version", default="1.0.0")
    p.add_argument("--license", help="licence of the weights (default: dataset.json 'licence')")
    p.add_argument("--description", default="")
    p.add_argument("--no-mirroring", action="store_true", help="no test-time mirroring in the package")
    p.add_argument("--allow-pickle", action="store_true",
                   help="load checkpoints that need full unpickling (runs code: trusted files only)")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    a = p.parse_args()

    import torch
    from nnunetv2.utilities.get_network_from_plans import get_network_from_plans
    from nnunetv2.utilities.label_handling.label_handling import determine_num_input_channels
    from nnunetv2.utilities.plans_handling.plans_handler import PlansManager

    folder = os.path.abspath(a.folder)
    for f in ("plans.json", "dataset.json"):
        if not os.path.isfile(os.path.join(folder, f)):
            fail(f"{folder}: no {f}; expected an nnU-Net v2 trained model folder "
                 "(plans.json, dataset.json, fold_*/checkpoint_final.pth)")
    with open(os.path.join(folder, "plans.json")) as f:
        plans = json.load(f)
    with open(os.path.join(folder, "dataset.json")) as f:
        dataset = json.load(f)

    folds = a.folds or sorted(
        (m.group(1) for d in glob.glob(os.path.join(folder, "fold_*"))
         if (m := re.match(r"fold_(\w+)$", os.path.basename(d)))
         and os.path.isfile(os.path.join(d, a.checkpoint))), key=lambda s: (not s.isdigit(), s.zfill(3)))
    if not folds:
        fail(f"{folder}: no fold_*/{a.checkpoint}")
    ckpts = []
    for fold in folds:
        path = os.path.join(folder, f"fold_{fold}", a.checkpoint)
        if not os.path.isfile(path):
            fail(f"{path} does not exist")
        ckpts.append((fold, path, load_checkpoint(path, a.allow_pickle)))

    first = ckpts[0][2]
    trained_conf = first.get("init_args", {}).get("configuration") if isinstance(first, dict) else None
    conf_name = a.configuration or trained_conf or "3d_fullres"
    if trained_conf and a.configuration and a.configuration != trained_conf:
        fail(f"--configuration {a.configuration} but the checkpoints were trained with {trained_conf}")
    trainer = first.get("trainer_name", "?") if isinstance(first, dict) else "?"
    if trainer != "?" and not trainer.startswith("nnUNetTrainer"):
        warn(f"trainer '{trainer}': a custom trainer may build its network differently from the plans; "
             "the weights must load without missing keys or the export stops")

    pm = PlansManager(plans)
    if conf_name not in plans.get("configurations", {}):
        fail(f"configuration '{conf_name}' not in plans.json (has {sorted(plans['configurations'])})")
    cm = pm.get_configuration(conf_name)
    lm = pm.get_label_manager(dataset)
    if lm.has_regions:
        fail("region-based training (dataset.json regions_class_order): nnU-Net applies nested regions "
             "in regions_class_order with a 0.5 threshold, which voxseg's 'sigmoid' output (most "
             "probable channel) does not reproduce; export a model trained on plain labels")
    if conf_name.endswith("cascade_fullres") or cm.previous_stage_name:
        fail(f"configuration '{conf_name}' is a cascade stage (needs the low-res prediction as input); "
             "voxseg runs single-stage models: export 3d_fullres or 3d_lowres")

    reader = dataset.get("overwrite_image_reader_writer", "SimpleITKIO")
    if reader in ("SimpleITKIO", "SimpleITKIOWithReorient"):
        axis_order, orientation = "zyx", "native"
        if reader == "SimpleITKIOWithReorient":
            orientation = "RAS"
            warn("SimpleITKIOWithReorient: package orientation RAS")
    elif reader == "NibabelIO":
        axis_order, orientation = "xyz", "native"
    elif reader == "NibabelIOWithReorient":
        axis_order, orientation = "xyz", "RAS"
    else:
        fail(f"dataset.json reader '{reader}' has no voxseg equivalent (SimpleITKIO / NibabelIO)")

    n_in = determine_num_input_channels(pm, cm, dataset)
    n_out = lm.num_segmentation_heads
    channel_names = dataset.get("channel_names") or dataset.get("modality")
    fg = plans.get("foreground_intensity_properties_per_channel", {})
    channels = []
    for c in range(n_in):
        scheme = cm.normalization_schemes[c]
        channels.append({"modality": modality_of(channel_names[str(c)]),
                         "normalization": normalization(scheme, cm.use_mask_for_norm[c],
                                                        fg.get(str(c)), c)})
    resampling = plans["configurations"][conf_name].get("resampling_fn_data", DEFAULT_RESAMPLING)
    if resampling != DEFAULT_RESAMPLING:
        warn(f"plans resample data with '{resampling}'; voxseg resamples like nnU-Net's "
             f"default {DEFAULT_RESAMPLING} (order 3, separate order-0 axis when anisotropic)")

    net = get_network_from_plans(cm.network_arch_class_name, cm.network_arch_init_kwargs,
                                 cm.network_arch_init_kwargs_req_import, n_in, n_out,
                                 allow_init=True, deep_supervision=False)

    mirror = [] if a.no_mirroring else list(first.get("inference_allowed_mirroring_axes") or [])
    labels_named = sorted((v, k) for k, v in lm.label_dict.items()
                          if k not in ("background", "ignore") and isinstance(v, int) and v > 0)
    labels = make_labels(labels_named, load_codes(a.codes))
    if len(labels) + 1 != n_out:
        fail(f"dataset.json has {len(labels)} labels but the network has {n_out} outputs")

    licence = a.license or dataset.get("licence") or dataset.get("license")
    if not licence:
        licence = "unknown"
        warn("no --license and no licence in dataset.json: package licence 'unknown'")
    name = a.name or f"{dataset.get('name', os.path.basename(os.path.dirname(folder)))}-{conf_name}"

    writer = PackageWriter(a.out, a.force)
    try:
        files = []
        for fold, path, ckpt in ckpts:
            missing, unexpected = net.load_state_dict(network_weights(ckpt, path), strict=False)
            if missing or unexpected:
                fail(f"{path}: weights do not match the network from plans.json "
                     f"(missing {missing[:5]}, unexpected {unexpected[:5]})")
            fname = "model.onnx" if len(ckpts) == 1 else f"fold_{fold}.onnx"
            _, out_shape = export_onnx(net, (n_in,) + tuple(cm.patch_size), writer.path(fname))
            if out_shape[0] != n_out:
                fail(f"network output has {out_shape[0]} channels, expected {n_out}")
            files.append(fname)
        model = {
            "format_version": 1,
            "name": name,
            "version": a.version,
            "description": a.description or (
                f"nnU-Net v2 {conf_name} ({trainer}), fold{'s' if len(folds) > 1 else ''} "
                f"{', '.join(folds)}, exported by tools/export_nnunet.py"),
            "license": licence,
            "channels": channels,
            "spacing_mm": [float(s) for s in cm.spacing],
            "patch_size": [int(s) for s in cm.patch_size],
            "axis_order": axis_order,
            "orientation": orientation,
            "labels": labels,
            "output": "softmax",
            "inference": {"overlap": 0.5, "gaussian": True, "gaussian_sigma_scale": 0.125,
                          "mirror_axes": mirror, "convention": "nnunet"},
        }
        model.update(model_files_entry(writer, files))
        model["_export"] = {"tool": "tools/export_nnunet.py", "source": folder,
                            "configuration": conf_name, "folds": folds, "trainer": trainer}
        writer.finish(model)
    except BaseException:
        writer.abort()
        raise
    print(f"{len(files)} network(s), {n_in} channel(s), {len(labels)} labels, spacing "
          f"{model['spacing_mm']} patch {model['patch_size']} ({axis_order}), mirror axes {mirror}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
