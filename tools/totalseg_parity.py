#!/usr/bin/env python3
"""Parity with TotalSegmentator 2.18.0 itself (issue 37 item 4): fabricated weights, real CLI.

Stages (each run alone; the weights and TotalSegmentator's scratch stay outside the repo):
  phantom    `voxseg phantom` (seeded) plus one dense sphere (see DENSE_*) -> a small CT, NIfTI
             int16 with the LPS affine a DICOM conversion gives: the parity input
             (tests/pipeline/data/totalseg/ct.nii.gz).
  fabricate  writes seeded random nnU-Net v2 models in TotalSegmentator's exact folder layout
             under --out (use it as TOTALSEG_WEIGHTS_PATH): task "total"'s five part datasets
             291-295 (nnUNetTrainerNoMirroring, 1.5 mm, nnU-Net's older plans format as the
             released weights have it) and the --fast / --fastest datasets 297 / 298
             (nnUNetTrainer_4000epochs_NoMirroring, 3 mm / 6 mm, the current plans format with
             "architecture"). Labels and ids: TotalSegmentator's class_map_5_parts and
             class_map["total"]. Small PlainConvUNets with non-trivial InstanceNorm affines; the
             final 1x1 convolution is random, fitted on the features nnU-Net's own sliding
             window computes on --ct so that every class wins somewhere (background: 55 % in
             the parts, 20 % in 297/298), and scaled so that the argmax is decisive. In 298 one
             class is planted on the dense sphere and one never wins (the --roi_subset crop).
             Writes <out>/fabricate.json: per dataset the classes present, the top-1/top-2
             logit margins of nnU-Net's float16 sliding-window logits, the planted region.
  run-ts     runs the unmodified TotalSegmentator CLI (--ml --device cpu) with
             TOTALSEG_WEIGHTS_PATH=--weights and a private TOTALSEG_HOME_DIR whose config.json
             turns usage statistics off (every dataset exists, so nothing is downloaded):
             default and --fast (+ --statistics --stats_include_incomplete), --fastest,
             --roi_subset (+ --statistics). Copies
             the multilabel maps and statistics.json to --golden and writes runs.json (command,
             version, wall time, label counts, the roi crop TotalSegmentator printed); copies
             the weights' fabricate.json there too.
  export     tools/export_totalsegmentator.py on --weights: the total, total_fast and
             total_fastest packages under <golden>/packages (the crop model kept once)
The comparison is the ctest totalseg_parity_test (docs/parity-totalseg.md).

All stages need the venv with totalsegmentator 2.18.0 (torch, nnunetv2;
not CI):

    /tmp/tsvenv/bin/python tools/totalseg_parity.py phantom --voxseg build/app/voxseg
    /tmp/tsvenv/bin/python tools/totalseg_parity.py fabricate --out /tmp/tsweights --seed 37
    /tmp/tsvenv/bin/python tools/totalseg_parity.py run-ts --weights /tmp/tsweights \\
        --ts /tmp/tsvenv/bin/TotalSegmentator

tests/pipeline/data/totalseg/README.md has the exact commands that made the committed goldens.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "../tests/pipeline/data/totalseg")
DEFAULT_CT = os.path.join(GOLDEN, "ct.nii.gz")

PARTS_TRAINER = "nnUNetTrainerNoMirroring"
LOWRES_TRAINER = "nnUNetTrainer_4000epochs_NoMirroring"
PLANS = "nnUNetPlans"
CONFIG = "3d_fullres"

# Dataset id -> (folder name TotalSegmentator 2.18.0 looks for (map_tasks_config.py
# TASK_ID_WEIGHTS_CONFIGS), trainer, spacing mm, patch, plans format, features per stage)
DATASETS = {
    291: ("Dataset291_TotalSegmentator_part1_organs_1559subj", PARTS_TRAINER, 1.5, 64, "old", None),
    292: ("Dataset292_TotalSegmentator_part2_vertebrae_1532subj", PARTS_TRAINER, 1.5, 64, "old", None),
    293: ("Dataset293_TotalSegmentator_part3_cardiac_1559subj", PARTS_TRAINER, 1.5, 64, "old", None),
    294: ("Dataset294_TotalSegmentator_part4_muscles_1559subj", PARTS_TRAINER, 1.5, 64, "old", None),
    295: ("Dataset295_TotalSegmentator_part5_ribs_1559subj", PARTS_TRAINER, 1.5, 64, "old", None),
    297: ("Dataset297_TotalSegmentator_total_3mm_1559subj", LOWRES_TRAINER, 3.0, 32, "new",
          [16, 32, 32, 32]),
    298: ("Dataset298_TotalSegmentator_total_6mm_1559subj", LOWRES_TRAINER, 6.0, 24, "new",
          [16, 24, 32, 32]),
    # a crop task: lung_nodules crops to the five lung lobes of 298's output (+20 mm)
    # (3 features in the first stage: the final layer is fitted on them, one per class at most)
    913: ("Dataset913_lung_nodules", "nnUNetTrainer_MOSAIC_1k_QuarterLR_NoMirroring", 1.5, 48,
          "new", [3, 24, 32, 32]),
    # a crop task without TotalSegmentator's resampling (nnU-Net resamples the crop itself)
    258: ("Dataset258_lung_vessels_248subj", "nnUNetTrainer", 1.5, 48, "new", [3, 24, 32, 32]),
    299: ("Dataset299_body_1559subj", "nnUNetTrainer", 1.5, 48, "new", [3, 24, 32, 32]),
    300: ("Dataset300_body_6mm_1559subj", "nnUNetTrainer", 6.0, 24, "new", [3, 16, 24, 32]),
    # total_v3's five parts (v3.0.0 weights; plans format assumed current)
    831: ("Dataset831_TotalSegmentator_part1_organs_1830subj", PARTS_TRAINER, 1.5, 64, "new",
          [16, 32, 32, 32]),
    832: ("Dataset832_TotalSegmentator_part2_vertebrae_1559subj", PARTS_TRAINER, 1.5, 64, "new",
          [16, 32, 32, 32]),
    833: ("Dataset833_TotalSegmentator_part3_cardiac_1830subj", PARTS_TRAINER, 1.5, 64, "new",
          [16, 32, 32, 32]),
    834: ("Dataset834_TotalSegmentator_part4_muscles_1830subj", PARTS_TRAINER, 1.5, 64, "new",
          [16, 32, 32, 32]),
    835: ("Dataset835_TotalSegmentator_part5_ribs_1559subj", PARTS_TRAINER, 1.5, 64, "new",
          [16, 32, 32, 32]),
    # headneck_muscles: two parts, nnU-Net's 3d_fullres_high configuration, anisotropic spacing
    # (z, y, x as nnU-Net's plans hold it; TotalSegmentator's [0.75, 0.75, 1.0] is x, y, z),
    # cropped to the clavicles and C1-T4 of 298's output
    778: ("Dataset778_headneck_muscles_part1_492subj", "nnUNetTrainer_DASegOrd0_NoMirroring",
          [1.0, 0.75, 0.75], 48, "new", [8, 24, 32, 32]),
    779: ("Dataset779_headneck_muscles_part2_492subj", "nnUNetTrainer_DASegOrd0_NoMirroring",
          [1.0, 0.75, 0.75], 48, "new", [8, 24, 32, 32]),
}
# body (1.5 mm) and its --fast model (6 mm): one network each, then TotalSegmentator's body
# post-processing (largest body_trunc blob, no body_extremities blob of 50 mL or less)
SINGLE_TASKS = {299: "body", 300: "body"}
# Multi-part tasks beyond "total": dataset -> (task, its class_map_*parts* table, its
# map_taskid_to_partname_* table) in TotalSegmentator's map_to_binary.py
PART_TASKS = {**{d: ("total_v3", "class_map_5_parts_total_v3", "map_taskid_to_partname_ct_v3")
                 for d in range(831, 836)},
              **{d: ("headneck_muscles", "class_map_parts_headneck_muscles",
                     "map_taskid_to_partname_headneck_muscles") for d in (778, 779)}}
CONFIG_OF = {778: "3d_fullres_high", 779: "3d_fullres_high"}  # else CONFIG
# Crop tasks run as TotalSegmentator runs them: dataset -> task (both crop to the lung lobes)
CROP_TASKS = {913: "lung_nodules", 258: "lung_vessels_LEGACY"}
# Old plans format: features = min(BASE * 2^i, MAX) over N_STAGES stages.
OLD_BASE_FEATURES, OLD_MAX_FEATURES, N_STAGES = 16, 32, 4
# Background share the balanced final layer aims at: the parts leave room for the merge's
# overwrite rule (later parts overwrite earlier ones where they are not background).
BG_TARGET = {"part": 0.55, "total": 0.2, "crop_task": 0.5}
LOGIT_STD = 8.0  # spread of the final logits across classes after scaling
# --roi_subset: TotalSegmentator crops to the 6 mm model's (298) region of the roi classes
# (+20 mm). Balanced random classes are scattered over the whole image, and random features
# do not single out an organ, so the phantom gets one dense object (DENSE_HU, a sphere of
# DENSE_RADIUS_MM at DENSE_CENTER_VOX) and in 298 one class is planted on it (a linear
# discriminant of the features nnU-Net computes on the CT) while another never wins.
# --roi_subset with both then crops to the object and still runs two of the five parts
# (organs and ribs) there.
DENSE_HU, DENSE_RADIUS_MM, DENSE_CENTER_VOX = 2000, 20.0, (70, 30, 36)
PLANTED = "lung_upper_lobe_left"
# rib_left_4: a --roi_subset class outside the object; the other lobes: so that lung_nodules'
# crop (the five lobes) is the object's box too, not the whole image
SUPPRESSED = ["rib_left_4", "lung_lower_lobe_left", "lung_upper_lobe_right", "lung_middle_lobe_right",
              "lung_lower_lobe_right"]
ROI_SUBSET = ["lung_upper_lobe_left", "rib_left_4"]
PLANT_SHARE = 0.15  # the planted class wins in about this share of the object's voxel count


def dataset_dir(root, did):
    name, trainer = DATASETS[did][:2]
    return os.path.join(root, name, f"{trainer}__{PLANS}__{CONFIG_OF.get(did, CONFIG)}")


def labels_for(did):
    """nnU-Net dataset.json labels: TotalSegmentator's ids for this dataset's outputs."""
    from totalsegmentator import map_to_binary as mb
    from totalsegmentator.map_to_binary import class_map, class_map_5_parts, map_taskid_to_partname_ct
    if did in PART_TASKS:
        _, parts, names = PART_TASKS[did]
        cmap = getattr(mb, parts)[getattr(mb, names)[did]]
    elif did in CROP_TASKS or did in SINGLE_TASKS:
        cmap = class_map[CROP_TASKS.get(did) or SINGLE_TASKS[did]]
    else:
        cmap = class_map_5_parts[map_taskid_to_partname_ct[did]] if did <= 295 else class_map["total"]
    ids = sorted(cmap)
    assert ids == list(range(1, len(ids) + 1)), f"dataset {did}: label ids not consecutive"
    return {"background": 0, **{cmap[i]: i for i in ids}}


def intensity_properties(did):
    """Plausible CT foreground statistics (HU), a little different for every dataset."""
    k = did - 290 if 290 < did < 300 else did % 7  # 1-8 for 291-298, 3 for 913, 6 for 258
    return {"0": {"max": 3071.0, "mean": 40.0 + 7.0 * k, "median": 35.0 + 5.0 * k, "min": -1024.0,
                  "percentile_00_5": -960.0 + 11.0 * k, "percentile_99_5": 1200.0 + 37.0 * k,
                  "std": 240.0 + 9.0 * k}}


def make_plans(did):
    name, _, spacing, patch, fmt, features = DATASETS[did]
    config = CONFIG_OF.get(did, CONFIG)
    spacing = list(spacing) if isinstance(spacing, list) else [spacing] * 3
    median_shape = [int(400 / s_) for s_ in spacing]
    strides = [[1, 1, 1]] + [[2, 2, 2]] * (N_STAGES - 1)
    kernels = [[3, 3, 3]] * N_STAGES
    conf = {
        "data_identifier": f"{PLANS}_{config}",
        "preprocessor_name": "DefaultPreprocessor",
        "batch_size": 2,
        "patch_size": [patch] * 3,
        "median_image_size_in_voxels": median_shape,
        "spacing": spacing,
        "normalization_schemes": ["CTNormalization"],
        "use_mask_for_norm": [False],
        "resampling_fn_data": "resample_data_or_seg_to_shape",
        "resampling_fn_seg": "resample_data_or_seg_to_shape",
        "resampling_fn_data_kwargs": {"is_seg": False, "order": 3, "order_z": 0, "force_separate_z": None},
        "resampling_fn_seg_kwargs": {"is_seg": True, "order": 1, "order_z": 0, "force_separate_z": None},
        "resampling_fn_probabilities": "resample_data_or_seg_to_shape",
        "resampling_fn_probabilities_kwargs": {"is_seg": False, "order": 1, "order_z": 0,
                                               "force_separate_z": None},
        "batch_dice": False,
    }
    if fmt == "old":  # nnU-Net v2 before "architecture" (TotalSegmentator's released 291-295)
        conf.update({
            "UNet_class_name": "PlainConvUNet",
            "UNet_base_num_features": OLD_BASE_FEATURES,
            "n_conv_per_stage_encoder": [2] * N_STAGES,
            "n_conv_per_stage_decoder": [2] * (N_STAGES - 1),
            "num_pool_per_axis": [N_STAGES - 1] * 3,
            "pool_op_kernel_sizes": strides,
            "conv_kernel_sizes": kernels,
            "unet_max_num_features": OLD_MAX_FEATURES,
        })
    else:
        conf["architecture"] = {
            "network_class_name": "dynamic_network_architectures.architectures.unet.PlainConvUNet",
            "arch_kwargs": {
                "n_stages": N_STAGES, "features_per_stage": features,
                "conv_op": "torch.nn.modules.conv.Conv3d", "kernel_sizes": kernels, "strides": strides,
                "n_conv_per_stage": [2] * N_STAGES, "n_conv_per_stage_decoder": [2] * (N_STAGES - 1),
                "conv_bias": True, "norm_op": "torch.nn.modules.instancenorm.InstanceNorm3d",
                "norm_op_kwargs": {"eps": 1e-05, "affine": True}, "dropout_op": None,
                "dropout_op_kwargs": None, "nonlin": "torch.nn.LeakyReLU",
                "nonlin_kwargs": {"inplace": True}},
            "_kw_requires_import": ["conv_op", "norm_op", "dropout_op", "nonlin"],
        }
    return {
        "dataset_name": name,
        "plans_name": PLANS,
        "original_median_spacing_after_transp": spacing,
        "original_median_shape_after_transp": median_shape,
        "image_reader_writer": "SimpleITKIO",
        "transpose_forward": [0, 1, 2],
        "transpose_backward": [0, 1, 2],
        "configurations": {config: conf},
        "experiment_planner_used": "ExperimentPlanner",
        "label_manager": "LabelManager",
        "foreground_intensity_properties_per_channel": intensity_properties(did),
    }


def make_dataset_json(did):
    return {"name": DATASETS[did][0][len("Dataset000_"):], "channel_names": {"0": "CT"},
            "labels": labels_for(did), "numTraining": 1559, "file_ending": ".nii.gz",
            "description": "FABRICATED seeded random weights for parity tests (tools/totalseg_parity.py); "
                           "not TotalSegmentator's trained model"}


def build_network(plans, dataset_json, trainer_name):
    """The network exactly as nnUNetPredictor builds it (old plans are converted by nnU-Net)."""
    import copy
    import inspect
    # TotalSegmentator's custom trainers (e.g. dataset 913's) join nnU-Net's class lookup on
    # import, as they do when TotalSegmentator itself runs
    import totalsegmentator.nnunet  # noqa: F401
    from nnunetv2.inference.predict_from_raw_data import recursive_find_trainer_class_by_name
    from nnunetv2.utilities.label_handling.label_handling import determine_num_input_channels
    from nnunetv2.utilities.plans_handling.plans_handler import PlansManager
    pm = PlansManager(copy.deepcopy(plans))
    cm = pm.get_configuration(config_name(plans))
    n_in = determine_num_input_channels(pm, cm, dataset_json)
    n_out = pm.get_label_manager(dataset_json).num_segmentation_heads
    trainer = recursive_find_trainer_class_by_name(trainer_name)
    if "plans_manager" in inspect.signature(trainer.build_network_architecture).parameters:
        return trainer.build_network_architecture(pm, cm, n_in, n_out, enable_deep_supervision=True)
    return trainer.build_network_architecture(cm.network_arch_class_name, cm.network_arch_init_kwargs,
                                              cm.network_arch_init_kwargs_req_import, n_in, n_out,
                                              enable_deep_supervision=True)


def randomize(net, gen):
    """Seeded He-normal (transposed) convolutions, small biases, InstanceNorm affines away
    from 1/0. Every parameter is set here (none keeps torch's default initialisation)."""
    import torch
    done = set()
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, (torch.nn.Conv3d, torch.nn.ConvTranspose3d)):
                done.update(id(p) for p in m.parameters())
                fan_in = m.weight[0].numel()
                if isinstance(m, torch.nn.ConvTranspose3d):  # [in, out, k...]: in x k^3 / stride^3
                    fan_in = m.weight.shape[0] * int(np.prod(m.kernel_size) / np.prod(m.stride))
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * np.sqrt(2.0 / fan_in))
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.05)
            elif isinstance(m, torch.nn.InstanceNorm3d):
                done.update(id(p) for p in m.parameters())
                m.weight.copy_(0.6 + 0.8 * torch.rand(m.weight.shape, generator=gen))
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.2)
    missed = [n for n, p in net.named_parameters() if id(p) not in done]
    assert not missed, f"parameters left at torch's default initialisation: {missed}"


def config_name(plans):
    """The one nnU-Net configuration a fabricated plans.json holds."""
    (name,) = plans["configurations"]
    return name


def spacing_xyz(plans):
    """The model's spacing in nibabel's (x, y, z) order (plans hold z, y, x)."""
    return list(plans["configurations"][config_name(plans)]["spacing"][::-1])


def model_input(ct_path, plans):
    """The CT as the model sees it in TotalSegmentator: canonical, resampled to the model's
    spacing (TotalSegmentator's change_spacing, order 1), [z, y, x] as SimpleITK reads it,
    CT-normalised. Only used to balance the final layer, so close is enough."""
    import nibabel as nib
    from totalsegmentator.resampling import change_spacing
    img = nib.as_closest_canonical(nib.load(ct_path))
    img = change_spacing(img, spacing_xyz(plans), order=1, dtype=np.int32, nr_cpus=1)
    data = np.asanyarray(img.dataobj).astype(np.float32).transpose(2, 1, 0)
    p = plans["foreground_intensity_properties_per_channel"]["0"]
    data = (np.clip(data, p["percentile_00_5"], p["percentile_99_5"]) - p["mean"]) / max(p["std"], 1e-8)
    return data


def dense_mask(ct_path, plans):
    """Voxels of the phantom's dense object on the model's grid ([z, y, x] raveled)."""
    import nibabel as nib
    from totalsegmentator.resampling import change_spacing
    img = nib.as_closest_canonical(nib.load(ct_path))
    img = change_spacing(img, spacing_xyz(plans), order=1, dtype=np.int32, nr_cpus=1)
    return (np.asanyarray(img.dataobj).transpose(2, 1, 0) >= DENSE_HU * 0.75).ravel()


def predictor_for(root, did):
    """nnU-Net's own predictor on the folder, as TotalSegmentator configures it for "total"
    (step 0.8, Gaussian, no mirroring); says whether nnU-Net converted old-format plans."""
    import warnings
    import torch
    from nnunetv2.inference.predict_from_raw_data import nnUNetPredictor
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = nnUNetPredictor(tile_step_size=0.8, use_gaussian=True, use_mirroring=False,
                            perform_everything_on_device=False, device=torch.device("cpu"),
                            verbose=False, allow_tqdm=False)
        p.initialize_from_trained_model_folder(dataset_dir(root, did), use_folds=[0],
                                               checkpoint_name="checkpoint_final.pth")
    old = any("old nnU-Net plans format" in str(w.message) for w in caught)
    return p, old


def set_head(head, w, b):
    import torch
    with torch.no_grad():
        head.weight.copy_(torch.from_numpy(np.asarray(w).reshape(head.weight.shape)).float())
        head.bias.copy_(torch.from_numpy(np.asarray(b)).float())


def sliding_logits(p, data):
    """nnU-Net's float16 sliding-window sum over the whole model input -> [K, N] float64."""
    import torch
    out = p.predict_sliding_window_return_logits(torch.from_numpy(data)[None]).float().numpy()
    return out.reshape(out.shape[0], -1).astype(np.float64)


def balance_head(feats, n_cls, bg_share, rng, planted=None, suppressed=()):
    """Random final layer: zero-mean over classes (logits stay small, so float16 sums keep
    their resolution), biases fitted so that background takes about bg_share and every other
    class an equal part of the rest, then scaled to LOGIT_STD. planted: {class: voxel mask}:
    that class's weights are the features' linear discriminant of the mask (6x the spread of
    the others), its share PLANT_SHARE of the mask's (the most certain voxels); suppressed
    classes never win."""
    c = feats.shape[0]
    planted = planted or {}
    mu, sd = feats.mean(1, keepdims=True), feats.std(1, keepdims=True) + 1e-6
    w = rng.normal(size=(n_cls, c)) / sd.T
    w -= w.mean(0, keepdims=True)
    b = -(w @ mu)[:, 0]
    free = [k for k in range(1, n_cls) if k not in planted and k not in suppressed]
    target = np.zeros(n_cls)
    target[0] = bg_share
    for k, mask in planted.items():
        target[k] = PLANT_SHARE * mask.mean()
    target[free] = (1 - target.sum()) / len(free)
    scale = 1.0 / (w @ feats).std()
    cov = np.cov(feats) + 1e-6 * np.eye(c)
    for k, mask in planted.items():
        lda = np.linalg.solve(cov, feats[:, mask].mean(1) - feats[:, ~mask].mean(1))
        w[k] = lda * 6.0 / ((lda @ feats).std() * scale)
        b[k] = -(w[k] @ mu)[0]
    idx = rng.choice(feats.shape[1], size=min(feats.shape[1], 120000), replace=False)
    for k, mask in planted.items():  # every voxel of a planted region takes part
        idx = np.union1d(idx, np.flatnonzero(mask))
    sample = feats[:, idx]
    z = w @ sample
    fit = [k for k in range(n_cls) if k not in suppressed]
    for it in range(800):
        logits = (z + b[:, None]) * scale
        logits[list(suppressed)] = -np.inf
        freq = np.bincount(logits.argmax(0), minlength=n_cls) / logits.shape[1]
        step = 0.3 * 0.995 ** it / scale
        b[fit] += step * np.clip(np.log(target[fit]) - np.log(freq[fit] + 0.5 / sample.shape[1]), -2, 2)
        b[fit] -= b[fit].mean()
    s = LOGIT_STD * scale
    w, b = w * s, b * s
    for k in suppressed:
        w[k], b[k] = 0.0, -4.0 * LOGIT_STD
    return w, b


def margin_stats(logits):
    """Top-1/top-2 margins; 'fragile': margin under 4 float16 ulps of the top logit."""
    top = np.sort(logits, axis=0)[-2:]
    m = top[1] - top[0]
    ulp = np.spacing(np.abs(top[1]).astype(np.float16)).astype(np.float64)
    return {"margin_median": round(float(np.median(m)), 3),
            "margin_p01": round(float(np.percentile(m, 1)), 4),
            "fp16_fragile_share": round(float((m < 4 * ulp).mean()), 5),
            "max_abs_logit": round(float(np.abs(logits).max()), 2)}


def planted_stats(logits, planted, suppressed, shape):
    if not planted and not suppressed:
        return {}
    am = logits.argmax(0)
    out = {"suppressed_present": int(np.isin(am, suppressed).sum())}
    for k, mask in planted.items():
        win = am == k
        at = np.argwhere(win.reshape(shape))
        out[f"planted_{k}"] = {"region": int(mask.sum()), "wins": int(win.sum()),
                               "wins_in_region": int((win & mask).sum()),
                               "wins_bbox_zyx": [at.min(0).tolist(), at.max(0).tolist()]}
    return out


def save_checkpoint(path, net, plans, ds, trainer):
    import torch
    torch.save({
        "network_weights": net.state_dict(),
        "optimizer_state": None,
        "grad_scaler_state": None,
        "logging": {},
        "_best_ema": None,
        "current_epoch": 4000 if trainer == LOWRES_TRAINER else 1000,
        "init_args": {"plans": plans, "configuration": config_name(plans), "fold": 0, "dataset_json": ds,
                      "device": torch.device("cpu")},
        "trainer_name": trainer,
        "inference_allowed_mirroring_axes": None,
    }, path)


def fabricate_one(root, did, seed, ct):
    """Writes one dataset folder. The final layer is fitted on the features nnU-Net's own
    sliding window produces on the CT (first with an identity head), so the balance holds for
    TotalSegmentator's run, not only for a whole-volume forward pass."""
    import torch
    out = dataset_dir(root, did)
    os.makedirs(os.path.join(out, "fold_0"), exist_ok=True)
    ckpt = os.path.join(out, "fold_0", "checkpoint_final.pth")
    plans, ds = make_plans(did), make_dataset_json(did)
    trainer = DATASETS[did][1]
    with open(os.path.join(out, "plans.json"), "w") as f:
        json.dump(plans, f, indent=4)
    with open(os.path.join(out, "dataset.json"), "w") as f:
        json.dump(ds, f, indent=4)
    net = build_network(plans, ds, trainer)
    randomize(net, torch.Generator().manual_seed(seed * 1000 + did))
    n_cls = len(ds["labels"])
    head = net.decoder.seg_layers[-1]
    c = head.weight.shape[1]
    assert c <= n_cls
    set_head(head, np.eye(n_cls, c), np.zeros(n_cls))  # logits[:c] = the features
    save_checkpoint(ckpt, net, plans, ds, trainer)
    p, old = predictor_for(root, did)
    data = model_input(ct, plans)
    feats = sliding_logits(p, data)[:c]
    planted, suppressed = {}, []
    if did == 298:
        planted = {ds["labels"][PLANTED]: dense_mask(ct, plans)}
        suppressed = [ds["labels"][name] for name in SUPPRESSED]
    kind = "part" if did <= 295 or did in PART_TASKS or did in SINGLE_TASKS else ("crop_task" if did in CROP_TASKS else "total")
    w, b = balance_head(feats, n_cls, BG_TARGET[kind],
                        np.random.default_rng(seed * 1000 + did), planted, suppressed)
    set_head(head, w, b)
    save_checkpoint(ckpt, net, plans, ds, trainer)
    p, old = predictor_for(root, did)  # reload: what TotalSegmentator will load
    logits = sliding_logits(p, data)
    counts = np.bincount(logits.argmax(0), minlength=n_cls)
    return {"dataset": DATASETS[did][0], "trainer": trainer, "plans_format": DATASETS[did][4],
            "nnunet_converted_old_plans": old, "spacing": DATASETS[did][2],
            "patch": [DATASETS[did][3]] * 3, "features_per_stage": list(net.encoder.output_channels),
            "parameters": int(sum(q.numel() for q in net.parameters())), "classes": n_cls,
            "model_input_shape_zyx": list(data.shape), "classes_present": int((counts > 0).sum()),
            "background_share": round(float(counts[0] / counts.sum()), 3),
            **planted_stats(logits, planted, suppressed, data.shape), **margin_stats(logits)}


def stage_fabricate(a):
    import torch
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    os.makedirs(a.out, exist_ok=True)
    report = {"seed": a.seed, "ct": os.path.relpath(a.ct, os.path.join(HERE, "..")),
              "weights_root": os.path.abspath(a.out), "datasets": {}}
    path = os.path.join(a.out, "fabricate.json")
    if a.datasets and os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
        if old.get("seed") == a.seed:
            report["datasets"] = old["datasets"]
    for did in a.datasets or DATASETS:
        info = fabricate_one(a.out, did, a.seed, a.ct)
        report["datasets"][str(did)] = info
        print(did, json.dumps(info), flush=True)
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
    print(f"weights root: {os.path.abspath(a.out)} (TOTALSEG_WEIGHTS_PATH)")


def stage_phantom(a):
    """voxseg's own CT phantom plus the dense sphere (DENSE_*), NIfTI int16 with the LPS
    affine voxseg writes (as a DICOM conversion gives)."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([a.voxseg, "phantom", os.path.join(tmp, "p"), "--seed", str(a.phantom_seed),
                        "--size", a.size, "--spacing", a.spacing, "--outputs", "image",
                        "--threads", "1"], check=True)
        os.makedirs(os.path.dirname(os.path.abspath(a.ct)), exist_ok=True)
        import nibabel as nib
        img = nib.load(os.path.join(tmp, "p", "image.nii.gz"))
        data = np.asanyarray(img.dataobj).copy()
        zooms = np.array(img.header.get_zooms()[:3])
        grid = np.stack(np.meshgrid(*[np.arange(n) for n in data.shape], indexing="ij"), -1)
        r = np.linalg.norm((grid - np.array(DENSE_CENTER_VOX)) * zooms, axis=-1)
        data[r <= DENSE_RADIUS_MM] = DENSE_HU
        out = nib.Nifti1Image(data, img.affine, img.header)
        out.set_data_dtype(np.int16)
        nib.save(out, a.ct)
        shutil.copyfile(os.path.join(tmp, "p", "phantom.json"), a.ct.replace(".nii.gz", ".json"))
    print(f"phantom -> {a.ct}")


# name, CLI options, golden file names (multilabel map, statistics or None). Every class of a
# random network touches the image border somewhere, and --statistics reports such masks as 0
# (its default rule), so the total and fast runs add --stats_include_incomplete; the roi run
# (classes inside the crop) keeps the default rule.
def ts_runs(roi):
    return [
        ("total", ["--statistics", "--stats_include_incomplete"], "total.nii.gz",
         "total_statistics.json"),
        ("fast", ["--fast", "--statistics", "--stats_include_incomplete"], "total_fast.nii.gz",
         "total_fast_statistics.json"),
        ("fastest", ["--fastest"], "total_fastest.nii.gz", None),
        ("roi", ["--roi_subset"] + roi + ["--statistics"], "total_roi.nii.gz",
         "total_roi_statistics.json"),
        ("crop_task", ["-ta", CROP_TASKS[913]], f"{CROP_TASKS[913]}.nii.gz", None),
        ("crop_task_nnunet", ["-ta", CROP_TASKS[258]], f"{CROP_TASKS[258]}.nii.gz", None),
        ("total_v3", ["-ta", "total_v3"], "total_v3.nii.gz", None),
        ("body", ["-ta", "body"], "body.nii.gz", None),
        ("body_fast", ["-ta", "body", "--fast"], "body_fast.nii.gz", None),
        ("headneck_muscles", ["-ta", "headneck_muscles"], "headneck_muscles.nii.gz", None),
    ]


# Runs that are not CI goldens (docs/parity-totalseg.md: checked once with --only and a
# --golden folder outside the repository); a plain run-ts leaves them out.
CHECKED_ONCE = ("total_v3", "headneck_muscles")


def label_summary(path):
    import nibabel as nib
    d = np.asanyarray(nib.load(path).dataobj)
    ids, counts = np.unique(d, return_counts=True)
    return {"labels_incl_background": int(len(ids)),
            "largest_label_share": round(float(counts.max() / d.size), 3),
            "background_share": round(float(counts[ids == 0].sum() / d.size), 3)}


def stage_run_ts(a):
    os.makedirs(a.golden, exist_ok=True)
    home = tempfile.mkdtemp(prefix="totalseg_home_")
    with open(os.path.join(home, "config.json"), "w") as f:
        json.dump({"totalseg_id": "totalseg_PARITY00", "send_usage_stats": False,
                   "prediction_counter": 0, "statistics_disclaimer_shown": True}, f, indent=4)
    env = dict(os.environ, TOTALSEG_WEIGHTS_PATH=os.path.abspath(a.weights), TOTALSEG_HOME_DIR=home,
               OMP_NUM_THREADS=str(a.threads), MKL_NUM_THREADS=str(a.threads))
    version = subprocess.run([a.ts, "--version"], capture_output=True, text=True, env=env).stdout.strip()
    roi = a.roi_subset
    runs = {"totalsegmentator_version": version, "ct": os.path.basename(a.ct),
            "weights_root": os.path.abspath(a.weights), "threads": a.threads, "runs": {}}
    work = tempfile.mkdtemp(prefix="totalseg_runs_")
    for name, opts, golden, stats in ts_runs(roi):
        if (a.only and name not in a.only) or (not a.only and name in CHECKED_ONCE):
            continue
        d = os.path.join(work, name)
        os.makedirs(d)
        cmd = [a.ts, "-i", os.path.abspath(a.ct), "-o", os.path.join(d, "seg.nii.gz"), "--ml",
               "--device", "cpu", "-nr", "1", "-ns", "1"] + opts
        t0 = time.time()
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall = time.time() - t0
        log = r.stdout + r.stderr
        with open(os.path.join(work, name + ".log"), "w") as f:
            f.write(log)
        if r.returncode != 0:
            print(log)
            raise SystemExit(f"TotalSegmentator {name} failed (rc {r.returncode})")
        shutil.copyfile(os.path.join(d, "seg.nii.gz"), os.path.join(a.golden, golden))
        entry = {"command": "TotalSegmentator -i ct.nii.gz -o seg.nii.gz " + " ".join(cmd[5:]),
                 "wall_s": round(wall, 1), "golden": golden, **label_summary(os.path.join(d, "seg.nii.gz"))}
        if stats:
            shutil.copyfile(os.path.join(d, "statistics.json"), os.path.join(a.golden, stats))
            entry["statistics"] = stats
        crop = [ln.strip() for ln in log.splitlines() if "cropping from" in ln]
        if crop:
            entry["crop"] = crop
        if name == "roi":
            entry["roi_subset"] = roi
        runs["runs"][name] = entry
        print(name, json.dumps(entry))
    fab = os.path.join(a.weights, "fabricate.json")
    if os.path.exists(fab):  # what the weights are: seed, sizes, margins (fabricate's report)
        shutil.copyfile(fab, os.path.join(a.golden, "fabricate.json"))
    runs_path = os.path.join(a.golden, "runs.json")
    if a.only and os.path.exists(runs_path):
        with open(runs_path) as f:
            old = json.load(f)
        old["runs"].update(runs["runs"])
        runs["runs"] = old["runs"]
    with open(runs_path, "w") as f:
        json.dump(runs, f, indent=1)
        f.write("\n")
    print(f"logs: {work}")


def stage_export(a):
    """tools/export_totalsegmentator.py for total, total_fast, total_fastest, the crop tasks and
    body (+ --fast) into <golden>/packages; the crop model (Dataset298) they share is kept once, in total/, and
    linked from the others (the ctest totalseg_parity_test runs them)."""
    out = os.path.join(a.golden, "packages")
    os.makedirs(out, exist_ok=True)
    for task in ("total", "total_fast", "total_fastest", *CROP_TASKS.values(), "body", "body_fast"):
        subprocess.run([sys.executable, os.path.join(HERE, "export_totalsegmentator.py"), a.weights,
                        "--task", task, "-o", os.path.join(out, task), "--force"], check=True)
        os.chmod(os.path.join(out, task), 0o755)
    shared = os.path.join(out, "total", "roi_crop.onnx")
    links = [("total_fast", "roi_crop"), ("total_fastest", "roi_crop")]
    for task, name in links + [(t, "crop") for t in CROP_TASKS.values()]:
        link = os.path.join(out, task, name + ".onnx")
        with open(shared, "rb") as f1, open(link, "rb") as f2:
            if f1.read() != f2.read():
                raise SystemExit(f"{link} differs from {shared}: not the same crop model")
        os.remove(link)
        os.symlink("../total/roi_crop.onnx", link)
    print(f"packages in {out}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="stage", required=True)
    s = sub.add_parser("phantom", help="the parity CT from `voxseg phantom`")
    s.add_argument("--voxseg", default=os.path.join(HERE, "../build/app/voxseg"))
    s.add_argument("--ct", default=DEFAULT_CT)
    s.add_argument("--phantom-seed", type=int, default=37)
    s.add_argument("--size", default="100x100x60")
    s.add_argument("--spacing", default="1.3x1.3x2.5")
    s.set_defaults(fn=stage_phantom)
    s = sub.add_parser("fabricate", help="seeded random weights in TotalSegmentator's layout")
    s.add_argument("--out", required=True, help="weights root (TOTALSEG_WEIGHTS_PATH)")
    s.add_argument("--seed", type=int, default=37)
    s.add_argument("--ct", default=DEFAULT_CT, help="CT the final layers are balanced on")
    s.add_argument("--datasets", type=int, nargs="+", choices=sorted(DATASETS),
                   help="only these (default: all)")
    s.set_defaults(fn=stage_fabricate)
    s = sub.add_parser("run-ts", help="the unmodified TotalSegmentator CLI -> goldens")
    s.add_argument("--weights", required=True)
    s.add_argument("--ts", default="TotalSegmentator", help="the TotalSegmentator executable")
    s.add_argument("--ct", default=DEFAULT_CT)
    s.add_argument("--golden", default=GOLDEN)
    s.add_argument("--roi-subset", nargs="+", default=ROI_SUBSET, help="classes for the roi run")
    s.add_argument("--only", nargs="+", choices=[r[0] for r in ts_runs([])])
    s.add_argument("--threads", type=int, default=2)
    s.set_defaults(fn=stage_run_ts)
    s = sub.add_parser("export", help="the voxseg packages of the weights (the CI test's)")
    s.add_argument("--weights", required=True)
    s.add_argument("--golden", default=GOLDEN)
    s.set_defaults(fn=stage_export)
    a = p.parse_args()
    return a.fn(a) or 0


if __name__ == "__main__":
    sys.exit(main())
