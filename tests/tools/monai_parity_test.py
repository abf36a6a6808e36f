#!/usr/bin/python3
"""MONAI parity on committed outputs (docs/parity-monai.md).

tests/tools/fixtures/monai/ct_phantom_bundle is a MONAI bundle shaped like spleen_ct_segmentation
(Orientationd RAS, Spacingd bilinear, ScaleIntensityRanged clip, SlidingWindowInferer, Activationsd
softmax, Invertd, AsDiscreted argmax), a small UNet trained briefly on CT phantoms by
tools/monai_ct_phantom.py. tests/tools/fixtures/monai/ct_phantom_parity holds two phantom CT
cases the network was not trained on and MONAI's own predictions for them (`python -m
monai.bundle run` of the bundle, written by tools/monai_parity.py --commit). Here:
tools/export_monai.py writes the package from the bundle, `voxseg segment` (fp32) runs it on each
case, and its label map must match MONAI's: >= 99.9 % of the voxels, Dice >= 0.999 per label.
The approximate format_version 1 package of earlier exporters (normalise, then voxseg's order-3
field-of-view resampling, logits interpolated back) runs on the first case too, and must fall
short of the exact one: the comparison can tell the two apart.

    VOXSEG=build/app/voxseg PYTHONPATH=build/pylib python3 tests/tools/monai_parity_test.py

Needs torch, onnx, nibabel and monai (scripts/deps.sh); exits 77 (ctest: skipped) naming what is
missing.
"""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUNDLE = os.path.join(HERE, "fixtures", "monai", "ct_phantom_bundle")
CASES = os.path.join(HERE, "fixtures", "monai", "ct_phantom_parity")
LABELS = {1: "liver", 2: "spleen", 3: "kidney", 4: "lung"}
NEEDED = ["numpy", "torch", "onnx", "nibabel", "monai.bundle"]


def voxseg():
    from export_packages_test import voxseg as path
    return path()


def export(out, *extra):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "export_monai.py"), BUNDLE,
                        "-o", out, *extra], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def segment(image, pkg, out):
    r = subprocess.run([voxseg(), "segment", image, "-m", pkg, "-o", out, "--device", "cpu",
                        "--precision", "fp32", "--accumulator", "fp32", "--no-tta",
                        "--outputs", "nifti"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return os.path.join(out, "segmentation.nii.gz")


def figures(monai_path, voxseg_path):
    import nibabel as nib
    import numpy as np
    m_img, v_img = nib.load(monai_path), nib.load(voxseg_path)
    assert np.allclose(m_img.affine, v_img.affine, atol=1e-3), (m_img.affine, v_img.affine)
    m = np.asarray(m_img.dataobj).reshape(m_img.shape[:3])
    v = np.asarray(v_img.dataobj).reshape(v_img.shape[:3])
    assert m.shape == v.shape, (m.shape, v.shape)
    dice = {}
    for value, name in LABELS.items():
        a, b = m == value, v == value
        n = int(a.sum() + b.sum())
        dice[name] = 2.0 * int((a & b).sum()) / n if n else None
    return float((m == v).mean()), int((m != v).sum()), dice


class MonaiParity(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.pkg = export(os.path.join(cls.tmp.name, "pkg"))
        cls.cases = sorted(f[:-len("_image.nii.gz")] for f in os.listdir(CASES)
                           if f.endswith("_image.nii.gz"))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_voxseg_matches_monai(self):
        self.assertGreaterEqual(len(self.cases), 1)
        for case in self.cases:
            with self.subTest(case=case):
                got = segment(os.path.join(CASES, case + "_image.nii.gz"), self.pkg,
                              os.path.join(self.tmp.name, case))
                agree, differ, dice = figures(os.path.join(CASES, case + "_monai.nii.gz"), got)
                print(f"[parity] {case}: {differ} voxels differ, agreement {100 * agree:.4f} %, "
                      f"Dice voxseg vs MONAI {dice}", flush=True)
                self.assertGreaterEqual(agree, 0.999)
                for name, d in dice.items():
                    self.assertIsNotNone(d, f"{name}: neither MONAI nor voxseg found it")
                    self.assertGreaterEqual(d, 0.999, name)

    def test_approximate_package_falls_short(self):
        case = self.cases[0]
        pkg = export(os.path.join(self.tmp.name, "pkg_v1"), "--format-version", "1")
        got = segment(os.path.join(CASES, case + "_image.nii.gz"), pkg,
                      os.path.join(self.tmp.name, case + "_v1"))
        exact = segment(os.path.join(CASES, case + "_image.nii.gz"), self.pkg,
                        os.path.join(self.tmp.name, case + "_exact"))
        monai = os.path.join(CASES, case + "_monai.nii.gz")
        agree_v1, differ_v1, dice_v1 = figures(monai, got)
        agree, differ, _ = figures(monai, exact)
        print(f"[parity] {case}, format_version 1 package: {differ_v1} voxels differ "
              f"(exact package: {differ}), Dice {dice_v1}", flush=True)
        self.assertGreater(differ_v1, 10 * max(differ, 1))


def main():
    from export_packages_test import run_unless_missing
    return run_unless_missing(NEEDED)


if __name__ == "__main__":
    sys.exit(main())
