#!/usr/bin/env python3
"""tools/export_totalsegmentator.py without weights or torch: the tasks it exports, what it refuses
and why (licence-only, crop models, ensembles, unknown), the errors naming a missing dataset or
trainer folder, and nnU-Net's older plans format converted as nnunetv2 converts it. The export of
real (fabricated) weights and the parity with TotalSegmentator itself are checked by
tests/pipeline/totalseg_parity_test.cpp on committed packages (docs/parity-totalseg.md).

    python3 -m unittest tools/tests/test_export_totalsegmentator.py -v
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TOOLS)
import export_totalsegmentator as ets  # noqa: E402
from export_nnunet import legacy_architecture  # noqa: E402


def run(*args):
    return subprocess.run([sys.executable, os.path.join(TOOLS, "export_totalsegmentator.py"), *args],
                          capture_output=True, text=True)


class Tables(unittest.TestCase):
    def test_exportable_tasks(self):
        tasks = ets.exportable(ets.load_tables())
        for t in ("total", "total_fast", "total_fastest", "total_mr", "total_mr_fast",
                  "lung_vessels", "lung_nodules", "liver_segments", "liver_lesions",
                  "liver_vessels", "total_v3", "total_v3_fast", "headneck_muscles", "body",
                  "body_fast"):
            self.assertIn(t, tasks)
        for t in ("teeth", "vertebrae_pp", "heartchambers_highres",
                  "appendicular_bones", "brain_aneurysm"):
            self.assertNotIn(t, tasks)
        out = run("/nonexistent", "--list")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.split(), tasks)

    def test_total_parts_cover_the_class_map_once(self):
        t = ets.load_tables()
        ids = [int(k) for p in t["parts"]["total"] for k in p["classes"]]
        names = [n for p in t["parts"]["total"] for n in p["classes"].values()]
        self.assertEqual(len(names), len(set(names)))
        self.assertEqual(sorted(names), sorted(t["class_map"]["total"].values()))
        self.assertEqual([p["task_id"] for p in t["parts"]["total"]], [291, 292, 293, 294, 295])
        self.assertTrue(all(i >= 1 for i in ids))

    def test_every_multi_part_task_has_its_parts(self):
        # total_v3 (831-835, vertebrae_L6 in place of total's id 26) and headneck_muscles
        # (778, 779): each part's classes map into the task's class map, once
        t = ets.load_tables()
        for task, conf in t["tasks"].items():
            if not isinstance(conf["task_id"], list) or ets.refusal(task, conf, t):
                continue
            parts = t["parts"][conf["class_map"]]
            self.assertEqual([p["task_id"] for p in parts], conf["task_id"], task)
            names = [n for p in parts for n in p["classes"].values()]
            self.assertEqual(sorted(names), sorted(t["class_map"][conf["class_map"]].values()), task)
        self.assertIn("vertebrae_L6", t["parts"]["total_v3"][1]["classes"].values())
        # a multi-part task whose part maps the tables lack is refused, naming that
        conf = dict(t["tasks"]["total_v3"], class_map="not_in_tables")
        self.assertIn("part models whose class maps", ets.refusal("total_v3", conf, t))


class Refusals(unittest.TestCase):
    def expect_error(self, args, *words):
        out = run(*args)
        self.assertNotEqual(out.returncode, 0)
        for w in words:
            self.assertIn(w, out.stderr)

    def test_unknown_licence_only_crop_and_ensemble_tasks(self):
        with tempfile.TemporaryDirectory() as d:
            o = os.path.join(d, "pkg")
            self.expect_error([d, "--task", "nope", "-o", o], "unknown task 'nope'")
            self.expect_error([d, "--task", "heartchambers_highres", "-o", o], "licence-only")
            self.expect_error([d, "--task", "teeth", "-o", o], "crop_model = 'craniofacial")
            self.expect_error([d, "--task", "vertebrae_pp", "-o", o], "post-processes the vertebrae")
            self.expect_error([d, "--task", "aorta_annulus", "-o", o], "licence-only")
            self.assertFalse(os.path.exists(o))

    def test_missing_folders_are_named(self):
        with tempfile.TemporaryDirectory() as d:
            o = os.path.join(d, "pkg")
            self.expect_error([os.path.join(d, "nowhere"), "--task", "total_fast", "-o", o],
                              "is not a folder")
            self.expect_error([d, "--task", "total_fast", "-o", o, "--no-roi-subset"],
                              "no Dataset297_* folder", "task total_fast")
            os.makedirs(os.path.join(d, "Dataset297_TotalSegmentator_total_3mm_1559subj",
                                     "nnUNetTrainer__nnUNetPlans__3d_fullres"))
            self.expect_error([d, "--task", "total_fast", "-o", o, "--no-roi-subset"],
                              "nnUNetTrainer_4000epochs_NoMirroring__nnUNetPlans__3d_fullres "
                              "does not exist", "nnUNetTrainer__nnUNetPlans__3d_fullres")
            self.expect_error([d, "--task", "total", "-o", o],
                              "no Dataset298_* folder", "--roi_subset crop model")
            # a crop task's crop model: 6 mm (298), 3 mm (297) for tasks marked robust_crop
            self.expect_error([d, "--task", "lung_nodules", "-o", o],
                              "no Dataset298_* folder", "task lung_nodules's crop model")
            self.expect_error([d, "--task", "lung_vessels", "-o", o],
                              "Dataset297_TotalSegmentator_total_3mm_1559subj",
                              "task lung_vessels's crop model")
            self.assertEqual(sorted(os.listdir(d)),
                             ["Dataset297_TotalSegmentator_total_3mm_1559subj"])


class LegacyPlans(unittest.TestCase):
    def test_converted_as_nnunetv2_does(self):
        conf = {"UNet_class_name": "PlainConvUNet", "UNet_base_num_features": 32,
                "n_conv_per_stage_encoder": [2, 2, 2, 2, 2, 2],
                "n_conv_per_stage_decoder": [2, 2, 2, 2, 2], "num_pool_per_axis": [5, 5, 5],
                "pool_op_kernel_sizes": [[1, 1, 1]] + [[2, 2, 2]] * 5,
                "conv_kernel_sizes": [[3, 3, 3]] * 6, "unet_max_num_features": 320,
                "patch_size": [128, 128, 128]}
        a = legacy_architecture(conf)
        self.assertEqual(a["network_class_name"],
                         "dynamic_network_architectures.architectures.unet.PlainConvUNet")
        k = a["arch_kwargs"]
        self.assertEqual(k["features_per_stage"], [32, 64, 128, 256, 320, 320])
        self.assertEqual(k["n_conv_per_stage"], [2] * 6)
        self.assertEqual(k["conv_op"], "torch.nn.modules.conv.Conv3d")
        self.assertEqual(k["norm_op"], "torch.nn.modules.instancenorm.InstanceNorm3d")
        self.assertEqual(k["norm_op_kwargs"], {"eps": 1e-05, "affine": True})
        res = dict(conf, UNet_class_name="ResidualEncoderUNet")
        self.assertIn("n_blocks_per_stage", legacy_architecture(res)["arch_kwargs"])


if __name__ == "__main__":
    unittest.main()
