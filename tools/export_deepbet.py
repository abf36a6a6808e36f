#!/usr/bin/env python3
"""deepbet 1.0.2 (brain extraction of T1-weighted MRI) -> voxseg model package (format 2).

    /usr/bin/python3 tools/export_deepbet.py --wheel deepbet-1.0.2-py3-none-any.whl \\
        -o sample_data/models/brain-extraction --force

    (get the wheel with: pip download deepbet==1.0.2 --no-deps -d /tmp/deepbet)

deepbet (https://github.com/wwu-mmll/deepbet, MIT licence; the paper to cite is taken from its
README's bibtex: Fisch et al., Computers in Biology and Medicine 179, 2024) ships two TorchScript LinkNet3d networks inside its wheel:
data/models/bbox_model.pt (finds the brain on a 128^3 image) and data/models/model.pt (segments
the brain on the 256^3 box). Its pipeline (deepbet/bet.py, BrainExtraction.run_model /
postprocess / get_bbox_with_margin) becomes two stages of model.json (docs/brain-extraction.md
maps every line):

    canonical orientation (nib.as_closest_canonical)      -> "orientation": "RAS", "axis_order": "xyz"
    F.interpolate(x, 128^3, 'nearest-exact')              -> stage bbox: "shape", "interpolation"
    quantile(.005/.995) of that image; normalize()         -> "percentile" [0.5, 99.5], range [0, 1],
                                                              z-score with torch's std (ddof 1),
                                                              affine [0.226, 0.449]
    bbox_model(...)[0, 1] > .5, largest component          -> "probability" channel 1, threshold,
                                                              "largest_component"
    get_bbox (slice mean > .02) + 10 % margin             -> stage brain: "crop_to"
    crop resized to 256^3 'nearest-exact', same low/high  -> "shape", "percentiles_of": "bbox"
    model(...)[0, 1], back 'nearest-exact', > .5          -> "probability", threshold 0.5
    largest component, fill_voids                         -> "postprocess"
    tiv = voxels x voxel volume / 1000                     -> measurement "tiv_ml"

The TorchScript modules are exported to ONNX (opset 17, static shapes [1, 1, 128^3] and
[1, 1, 256^3]: the networks run on the whole resized image) and checked against TorchScript on
random inputs with ONNX Runtime when it is installed (else with onnx.checker only, said so).
Weights stay fp32 (8.7 MB per network), so the package reproduces deepbet's own thresholds.

Needs torch and onnx (Debian: apt-get install python3-torch python3-onnx; run with /usr/bin/python3).
voxseg itself and CI need neither: the package is committed.
"""
import argparse
import json
import os
import re
import sys
import tempfile
import zipfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import PackageWriter, fail, sha256_file  # noqa: E402

DEEPBET_VERSION = "1.0.2"
NETWORKS = [  # (stage name, file in the wheel, ONNX file in the package, network shape)
    ("bbox", "data/models/bbox_model.pt", "bbox_model.onnx", 128),
    ("brain", "data/models/model.pt", "brain_model.onnx", 256),
]
# LinkNet3d's outputs are softmax probabilities in [0, 1]; ONNX Runtime and TorchScript sum in
# other orders, and through 20 instance norms over 128^3 or 256^3 voxels the rounding grows. On
# a smooth random field (image-like) the largest difference measured was 3e-4 (128^3) and 5.5e-3
# (256^3, at a few voxels where the softmax is steepest), with 1e-6 and 4e-6 of the voxels on
# the other side of 0.5. Allowed: 2e-2 absolute, and at most 1e-5 of the voxels flipping.
PARITY_TOL = 2e-2
MAX_FLIPS = 1e-5
NORMALIZATION = {"scheme": "percentile", "percentiles": [0.5, 99.5], "range": [0, 1],
                 "zscore": True, "std_ddof": 1, "affine": [0.226, 0.449]}


def citation_from_metadata(metadata):
    """The paper deepbet's README asks users to cite (its bibtex block), as one line."""
    m = re.search(r"```bibtex\n(.*?)```", metadata, re.S)
    if not m:
        fail("deepbet's METADATA has no bibtex citation block")
    fields = dict(re.findall(r"(\w+)\s*=\s*\{(.*?)\},?\n", m.group(1)))
    for k in ("author", "title", "journal", "volume", "pages", "year", "doi"):
        if k not in fields:
            fail(f"deepbet's citation has no {k}")
    authors = [a.strip() for a in fields["author"].split(" and ")]
    short = []
    for a in authors:
        parts = a.split()
        short.append(parts[-1] + " " + "".join(p[0] for p in parts[:-1]))
    doi = fields["doi"].replace("https://doi.org/", "")
    return (f"{', '.join(short)}. {fields['title']}. {fields['journal']} {fields['volume']} "
            f"({fields['year']}) {fields['pages']}. doi:{doi}")


def export(torchscript_path, onnx_path, size, seed):
    import onnx
    import torch

    net = torch.jit.load(torchscript_path, map_location="cpu").eval()
    shape = (1, 1, size, size, size)
    dummy = torch.zeros(shape, dtype=torch.float32)
    with torch.no_grad():
        torch.onnx.export(net, (dummy,), onnx_path, opset_version=17, input_names=["input"],
                          output_names=["probabilities"], do_constant_folding=True)
    model = onnx.load(onnx_path)
    onnx.checker.check_model(model)
    ops = sorted({n.op_type for n in model.graph.node})
    print(f"{os.path.basename(onnx_path)}: ops {', '.join(ops)}; "
          f"{os.path.getsize(onnx_path) / 1e6:.1f} MB")
    try:
        import onnxruntime as ort
    except ImportError:
        print(f"{os.path.basename(onnx_path)}: onnxruntime not installed: checked with "
              "onnx.checker only (voxseg's own run is checked by tools/deepbet_parity.py)")
        return None
    g = torch.Generator().manual_seed(seed)
    coarse = torch.randn((1, 1, 8, 8, 8), generator=g, dtype=torch.float32)
    x = torch.nn.functional.interpolate(coarse, size=shape[2:], mode="trilinear",
                                        align_corners=False)
    x = (x - x.mean()) / x.std() * 0.226 + 0.449  # deepbet's normalised range
    with torch.no_grad():
        ref = net(x).numpy()
    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    got = sess.run(None, {"input": x.numpy()})[0]
    if got.shape != ref.shape:
        fail(f"{onnx_path}: ONNX Runtime output {got.shape} != TorchScript {ref.shape}")
    err = float(np.max(np.abs(got - ref)))
    mean_err = float(np.mean(np.abs(got - ref)))
    flips = float(np.mean((got[:, 1] > 0.5) != (ref[:, 1] > 0.5)))
    print(f"{os.path.basename(onnx_path)}: ONNX Runtime vs TorchScript on a random "
          f"{list(shape)}: max abs error {err:.3g} (tolerance {PARITY_TOL:g}), mean {mean_err:.2g}; "
          f"channel 1 > 0.5 "
          f"differs at {flips:.2e} of the voxels")
    if not (err < PARITY_TOL and flips <= MAX_FLIPS):
        fail(f"{onnx_path}: ONNX Runtime differs from TorchScript by {err:.3g} "
             f"({flips:.2e} of the voxels flip)")
    return err


def stage(name, onnx_file, sha, size, first):
    s = {"name": name, "file": onnx_file, "sha256": sha,
         "shape": [size, size, size], "interpolation": "nearest-exact",
         "normalization": dict(NORMALIZATION),
         "output": {"kind": "probability", "channels": 2, "channel": 1, "threshold": 0.5,
                    "label": 1}}
    if first:
        s["postprocess"] = {"largest_component": True}
    else:
        s["crop_to"] = {"stage": "bbox", "label": 1, "margin_fraction": 0.1,
                        "slice_fraction": 0.02}
        s["normalization"]["percentiles_of"] = "bbox"  # deepbet reuses the 128^3 low/high
        s["postprocess"] = {"largest_component": True, "fill_holes": "3d"}
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wheel", required=True, help="deepbet-1.0.2-py3-none-any.whl")
    ap.add_argument("-o", "--out", required=True, help="package folder to write")
    ap.add_argument("--force", action="store_true", help="replace an existing package")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    writer = PackageWriter(args.out, args.force)
    try:
        with zipfile.ZipFile(args.wheel) as wheel, tempfile.TemporaryDirectory() as tmp:
            names = set(wheel.namelist())
            meta = f"deepbet-{DEEPBET_VERSION}.dist-info/METADATA"
            if meta not in names:
                fail(f"{args.wheel} is not the deepbet {DEEPBET_VERSION} wheel ({meta} missing)")
            licence = wheel.read(f"deepbet-{DEEPBET_VERSION}.dist-info/LICENSE").decode()
            citation = citation_from_metadata(wheel.read(meta).decode())
            copyright_line = next((line.strip() for line in licence.splitlines()
                                   if line.startswith("Copyright")), "")
            stages = []
            for i, (name, member, onnx_file, size) in enumerate(NETWORKS):
                if member not in names:
                    fail(f"{args.wheel} has no {member}")
                ts = wheel.extract(member, tmp)
                export(ts, writer.path(onnx_file), size, args.seed + i)
                stages.append(stage(name, onnx_file, sha256_file(writer.path(onnx_file)), size,
                                    i == 0))
        with open(writer.path("LICENSE"), "w") as f:
            f.write(f"The networks in this folder (bbox_model.onnx, brain_model.onnx) are the\n"
                    f"TorchScript weights of deepbet {DEEPBET_VERSION} "
                    f"(https://github.com/wwu-mmll/deepbet), exported to ONNX by\n"
                    f"tools/export_deepbet.py. deepbet's licence:\n\n{licence}")
        model = {
            "format_version": 2,
            "name": "brain-extraction",
            "version": DEEPBET_VERSION,
            "description": ("Brain extraction of T1-weighted MRI: deepbet's two LinkNet3d "
                            "networks (a 128^3 box finder, then the brain on the box at 256^3), "
                            "with deepbet's pre- and post-processing; total intracranial volume "
                            "(TIV) as a measurement. Trained on healthy adults' T1w scans."),
            "license": "MIT",
            "disclaimer": ("Not a clinical model: a research tool (deepbet) converted by voxseg, "
                           "not a certified medical device; check every mask before using it or "
                           "its TIV."),
            "attribution": (f"deepbet {DEEPBET_VERSION} (https://github.com/wwu-mmll/deepbet), "
                            f"MIT licence, {copyright_line}; networks exported to ONNX by "
                            "voxseg's tools/export_deepbet.py"),
            "citation": citation,
            "channels": [{"modality": "MR"}],
            "axis_order": "xyz",
            "orientation": "RAS",
            "labels": [{"value": 1, "name": "Brain", "color": [250, 190, 60],
                        "category": {"code": "91723000", "scheme": "SCT",
                                     "meaning": "Anatomical Structure"},
                        "type": {"code": "12738006", "scheme": "SCT", "meaning": "Brain"}}],
            "stages": stages,
            "measurements": [{"name": "tiv_ml", "kind": "volume_ml", "labels": [1],
                              "description": "total intracranial volume (deepbet's TIV: brain "
                                             "mask voxels x voxel volume)"}],
        }
        writer.finish(model)
    except BaseException:
        writer.abort()
        raise


if __name__ == "__main__":
    main()
