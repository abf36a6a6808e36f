#!/usr/bin/python3
"""The exporters end to end on the committed tiny trained-model folders (tests/tools/fixtures,
written by tools/gen_exporter_fixtures.py): nnU-Net ResEnc-L and Primus results folders, MONAI
SwinUNETR and UNETR bundles.

For each: tools/export_nnunet.py / tools/export_monai.py writes a package; `voxseg segment` runs
it (fp32, no mirroring) on an image exactly one patch large on the model's grid, and its
probabilities are compared with PyTorch's softmax of the same network on the same normalised
patch (max |difference| <= 2e-4, label agreement printed and >= 99.9 %; the MONAI bundles'
format_version 2 packages write no probability maps: labels only); then `voxseg segment`
runs the package on a synthetic CT study (DICOM from `voxseg phantom`, resampled, sliding window,
the package's own precision; no mirroring, which would make it 8x slower and is tested in
tests/pipeline) and must write a label map holding only the model's labels (random weights may
well give one label everywhere).

    VOXSEG=build/app/voxseg PYTHONPATH=build/pylib python3 tests/tools/export_packages_test.py

Needs torch and onnx (Debian python3-torch, python3-onnx, python3-torchvision for timm),
nibabel, and monai / dynamic_network_architectures / timm / einops (scripts/deps.sh installs the
pinned versions into build/pylib). Exits 77 (ctest: skipped) naming what is missing.
"""
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOLS = os.path.join(ROOT, "tools")
FIXTURES = os.path.join(HERE, "fixtures")
NEEDED = ["numpy", "torch", "onnx", "nibabel", "monai", "dynamic_network_architectures", "timm",
          "einops"]
PROB_TOL = 2e-4
NNUNET = {
    "resenc_l": ("Dataset901_TinyResEncL/nnUNetTrainer__nnUNetResEncUNetLPlans__3d_fullres", []),
    "primus": ("Dataset902_TinyPrimus/nnUNet_Primus_Tiny_Trainer__nnUNetResEncUNetLPlans__3d_fullres",
               ["--primus", "48,2,4"]),
}


def voxseg():
    return os.environ.get("VOXSEG", os.path.join(ROOT, "build", "app", "voxseg"))


def run(cmd):
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r, time.time() - t


def write_patch_image(path, shape_xyz, spacing_xyz, seed):
    """A float32 NIfTI, RAS axes, CT-like values (never exactly 0: nnU-Net's nonzero crop keeps it
    whole)."""
    import nibabel as nib
    import numpy as np
    rng = np.random.default_rng(seed)
    data = (rng.normal(40.0, 150.0, shape_xyz) + 0.25).astype(np.float32)
    data[data == 0] = 0.5
    nib.save(nib.Nifti1Image(data, np.diag(list(spacing_xyz) + [1.0])), path)
    return data


def read_probabilities(folder, channels):
    """probabilities_<channel>.nii.gz (background 0 included) -> (C, x, y, z)."""
    import nibabel as nib
    import numpy as np
    return np.stack([np.asarray(nib.load(os.path.join(folder, f"probabilities_{c}.nii.gz")).dataobj,
                                dtype=np.float64) for c in range(channels)])


class ExportedPackages(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.study = os.path.join(cls.tmp.name, "study")
        r, _ = run([voxseg(), "phantom", cls.study, "--seed", "7", "--size", "48x48x20",
                    "--spacing", "2x2x3", "--outputs", "dicom"])
        assert r.returncode == 0, r.stderr

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def export(self, tool, src, extra, name):
        out = os.path.join(self.tmp.name, f"pkg_{name}")
        r, secs = run([sys.executable, os.path.join(TOOLS, tool), src, "-o", out, *extra])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        print(f"[export] {name}: {tool} {secs:.1f} s", flush=True)
        with open(os.path.join(out, "model.json")) as f:
            return out, json.load(f)

    def compare_patch(self, name, pkg, model, net, to_net, from_net, norm):
        """voxseg on one patch vs PyTorch. to_net: image array (x,y,z) -> network input axes.
        A format_version 2 package (no probability maps) is compared by its labels."""
        import numpy as np
        import torch
        spec = model["stages"][0] if "stages" in model else model
        patch = spec["patch_size"]
        spacing = spec["spacing_mm"]
        shape_xyz = patch[::-1] if model["axis_order"] == "zyx" else patch
        sp_xyz = spacing[::-1] if model["axis_order"] == "zyx" else spacing
        img_path = os.path.join(self.tmp.name, f"{name}_patch.nii.gz")
        data = write_patch_image(img_path, shape_xyz, sp_xyz, seed=3)
        out = os.path.join(self.tmp.name, f"{name}_patch_out")
        staged = "stages" in model
        r, secs = run([voxseg(), "segment", img_path, "-m", pkg, "-o", out, "--device", "cpu",
                       "--precision", "fp32", "--no-tta", "--accumulator", "fp32",
                       "--outputs", "nifti" if staged else "nifti,probabilities"])
        self.assertEqual(r.returncode, 0, r.stderr)
        x = torch.from_numpy(norm(to_net(data)).astype(np.float32))[None, None]
        with torch.no_grad():
            y = net(x)
        y = (y[0] if isinstance(y, (list, tuple)) else y)[0]
        want = from_net(torch.softmax(y.double(), 0).numpy())
        if staged:
            import nibabel as nib
            got = np.asarray(nib.load(os.path.join(out, "segmentation.nii.gz")).dataobj)
            values = np.array([0] + [lab["value"] for lab in model["labels"]])
            agree = float(np.mean(values[np.argmax(want, 0)] == got))
            print(f"[patch] {name}: voxseg segment fp32 vs PyTorch argmax on {patch}: labels agree "
                  f"on {100 * agree:.3f} % ({secs:.1f} s)", flush=True)
            self.assertGreaterEqual(agree, 0.999)
            return
        got = read_probabilities(out, len(model["labels"]) + 1)
        self.assertEqual(got.shape, want.shape)
        err = float(np.max(np.abs(got - want)))
        agree = float(np.mean(np.argmax(want, 0) == np.argmax(got, 0)))
        print(f"[patch] {name}: voxseg segment fp32 vs PyTorch softmax on {patch}: max |dp| "
              f"{err:.2e}, labels agree on {100 * agree:.3f} % ({secs:.1f} s)", flush=True)
        self.assertLessEqual(err, PROB_TOL)
        self.assertGreaterEqual(agree, 0.999)

    def segment_study(self, name, pkg, model):
        import nibabel as nib
        import numpy as np
        out = os.path.join(self.tmp.name, f"{name}_study_out")
        r, secs = run([voxseg(), "segment", self.study, "-m", pkg, "-o", out, "--device", "cpu",
                       "--no-tta", "--outputs", "nifti,stats"])
        self.assertEqual(r.returncode, 0, r.stderr)
        seg = np.asarray(nib.load(os.path.join(out, "segmentation.nii.gz")).dataobj)
        values = sorted(int(v) for v in np.unique(seg))
        allowed = {0} | {lab["value"] for lab in model["labels"]}
        self.assertTrue(set(values) <= allowed, values)
        with open(os.path.join(out, "run.json")) as f:
            precision = json.load(f)["device"]["precision"]
        print(f"[study] {name}: voxseg segment on the phantom study {seg.shape}: labels {values}, "
              f"precision {precision}, {secs:.1f} s", flush=True)

    def nnunet(self, name):
        sys.path.insert(0, TOOLS)
        import export_nnunet as en
        import numpy as np
        from export_common import load_checkpoint
        rel, extra = NNUNET[name]
        src = os.path.join(FIXTURES, "nnunet", rel)
        pkg, model = self.export("export_nnunet.py", src, extra, name)
        with open(os.path.join(src, "plans.json")) as f:
            conf = en.configuration(json.load(f), "3d_fullres")
        ckpt_path = os.path.join(src, "fold_0", "checkpoint_final.pth")
        ckpt = load_checkpoint(ckpt_path, False)
        net, _ = en.build_network(conf, 1, 3, ckpt["trainer_name"], extra[1] if extra else None)
        net.load_state_dict(en.network_weights(ckpt, ckpt_path))
        n = model["channels"][0]["normalization"]
        self.assertEqual(n["scheme"], "ct")
        norm = lambda a: (np.clip(a, *n["clip"]) - n["mean"]) / n["std"]  # noqa: E731
        # The exporter asks for nnU-Net's own float16 window arithmetic (tests/engine NnUNetFp16
        # check it against nnU-Net), whose Gaussian is float16-subnormal at a patch's corners, so
        # the logits there are a few float16 steps off by design. The network itself is checked
        # on a copy of the package that sums in float32.
        self.assertEqual(model["inference"]["accumulate"], "nnunet-fp16")
        exact = pkg + "_fp32_window"
        shutil.copytree(pkg, exact)
        model_exact = json.loads(json.dumps(model))
        model_exact["inference"]["accumulate"] = "normalized"
        with open(os.path.join(exact, "model.json"), "w") as f:
            json.dump(model_exact, f, indent=2)
        self.compare_patch(name, exact, model_exact, net.eval(), lambda a: a.transpose(2, 1, 0),
                           lambda p: p.transpose(0, 3, 2, 1), norm)
        self.segment_study(name, pkg, model)

    def monai(self, name):
        sys.path.insert(0, TOOLS)
        import numpy as np
        import torch
        from export_monai import read_config
        src = os.path.join(FIXTURES, "monai", name)
        pkg, model = self.export("export_monai.py", src, [], name)
        parser, _ = read_config(src, "inference")
        net = parser.get_parsed_content("network_def")
        sd = torch.load(os.path.join(src, "models", "model.pt"), map_location="cpu")
        net.load_state_dict(sd)
        n = model["stages"][0]["normalization"]  # MONAI's pipeline: a format_version 2 stage
        self.assertEqual(n["scheme"], "window")
        (lo, hi), (b0, b1) = n["window"], n["range"]
        norm = lambda a: (np.clip(a, lo, hi) - lo) / (hi - lo) * (b1 - b0) + b0  # noqa: E731
        self.assertEqual(model["axis_order"], "xyz")
        self.compare_patch(name, pkg, model, net.float().eval(), lambda a: a, lambda p: p, norm)
        self.segment_study(name, pkg, model)

    def test_nnunet_resenc_l(self):
        self.nnunet("resenc_l")

    def test_nnunet_primus(self):
        self.nnunet("primus")

    def test_monai_swinunetr(self):
        self.monai("swinunetr_bundle")

    def test_monai_unetr(self):
        self.monai("unetr_bundle")

    def test_unknown_primus_trainer_is_refused(self):
        rel, _ = NNUNET["primus"]
        out = os.path.join(self.tmp.name, "pkg_refused")
        r, _ = run([sys.executable, os.path.join(TOOLS, "export_nnunet.py"),
                    os.path.join(FIXTURES, "nnunet", rel), "-o", out])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("nnUNet_Primus_Tiny_Trainer", r.stderr)
        self.assertIn("--primus EMBED,DEPTH,HEADS", r.stderr)
        self.assertFalse(os.path.exists(out))


def unimportable(modules):
    """'module (reason)' for each of `modules` that does not import."""
    out = []
    for m in modules:
        try:
            importlib.import_module(m)
        except Exception as e:  # noqa: BLE001 - any failure to import is reported
            out.append(f"{m} ({type(e).__name__}: {e})")
    return out


def run_unless_missing(modules):
    """The calling script's tests, or 77 (ctest: skipped) naming what is missing."""
    missing = unimportable(modules)
    if missing:
        print(f"SKIPPED: python modules do not import: {'; '.join(missing)} (sys.path {sys.path}); "
              "scripts/deps.sh installs them (Debian python3-torch python3-onnx python3-torchvision "
              "python3-nibabel, the rest into build/pylib from the package index; an unreachable "
              "index leaves them out)", flush=True)
        return 77
    if not os.access(voxseg(), os.X_OK):
        print(f"SKIPPED: no voxseg binary at {voxseg()} (set VOXSEG)", flush=True)
        return 77
    prog = unittest.main(argv=[sys.argv[0], "-v", *sys.argv[1:]], exit=False)
    return 0 if prog.result.wasSuccessful() else 1


def main():
    return run_unless_missing(NEEDED + ["dynamic_network_architectures.architectures.primus",
                                        "monai.bundle"])


if __name__ == "__main__":
    sys.exit(main())
