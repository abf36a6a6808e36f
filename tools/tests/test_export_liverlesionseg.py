#!/usr/bin/env python3
"""tools/export_liverlesionseg.py without torch: the builder's size arithmetic for the liver
network, the numpy reference's Keras layers against direct definitions, and (when the wheel is
at $PYLIVERLESIONSEG_WHEEL or /tmp/plsdl/) the HDF5 layer names and shapes. The PyTorch rebuild
is checked against the reference by the tool itself (docs/liver-model.md).

    python3 -m unittest tools/tests/test_export_liverlesionseg.py -v
"""
import os
import sys
import unittest
from pathlib import Path

import numpy as np

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TOOLS)
import export_liverlesionseg as elr  # noqa: E402

WHEEL = Path(os.environ.get("PYLIVERLESIONSEG_WHEEL",
                            "/tmp/plsdl/pyliverlesionseg-0.3-py3-none-any.whl"))


class Sizes(unittest.TestCase):
    def test_liver_segment(self):
        plan = elr.plan_sizes(elr.LIVER_CONFIG, elr.LIVER_SEGMENT_SIZE)
        self.assertEqual(plan["input_size"], [189, 162, 162])
        self.assertEqual(plan["align_pool"], [(1, 1, 1)] * 5)

    def test_valid_sizes_are_27k_minus_26(self):
        plan = elr.plan_sizes(elr.LIVER_CONFIG, [28, 55, 82])
        self.assertEqual(plan["input_size"], [54, 81, 108])
        self.assertEqual(plan["possible_output"][0][:4], [1, 28, 55, 82])

    def test_impossible_size_refused(self):
        with self.assertRaisesRegex(ValueError, "impossible on axis 1"):
            elr.plan_sizes(elr.LIVER_CONFIG, [28, 30, 28])


class ReferenceLayers(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(3)

    def test_conv_same_is_zero_padded_correlation(self):
        x = self.rng.normal(size=(5, 4, 3, 2))
        k = self.rng.normal(size=(3, 3, 1, 2, 3))
        b = self.rng.normal(size=3)
        got = elr.np_conv3d(x, k, b, "same")
        xp = np.pad(x, ((1, 1), (1, 1), (0, 0), (0, 0)))
        want = np.empty((5, 4, 3, 3))
        for i, j, l in np.ndindex(5, 4, 3):
            want[i, j, l] = np.einsum("abcd,abcdo->o", xp[i:i + 3, j:j + 3, l:l + 1], k) + b
        np.testing.assert_allclose(got, want, rtol=1e-12)
        # not a convolution: flipping the kernel changes the result
        self.assertFalse(np.allclose(elr.np_conv3d(x, k[::-1, ::-1], b, "same"), want))
        # 'valid' (the lesion network): the same correlation without padding, the interior
        valid = elr.np_conv3d(x, k, b, "valid")
        self.assertEqual(valid.shape, (3, 2, 3, 3))
        np.testing.assert_allclose(valid, want[1:-1, 1:-1], rtol=1e-12)

    def test_linear_upsampling_shrinks_by_two(self):
        x = np.arange(4.0).reshape(4, 1, 1, 1) * np.ones((1, 2, 2, 1))
        up = elr.np_avg_pool_stride1(elr.np_upsample(x, (3, 1, 1)), (3, 1, 1))
        self.assertEqual(up.shape, (10, 2, 2, 1))
        np.testing.assert_allclose(up[:, 0, 0, 0], [0, 1 / 3, 2 / 3, 1, 4 / 3, 5 / 3, 2, 7 / 3,
                                                    8 / 3, 3])

    def test_max_pool_and_crop(self):
        x = self.rng.normal(size=(6, 9, 3, 2))
        p = elr.np_max_pool(x, (3, 3, 3))
        self.assertEqual(p.shape, (2, 3, 1, 2))
        self.assertEqual(p[1, 2, 0, 1], x[3:6, 6:9, 0:3, 1].max())
        c = elr.np_crop_to(x, (4, 5, 3))
        np.testing.assert_array_equal(c, x[1:5, 2:7, :])

    def test_instance_norm_population_std(self):
        x = self.rng.normal(3, 2, size=(4, 5, 6, 2))
        n = elr.np_instance_norm(x, 1e-7)
        np.testing.assert_allclose(n.mean(axis=(0, 1, 2)), 0, atol=1e-12)
        np.testing.assert_allclose(n.std(axis=(0, 1, 2)), 1, rtol=1e-6)


@unittest.skipUnless(WHEEL.exists(), f"no pyliverlesionseg wheel at {WHEEL}")
class Weights(unittest.TestCase):
    def test_liver_layers(self):
        try:
            import h5py  # noqa: F401
        except ImportError:
            self.skipTest("h5py not installed")
        w, header = elr.load_hdf5_weights(elr.read_wheel_member(WHEEL, elr.LIVER_HDF5))
        self.assertEqual(sorted(w), sorted(f"conv3d_{i}" for i in range(1, 16)))
        self.assertEqual(w["conv3d_1"][0].shape, (3, 3, 1, 1, 20))
        self.assertEqual(w["conv3d_9"][0].shape, (3, 3, 3, 320, 160))
        self.assertEqual(w["conv3d_15"][0].shape, (1, 1, 1, 20, 1))
        np.testing.assert_array_equal(header["voxel_size"], [3, 3, 3])


if __name__ == "__main__":
    unittest.main()
