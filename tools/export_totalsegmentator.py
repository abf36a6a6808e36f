#!/usr/bin/env python3
"""TotalSegmentator weights -> voxseg model packages that run its tasks as it does (issue 37).

    python3 tools/export_totalsegmentator.py ~/.totalsegmentator/nnunet/results \\
        --task total -o totalseg-total
    python3 tools/export_totalsegmentator.py "$TOTALSEG_WEIGHTS_PATH" --task total_fast -o totalseg-fast
    python3 tools/export_totalsegmentator.py ROOT --list      # the tasks this tool exports

ROOT is TotalSegmentator's weights folder (TOTALSEG_WEIGHTS_PATH, or
~/.totalsegmentator/nnunet/results): one nnU-Net v2 results folder per dataset,
Dataset<NNN>_<name>/<trainer>__<plans>__3d_fullres/{dataset.json, plans.json,
fold_0/checkpoint_final.pth}. The package (model.json format_version 2, docs/model-package-stages.md)
repeats TotalSegmentator 2.18.0's pipeline (python_api.py, nnunet.py):

  - every network is a stage with "grid": "totalsegmentator": the image in closest-canonical
    (RAS) orientation, resampled to the task spacing with TotalSegmentator's own scipy zoom (order
    1, cast to int32), nnU-Net's crop to the nonzero box, CT normalisation, a sliding window with
    the task's step (0.8 for total / total_mr, else 0.5), Gaussian weighting, no mirroring,
    nnU-Net's float16 sums, argmax, and the labels brought back with an order-0 zoom;
  - total / total_mr: the part models are result stages in TotalSegmentator's order, each part's
    classes mapped to the task's class ids (its class_map), later parts painting over earlier ones,
    with its split of images over 512 x 512 x 900 resampled voxels into three slabs ("slabs");
  - --roi_subset: a first stage runs TotalSegmentator's crop model (the 6 mm total model, 3 mm for
    MR or with --robust-crop) and the other stages link to it with "rule": "roi_subset" (20 mm):
    `voxseg segment -m PKG --labels liver,spleen` then crops to those classes and runs only the
    parts that hold them. Without --labels the crop model does not run;
  - crop tasks (liver_segments, lung_nodules, kidney_cysts, ...): the crop model runs first (3 mm
    for tasks marked robust_crop and MR tasks, else 6 mm) and the task's network links to it with
    "rule": "labels": the box of the task's crop classes grown by 20 mm (TotalSegmentator 2.18.0
    uses 20 mm there whatever crop_addon a task states), on every run. An empty box gives empty
    labels, as TotalSegmentator's "Crop is empty". Tasks TotalSegmentator does not resample
    (liver_vessels, ...) run on nnU-Net's own grid (the package's default nnU-Net stage), as
    nnU-Net's predict_from_files resamples the image TotalSegmentator saved for it.

Labels carry TotalSegmentator's class names and ids and the SNOMED CT codes and colours of its
DICOM writer. Those facts come from tools/data/totalsegmentator-tables.json
(tools/gen_totalseg_tables.py writes it from an installed TotalSegmentator), so this tool needs
torch, onnx and dynamic_network_architectures but not TotalSegmentator. voxseg itself never loads
the .pth files: a package holds JSON and ONNX only.
"""
import argparse
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import GENERIC_CATEGORY, GENERIC_TYPE, PackageWriter, fail, sha256_file, warn  # noqa: E402
from export_nnunet import channel_specs, export_folds, image_layout, labels_of, load_trained  # noqa: E402

TABLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                      "totalsegmentator-tables.json")
# python_api.py: `crop_addon = [20,20,20] if crop_model is None else crop_addon`, after the
# crop model ran: --roi_subset AND every crop task without a crop_model of its own crop with
# 20 mm, whatever crop_addon its configuration states (TotalSegmentator 2.18.0).
ROI_MARGIN_MM = 20.0
CITATION = ("Wasserthal J, Breit H-C, Meyer MT, et al. TotalSegmentator: Robust Segmentation of 104 "
            "Anatomic Structures in CT Images. Radiology: Artificial Intelligence 2023; 5(5):e230024")
# What a task may set for this tool to repeat it exactly (anything else is refused by name).
DEFAULTS = {"crop_model": None, "cascade": None, "remove_outside": None,
            "remove_outside_dilation": None, "remove_mask": None, "plans": None}
MODELS = ("3d_fullres", "3d_fullres_high")  # nnU-Net configurations of the exported tasks
# Tasks whose pipeline has more than the generic steps (nnunet.py / python_api.py).
SPECIAL = {"vertebrae_pp": "post-processes the vertebrae (postprocess_vertebrae_pp)",
           "vertebrae_pp_refined": "refines the vertebrae with a second model",
           "appendicular_bones": "removes auxiliary labels (remove_auxiliary_labels)"}
CROP_MODELS = {"total": (298, 6.0, "nnUNetTrainer_4000epochs_NoMirroring", "total"),
               "total_robust": (297, 3.0, "nnUNetTrainer_4000epochs_NoMirroring", "total"),
               "total_mr": (852, 3.0, "nnUNetTrainer_2000epochs_NoMirroring", "total_mr")}


def load_tables():
    if not os.path.isfile(TABLES):
        fail(f"{TABLES} is missing (tools/gen_totalseg_tables.py writes it)")
    with open(TABLES) as f:
        return json.load(f)


def refusal(task, conf, tables):
    """Why this tool cannot repeat `task` exactly, or None."""
    if task in tables["commercial"] or conf.get("commercial"):
        return (f"'{task}' is one of TotalSegmentator's licence-only tasks (its weights need a "
                "licence from its authors); it is not exported")
    if task in SPECIAL:
        return f"'{task}' {SPECIAL[task]}, which voxseg does not repeat"
    for k, v in DEFAULTS.items():
        if conf.get(k, v) != v:
            return (f"'{task}' sets {k} = {conf[k]!r}; this tool exports the tasks without crop "
                    "models of their own, cascades or masks")
    if isinstance(conf.get("task_id"), list) and conf["class_map"] not in tables["parts"]:
        return (f"'{task}' merges {len(conf['task_id'])} part models whose class maps "
                "tools/data/totalsegmentator-tables.json does not hold")
    if conf.get("model", "3d_fullres") not in MODELS:
        return f"'{task}' runs nnU-Net configuration {conf['model']!r}, not one of {MODELS}"
    if conf.get("crop") is not None and not isinstance(conf["crop"], list):
        return f"'{task}' crops to {conf['crop']!r}, not to classes of the total model"
    if conf.get("crop") and conf.get("modality") == "mr" and not task.endswith("_mr"):
        return f"'{task}' is an MR task without the _mr suffix; its crop model is not repeated"
    folds = conf.get("folds")
    if folds is None or len(folds) != 1:
        return f"'{task}' ensembles folds {folds}; a stage holds one network"
    return None


def body_postprocess(inv):
    """TotalSegmentator's body task (nnunet.py, task_name "body", --fast too): on its resampled
    grid, scipy.ndimage.label's 6-connected components; body_trunc keeps its largest one
    (keep_largest_blob_multilabel), body_extremities loses the ones of at most 50,000 mm^3
    (remove_small_blobs_multilabel, interval [50000 / voxel mm^3, 1e10]: voxseg removes those
    under ceil(50 mL / voxel mL) voxels, the same set unless 50,000 mm^3 is a whole number of
    voxels, which it is not at 1.5 or 6 mm)."""
    return {"grid": "stage", "connectivity": 6,
            "labels": {str(inv["body_trunc"]): {"largest_component": True},
                       str(inv["body_extremities"]): {"min_component_ml": 50.0}}}


def exportable(tables):
    return sorted(t for t, c in tables["tasks"].items()
                  if refusal(t, c, tables) is None)


def model_folder(root, task_id, trainer, plans, what, model="3d_fullres"):
    """<root>/Dataset<NNN>_*/<trainer>__<plans>__<model>, or a clear error naming it."""
    hits = sorted(glob.glob(os.path.join(root, f"Dataset{int(task_id):03d}_*")))
    if not hits:
        fail(f"{root}: no Dataset{int(task_id):03d}_* folder for {what} (TotalSegmentator downloads "
             f"it with `totalseg_download_weights -t <task>`; is this its weights folder?)")
    if len(hits) > 1:
        fail(f"{root}: several folders for dataset {task_id}: {hits}")
    folder = os.path.join(hits[0], f"{trainer}__{plans}__{model}")
    if not os.path.isdir(folder):
        found = [os.path.basename(d) for d in glob.glob(os.path.join(hits[0], "*__*__*"))]
        fail(f"{folder} does not exist ({what}; found {found or 'nothing'}): TotalSegmentator "
             f"2.18.0 expects trainer {trainer}; weights of another version?")
    return folder


def three(v):
    return [float(x) for x in v] if isinstance(v, (list, tuple)) else [float(v)] * 3


def resolution(conf):
    if conf.get("resample") is None:
        return "nnU-Net's own resampling"
    return f"{three(conf['resample'])[0]:g} mm"


def network_stage(root, name, task_id, trainer, plans, resample, step, class_ids, class_names,
                  writer, what, model="3d_fullres"):
    """One TotalSegmentator network as a stage: its class ids (in network channel order) are
    the task's, via `class_ids` (channel -> task id). `model` is the nnU-Net configuration
    (3d_fullres; 3d_fullres_high for some tasks)."""
    folder = model_folder(root, task_id, trainer, plans, what, model)
    t = load_trained(folder, ["0"], "checkpoint_final.pth", False)
    if t["conf_name"] != model:
        fail(f"{folder}: trained as {t['conf_name']}, expected {model}")
    named, n_out = labels_of(t["dataset"])
    if n_out - 1 != len(class_ids):
        fail(f"{folder}: dataset.json has {n_out - 1} classes but TotalSegmentator 2.18.0's table for "
             f"{what} has {len(class_ids)}: weights of another version?")
    for (value, dname), tname in zip(named, class_names):
        if dname != tname:
            warn(f"{folder}: class {value} is '{dname}' in dataset.json, '{tname}' in "
                 "TotalSegmentator's table (the table's name is used, as TotalSegmentator does)")
    channels = channel_specs(t)
    if len(channels) != 1:
        fail(f"{folder}: {len(channels)} input channels; TotalSegmentator's tasks take one image")
    plans_spacing = [float(v) for v in t["cm"]["spacing"]]
    if resample is None:
        # TotalSegmentator saves the (cropped, canonical) image to NIfTI and nnU-Net's
        # predict_from_files resamples it itself: voxseg's nnU-Net grid, on the RAS image
        if image_layout(t["dataset"]) != ("zyx", "native"):
            fail(f"{folder}: dataset.json reads images with "
                 f"{t['dataset'].get('overwrite_image_reader_writer')}; the package repeats "
                 "nnU-Net's SimpleITKIO only")
        grid = {}
    else:
        grid = {"interpolation": "linear", "grid": "totalsegmentator"}
    spacing = list(reversed(three(resample))) if resample else plans_spacing  # SimpleITK's (z, y, x)
    if any(abs(a - b) > 1e-4 * b for a, b in zip(plans_spacing, spacing)):
        fail(f"{folder}: plans spacing {plans_spacing} differs from the task's resample spacing "
             f"{spacing} (z, y, x): nnU-Net would resample again after TotalSegmentator, which "
             "this package does not repeat")
    # A network two stages use (total_fastest's crop model is its own network) is written once.
    fname = writer.networks.get(folder)
    if fname is None:
        fname = f"{name}.onnx"
        export_folds(t, 1, n_out, None, writer, lambda fold: fname)
        writer.networks[folder] = fname
    return {"name": name, "file": fname, "sha256": sha256_file(writer.path(fname)),
            "spacing_mm": plans_spacing, "patch_size": [int(v) for v in t["cm"]["patch_size"]],
            **grid, "normalization": channels[0]["normalization"],
            "inference": {"overlap": round(1.0 - step, 6), "gaussian": True,
                          "gaussian_sigma_scale": 0.125, "mirror_axes": [], "convention": "nnunet",
                          "accumulate": "nnunet-fp16"},
            "output": {"kind": "softmax", "labels": class_ids}}, t


def make_labels(class_map, codes):
    labels, missing = [], []
    for value, name in sorted(((int(k), v) for k, v in class_map.items())):
        c = codes.get(name, {})
        lab = {"value": value, "name": name, "color": c.get("color", [128, 128, 128])}
        if "category" in c and "type" in c:
            lab["category"], lab["type"] = c["category"], c["type"]
            if "modifier" in c:  # laterality: kidney_left is Kidney + Left
                lab["type_modifier"] = c["modifier"]
        else:
            lab["category"], lab["type"] = GENERIC_CATEGORY, GENERIC_TYPE
            missing.append(name)
        labels.append(lab)
    if missing:
        warn(f"TotalSegmentator's table has no SNOMED codes for {missing}")
    return labels


def crop_stage(a, mr, robust, tables, writer, name, what):
    """TotalSegmentator's crop model (python_api.py: 852 at 3 mm for MR, 297 at 3 mm when robust,
    else 298 at 6 mm) as a stage that is not part of the result. Returns (stage, its class map)."""
    key = "total_mr" if mr else ("total_robust" if robust else "total")
    tid, spacing, trainer, cmap_name = CROP_MODELS[key]
    cmap = tables["class_map"][cmap_name]
    ids = sorted(int(k) for k in cmap)
    # nnunet.py: step 0.8 for the total tasks, which the crop model runs as
    stage, _ = network_stage(a.root, name, tid, trainer, "nnUNetPlans", spacing,
                             tables["tasks"][cmap_name]["step_size"], ids, [cmap[str(i)] for i in ids],
                             writer, f"{what} (dataset {tid})")
    stage["result"] = False
    return stage, cmap


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root", help="TotalSegmentator's weights folder (TOTALSEG_WEIGHTS_PATH)")
    p.add_argument("--task", help="total, total_fast, total_fastest, total_mr, ... (--list)")
    p.add_argument("-o", "--out", help="package folder to write")
    p.add_argument("--list", action="store_true", help="print the tasks this tool exports")
    p.add_argument("--no-roi-subset", action="store_true",
                   help="leave out the crop model that --labels (TotalSegmentator's --roi_subset) uses")
    p.add_argument("--robust-crop", action="store_true",
                   help="crop --labels with the 3 mm model, as TotalSegmentator's --robust_crop")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    a = p.parse_args()
    tables = load_tables()
    if a.list:
        for t in exportable(tables):
            print(t)
        return 0
    if not a.task or not a.out:
        p.error("--task and -o are required (or --list)")
    conf = tables["tasks"].get(a.task)
    if conf is None:
        fail(f"unknown task '{a.task}' (TotalSegmentator 2.18.0 has {sorted(tables['tasks'])})")
    why = refusal(a.task, conf, tables)
    if why:
        fail(why + f"; exportable tasks: {', '.join(exportable(tables))}")
    a.root = os.path.abspath(os.path.expanduser(a.root))
    if not os.path.isdir(a.root):
        fail(f"{a.root} is not a folder (TotalSegmentator's weights: TOTALSEG_WEIGHTS_PATH or "
             "~/.totalsegmentator/nnunet/results)")
    base = conf["class_map"]
    cmap = tables["class_map"][base]
    inv = {v: int(k) for k, v in cmap.items()}
    plans = conf.get("plans") or "nnUNetPlans"
    writer = PackageWriter(a.out, a.force)
    writer.networks = {}  # trained folder -> the ONNX file written for it
    try:
        stages, sources = [], []
        roi = base in ("total", "total_mr") and not a.no_roi_subset
        if roi:
            stages.append(crop_stage(a, base == "total_mr", a.robust_crop, tables, writer,
                                     "roi_crop", "the --roi_subset crop model")[0])
        crop_link = None
        if conf.get("crop"):  # a crop task: the crop model's box of its classes, always
            stage, crop_map = crop_stage(a, a.task.endswith("_mr"),
                                         bool(conf.get("robust_crop")) or a.robust_crop, tables,
                                         writer, "crop", f"task {a.task}'s crop model")
            crop_inv = {v: int(k) for k, v in crop_map.items()}
            missing = [c for c in conf["crop"] if c not in crop_inv]
            if missing:
                fail(f"task {a.task} crops to {missing}, which the crop model does not segment")
            stages.append(stage)
            crop_link = {"stage": "crop", "rule": "labels",
                         "labels": sorted(crop_inv[c] for c in conf["crop"]),
                         "margin_mm": ROI_MARGIN_MM}
        if isinstance(conf["task_id"], list):  # the part models, merged in this order
            parts = {p_["task_id"]: p_ for p_ in tables["parts"][base]}
            for tid in conf["task_id"]:
                part = parts[tid]
                order = sorted(part["classes"], key=int)
                names = [part["classes"][k] for k in order]
                stage, t = network_stage(a.root, part["name"].replace("class_map_part_", ""), tid,
                                         conf["trainer"], plans, conf["resample"], conf["step_size"],
                                         [inv[n] for n in names], names, writer,
                                         f"part {part['name']} of task {a.task}",
                                         conf.get("model") or "3d_fullres")
                stage["result"] = True
                stage["slabs"] = True  # nnunet.py splits large images for multi-model tasks
                if crop_link:  # every part runs on the one crop (nnunet.py crops once)
                    stage["crop_to"] = crop_link
                stages.append(stage)
                sources.append(t["folder"])
        else:
            ids = sorted(int(k) for k in cmap)
            stage, t = network_stage(a.root, a.task, conf["task_id"], conf["trainer"], plans,
                                     conf["resample"], conf["step_size"], ids,
                                     [cmap[str(i)] for i in ids], writer, f"task {a.task}",
                                     conf.get("model") or "3d_fullres")
            if a.task.endswith("_fast"):  # python_api.py: --fast statistics on its own grid
                stage["statistics_on_stage_grid"] = True
            if base == "body":  # nnunet.py, on the resampled grid before it goes back
                stage["postprocess"] = body_postprocess(inv)
            if crop_link:
                stage["crop_to"] = crop_link
            stages.append(stage)
            sources.append(t["folder"])
        if roi:
            for st in stages[1:]:
                st["crop_to"] = {"stage": "roi_crop", "rule": "roi_subset", "margin_mm": ROI_MARGIN_MM}
        modality = "MR" if base.endswith("_mr") else "CT"
        model = {
            "format_version": 2, "name": f"totalsegmentator-{a.task}", "version": "2.18.0",
            "description": (f"TotalSegmentator 2.18.0 task '{a.task}' ({len(cmap)} classes, "
                            f"{resolution(conf)}), run as TotalSegmentator runs it; "
                            "exported by tools/export_totalsegmentator.py"),
            "license": ("Apache-2.0 (TotalSegmentator's code and the weights of its open tasks); "
                        "check the licence of the weights you exported"),
            "attribution": "TotalSegmentator, Jakob Wasserthal et al., University Hospital Basel",
            "citation": CITATION,
            "channels": [{"modality": modality}],
            "intended_input": {"modality": [modality],
                               "body_region": (f"{modality} of any part of the body, as "
                                               f"TotalSegmentator's '{base}' task takes")},
            "axis_order": "zyx", "orientation": "RAS",
            "labels": make_labels(cmap, tables["codes"]),
            "stages": stages,
            "_export": {"tool": "tools/export_totalsegmentator.py", "task": a.task,
                        "sources": sources, "totalsegmentator": "2.18.0"},
        }
        writer.finish(model)
    except BaseException:
        writer.abort()
        raise
    print(f"{a.task}: {len(stages)} stage(s) ({', '.join(s['name'] for s in stages)}), "
          f"{len(cmap)} classes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
