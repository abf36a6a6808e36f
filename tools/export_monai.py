#!/usr/bin/env python3
"""MONAI bundle -> voxseg model package (docs/model-package.md).

    python3 tools/export_monai.py path/to/spleen_ct_segmentation -o spleen-pkg [--codes codes.json]

The bundle holds configs/inference.json (or .yaml), optionally configs/metadata.json, and
models/model.pt (a state dict) or models/model.ts (TorchScript). The network is instantiated from
`network_def` with monai.bundle.ConfigParser, the weights loaded (torch.load weights_only=True),
and exported to ONNX (opset 17, dynamic batch, static roi_size) with an ONNX Runtime vs PyTorch
check. Preprocessing is read from the instantiated `preprocessing` transforms and `inferer`.

A one-channel bundle becomes a format_version 2 package of one stage that repeats MONAI's pipeline
step for step (docs/parity-monai.md measures it against `python -m monai.bundle run`):

  Orientationd(axcodes)                      -> orientation (before Spacingd)
  Spacingd(pixdim, mode "bilinear", padding "border", align_corners False)
                                             -> spacing_mm, "grid": "monai", "interpolation":
                                                "linear" (Spacingd's output grid, in float64)
  ScaleIntensityRanged(a_min, a_max, b_min, b_max, clip=True), after Spacingd
                                             -> "window" [a_min, a_max] onto "range" [b_min, b_max]
                     (clip=False)            -> "ct" without clip (mean/std exact)
  NormalizeIntensityd(nonzero=False)         -> "zscore"
  SlidingWindowInferer(roi_size, overlap, mode, sigma_scale; padding constant 0)
                                             -> patch_size, inference (convention "monai")
  postprocessing Activationsd(softmax), Invertd(nearest_interp=False), AsDiscreted(argmax)
                                             -> output softmax; probabilities resampled back
                                                bilinearly onto the input grid, then argmax

Anything else, or these with settings voxseg does not repeat exactly (another Spacingd mode,
a transform before Orientationd/Spacingd that changes the grid, intensity scaling before
Spacingd, a sigmoid output, KeepLargestConnectedComponentd, ...), is refused, naming the
transform. Loading/typing transforms (LoadImaged, EnsureChannelFirstd, EnsureTyped, SaveImaged,
...) are ignored.

Several input channels (or --format-version 1) give the format_version 1 package of earlier
versions instead, which approximates MONAI (normalisation before resampling, voxseg's order-3
resampler and field-of-view grid, logits interpolated back): each approximation is printed as a
warning and listed in model.json `_export.warnings`.

MONAI arrays after LoadImage are (x, y, z): the package's axis_order is "xyz".
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import (PackageWriter, export_onnx, fail, load_checkpoint, load_codes,  # noqa: E402
                           make_labels, model_files_entry, sha256_file, warn)

IGNORED = {"LoadImaged", "LoadImage", "EnsureChannelFirstd", "EnsureChannelFirst", "AddChanneld",
           "AddChannel", "EnsureTyped", "EnsureType", "ToTensord", "ToTensor", "CastToTyped",
           "CastToType", "Identityd", "Identity", "ToDeviced", "ToDevice", "SaveImaged",
           "DeleteItemsd", "CopyItemsd"}
# Close enough to what voxseg does anyway, but not identical: warn.
WARN_ONLY = {"CropForegroundd": "crops to the foreground box (voxseg crops to the nonzero box)",
             "CropForeground": "crops to the foreground box (voxseg crops to the nonzero box)",
             "Resized": "resizes to a fixed shape (voxseg resamples to spacing_mm only)",
             "SpatialPadd": "pads to a minimum size (voxseg pads patches with zeros)",
             "DivisiblePadd": "pads to a multiple (voxseg pads patches with zeros)"}
MODALITY_WORDS = {"CT": "CT", "MR": "MR", "MRI": "MR", "PET": "PT", "PT": "PT"}


def read_config(bundle, name):
    from monai.bundle import ConfigParser
    for ext in (".json", ".yaml", ".yml"):
        path = os.path.join(bundle, "configs", name + ext)
        if os.path.isfile(path):
            parser = ConfigParser()
            parser.read_config(path)
            parser["bundle_root"] = bundle
            return parser, path
    return None, None


def flatten(t):
    from monai.transforms import Compose
    if isinstance(t, Compose):
        out = []
        for x in t.transforms:
            out.extend(flatten(x))
        return out
    return [t]


def spacing_problems(cls, t):
    """What keeps voxseg's "monai" grid from repeating this Spacingd exactly (empty: nothing)."""
    s = t.spacing_transform if hasattr(t, "spacing_transform") else t
    first = lambda v: (v[0] if isinstance(v, (list, tuple)) else v)  # noqa: E731 - one key
    name = lambda v: str(getattr(first(v), "value", first(v)))  # noqa: E731 - enum or str
    out = []
    mode = name(getattr(t, "mode", getattr(s, "mode", "bilinear")))
    if mode != "bilinear":
        out.append(f"{cls}(mode='{mode}'): voxseg repeats Spacingd's 'bilinear' only")
    pad = name(getattr(t, "padding_mode", getattr(s, "padding_mode", "border")))
    if pad != "border":
        out.append(f"{cls}(padding_mode='{pad}'): voxseg repeats 'border' only")
    if first(getattr(t, "align_corners", False)):
        out.append(f"{cls}(align_corners=True): voxseg repeats align_corners=False only")
    if first(getattr(t, "scale_extent", False)) or getattr(s, "scale_extent", False):
        out.append(f"{cls}(scale_extent=True): voxseg repeats scale_extent=False only")
    if getattr(s, "recompute_affine", False):
        out.append(f"{cls}(recompute_affine=True) is not repeated")
    for k in ("min_pixdim", "max_pixdim"):
        v = getattr(s, k, None)
        if v is not None and not all(x != x for x in list(v)):  # all NaN: not set
            out.append(f"{cls}({k}=...) is not repeated")
    return out


def map_preprocessing(transforms, n_in):
    """-> dict: norm (format_version 1 normalization), norm2 (a version 2 stage's, applied after
    resampling), spacing (or None), orientation, notes (version 1's approximations), errors, and
    `exact` (what a version 2 package could not repeat exactly: refused there)."""
    norm, norm2, spacing, orientation, notes, errors, exact = None, None, None, "native", [], [], []
    seen_norm = None
    for t in transforms:
        cls = type(t).__name__
        if cls in IGNORED:
            continue
        if cls in ("Orientationd", "Orientation"):
            o = t.ornt_transform if hasattr(t, "ornt_transform") else t
            if not o.axcodes:
                errors.append(f"{cls} without axcodes")
            else:
                orientation = "".join(o.axcodes).upper()
            if spacing is not None or seen_norm:
                exact.append(f"{cls} after {'Spacingd' if spacing is not None else seen_norm}: "
                             "voxseg reorients first")
        elif cls in ("Spacingd", "Spacing"):
            s = t.spacing_transform if hasattr(t, "spacing_transform") else t
            spacing = [float(v) for v in list(s.pixdim)]
            exact.extend(spacing_problems(cls, t))
            if seen_norm:
                exact.append(f"{seen_norm} before {cls}: voxseg normalises after resampling")
            notes.append(f"{cls}: resampled to {spacing} mm by voxseg's resampler (order 3 / nnU-Net rules), "
                         f"not MONAI's '{getattr(s, 'mode', getattr(t, 'mode', '?'))}' interpolation")
        elif cls in ("ScaleIntensityRanged", "ScaleIntensityRange"):
            s = t.scaler if hasattr(t, "scaler") else t
            a_min, a_max, b_min, b_max = (float(s.a_min), float(s.a_max),
                                          float(s.b_min) if s.b_min is not None else None,
                                          float(s.b_max) if s.b_max is not None else None)
            if b_min is None or b_max is None or a_max == a_min or b_max == b_min:
                errors.append(f"{cls}(a_min={a_min}, a_max={a_max}, b_min={b_min}, b_max={b_max}) "
                              "is not an affine range mapping")
                continue
            std = (a_max - a_min) / (b_max - b_min)
            mean = a_min - b_min * std
            lo, hi = (a_min, a_max) if s.clip else (-3.0e38, 3.0e38)
            if std < 0:
                errors.append(f"{cls}: a decreasing mapping (std {std}) has no voxseg equivalent")
                continue
            norm = norm2 = {"scheme": "ct", "clip": [lo, hi], "mean": mean, "std": std}
            if s.clip:  # MONAI maps, then clips to [b_min, b_max]: the same as clip, then map
                norm2 = {"scheme": "window", "window": [a_min, a_max], "range": [b_min, b_max]}
            seen_norm = cls
        elif cls in ("NormalizeIntensityd", "NormalizeIntensity"):
            s = t.normalizer if hasattr(t, "normalizer") else t
            if s.subtrahend is not None or s.divisor is not None:
                errors.append(f"{cls} with fixed subtrahend/divisor is not supported")
                continue
            if n_in > 1 and not s.channel_wise:
                errors.append(f"{cls}(channel_wise=False) over {n_in} channels: voxseg normalises each channel")
            norm = {"scheme": "zscore"}
            norm2 = dict(norm)
            if s.nonzero:
                norm["mask"] = "nonzero"
                exact.append(f"{cls}(nonzero=True): a format_version 2 stage normalises every voxel")
            seen_norm = cls
        elif cls in WARN_ONLY:
            notes.append(f"{cls}: {WARN_ONLY[cls]}")
            exact.append(f"{cls}: {WARN_ONLY[cls]}")
        else:
            errors.append(f"{cls}: no voxseg equivalent")
    return {"norm": norm or {"scheme": "none"}, "norm2": norm2 or {"scheme": "none"}, "spacing": spacing, "orientation": orientation,
            "notes": notes, "errors": errors, "exact": exact}


def load_weights(bundle, net, allow_pickle):
    import torch
    pt = os.path.join(bundle, "models", "model.pt")
    ts = os.path.join(bundle, "models", "model.ts")
    if os.path.isfile(pt):
        sd = load_checkpoint(pt, allow_pickle)
        if isinstance(sd, dict) and "model" in sd and isinstance(sd["model"], dict):
            sd = sd["model"]
        sd = {k[len("module."):] if k.startswith("module.") else k: v for k, v in sd.items()}
        net.load_state_dict(sd, strict=True)
        return net, pt
    if os.path.isfile(ts):
        return torch.jit.load(ts, map_location="cpu").eval(), ts
    fail(f"{bundle}: no models/model.pt or models/model.ts")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bundle", help="bundle folder (configs/, models/)")
    p.add_argument("-o", "--out", required=True)
    p.add_argument("--config", default="inference", help="config file name under configs/ (no extension)")
    p.add_argument("--codes", help="JSON with SNOMED codes/colours per label name (docs/models.md)")
    p.add_argument("--modality", help="input modality (default: from metadata.json)")
    p.add_argument("--labels", help="'1:spleen,2:liver' when metadata.json has no channel_def")
    p.add_argument("--name")
    p.add_argument("--version")
    p.add_argument("--license")
    p.add_argument("--allow-pickle", action="store_true")
    p.add_argument("--force", action="store_true")
    p.add_argument("--format-version", type=int, choices=(1, 2), default=2,
                   help="2 (default, one input channel): MONAI's pipeline exactly; 1: the "
                        "approximate format_version 1 package (chosen for several channels)")
    a = p.parse_args()

    import torch
    torch.manual_seed(0)
    bundle = os.path.abspath(a.bundle)
    parser, cfg_path = read_config(bundle, a.config)
    if parser is None:
        fail(f"{bundle}: no configs/{a.config}.json or .yaml (is this a MONAI bundle?)")
    meta_parser, _ = read_config(bundle, "metadata")
    meta = meta_parser.get() if meta_parser else {}

    net = parser.get_parsed_content("network_def")
    net, weights = load_weights(bundle, net, a.allow_pickle)
    net.eval()
    first_w = next((w for w in net.state_dict().values() if w.dim() in (4, 5)), None)
    ndf = meta.get("network_data_format", {})
    n_in = ndf.get("inputs", {}).get("image", {}).get("num_channels") or (
        int(first_w.shape[1]) if first_w is not None else None)
    if not n_in:
        fail("cannot tell the number of input channels (metadata.json network_data_format)")

    transforms = []
    if "preprocessing" in parser.get():
        transforms = flatten(parser.get_parsed_content("preprocessing"))
    pre = map_preprocessing(transforms, n_in)
    v2 = n_in == 1 and a.format_version != 1
    if n_in > 1 and a.format_version != 1:
        warn(f"{n_in} input channels: a format_version 1 package (format_version 2 stages take one "
             "channel), which approximates MONAI's pre-processing")
    errors = pre["errors"] + (pre["exact"] if v2 else [])
    notes = [] if v2 else list(pre["notes"])
    if "preprocessing" not in parser.get():
        notes.append("no 'preprocessing' in the config: intensities fed as stored")
    norm, spacing, orientation = (pre["norm2"] if v2 else pre["norm"]), pre["spacing"], pre["orientation"]

    if "inferer" not in parser.get():
        fail(f"{cfg_path}: no 'inferer'; voxseg needs a SlidingWindowInferer's roi_size")
    inferer = parser.get_parsed_content("inferer")
    if type(inferer).__name__ != "SlidingWindowInferer":
        fail(f"inferer {type(inferer).__name__}: only SlidingWindowInferer maps onto voxseg")
    roi = [int(v) for v in inferer.roi_size]
    mode = str(getattr(inferer.mode, "value", inferer.mode))
    if mode not in ("gaussian", "constant"):
        errors.append(f"SlidingWindowInferer mode '{mode}' (voxseg: gaussian or constant)")
    pad = str(getattr(inferer.padding_mode, "value", inferer.padding_mode))
    if v2 and (pad != "constant" or float(getattr(inferer, "cval", 0.0)) != 0.0):
        errors.append(f"SlidingWindowInferer padding_mode '{pad}' cval {inferer.cval} (voxseg pads "
                      "with zeros)")
    sigma = inferer.sigma_scale
    if isinstance(sigma, (list, tuple)):
        if len(set(sigma)) != 1:
            errors.append(f"per-axis sigma_scale {sigma}")
        sigma = sigma[0]
    if spacing is None:
        if v2:
            errors.append("no Spacingd: MONAI runs on each image's own grid; a voxseg stage needs "
                          "a spacing (--format-version 1 resamples to 1 mm)")
        else:
            warn("no Spacingd: spacing_mm set to 1 mm (the image is resampled to it)")
        spacing = [1.0] * len(roi)
    if len(spacing) != len(roi):
        errors.append(f"pixdim {spacing} and roi_size {roi} differ in length")

    output = "softmax"
    post = parser.get_parsed_content("postprocessing") if "postprocessing" in parser.get() else None
    inverted = False
    for t in flatten(post) if post is not None else []:
        cls = type(t).__name__
        if cls in ("Activationsd", "Activations"):
            act = t.converter if hasattr(t, "converter") else t
            if act.sigmoid:
                output = "sigmoid"
                if v2:
                    errors.append(f"{cls}(sigmoid=True): a format_version 2 MONAI stage inverts "
                                  "softmax outputs only")
        elif cls in ("AsDiscreted", "AsDiscrete"):
            d = t.converter if hasattr(t, "converter") else t
            thr = d.kwargs.get("threshold") if hasattr(d, "kwargs") else None
            if thr is not None and output == "sigmoid" and abs(float(thr) - 0.5) > 1e-9:
                errors.append(f"AsDiscrete threshold {thr} (voxseg's sigmoid output uses 0.5)")
        elif cls == "Invertd":
            inverted = True
            if v2 and any(bool(x) for x in t.nearest_interp):
                errors.append("Invertd(nearest_interp=True): voxseg inverts Spacingd with its "
                              "bilinear mode (nearest_interp=False)")
        elif cls in ("SaveImaged", "EnsureTyped", "ToDeviced", "CopyItemsd", "DeleteItemsd"):
            continue
        elif v2:
            errors.append(f"postprocessing {cls}: not repeated by voxseg")
        else:
            notes.append(f"postprocessing {cls}: not repeated by voxseg")
    if v2 and not inverted:
        warn("no Invertd in postprocessing: MONAI's prediction stays on the Spacingd grid; "
             "voxseg's is brought back onto the input grid as Invertd would")

    channel_def = ndf.get("outputs", {}).get("pred", {}).get("channel_def", {})
    if a.labels:
        named = [(int(v), n) for v, n in (x.split(":", 1) for x in a.labels.split(","))]
    elif channel_def:
        named = sorted((int(k), v) for k, v in channel_def.items() if int(k) > 0)
        if output == "sigmoid":
            named = sorted((int(k) + 1, v) for k, v in channel_def.items())
    else:
        named = None

    if errors:
        fail("the bundle does things voxseg cannot reproduce:\n  - " + "\n  - ".join(errors))
    for n in notes:
        warn(n)

    modality = a.modality or MODALITY_WORDS.get(
        str(ndf.get("inputs", {}).get("image", {}).get("modality", "")).upper())
    if not modality:
        modality = "MR"
        warn("modality unknown (no --modality, none in metadata.json): 'MR'")
    licence = a.license or meta.get("license") or "unknown"
    if licence == "unknown":
        warn("no licence in metadata.json and no --license: package licence 'unknown'")

    writer = PackageWriter(a.out, a.force)
    try:
        _, out_shape = export_onnx(net, (n_in,) + tuple(roi), writer.path("model.onnx"))
        n_out = out_shape[0]
        if named is None:
            count = n_out if output == "sigmoid" else n_out - 1
            named = [(i + 1, f"label_{i + 1}") for i in range(count)]
            warn(f"no channel_def in metadata.json and no --labels: labels named {[n for _, n in named]}")
        expect = len(named) if output == "sigmoid" else len(named) + 1
        if expect != n_out:
            fail(f"{len(named)} labels need {expect} output channels ({output}) but the network has {n_out}")
        inference = {"overlap": float(inferer.overlap), "gaussian": mode == "gaussian",
                     "gaussian_sigma_scale": float(sigma), "mirror_axes": [], "convention": "monai"}
        model = {
            "format_version": 2 if v2 else 1,
            "name": a.name or meta.get("name", os.path.basename(bundle)).replace(" ", "-"),
            "version": a.version or str(meta.get("version", "1.0.0")),
            "description": meta.get("description", "")[:500] or "MONAI bundle exported by tools/export_monai.py",
            "license": licence,
            "channels": [{"modality": modality} if v2 else {"modality": modality, "normalization": norm}
                         for _ in range(n_in)],
            "axis_order": "xyz",
            "orientation": orientation,
            "labels": make_labels(named, load_codes(a.codes)),
        }
        if v2:
            model["stages"] = [{
                "name": "monai", "file": "model.onnx", "sha256": sha256_file(writer.path("model.onnx")),
                "spacing_mm": spacing, "patch_size": roi, "interpolation": "linear", "grid": "monai",
                "normalization": norm, "output": {"kind": "softmax"}, "inference": inference}]
        else:
            model.update({"spacing_mm": spacing, "patch_size": roi, "output": output,
                          "inference": inference})
            model.update(model_files_entry(writer, ["model.onnx"]))
        model["_export"] = {"tool": "tools/export_monai.py", "source": bundle,
                            "weights": os.path.relpath(weights, bundle), "warnings": notes}
        writer.finish(model)
    except BaseException:
        writer.abort()
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
