"""Shared parts of tools/export_nnunet.py and tools/export_monai.py: ONNX export with a parity
check against PyTorch, the model.json writer and the label colour palette.

The package format is docs/model-package.md (engine/model/model_package.h reads it).
"""
import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile

import numpy as np

# Distinct colours for labels without one (cycled); 3D Slicer-like hues.
PALETTE = [
    (255, 80, 80), (80, 160, 255), (80, 200, 120), (255, 200, 60), (190, 110, 230),
    (60, 210, 210), (240, 130, 40), (230, 110, 180), (150, 200, 60), (120, 120, 255),
    (200, 160, 120), (255, 150, 150), (100, 180, 160), (180, 180, 60), (160, 90, 90),
    (90, 120, 160),
]
# Generic coded concepts used when the user gives no codes (DICOM SEG needs some).
GENERIC_CATEGORY = {"code": "91723000", "scheme": "SCT", "meaning": "Anatomical Structure"}
GENERIC_TYPE = {"code": "85756007", "scheme": "SCT", "meaning": "Tissue"}

# Max abs difference ONNX Runtime vs PyTorch in fp32, relative to the largest |logit| when that
# is above 1: the two sum in different orders, and through a deep network with instance norms
# on a whole-image patch (112x128x128) the rounding grows with the values' scale. Per 16
# convolutions beyond the first 16 the bound grows in proportion (PARITY_CONVS): the rounding
# adds up layer by layer (a random 102 M-parameter ResEnc-L, 68 convolutions at 192^3, differs
# by 5.1e-4 at a largest |logit| of 2.4), while a wrong export differs by the output's own size.
PARITY_TOL = 1e-4
PARITY_CONVS = 16


def warn(msg):
    print(f"warning: {msg}", file=sys.stderr)


def fail(msg):
    raise SystemExit(f"error: {msg}")


# What a checkpoint of tensors and plain containers needs from the unpickler; nothing that runs code.
_SAFE_GLOBALS = {
    ("collections", "OrderedDict"), ("torch._utils", "_rebuild_tensor_v2"),
    ("torch._utils", "_rebuild_parameter"), ("torch", "Size"), ("torch", "device"),
    ("numpy.core.multiarray", "scalar"), ("numpy.core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
} | {("torch", t + "Storage") for t in ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short",
                                          "Char", "Byte", "Bool")} | {("torch", "storage")}


def _restricted_pickle():
    import pickle
    import types

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if (module, name) in _SAFE_GLOBALS or (module == "numpy" and name.endswith("DType")) \
                    or (module == "numpy.dtypes"):
                return super().find_class(module, name)
            raise pickle.UnpicklingError(f"{module}.{name} is not a tensor or plain container")

    return types.SimpleNamespace(Unpickler=Unpickler, load=lambda f, **kw: Unpickler(f, **kw).load(),
                                 __name__="voxseg_restricted_pickle")


def load_checkpoint(path, allow_pickle):
    """torch.load of a checkpoint without running code from it: weights_only=True, or (torch
    < 2, whose weights-only unpickler refuses plain floats) a pickle module that resolves only
    tensors, storages, OrderedDict and numpy scalars/arrays. With allow_pickle, anything."""
    import torch
    safe_globals = getattr(torch.serialization, "safe_globals", None)  # torch >= 2.4
    try:
        if safe_globals is None:
            return torch.load(path, map_location="cpu", weights_only=True)
        import numpy.core.multiarray as ma
        with safe_globals([np.dtype, np.ndarray, ma.scalar, ma._reconstruct,
                           type(np.dtype(np.float64)), type(np.dtype(np.float32)),
                           type(np.dtype(np.int64))]):
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - fall back, then report
        first_error = str(e).splitlines()[0]
    try:
        return torch.load(path, map_location="cpu", pickle_module=_restricted_pickle())
    except Exception as e:  # noqa: BLE001
        if not allow_pickle:
            fail(f"{path} cannot be loaded as tensors and plain containers ({first_error}; "
                 f"{str(e).splitlines()[0]}). It is a pickle and may run code when loaded; if you "
                 "trust it, rerun with --allow-pickle")
    warn(f"{path}: loading as a full pickle (--allow-pickle)")
    return torch.load(path, map_location="cpu", weights_only=False)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_codes(path):
    """--codes JSON: {"<label name>": {"category": {code, scheme, meaning}, "type": {...},
    "color": [r, g, b]}}; every part optional."""
    if not path:
        return {}
    with open(path) as f:
        codes = json.load(f)
    if not isinstance(codes, dict):
        fail(f"{path}: expected an object keyed by label name")
    for name, c in codes.items():
        for k in ("category", "type"):
            if k in c and not all(isinstance(c[k].get(f), str) for f in ("code", "scheme", "meaning")):
                fail(f"{path}: label '{name}' {k} needs string code, scheme and meaning")
    return codes


def make_labels(named_values, codes):
    """named_values: [(value, name)] -> model.json labels; warns once for missing codes."""
    labels, missing = [], []
    for i, (value, name) in enumerate(named_values):
        c = codes.get(name, {})
        lab = {"value": int(value), "name": str(name),
               "color": list(c.get("color", PALETTE[i % len(PALETTE)]))}
        if "category" in c and "type" in c:
            lab["category"], lab["type"] = c["category"], c["type"]
        else:
            lab["category"], lab["type"] = GENERIC_CATEGORY, GENERIC_TYPE
            missing.append(name)
        labels.append(lab)
    unknown = set(codes) - {n for _, n in named_values}
    if unknown:
        warn(f"--codes names labels the model does not have: {sorted(unknown)}")
    if missing:
        warn(f"no SNOMED codes for {missing}: DICOM SEG will say 'Anatomical Structure / Tissue'; "
             "pass --codes codes.json to name them")
    return labels


@contextlib.contextmanager
def _layer_norm_scale_given():
    """torch < 2 exports F.layer_norm without a weight (MONAI SwinUNETR.proj_out) at opset 17 as a
    LayerNormalization with an empty scale input, which the ONNX checker rejects: while
    exporting, such calls pass a scale of ones (the same function)."""
    import torch
    import torch.nn.functional as F
    layer_norm = F.layer_norm

    def with_scale(x, normalized_shape, weight=None, bias=None, eps=1e-5):
        if weight is None:
            weight = torch.ones(normalized_shape, dtype=x.dtype)
        return layer_norm(x, normalized_shape, weight, bias, eps)

    F.layer_norm = with_scale
    try:
        yield
    finally:
        F.layer_norm = layer_norm


def export_onnx(net, in_shape, path, tol=PARITY_TOL, seed=0):
    """Exports `net` (eval mode, fp32) with a dynamic batch and a static patch (opset 17), checks
    it with onnx.checker and, when ONNX Runtime is installed, compares it with PyTorch on a random
    batch of 2. Returns (max abs error or None, output shape without batch); fails above `tol` x
    max(1, max |PyTorch output|) x max(1, convolutions / PARITY_CONVS)."""
    import inspect

    import onnx
    import torch

    net = net.float().eval()
    dummy = torch.zeros((1,) + tuple(in_shape), dtype=torch.float32)
    kwargs = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:  # torch >= 2.5
        kwargs["dynamo"] = False
    with torch.no_grad(), _layer_norm_scale_given():
        torch.onnx.export(net, (dummy,), path, opset_version=17, input_names=["input"],
                          output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                          do_constant_folding=True, **kwargs)
    model = onnx.load(path)
    onnx.checker.check_model(model)
    ops = sorted({n.op_type for n in model.graph.node})
    print(f"{os.path.basename(path)}: ops {', '.join(ops)}")
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((2,) + tuple(in_shape), generator=g, dtype=torch.float32)
    with torch.no_grad():
        ref = net(x)
    if isinstance(ref, (list, tuple)):
        ref = ref[0]
    ref = ref.numpy()
    try:
        import onnxruntime as ort
    except ImportError:
        warn(f"{os.path.basename(path)}: onnxruntime is not installed, so the ONNX file was not "
             "run against PyTorch here; check the package with `voxseg segment` on a case")
        return None, tuple(ref.shape[1:])
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = sess.run(None, {"input": x.numpy()})[0]
    if got.shape != ref.shape:
        fail(f"{path}: ONNX Runtime output {got.shape} != PyTorch {ref.shape}")
    err = float(np.max(np.abs(got - ref)))
    convs = sum(n.op_type in ("Conv", "ConvTranspose") for n in model.graph.node)
    depth = max(1.0, convs / PARITY_CONVS)
    scale = max(1.0, float(np.max(np.abs(ref)))) * depth
    argmax_differs = float(np.mean(np.argmax(got, axis=1) != np.argmax(ref, axis=1)))
    print(f"{os.path.basename(path)}: ONNX Runtime vs PyTorch on a random batch of 2 "
          f"{list(x.shape)}: max abs error {err:.3g} (tolerance {tol:g} x {scale:.3g}: the "
          f"largest |output| x {depth:.2f} for {convs} convolutions); argmax differs at "
          f"{argmax_differs:.2e} of the voxels")
    if not err < tol * scale:
        fail(f"{path}: ONNX Runtime differs from PyTorch by {err:.3g} (> {tol * scale:.3g})")
    return err, tuple(ref.shape[1:])


class PackageWriter:
    """Builds the package in a temporary folder beside `out` and renames it into place at the
    end, so a failed export never leaves a half-written package."""

    def __init__(self, out, force):
        self.out = os.path.abspath(out)
        if os.path.exists(self.out) and not force:
            fail(f"{self.out} exists; pass --force to replace it")
        parent = os.path.dirname(self.out)
        os.makedirs(parent, exist_ok=True)
        self.tmp = tempfile.mkdtemp(prefix=".export-", dir=parent)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def finish(self, model_json):
        with open(self.path("model.json"), "w") as f:
            json.dump(model_json, f, indent=2)
            f.write("\n")
        if os.path.exists(self.out):
            shutil.rmtree(self.out)
        os.rename(self.tmp, self.out)
        print(f"package written: {self.out}")

    def abort(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def model_files_entry(writer, files):
    """files: names inside the package -> {"sha256": ...} or {"models": [...]}."""
    if len(files) == 1 and files[0] == "model.onnx":
        return {"sha256": sha256_file(writer.path("model.onnx"))}
    return {"models": [{"file": f, "sha256": sha256_file(writer.path(f))} for f in files]}
