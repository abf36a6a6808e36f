#!/usr/bin/python3
"""Writes the tiny trained-model folders the exporter tests run on (tests/tools/fixtures/), laid
out as the frameworks write them, with seeded random weights (powers_of_two below; nothing is trained; the tests check
that the exported package computes what PyTorch computes, not that it segments anatomy):

  nnunet/Dataset901_TinyResEncL/nnUNetTrainer__nnUNetResEncUNetLPlans__3d_fullres/
      plans.json (nnunetv2 >= 2.4 layout: configurations.3d_fullres.architecture with
      network_class_name ResidualEncoderUNet, arch_kwargs in the ResEnc-L preset's shape: 6 stages,
      n_blocks_per_stage [1,3,4,6,6,6], tiny feature widths), dataset.json, fold_0/checkpoint_final.pth
  nnunet/Dataset902_TinyPrimus/nnUNet_Primus_Tiny_Trainer__nnUNetResEncUNetLPlans__3d_fullres/
      a Primus trainer's folder (the network is the trainer's, not the plans' architecture):
      dynamic_network_architectures Primus with the nnU-Net Primus trainers' settings
      (8x8x8 patches, drop_path 0.2, scale_attn_inner, LayerScale init 0.1) at embed 48, 2 blocks,
      4 heads; export with --primus 48,2,4 (a custom trainer name is not in the exporter's table)
  monai/swinunetr_bundle/   configs/inference.json (network_def SwinUNETR feature_size 12, the
      smallest MONAI allows, roi 64^3), configs/metadata.json, models/model.pt (fp16)
  monai/unetr_bundle/       the same for UNETR (hidden 24, 2 heads, feature_size 4, roi 32^3)

Checkpoints hold only tensors and plain containers (torch.load(weights_only=True) reads them).

    PYTHONPATH=build/pylib /usr/bin/python3 tools/gen_exporter_fixtures.py

Versions as tools/gen_network_golden.py: torch 1.13.1 (Debian), monai 1.4.0,
dynamic_network_architectures 0.4.4, timm 1.0.22, einops 0.8.1.
"""
import json
import math
import re
import pathlib
import shutil

import torch
import torch.nn as nn

SEED = 901
ROOT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "tools" / "fixtures"

RESENC_L_ARCH = {
    "network_class_name": "dynamic_network_architectures.architectures.unet.ResidualEncoderUNet",
    "arch_kwargs": {
        "n_stages": 6, "features_per_stage": [4, 6, 8, 10, 12, 12],
        "conv_op": "torch.nn.modules.conv.Conv3d",
        "kernel_sizes": [[1, 3, 3]] + [[3, 3, 3]] * 5,
        "strides": [[1, 1, 1], [1, 2, 2], [2, 2, 2], [2, 2, 2], [1, 2, 2], [2, 1, 1]],
        "n_blocks_per_stage": [1, 3, 4, 6, 6, 6], "n_conv_per_stage_decoder": [1, 1, 1, 1, 1],
        "conv_bias": True, "norm_op": "torch.nn.modules.instancenorm.InstanceNorm3d",
        "norm_op_kwargs": {"eps": 1e-05, "affine": True}, "dropout_op": None,
        "dropout_op_kwargs": None, "nonlin": "torch.nn.LeakyReLU",
        "nonlin_kwargs": {"inplace": True}},
    "_kw_requires_import": ["conv_op", "norm_op", "dropout_op", "nonlin"]}


def plans(name, plans_name, patch, spacing):
    conf = {
        "data_identifier": f"{plans_name}_3d_fullres", "preprocessor_name": "DefaultPreprocessor",
        "batch_size": 2, "patch_size": patch, "median_image_size_in_voxels": [2 * p for p in patch],
        "spacing": spacing, "normalization_schemes": ["CTNormalization"],
        "use_mask_for_norm": [False],
        "resampling_fn_data": "resample_data_or_seg_to_shape",
        "resampling_fn_seg": "resample_data_or_seg_to_shape",
        "resampling_fn_data_kwargs": {"is_seg": False, "order": 3, "order_z": 0, "force_separate_z": None},
        "resampling_fn_seg_kwargs": {"is_seg": True, "order": 1, "order_z": 0, "force_separate_z": None},
        "resampling_fn_probabilities": "resample_data_or_seg_to_shape",
        "resampling_fn_probabilities_kwargs": {"is_seg": False, "order": 1, "order_z": 0,
                                               "force_separate_z": None},
        "architecture": RESENC_L_ARCH, "batch_dice": False}
    return {"dataset_name": name, "plans_name": plans_name,
            "original_median_spacing_after_transp": spacing,
            "original_median_shape_after_transp": [2 * p for p in patch],
            "image_reader_writer": "SimpleITKIO", "transpose_forward": [0, 1, 2],
            "transpose_backward": [0, 1, 2], "experiment_planner_used": "nnUNetPlannerResEncL",
            "label_manager": "LabelManager",
            "foreground_intensity_properties_per_channel": {"0": {
                "max": 1200.0, "mean": 60.0, "median": 50.0, "min": -1000.0,
                "percentile_00_5": -200.0, "percentile_99_5": 400.0, "std": 120.0}},
            "configurations": {"3d_fullres": conf}}


def dataset(name):
    return {"channel_names": {"0": "CT"}, "labels": {"background": 0, "liver": 1, "spleen": 2},
            "numTraining": 2, "file_ending": ".nii.gz", "name": name, "licence": "CC0-1.0"}


def nnunet_folder(dataset_dir, trainer, plans_name, plans_json, net, gen):
    folder = ROOT / "nnunet" / dataset_dir / f"{trainer}__{plans_name}__3d_fullres"
    ds = dataset(dataset_dir.split("_", 1)[1])
    (folder / "fold_0").mkdir(parents=True)
    (folder / "plans.json").write_text(json.dumps(plans_json, indent=2) + "\n")
    (folder / "dataset.json").write_text(json.dumps(ds, indent=2) + "\n")
    ckpt = {"network_weights": powers_of_two(net, gen, torch.float32), "optimizer_state": {}, "grad_scaler_state": None,
            "logging": {}, "_best_ema": None, "current_epoch": 1000, "trainer_name": trainer,
            "init_args": {"plans": plans_json, "configuration": "3d_fullres", "fold": 0,
                          "dataset_json": ds},
            "inference_allowed_mirroring_axes": (0, 1, 2)}
    torch.save(ckpt, folder / "fold_0" / "checkpoint_final.pth")


def resenc_l(gen):
    from dynamic_network_architectures.architectures.unet import ResidualEncoderUNet
    a = RESENC_L_ARCH["arch_kwargs"]
    net = ResidualEncoderUNet(
        1, a["n_stages"], a["features_per_stage"], nn.Conv3d, a["kernel_sizes"], a["strides"],
        a["n_blocks_per_stage"], 3, a["n_conv_per_stage_decoder"], True, nn.InstanceNorm3d,
        a["norm_op_kwargs"], None, None, nn.LeakyReLU, a["nonlin_kwargs"], deep_supervision=True)
    p = plans("Dataset901_TinyResEncL", "nnUNetResEncUNetLPlans", [16, 32, 48], [2.5, 0.8, 0.7])
    nnunet_folder("Dataset901_TinyResEncL", "nnUNetTrainer", "nnUNetResEncUNetLPlans", p, net, gen)


def primus(gen):
    from dynamic_network_architectures.architectures.primus import Primus
    net = Primus(1, 48, (8, 8, 8), 3, 2, 4, (32, 32, 32), drop_path_rate=0.2,
                 scale_attn_inner=True, init_values=0.1)
    p = plans("Dataset902_TinyPrimus", "nnUNetResEncUNetLPlans", [32, 32, 32], [1.0, 1.0, 1.0])
    nnunet_folder("Dataset902_TinyPrimus", "nnUNet_Primus_Tiny_Trainer", "nnUNetResEncUNetLPlans",
                  p, net, gen)


def bundle(name, net_def, roi, pixdim, labels, state_dict):
    folder = ROOT / "monai" / name
    (folder / "configs").mkdir(parents=True)
    (folder / "models").mkdir()
    pre = [{"_target_": "LoadImaged", "keys": "image"},
           {"_target_": "EnsureChannelFirstd", "keys": "image"},
           {"_target_": "Orientationd", "keys": "image", "axcodes": "RAS"},
           {"_target_": "Spacingd", "keys": "image", "pixdim": pixdim, "mode": "bilinear"},
           {"_target_": "ScaleIntensityRanged", "keys": "image", "a_min": -175, "a_max": 250,
            "b_min": 0.0, "b_max": 1.0, "clip": True},
           {"_target_": "EnsureTyped", "keys": "image"}]
    cfg = {"bundle_root": ".", "network_def": net_def,
           "network": "$@network_def.to(@device)", "device": "$torch.device('cpu')",
           "preprocessing": {"_target_": "Compose", "transforms": pre},
           "inferer": {"_target_": "SlidingWindowInferer", "roi_size": roi, "sw_batch_size": 1,
                       "overlap": 0.5, "mode": "gaussian", "sigma_scale": 0.125},
           "postprocessing": {"_target_": "Compose", "transforms": [
               {"_target_": "Activationsd", "keys": "pred", "softmax": True},
               {"_target_": "AsDiscreted", "keys": "pred", "argmax": True}]}}
    (folder / "configs" / "inference.json").write_text(json.dumps(cfg, indent=2) + "\n")
    meta = {"name": name.replace("_", " "), "version": "0.1.0", "license": "CC0-1.0",
            "description": "random weights, for tests/tools only",
            "network_data_format": {
                "inputs": {"image": {"modality": "CT", "num_channels": 1}},
                "outputs": {"pred": {"num_channels": len(labels),
                                     "channel_def": {str(i): n for i, n in enumerate(labels)}}}}}
    (folder / "configs" / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
    torch.save(state_dict, folder / "models" / "model.pt")


def powers_of_two(net, gen, dtype=torch.float16):
    """Every weight +-2^-k (k in 1..6 plus half of log2 of the fan-in, zero for 1 in 8; norm
    scales 1 +- 2^-k-1), stored as `dtype`: an exactly representable state dict git packs to a
    fraction of its size, that still computes something nontrivial."""
    with torch.no_grad():
        for k, v in net.state_dict().items():  # in place: shared modules stay shared
            if not v.is_floating_point() or v.dim() == 0:
                continue
            fan_in = v[0].numel() if v.dim() >= 2 else 1
            shift = round(0.5 * math.log2(fan_in))
            mag = torch.pow(2.0, -(shift + torch.randint(1, 7, v.shape, generator=gen)).float())
            sign = torch.where(torch.rand(v.shape, generator=gen) < 0.5, -1.0, 1.0)
            keep = (torch.rand(v.shape, generator=gen) >= 0.125).float()
            v.copy_(1.0 + 0.5 * sign * mag if re.search(r"norm\d?\.weight$|gamma_\d$", k)
                    else sign * mag * keep)
    return {k: v.to(dtype) if v.is_floating_point() else v for k, v in net.state_dict().items()}


def swinunetr(gen):
    from monai.networks.nets import SwinUNETR
    net_def = {"_target_": "SwinUNETR", "img_size": [64, 64, 64], "in_channels": 1,
               "out_channels": 3, "feature_size": 12, "use_checkpoint": False}
    net = SwinUNETR(img_size=(64, 64, 64), in_channels=1, out_channels=3, feature_size=12)
    bundle("swinunetr_bundle", net_def, [64, 64, 64], [1.5, 1.5, 2.0],
           ["background", "liver", "spleen"], powers_of_two(net, gen))


def unetr(gen):
    from monai.networks.nets import UNETR
    kw = {"in_channels": 1, "out_channels": 3, "img_size": [32, 32, 32], "feature_size": 4,
          "hidden_size": 24, "mlp_dim": 48, "num_heads": 2, "norm_name": "instance",
          "res_block": True}
    bundle("unetr_bundle", {"_target_": "UNETR", **kw}, [32, 32, 32], [1.5, 1.5, 2.0],
           ["background", "liver", "spleen"], powers_of_two(UNETR(**kw), gen))


def main():
    if ROOT.exists():
        shutil.rmtree(ROOT)
    for make in (resenc_l, primus, swinunetr, unetr):
        torch.manual_seed(SEED)
        make(torch.Generator().manual_seed(SEED))
    for p in sorted(ROOT.rglob("*")):
        if p.is_file():
            print(f"{p.stat().st_size:>10}  {p.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
