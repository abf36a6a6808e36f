#!/usr/bin/env python3
"""nnInteractive model folder -> voxseg model package with an "interactive" section
(docs/interactive.md, "Importing an nnInteractive model").

    python3 tools/export_nninteractive.py ~/nnInteractive_v1.0 -o nninteractive-pkg [--force]

The folder is read as nninteractive 2.6.0's nnInteractiveInferenceSession reads it
(initialize_from_trained_model_folder, _load_capability_and_runtime_defaults, _apply_capability,
_load_license):
  - inference_info.json (capability metadata; its inference_class must be
    nnInteractiveInferenceSession and inference_class_min_version at most 2.6.0), or else the
    legacy inference_session_class.json: a JSON string (only the interaction decay changes: 0.9)
    or an object (point_radius, preferred_scribble_thickness, interaction_decay, pad_mode_image;
    default decay 0.98); the capability of a legacy folder is 2.6.0's legacy default;
  - plans.json (the checkpoint's configuration: patch_size and architecture), dataset.json
    (input channels), LICENSE (first non-empty line; without one, 2.6.0's fallback);
  - fold_<f>/checkpoint_final.pth: trainer_name, init_args.configuration, network_weights (its
    state dict repeats keys, e.g. encoder.* under decoder.encoder.* and conv.* under
    all_modules.*, all naming the same tensors: loaded with load_state_dict as 2.6.0 does).
Every value is resolved as 2.6.0 resolves it (defaults applied, negative channel indices made
positive), so the package's reader needs no defaults. The network (always 2 output channels) is
built with tools/export_nnunet.py's machinery and exported to ONNX (opset 17, input
[batch, image + interaction channels, *patch_size], float32), checked against PyTorch with ONNX
Runtime when it is installed.

Refused, with the reason: a folder for another nnInteractive version or session class, a missing
file (named), unknown interactions or channel_mapping keys, channel indices outside the
interaction channels, a cascade configuration, pad modes other than "constant", a point radius
that is not one positive number (2.6.0 would draw a random radius per point from a range).

Checkpoints are Python pickles: they are loaded as tensors and plain containers only unless
--allow-pickle is given for a checkpoint you trust (tools/export_common.py load_checkpoint).
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import (PackageWriter, export_onnx, fail, load_checkpoint,  # noqa: E402
                           make_labels, model_files_entry, warn)
from export_nnunet import build_network, configuration, modality_of, network_weights  # noqa: E402

SESSION_VERSION = "2.6.0"
SESSION_CLASS = "nnInteractiveInferenceSession"
SUPPORTED_INTERACTION_KEYS = ("scribble", "lasso", "points", "bbox2d", "bbox3d")
MAX_AUTOZOOM_FACTOR = 4
AUTOZOOM_GROWTH = 1.5
NUM_CLASSES = 2          # nnInteractive networks: object vs background, whatever dataset.json says
OFFICIAL_DATASET = "Dataset225_nnInteractiveV2"
OFFICIAL_CONFIGURATION = "3d_fullres_ps192_bs24"
MISSING_LICENCE = "!!MISSING!!"
REFINEMENT_MARGIN = 24   # 2.6.0's _plan_refinement_bboxes, whatever the patch (sized for 192^3)


class ResolveError(ValueError):
    """A folder 2.6.0 would refuse (or that this exporter cannot represent)."""


def legacy_default_capability():
    """2.6.0's _legacy_default_capability."""
    return {
        "supported_interactions": {"scribble": True, "lasso": True, "points": True,
                                   "bbox2d": True, "bbox3d": False},
        "supports_initial_label": True,
        "channel_mapping": {"prev_seg": 0, "bbox2d": (1, 2), "bbox3d": (1, 2), "lasso": (1, 2),
                            "points": (3, 4), "scribble": (5, 6)},
    }


def version_to_tuple(version):
    return tuple(int(i) for i in re.findall(r"\d+", str(version)))


def load_json_file(folder, name):
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        raise ResolveError(f"{folder}: no {name}")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise ResolveError(f"{path}: not valid JSON ({e})") from None


def check_capability_version(capability, path):
    """2.6.0's _validate_capability_version (session class and minimum version)."""
    required = capability.get("inference_class", SESSION_CLASS)
    if required != SESSION_CLASS:
        raise ResolveError(f"{path}: the checkpoint requires inference class '{required}', but "
                           f"nnInteractive {SESSION_VERSION}'s (which voxseg reproduces) is "
                           f"'{SESSION_CLASS}'")
    min_version = capability.get("inference_class_min_version")
    if min_version is not None and version_to_tuple(min_version) > version_to_tuple(SESSION_VERSION):
        raise ResolveError(f"{path}: the checkpoint requires {SESSION_CLASS}>={min_version}; voxseg "
                           f"reproduces nnInteractive {SESSION_VERSION}")


def runtime_defaults(folder):
    """2.6.0's _load_capability_and_runtime_defaults: (capability, point_radius,
    scribble_thickness, interaction_decay, pad_mode, source file name)."""
    point_radius, thickness, decay, pad_mode = 4, [2, 2, 2], 0.98, "constant"
    capability = {}
    modern = os.path.join(folder, "inference_info.json")
    legacy = os.path.join(folder, "inference_session_class.json")
    if os.path.isfile(modern):
        source = "inference_info.json"
        capability = load_json_file(folder, source)
        if not isinstance(capability, dict):
            raise ResolveError(f"{modern}: invalid capability metadata, expected a JSON object")
        check_capability_version(capability, modern)
        point_radius = capability.get("point_radius", point_radius)
        thickness = capability.get("preferred_scribble_thickness", thickness)
        decay = capability.get("interaction_decay", decay)
        pad_mode = capability.get("pad_mode_image", pad_mode)
    elif os.path.isfile(legacy):
        source = "inference_session_class.json"
        content = load_json_file(folder, source)
        if isinstance(content, str):
            decay = 0.9
        elif isinstance(content, dict):
            point_radius = content.get("point_radius", point_radius)
            thickness = content.get("preferred_scribble_thickness", thickness)
            decay = content.get("interaction_decay", decay)
            pad_mode = content.get("pad_mode_image", pad_mode)
        else:
            raise ResolveError(f"{legacy}: expected a JSON string (session class name) or object")
    else:
        raise ResolveError(f"{folder}: neither inference_info.json (capability metadata) nor the "
                           "legacy inference_session_class.json; not an nnInteractive model folder")
    if not isinstance(thickness, (list, tuple)):
        thickness = [thickness] * 3
    return capability, point_radius, list(thickness), decay, pad_mode, source


def parse_channel_pair(name, raw):
    if not isinstance(raw, (list, tuple)) or len(raw) != 2:
        raise ResolveError(f"channel_mapping '{name}': expected a pair [positive, negative], got "
                           f"{raw!r}")
    return int(raw[0]), int(raw[1])


def infer_num_interaction_channels(mapping):
    """2.6.0's infer_num_interaction_channels_from_mapping."""
    max_pos, max_neg = -1, 0
    for k, v in mapping.items():
        for idx in ([int(v)] if k == "prev_seg" else parse_channel_pair(k, v)):
            if idx >= 0:
                max_pos = max(max_pos, idx)
            else:
                max_neg = max(max_neg, -idx)
    return max(max_pos + 1, max_neg, 1)


def apply_capability(capability):
    """2.6.0's _apply_capability: {supported_interactions, supports_initial_label,
    channel_mapping (positive indices), num_interaction_channels (prev_seg included)}."""
    default = legacy_default_capability()
    keys = set(SUPPORTED_INTERACTION_KEYS)
    raw_supported = capability.get("supported_interactions", {})
    if not isinstance(raw_supported, dict):
        raise ResolveError(f"supported_interactions: expected an object, got {raw_supported!r}")
    unknown = set(raw_supported) - keys
    if unknown:
        raise ResolveError(f"capability requests unsupported interactions {sorted(unknown)}; "
                           f"nnInteractive {SESSION_VERSION} knows {sorted(keys)}")
    supported = {**default["supported_interactions"],
                 **{k: bool(v) for k, v in raw_supported.items()}}
    raw_mapping = capability.get("channel_mapping", {})
    if not isinstance(raw_mapping, dict):
        raise ResolveError(f"channel_mapping: expected an object, got {raw_mapping!r}")
    unknown = set(raw_mapping) - keys - {"prev_seg"}
    if unknown:
        raise ResolveError(f"capability channel_mapping has unsupported keys {sorted(unknown)}; "
                           f"known: {sorted(keys | {'prev_seg'})}")
    mapping = dict(default["channel_mapping"])
    for k, v in raw_mapping.items():
        mapping[k] = int(v) if k == "prev_seg" else parse_channel_pair(k, v)
    if "interaction_channels" in capability:
        n = int(capability["interaction_channels"]) + 1
    else:
        n = infer_num_interaction_channels(mapping)

    def positive(idx, what):
        p = idx if idx >= 0 else n + idx
        if not 0 <= p < n:
            raise ResolveError(f"channel_mapping '{what}': channel {idx} is outside the {n} "
                               "interaction channels (prev_seg included)")
        return p

    resolved = {"prev_seg": positive(int(mapping["prev_seg"]), "prev_seg")}
    for k in SUPPORTED_INTERACTION_KEYS:
        pos, neg = parse_channel_pair(k, mapping[k])
        resolved[k] = [positive(pos, k), positive(neg, k)]
    return {"supported_interactions": {k: supported[k] for k in SUPPORTED_INTERACTION_KEYS},
            "supports_initial_label": bool(capability.get("supports_initial_label", True)),
            "channel_mapping": resolved, "num_interaction_channels": n}


def licence_of(folder, plans, checkpoint):
    """2.6.0's _load_license: the first non-empty line of LICENSE, else CC BY-NC-SA 4.0 for the
    official v1 checkpoint, else "!!MISSING!!"."""
    path = os.path.join(folder, "LICENSE")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    return line.strip()
    init_args = checkpoint.get("init_args", {}) if isinstance(checkpoint, dict) else {}
    if plans.get("dataset_name") == OFFICIAL_DATASET and \
            init_args.get("configuration") == OFFICIAL_CONFIGURATION:
        return "CC BY-NC-SA 4.0"
    return MISSING_LICENCE


def fold_folder(folder, fold):
    if fold is not None:
        name = f"fold_{fold}"
        if not os.path.isdir(os.path.join(folder, name)):
            raise ResolveError(f"{folder}: no {name}")
        return name
    folds = sorted(d for d in os.listdir(folder)
                   if d.startswith("fold_") and os.path.isdir(os.path.join(folder, d)))
    if len(folds) != 1:
        raise ResolveError(f"{folder}: {len(folds)} fold_ folders ({', '.join(folds) or 'none'}); "
                           "nnInteractive infers the fold only when there is exactly one: pass --fold")
    return folds[0]


def resolve_folder(folder):
    """Everything 2.6.0 resolves before it touches the checkpoint."""
    capability, radius, thickness, decay, pad_mode, source = runtime_defaults(folder)
    cap = apply_capability(capability)
    if pad_mode != "constant":
        raise ResolveError(f"pad_mode_image '{pad_mode}': nnInteractive {SESSION_VERSION} implements "
                           "only 'constant'")
    if not 0 < float(decay) <= 1:
        raise ResolveError(f"interaction_decay must be in (0, 1], got {decay}")
    if len(thickness) != 3:
        raise ResolveError(f"preferred_scribble_thickness: expected 3 values, got {thickness}")
    if isinstance(radius, bool) or not isinstance(radius, (int, float)) or not radius > 0:
        # 2.6.0 passes it to batchgeneratorsv2's sample_scalar: a range or callable would draw a
        # random radius for every point, which no port can reproduce
        raise ResolveError(f"point_radius {radius!r}: expected a positive number (a random "
                           "radius cannot be reproduced)")
    dataset = load_json_file(folder, "dataset.json")
    plans = load_json_file(folder, "plans.json")
    return {"capability_file": source,
            "point_radius": int(radius) if float(radius).is_integer() else float(radius),
            "scribble_thickness": [int(t) if float(t).is_integer() else float(t) for t in thickness],
            "interaction_decay": float(decay), "pad_mode_image": pad_mode,
            "dataset": dataset, "plans": plans, **cap}


def image_channels(dataset):
    names = dataset.get("modality") if "modality" in dataset else dataset.get("channel_names")
    if not names:
        raise ResolveError("dataset.json has neither channel_names nor modality")
    return names


def interactive_section(r, conf, conf_name, trainer, licence, network_file, n_image):
    return {
        "source": "nninteractive", "session_version": SESSION_VERSION, "network": network_file,
        "patch_size": [int(v) for v in conf["patch_size"]],
        "image_channels": n_image, "interaction_channels": r["num_interaction_channels"],
        "channel_mapping": r["channel_mapping"],
        "supported_interactions": r["supported_interactions"],
        "supports_initial_label": r["supports_initial_label"],
        "point_radius": r["point_radius"], "scribble_thickness": r["scribble_thickness"],
        "interaction_decay": r["interaction_decay"], "pad_mode_image": r["pad_mode_image"],
        "autozoom": {"max_factor": MAX_AUTOZOOM_FACTOR, "growth": AUTOZOOM_GROWTH},
        "normalization": "nonzero_zscore", "num_classes": NUM_CLASSES, "licence": licence,
        "trainer": trainer, "configuration": conf_name,
        "dataset": r["plans"].get("dataset_name", ""),
    }


def refinement_margin(text, patch):
    """--refinement-margin: one value for every axis, "z,y,x", or "scaled" (2.6.0's 24 voxels
    scaled to the patch as 24 of 192: 8 at 64^3). Each 2 x margin must stay below the patch."""
    if text == "scaled":
        margin = [max(0, round(REFINEMENT_MARGIN * p / 192)) for p in patch]
    else:
        try:
            margin = [int(v) for v in text.split(",")]
        except ValueError:
            raise ResolveError(f"--refinement-margin {text}: expected N, Z,Y,X or scaled")
        margin = margin * 3 if len(margin) == 1 else margin
        if len(margin) != 3 or min(margin) < 0:
            raise ResolveError(f"--refinement-margin {text}: expected N, Z,Y,X (>= 0) or scaled")
    for m, p in zip(margin, patch):
        if 2 * m >= p:
            raise ResolveError(f"--refinement-margin {text}: {m} leaves no inner part of the "
                               f"{p} voxel patch (needs 2 x margin < patch)")
    return margin


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", help="nnInteractive model folder (plans.json, dataset.json, "
                   "inference_info.json, fold_0/checkpoint_final.pth)")
    p.add_argument("-o", "--out", required=True, help="package folder to write")
    p.add_argument("--fold", help="fold_<FOLD> to use (default: the only fold_ folder)")
    p.add_argument("--checkpoint", default="checkpoint_final.pth")
    p.add_argument("--name", help="package name (default: nninteractive-<configuration>)")
    p.add_argument("--version", default="1.0.0")
    p.add_argument("--license", help="package licence (default: the model's, from LICENSE)")
    p.add_argument("--allow-pickle", action="store_true",
                   help="load a checkpoint that needs full unpickling (runs code: trusted files only)")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    p.add_argument("--refinement-margin",
                   help="voxels the refinement planning leaves uncovered at each side of a box: N, "
                   "Z,Y,X or scaled (24 of 192); default: none written, voxseg uses 2.6.0's 24 "
                   "(nninteractive itself always does)")
    a = p.parse_args()

    folder = os.path.abspath(a.folder)
    if not os.path.isdir(folder):
        fail(f"{folder} is not a folder")
    try:
        r = resolve_folder(folder)
        ckpt_path = os.path.join(folder, fold_folder(folder, a.fold), a.checkpoint)
        if not os.path.isfile(ckpt_path):
            raise ResolveError(f"{ckpt_path} does not exist")
    except ResolveError as e:
        fail(str(e))
    ckpt = load_checkpoint(ckpt_path, a.allow_pickle)
    if not isinstance(ckpt, dict) or "network_weights" not in ckpt or "trainer_name" not in ckpt:
        fail(f"{ckpt_path}: expected trainer_name, init_args and network_weights (an nnInteractive "
             "checkpoint)")
    trainer = ckpt["trainer_name"]
    conf_name = (ckpt.get("init_args") or {}).get("configuration")
    if not conf_name:
        fail(f"{ckpt_path}: no init_args.configuration")
    conf = configuration(r["plans"], conf_name)
    if conf.get("previous_stage"):
        fail(f"configuration '{conf_name}' is a cascade stage; nnInteractive models are not")
    if trainer not in ("nnInteractiveTrainer_stub", "nnUNetTrainer"):
        warn(f"trainer '{trainer}': 2.6.0 looks it up in nnInteractive.trainer / nnunetv2 and falls "
             "back to nnInteractiveTrainer_stub; the network is built from the plans as the stub "
             "does, and the weights must load without missing keys")
    licence = licence_of(folder, r["plans"], ckpt)
    if licence == MISSING_LICENCE:
        warn(f"{folder}: no LICENSE; nnInteractive {SESSION_VERSION} reports the licence as "
             f"'{MISSING_LICENCE}'")
    channel_names = image_channels(r["dataset"])
    n_image = len(channel_names)
    n_in = n_image + r["num_interaction_channels"]
    patch = [int(v) for v in conf["patch_size"]]
    if len(patch) != 3:
        fail(f"configuration '{conf_name}': patch_size {patch} is not 3D")
    margin = None
    if a.refinement_margin:
        try:
            margin = refinement_margin(a.refinement_margin, patch)
        except ResolveError as e:
            fail(str(e))

    writer = PackageWriter(a.out, a.force)
    try:
        net, net_name = build_network(conf, n_in, NUM_CLASSES, trainer, None)
        what = (f"{ckpt_path}: weights do not match the network ({net_name}, {n_in} input channels: "
                f"{n_image} image + {r['num_interaction_channels']} interaction channels as "
                f"{r['capability_file']} says)")
        try:
            missing, unexpected = net.load_state_dict(network_weights(ckpt, ckpt_path), strict=False)
        except RuntimeError as e:       # shape mismatches
            lines = [ln.strip() for ln in str(e).splitlines()[1:] if ln.strip()]
            fail(f"{what}: {'; '.join(lines[:2]) or str(e)}")
        if missing or unexpected:
            fail(f"{what} (missing {missing[:5]}, unexpected {unexpected[:5]})")
        network_file = "network.onnx"
        _, out_shape = export_onnx(net, (n_in,) + tuple(patch), writer.path(network_file))
        if out_shape[0] != NUM_CLASSES:
            fail(f"network output has {out_shape[0]} channels, expected {NUM_CLASSES}")
        pkg_licence = a.license or (licence if licence != MISSING_LICENCE else "unknown")
        dataset_name = r["plans"].get("dataset_name", "")
        model = {
            "format_version": 1,
            "name": a.name or f"nninteractive-{conf_name}",
            "version": a.version,
            "description": (f"nnInteractive promptable segmentation ({dataset_name}, {conf_name}, "
                            f"{net_name}), run by voxseg's interactive session as nnInteractive "
                            f"{SESSION_VERSION}; exported by tools/export_nninteractive.py"),
            "license": pkg_licence,
            "channels": [{"modality": modality_of(str(channel_names[k])),
                          "normalization": {"scheme": "zscore"}} for k in sorted(channel_names)],
            "spacing_mm": [float(s) for s in conf.get("spacing", [1.0, 1.0, 1.0])],
            "patch_size": patch,
            "axis_order": "zyx",
            "orientation": "native",
            "labels": make_labels([(1, "object")], {}),
            "output": "softmax",
        }
        model.update(model_files_entry(writer, [network_file]))
        model["interactive"] = interactive_section(r, conf, conf_name, trainer, licence,
                                                   network_file, n_image)
        if margin is not None:
            model["interactive"]["refinement_margin"] = margin
        model["_export"] = {"tool": "tools/export_nninteractive.py", "source": folder,
                            "capability_file": r["capability_file"], "checkpoint": ckpt_path,
                            "network": net_name}
        writer.finish(model)
    except BaseException:
        writer.abort()
        raise
    i = model["interactive"]
    print(f"{net_name}, {n_image} image + {i['interaction_channels']} interaction channels, patch "
          f"{patch} (z, y, x), decay {i['interaction_decay']}, licence '{licence}' "
          f"(from {r['capability_file']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
