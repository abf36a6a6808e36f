#!/usr/bin/env python3
"""nnU-Net v2 trained model folder -> voxseg model package (docs/model-package.md).

    python3 tools/export_nnunet.py \\
        $nnUNet_results/Dataset004_Hippocampus/nnUNetTrainer__nnUNetPlans__3d_fullres \\
        -o hippocampus-pkg [--folds 0 1 2 3 4] [--configuration 3d_fullres] [--codes codes.json]

The folder holds plans.json, dataset.json and fold_*/checkpoint_final.pth (what nnUNetv2_train
writes). The network is rebuilt as nnU-Net builds it, with dynamic_network_architectures (deep
supervision off), the fold weights are loaded, and each fold is exported to ONNX (opset 17,
dynamic batch, static patch) and checked against PyTorch with ONNX Runtime when it is installed.
Several folds become an ensemble (model.json "models", logits averaged as nnU-Net does).

Cascades: a 3d_cascade_fullres folder (plans.json previous_stage) becomes a format 2 package of
two stages, its previous stage (3d_lowres, from the sibling folder
<trainer>__<plans>__3d_lowres or --previous-stage-folder) and itself, linked by `one_hot_from`
(the low-resolution prediction fed as one-hot channels, as nnU-Net's predictor does with
folder_with_segs_from_prev_stage); each stage keeps its configuration's spacing, patch,
normalisation and mirror axes, one fold each (--folds, --previous-stage-folds):

    python3 tools/export_nnunet.py \
        $nnUNet_results/Dataset015_CTAniso/nnUNetTrainer__nnUNetPlans__3d_cascade_fullres \
        -o ct-cascade-pkg --folds 0 --previous-stage-folds all

Which network:
  - plans.json configurations.<c>.architecture (nnunetv2 >= 2.4): network_class_name, arch_kwargs
    and _kw_requires_import, e.g. PlainConvUNet or ResidualEncoderUNet (the ResEnc M/L/XL
    presets, nnUNetResEncUNet{M,L,XL}Plans), as nnunetv2's get_network_from_plans does it;
  - the older plans format without "architecture" (UNet_class_name, UNet_base_num_features,
    n_conv_per_stage_encoder/decoder, pool_op_kernel_sizes, conv_kernel_sizes,
    unet_max_num_features; TotalSegmentator's released weights) converted as nnunetv2 does;
  - a Primus trainer (nnUNet_Primus_{S,B,M,L}_Trainer and their _Primus_<S|B|M|L>_* variants)
    builds its own network: dynamic_network_architectures Primus(embed, 8x8x8 patches, depth,
    heads, patch_size, drop_path 0.2, scale_attn_inner, LayerScale 0.1), whatever the plans' architecture
    says. A custom Primus trainer: pass --primus EMBED,DEPTH,HEADS.
Needs torch, onnx, dynamic_network_architectures (and timm, einops for Primus); not nnunetv2.

Checkpoints are Python pickles: loading one can run code. This tool loads them as tensors and
plain containers only (torch.load(weights_only=True), or a restricted unpickler on torch < 2)
and refuses otherwise unless
--allow-pickle is given for a checkpoint you trust. voxseg itself never loads pickles: a package
holds only JSON and ONNX.
"""
import argparse
import glob
import inspect
import json
import os
import pydoc
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import (PackageWriter, export_onnx, fail, load_checkpoint, load_codes,  # noqa: E402
                           make_labels, model_files_entry, sha256_file, warn)

DEFAULT_NORMALIZERS = {"CTNormalization", "ZScoreNormalization", "NoNormalization"}
# nnunetv2/training/nnUNetTrainer/primus/primus_trainers.py: (embed_dim, eva_depth, eva_numheads)
PRIMUS_SIZES = {"S": (396, 12, 6), "B": (792, 12, 12), "M": (864, 16, 12), "L": (1056, 24, 16)}
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


def configuration(plans, name):
    """plans.json configuration `name` with its inherits_from chain applied (as PlansManager)."""
    confs = plans.get("configurations", {})
    if name not in confs:
        fail(f"configuration '{name}' not in plans.json (has {sorted(confs)})")
    conf, seen = dict(confs[name]), [name]
    while "inherits_from" in conf:
        parent = conf.pop("inherits_from")
        if parent in seen or parent not in confs:
            fail(f"plans.json configuration '{seen[-1]}' inherits from '{parent}', which "
                 + ("loops" if parent in seen else "does not exist"))
        seen.append(parent)
        merged = dict(confs[parent])
        merged.update(conf)
        conf = merged
    return conf


def labels_of(dataset):
    """dataset.json labels -> ([(value, name)] foreground, number of network outputs)."""
    labels = dataset.get("labels") or {}
    if dataset.get("regions_class_order") or any(
            isinstance(v, (list, tuple)) and len(v) > 1 for v in labels.values()):
        fail("region-based training (dataset.json regions_class_order): nnU-Net applies nested regions "
             "in regions_class_order with a 0.5 threshold, which voxseg's 'sigmoid' output (most "
             "probable channel) does not reproduce; export a model trained on plain labels")
    plain = {k: (v[0] if isinstance(v, (list, tuple)) else v) for k, v in labels.items() if k != "ignore"}
    if sorted(plain.values()) != list(range(len(plain))):
        fail(f"dataset.json labels {labels}: expected consecutive values 0..N-1 (background 0)")
    return sorted((v, k) for k, v in plain.items() if v > 0), len(plain)


def primus_size(trainer, override):
    """(embed, depth, heads) of a Primus trainer, None for the plans' architecture."""
    if override:
        try:
            embed, depth, heads = (int(v) for v in override.split(","))
        except ValueError:
            fail(f"--primus '{override}': expected EMBED,DEPTH,HEADS (e.g. 396,12,6 for Primus S)")
        return embed, depth, heads
    if "Primus" not in trainer:
        return None
    m = re.search(r"Primus_([SBML])_", trainer)
    if not m:
        fail(f"trainer '{trainer}' builds a Primus network of a size this tool does not know "
             f"(it knows nnUNet_Primus_{{S,B,M,L}}_Trainer and their variants); pass "
             "--primus EMBED,DEPTH,HEADS as the trainer's build_network_architecture sets them")
    return PRIMUS_SIZES[m.group(1)]


LEGACY_CLASSES = {"PlainConvUNet": "dynamic_network_architectures.architectures.unet.PlainConvUNet",
                  "ResidualEncoderUNet":
                      "dynamic_network_architectures.architectures.residual_unet.ResidualEncoderUNet"}
LEGACY_KEYS = ("UNet_class_name", "UNet_base_num_features", "n_conv_per_stage_encoder",
               "n_conv_per_stage_decoder", "pool_op_kernel_sizes", "conv_kernel_sizes",
               "unet_max_num_features")


def legacy_architecture(conf):
    """The architecture of plans written before nnunetv2 2.4 (no configurations.<c>.architecture:
    UNet_class_name, UNet_base_num_features, ... as TotalSegmentator's released weights have),
    built as nnunetv2's ConfigurationManager converts such plans: features doubling per stage
    up to unet_max_num_features, conv bias, InstanceNorm (eps 1e-5, affine), LeakyReLU."""
    missing = [k for k in LEGACY_KEYS if k not in conf]
    if missing:
        fail("plans.json configuration has neither 'architecture' (nnunetv2 >= 2.4) nor the older "
             f"format's keys (missing {missing}); re-run nnUNetv2_plan_and_preprocess")
    cls = conf["UNet_class_name"]
    if cls not in LEGACY_CLASSES:
        fail(f"older plans format with UNet_class_name '{cls}': nnU-Net converts only "
             f"{sorted(LEGACY_CLASSES)}")
    n_stages = len(conf["n_conv_per_stage_encoder"])
    dim = len(conf["patch_size"])
    blocks = "n_conv_per_stage" if cls == "PlainConvUNet" else "n_blocks_per_stage"
    return {"network_class_name": LEGACY_CLASSES[cls],
            "arch_kwargs": {
                "n_stages": n_stages,
                "features_per_stage": [min(conf["UNet_base_num_features"] * 2 ** i,
                                           conf["unet_max_num_features"]) for i in range(n_stages)],
                "conv_op": f"torch.nn.modules.conv.Conv{dim}d",
                "kernel_sizes": conf["conv_kernel_sizes"], "strides": conf["pool_op_kernel_sizes"],
                blocks: conf["n_conv_per_stage_encoder"],
                "n_conv_per_stage_decoder": conf["n_conv_per_stage_decoder"],
                "conv_bias": True,
                "norm_op": f"torch.nn.modules.instancenorm.InstanceNorm{dim}d",
                "norm_op_kwargs": {"eps": 1e-05, "affine": True},
                "dropout_op": None, "dropout_op_kwargs": None,
                "nonlin": "torch.nn.LeakyReLU", "nonlin_kwargs": {"inplace": True}},
            "_kw_requires_import": ["conv_op", "norm_op", "dropout_op", "nonlin"]}


def build_network(conf, n_in, n_out, trainer, primus):
    """The network as nnunetv2's get_network_from_plans (or a Primus trainer) builds it."""
    patch = [int(v) for v in conf["patch_size"]]
    size = primus_size(trainer, primus)
    if size is not None:
        from dynamic_network_architectures.architectures.primus import Primus
        if any(p % 8 for p in patch):
            fail(f"Primus needs a patch size divisible by 8 (plans: {patch})")
        embed, depth, heads = size
        return Primus(n_in, embed, (8, 8, 8), n_out, depth, heads, tuple(patch),
                      drop_path_rate=0.2, scale_attn_inner=True, init_values=0.1), f"Primus {size}"
    arch = conf.get("architecture") or legacy_architecture(conf)
    cls = pydoc.locate(arch["network_class_name"])
    if cls is None:
        fail(f"network class {arch['network_class_name']} cannot be imported (install "
             "dynamic_network_architectures, or the package that defines it)")
    kwargs = dict(arch["arch_kwargs"])
    for k in arch.get("_kw_requires_import", []):
        if kwargs.get(k) is not None:
            kwargs[k] = pydoc.locate(kwargs[k])
    if "deep_supervision" in inspect.signature(cls.__init__).parameters:
        kwargs["deep_supervision"] = False
    return cls(input_channels=n_in, num_classes=n_out, **kwargs), arch["network_class_name"].rsplit(".", 1)[-1]


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


def load_trained(folder, folds, checkpoint, allow_pickle, conf=None):
    """An nnU-Net trained model folder: plans, dataset, the configuration the checkpoints were
    trained with (inherits_from applied), trainer name and the fold checkpoints."""
    folder = os.path.abspath(folder)
    for f in ("plans.json", "dataset.json"):
        if not os.path.isfile(os.path.join(folder, f)):
            fail(f"{folder}: no {f}; expected an nnU-Net v2 trained model folder "
                 "(plans.json, dataset.json, fold_*/checkpoint_final.pth)")
    with open(os.path.join(folder, "plans.json")) as f:
        plans = json.load(f)
    with open(os.path.join(folder, "dataset.json")) as f:
        dataset = json.load(f)
    folds = folds or sorted(
        (m.group(1) for d in glob.glob(os.path.join(folder, "fold_*"))
         if (m := re.match(r"fold_(\w+)$", os.path.basename(d)))
         and os.path.isfile(os.path.join(d, checkpoint))), key=lambda s: (not s.isdigit(), s.zfill(3)))
    if not folds:
        fail(f"{folder}: no fold_*/{checkpoint}")
    ckpts = []
    for fold in folds:
        path = os.path.join(folder, f"fold_{fold}", checkpoint)
        if not os.path.isfile(path):
            fail(f"{path} does not exist")
        ckpts.append((fold, path, load_checkpoint(path, allow_pickle)))
    first = ckpts[0][2]
    trained_conf = first.get("init_args", {}).get("configuration") if isinstance(first, dict) else None
    conf_name = conf or trained_conf or "3d_fullres"
    if trained_conf and conf and conf != trained_conf:
        fail(f"--configuration {conf} but the checkpoints were trained with {trained_conf}")
    trainer = first.get("trainer_name", "?") if isinstance(first, dict) else "?"
    if trainer != "?" and not trainer.startswith("nnUNetTrainer") and "Primus" not in trainer:
        warn(f"trainer '{trainer}': a custom trainer may build its network differently from the plans; "
             "the weights must load without missing keys or the export stops")
    return {"folder": folder, "plans": plans, "dataset": dataset, "folds": folds, "ckpts": ckpts,
            "first": first, "conf_name": conf_name, "cm": configuration(plans, conf_name),
            "trainer": trainer}


def image_layout(dataset):
    """dataset.json's reader -> (axis_order, orientation)."""
    reader = dataset.get("overwrite_image_reader_writer", "SimpleITKIO")
    if reader == "SimpleITKIO":
        return "zyx", "native"
    if reader == "SimpleITKIOWithReorient":
        warn("SimpleITKIOWithReorient: package orientation RAS")
        return "zyx", "RAS"
    if reader == "NibabelIO":
        return "xyz", "native"
    if reader == "NibabelIOWithReorient":
        return "xyz", "RAS"
    fail(f"dataset.json reader '{reader}' has no voxseg equivalent (SimpleITKIO / NibabelIO)")


def channel_specs(t):
    """model.json channels (modality, normalization) of a trained model's configuration."""
    plans, cm, dataset = t["plans"], t["cm"], t["dataset"]
    channel_names = dataset.get("channel_names") or dataset.get("modality")
    if not channel_names:
        fail("dataset.json has no channel_names")
    n_in = len(channel_names)
    fg = plans.get("foreground_intensity_properties_per_channel", {})
    schemes, use_mask = cm["normalization_schemes"], cm["use_mask_for_norm"]
    if len(schemes) != n_in:
        fail(f"plans.json has {len(schemes)} normalization_schemes for {n_in} channels")
    resampling = cm.get("resampling_fn_data", DEFAULT_RESAMPLING)
    if resampling != DEFAULT_RESAMPLING:
        warn(f"plans resample data with '{resampling}'; voxseg resamples like nnU-Net's "
             f"default {DEFAULT_RESAMPLING} (order 3, separate order-0 axis when anisotropic)")
    return [{"modality": modality_of(channel_names[str(c)]),
             "normalization": normalization(schemes[c], use_mask[c], fg.get(str(c)), c)}
            for c in range(n_in)]


def export_folds(t, n_in, n_out, primus, writer, name_of):
    """Each fold's network to ONNX (name_of(fold) in the package); returns the file names."""
    net, net_name = build_network(t["cm"], n_in, n_out, t["trainer"], primus)
    patch = [int(v) for v in t["cm"]["patch_size"]]
    files = []
    for fold, path, ckpt in t["ckpts"]:
        missing, unexpected = net.load_state_dict(network_weights(ckpt, path), strict=False)
        if missing or unexpected:
            fail(f"{path}: weights do not match the network ({net_name}) "
                 f"(missing {missing[:5]}, unexpected {unexpected[:5]})"
                 + ("; for a Primus trainer check --primus" if "Primus" in net_name else ""))
        fname = name_of(fold)
        _, out_shape = export_onnx(net, (n_in,) + tuple(patch), writer.path(fname))
        if out_shape[0] != n_out:
            fail(f"network output has {out_shape[0]} channels, expected {n_out}")
        files.append(fname)
    t["net_name"] = net_name
    return files


def inference_of(t, no_mirroring):
    """nnUNetPredictor's sliding window: tile step 0.5, Gaussian sigma patch / 8, and its float16
    arithmetic ("accumulate": "nnunet-fp16": the map, the sums and the exported logits rounded as
    nnU-Net 2.x rounds them; docs/model-package.md)."""
    mirror = [] if no_mirroring else list(t["first"].get("inference_allowed_mirroring_axes") or [])
    return {"overlap": 0.5, "gaussian": True, "gaussian_sigma_scale": 0.125,
            "mirror_axes": mirror, "convention": "nnunet", "accumulate": "nnunet-fp16"}


def previous_stage_folder(t, override):
    """The trained folder of a cascade's previous stage: --previous-stage-folder, else the
    sibling nnU-Net writes (<trainer>__<plans>__<previous_stage> next to this one)."""
    prev = t["cm"].get("previous_stage")
    if not prev:
        fail(f"configuration '{t['conf_name']}' has no previous_stage in plans.json")
    if override:
        return os.path.abspath(override), prev
    parts = os.path.basename(t["folder"]).split("__")
    if len(parts) != 3:
        fail(f"{t['folder']}: not named <trainer>__<plans>__<configuration>; pass "
             "--previous-stage-folder with the trained folder of " + prev)
    folder = os.path.join(os.path.dirname(t["folder"]), "__".join(parts[:2] + [prev]))
    if not os.path.isdir(folder):
        fail(f"cascade stage '{t['conf_name']}' needs its previous stage '{prev}', trained in "
             f"{folder}, which does not exist; train it or pass --previous-stage-folder")
    return folder, prev


def single_fold(t, what):
    if len(t["ckpts"]) != 1:
        fail(f"{t['folder']}: {len(t['ckpts'])} folds ({', '.join(t['folds'])}) for the {what}; a "
             "format 2 stage holds one network: pick one with --folds / --previous-stage-folds")


def cascade_stages(a, t, labels_named, n_out, channels, writer):
    """3d_lowres -> 3d_cascade_fullres as two format 2 stages linked by one_hot_from."""
    prev_folder, prev_name = previous_stage_folder(t, a.previous_stage_folder)
    p = load_trained(prev_folder, a.previous_stage_folds, a.checkpoint, a.allow_pickle)
    if p["conf_name"] != prev_name:
        fail(f"{prev_folder} was trained as '{p['conf_name']}', but '{t['conf_name']}' follows "
             f"'{prev_name}'")
    single_fold(t, t["conf_name"])
    single_fold(p, prev_name)
    if labels_of(p["dataset"]) != (labels_named, n_out):
        fail(f"{prev_folder}: its dataset.json labels differ from {t['folder']}'s")
    if len(channels) != 1:
        fail(f"{len(channels)} input channels: format 2 packages (cascades) take one image channel")
    p_channels = channel_specs(p)
    values = [v for v, _ in labels_named]
    stages = []
    for s, chans, n_in, extra in ((p, p_channels, 1, {}),
                                  (t, channels, 1 + len(values), {"one_hot_from": {"stage": prev_name}})):
        fname = f"{s['conf_name']}.onnx"
        export_folds(s, n_in, n_out, a.primus, writer, lambda fold, f=fname: f)
        stage = {"name": s["conf_name"], "file": fname,
                 "sha256": sha256_file(writer.path(fname)),
                 "spacing_mm": [float(v) for v in s["cm"]["spacing"]],
                 "patch_size": [int(v) for v in s["cm"]["patch_size"]],
                 "normalization": chans[0]["normalization"],
                 "inference": inference_of(s, a.no_mirroring)}
        stage.update(extra)
        stage["output"] = {"kind": "softmax", "labels": values}
        stages.append(stage)
    return stages, p


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", help="trained model folder (plans.json, dataset.json, fold_*/)")
    p.add_argument("-o", "--out", required=True, help="package folder to write")
    p.add_argument("--configuration", help="plans configuration (default: the one the checkpoint "
                   "was trained with, else 3d_fullres)")
    p.add_argument("--folds", nargs="+", help="folds to export (default: every fold_* with a checkpoint)")
    p.add_argument("--previous-stage-folder", help="cascade (3d_cascade_fullres): the trained folder "
                   "of its previous stage (default: the sibling <trainer>__<plans>__3d_lowres)")
    p.add_argument("--previous-stage-folds", nargs="+", help="cascade: the previous stage's fold "
                   "(default: its only fold with a checkpoint)")
    p.add_argument("--checkpoint", default="checkpoint_final.pth")
    p.add_argument("--codes", help="JSON with SNOMED codes/colours per label name (docs/models.md)")
    p.add_argument("--name", help="package name (default: dataset name + configuration)")
    p.add_argument("--version", default="1.0.0")
    p.add_argument("--license", help="licence of the weights (default: dataset.json 'licence')")
    p.add_argument("--description", default="")
    p.add_argument("--no-mirroring", action="store_true", help="no test-time mirroring in the package")
    p.add_argument("--allow-pickle", action="store_true",
                   help="load checkpoints that need full unpickling (runs code: trusted files only)")
    p.add_argument("--primus", metavar="EMBED,DEPTH,HEADS",
                   help="the Primus size a custom Primus trainer builds (nnU-Net's own Primus trainers "
                   "are recognised by name)")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    a = p.parse_args()

    t = load_trained(a.folder, a.folds, a.checkpoint, a.allow_pickle, a.configuration)
    conf_name, cm, dataset, trainer, folds = (t["conf_name"], t["cm"], t["dataset"], t["trainer"],
                                              t["folds"])
    cascade = conf_name.endswith("cascade_fullres") or bool(cm.get("previous_stage"))
    labels_named, n_out = labels_of(dataset)
    axis_order, orientation = image_layout(dataset)
    channels = channel_specs(t)
    n_in = len(channels)
    labels = make_labels(labels_named, load_codes(a.codes))
    if len(labels) + 1 != n_out:
        fail(f"dataset.json has {len(labels)} labels but the network has {n_out} outputs")

    licence = a.license or dataset.get("licence") or dataset.get("license")
    if not licence:
        licence = "unknown"
        warn("no --license and no licence in dataset.json: package licence 'unknown'")
    name = a.name or f"{dataset.get('name', os.path.basename(os.path.dirname(t['folder'])))}-{conf_name}"
    common = {"name": name, "version": a.version}
    export = {"tool": "tools/export_nnunet.py", "source": t["folder"], "configuration": conf_name,
              "folds": folds, "trainer": trainer}

    writer = PackageWriter(a.out, a.force)
    try:
        if cascade:
            stages, prev = cascade_stages(a, t, labels_named, n_out, channels, writer)
            model = {"format_version": 2, **common,
                     "description": a.description or (
                         f"nnU-Net v2 cascade {prev['conf_name']} -> {conf_name} ({trainer}, "
                         f"{t['net_name']}), folds {prev['folds'][0]} / {folds[0]}, exported by "
                         "tools/export_nnunet.py"),
                     "license": licence,
                     "channels": [{"modality": channels[0]["modality"]}],
                     "axis_order": axis_order, "orientation": orientation,
                     "labels": labels, "stages": stages}
            export.update(previous_stage={"source": prev["folder"], "configuration": prev["conf_name"],
                                          "folds": prev["folds"]}, network=t["net_name"])
            summary = (f"cascade {prev['conf_name']} (spacing {stages[0]['spacing_mm']}, patch "
                       f"{stages[0]['patch_size']}) -> {conf_name} (spacing {stages[1]['spacing_mm']}, "
                       f"patch {stages[1]['patch_size']}, {n_in} + {len(labels)} one-hot channels)")
        else:
            files = export_folds(t, n_in, n_out, a.primus, writer,
                                 lambda fold: "model.onnx" if len(t["ckpts"]) == 1 else f"fold_{fold}.onnx")
            patch = [int(v) for v in cm["patch_size"]]
            model = {
                "format_version": 1, **common,
                "description": a.description or (
                    f"nnU-Net v2 {conf_name} ({trainer}, {t['net_name']}), fold{'s' if len(folds) > 1 else ''} "
                    f"{', '.join(folds)}, exported by tools/export_nnunet.py"),
                "license": licence,
                "channels": channels,
                "spacing_mm": [float(s) for s in cm["spacing"]],
                "patch_size": patch,
                "axis_order": axis_order,
                "orientation": orientation,
                "labels": labels,
                "output": "softmax",
                "inference": inference_of(t, a.no_mirroring),
            }
            model.update(model_files_entry(writer, files))
            export["network"] = t["net_name"]
            summary = (f"{len(files)} network(s), {n_in} channel(s), {len(labels)} labels, spacing "
                       f"{model['spacing_mm']} patch {model['patch_size']} ({axis_order}), mirror axes "
                       f"{model['inference']['mirror_axes']}")
        model["_export"] = export
        writer.finish(model)
    except BaseException:
        writer.abort()
        raise
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
