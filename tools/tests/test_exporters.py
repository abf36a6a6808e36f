#!/usr/bin/env python3
"""Tests of tools/export_nnunet.py and tools/export_monai.py on tiny models built in a temporary
folder (an nnU-Net v2 trained-model folder with two folds; a MONAI bundle with a small UNet).
When ONNX Runtime is installed each export runs its ONNX Runtime vs PyTorch check (max abs error
< 1e-4 x max(1, the largest |output|)); tests/tools/export_packages_test.py compares voxseg's
own output with PyTorch.

    PYTHONPATH=build/pylib python3 -m unittest discover -s tools/tests -v

Needs torch, onnx, dynamic_network_architectures and monai (scripts/deps.sh); a test whose
framework is missing is skipped.
"""
import contextlib
import hashlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def have(*mods):
    return all(importlib.util.find_spec(m) is not None for m in mods)


_TOOLS_LOADED = {}


def run_tool(script, *args):
    """Runs the tool's main() in this process (argv, stdout, stderr and the exit status as a
    subprocess would see them): importing torch and MONAI once instead of once per export keeps
    the suite to a third of its time. tests/tools/export_packages_test.py runs the tools as
    commands."""
    mod = _TOOLS_LOADED.get(script)
    if mod is None:
        spec = importlib.util.spec_from_file_location(script[:-3], os.path.join(TOOLS, script))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _TOOLS_LOADED[script] = mod
    out, err, argv, rc = io.StringIO(), io.StringIO(), sys.argv, 0
    sys.argv = [script, *args]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = mod.main() or 0
    except SystemExit as e:  # fail("...") and argparse, as the interpreter would report them
        if isinstance(e.code, str):
            err.write(e.code + "\n")
            rc = 1
        else:
            rc = e.code or 0
    finally:
        sys.argv = argv
    return subprocess.CompletedProcess([script, *args], rc, out.getvalue(), err.getvalue())


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def tiny_plans(scheme):
    conf = {
        "data_identifier": "nnUNetPlans_3d_fullres", "preprocessor_name": "DefaultPreprocessor",
        "batch_size": 2, "patch_size": [16, 24, 16], "median_image_size_in_voxels": [30, 40, 30],
        "spacing": [2.5, 0.8, 0.8], "normalization_schemes": [scheme], "use_mask_for_norm": [True],
        "resampling_fn_data": "resample_data_or_seg_to_shape",
        "resampling_fn_seg": "resample_data_or_seg_to_shape",
        "resampling_fn_data_kwargs": {"is_seg": False, "order": 3, "order_z": 0, "force_separate_z": None},
        "resampling_fn_seg_kwargs": {"is_seg": True, "order": 1, "order_z": 0, "force_separate_z": None},
        "resampling_fn_probabilities": "resample_data_or_seg_to_shape",
        "resampling_fn_probabilities_kwargs": {"is_seg": False, "order": 1, "order_z": 0, "force_separate_z": None},
        "architecture": {
            "network_class_name": "dynamic_network_architectures.architectures.unet.PlainConvUNet",
            "arch_kwargs": {
                "n_stages": 3, "features_per_stage": [4, 8, 16],
                "conv_op": "torch.nn.modules.conv.Conv3d",
                "kernel_sizes": [[1, 3, 3], [3, 3, 3], [3, 3, 3]],
                "strides": [[1, 1, 1], [1, 2, 2], [2, 2, 2]],
                "n_conv_per_stage": [2, 2, 2], "n_conv_per_stage_decoder": [2, 2], "conv_bias": True,
                "norm_op": "torch.nn.modules.instancenorm.InstanceNorm3d",
                "norm_op_kwargs": {"eps": 1e-05, "affine": True}, "dropout_op": None,
                "dropout_op_kwargs": None, "nonlin": "torch.nn.LeakyReLU", "nonlin_kwargs": {"inplace": True}},
            "_kw_requires_import": ["conv_op", "norm_op", "dropout_op", "nonlin"]},
        "batch_dice": False}
    return {"dataset_name": "Dataset999_Tiny", "plans_name": "nnUNetPlans",
            "original_median_spacing_after_transp": [2.5, 0.8, 0.8],
            "original_median_shape_after_transp": [30, 40, 30], "image_reader_writer": "SimpleITKIO",
            "transpose_forward": [0, 1, 2], "transpose_backward": [0, 1, 2],
            "experiment_planner_used": "ExperimentPlanner", "label_manager": "LabelManager",
            "foreground_intensity_properties_per_channel": {"0": {
                "max": 1500.0, "mean": 80.5, "median": 60.0, "min": -1000.0,
                "percentile_00_5": -120.25, "percentile_99_5": 310.75, "std": 95.5}},
            "configurations": {"3d_fullres": conf}}


def assert_checked(test, r):
    """The export's ONNX Runtime check ran, or it said why not."""
    if have("onnxruntime"):
        test.assertIn("max abs error", r.stdout)
    else:
        test.assertIn("onnxruntime is not installed", r.stderr)


@unittest.skipUnless(have("torch", "onnx", "dynamic_network_architectures"),
                     "needs torch, onnx, dynamic_network_architectures (scripts/deps.sh)")
class ExportNnUNetTest(unittest.TestCase):
    def make_folder(self, root, scheme="CTNormalization", folds=(0, 1), regions=False,
                    conf="3d_fullres", plans=None, n_in=1):
        import torch
        sys.path.insert(0, TOOLS)
        from export_nnunet import build_network, configuration
        folder = os.path.join(root, f"nnUNetTrainer__nnUNetPlans__{conf}")
        os.makedirs(folder)
        plans = plans or tiny_plans(scheme)
        labels = {"background": 0, "liver": 1, "tumour": 2}
        ds = {"channel_names": {"0": "CT"}, "labels": labels, "numTraining": 4,
              "file_ending": ".nii.gz", "name": "Tiny", "licence": "CC-BY-4.0"}
        if regions:
            ds["labels"] = {"background": 0, "whole": [1, 2], "core": 2}
            ds["regions_class_order"] = [1, 2]
        json.dump(plans, open(os.path.join(folder, "plans.json"), "w"))
        json.dump(ds, open(os.path.join(folder, "dataset.json"), "w"))
        for f in folds:
            torch.manual_seed(10 + (f if isinstance(f, int) else 7))
            net, _ = build_network(configuration(plans, conf), n_in, 3, "nnUNetTrainer", None)
            # compiled-model prefix, as nnU-Net saves when torch.compile was on
            sd = {("_orig_mod." + k if f == 1 else k): v for k, v in net.state_dict().items()}
            os.makedirs(os.path.join(folder, f"fold_{f}"))
            torch.save({"network_weights": sd, "trainer_name": "nnUNetTrainer",
                        "init_args": {"configuration": conf, "fold": f},
                        "inference_allowed_mirroring_axes": (0, 1, 2)},
                       os.path.join(folder, f"fold_{f}", "checkpoint_final.pth"))
        return folder

    def test_two_folds_ct(self):
        with tempfile.TemporaryDirectory() as tmp:
            folder = self.make_folder(tmp)
            codes = os.path.join(tmp, "codes.json")
            json.dump({"liver": {"category": {"code": "123037004", "scheme": "SCT", "meaning": "Anatomical Structure"},
                                 "type": {"code": "10200004", "scheme": "SCT", "meaning": "Liver"}}}, open(codes, "w"))
            out = os.path.join(tmp, "pkg")
            r = run_tool("export_nnunet.py", folder, "-o", out, "--codes", codes)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            assert_checked(self, r)
            self.assertIn("no SNOMED codes for ['tumour']", r.stderr)
            m = json.load(open(os.path.join(out, "model.json")))
            self.assertEqual(m["channels"], [{"modality": "CT", "normalization": {
                "scheme": "ct", "clip": [-120.25, 310.75], "mean": 80.5, "std": 95.5}}])
            self.assertEqual(m["spacing_mm"], [2.5, 0.8, 0.8])
            self.assertEqual(m["patch_size"], [16, 24, 16])
            self.assertEqual((m["axis_order"], m["orientation"], m["output"]), ("zyx", "native", "softmax"))
            self.assertEqual([(l["value"], l["name"]) for l in m["labels"]], [(1, "liver"), (2, "tumour")])
            self.assertEqual(m["labels"][0]["type"]["code"], "10200004")
            self.assertEqual(m["inference"]["mirror_axes"], [0, 1, 2])
            self.assertEqual(m["license"], "CC-BY-4.0")
            self.assertNotIn("sha256", m)
            self.assertEqual([e["file"] for e in m["models"]], ["fold_0.onnx", "fold_1.onnx"])
            for e in m["models"]:
                self.assertEqual(e["sha256"], sha256(os.path.join(out, e["file"])))
            # the two folds are different networks
            self.assertNotEqual(m["models"][0]["sha256"], m["models"][1]["sha256"])
            # existing output is not replaced without --force
            r = run_tool("export_nnunet.py", folder, "-o", out, "--folds", "0")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("--force", r.stderr)
            r = run_tool("export_nnunet.py", folder, "-o", out, "--folds", "0", "--force", "--no-mirroring")
            self.assertEqual(r.returncode, 0, r.stderr)
            m = json.load(open(os.path.join(out, "model.json")))
            self.assertEqual(m["sha256"], sha256(os.path.join(out, "model.onnx")))
            self.assertEqual(m["inference"]["mirror_axes"], [])

    def test_cascade_becomes_two_linked_stages(self):
        import onnx
        plans = tiny_plans("CTNormalization")
        plans["configurations"]["3d_lowres"] = {
            "inherits_from": "3d_fullres", "data_identifier": "nnUNetPlans_3d_lowres",
            "spacing": [5.0, 1.6, 1.6], "patch_size": [8, 24, 16], "next_stage": "3d_cascade_fullres"}
        plans["configurations"]["3d_cascade_fullres"] = {
            "inherits_from": "3d_fullres", "previous_stage": "3d_lowres"}
        with tempfile.TemporaryDirectory() as tmp:
            self.make_folder(tmp, folds=("all",), conf="3d_lowres", plans=plans)
            folder = self.make_folder(tmp, folds=(0,), conf="3d_cascade_fullres", plans=plans, n_in=3)
            out = os.path.join(tmp, "pkg")
            r = run_tool("export_nnunet.py", folder, "-o", out, "--no-mirroring")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            assert_checked(self, r)
            m = json.load(open(os.path.join(out, "model.json")))
            self.assertEqual(m["format_version"], 2)
            self.assertEqual(m["channels"], [{"modality": "CT"}])
            for k in ("spacing_mm", "patch_size", "sha256", "models", "output", "inference"):
                self.assertNotIn(k, m)
            low, full = m["stages"]
            self.assertEqual((low["name"], full["name"]), ("3d_lowres", "3d_cascade_fullres"))
            self.assertNotIn("one_hot_from", low)
            self.assertEqual(full["one_hot_from"], {"stage": "3d_lowres"})
            self.assertEqual((low["spacing_mm"], low["patch_size"]), ([5.0, 1.6, 1.6], [8, 24, 16]))
            self.assertEqual((full["spacing_mm"], full["patch_size"]), ([2.5, 0.8, 0.8], [16, 24, 16]))
            ct = {"scheme": "ct", "clip": [-120.25, 310.75], "mean": 80.5, "std": 95.5}
            for st, channels in ((low, 1), (full, 3)):  # the image + one channel per label
                self.assertEqual(st["normalization"], ct)
                self.assertEqual(st["output"], {"kind": "softmax", "labels": [1, 2]})
                self.assertEqual(st["inference"]["mirror_axes"], [])
                self.assertEqual(st["sha256"], sha256(os.path.join(out, st["file"])))
                g = onnx.load(os.path.join(out, st["file"])).graph
                self.assertEqual(g.input[0].type.tensor_type.shape.dim[1].dim_value, channels)
            self.assertEqual(m["_export"]["previous_stage"]["folds"], ["all"])
            # without its previous stage the cascade is refused, naming what is missing
            os.rename(os.path.join(tmp, "nnUNetTrainer__nnUNetPlans__3d_lowres"),
                      os.path.join(tmp, "lowres_elsewhere"))
            r = run_tool("export_nnunet.py", folder, "-o", os.path.join(tmp, "pkg2"))
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("3d_lowres", r.stderr)
            self.assertIn("--previous-stage-folder", r.stderr)
            r = run_tool("export_nnunet.py", folder, "-o", os.path.join(tmp, "pkg2"),
                         "--previous-stage-folder", os.path.join(tmp, "lowres_elsewhere"))
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_zscore_mask(self):
        with tempfile.TemporaryDirectory() as tmp:
            folder = self.make_folder(tmp, scheme="ZScoreNormalization", folds=(0,))
            out = os.path.join(tmp, "pkg")
            r = run_tool("export_nnunet.py", folder, "-o", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            m = json.load(open(os.path.join(out, "model.json")))
            self.assertEqual(m["channels"][0]["normalization"], {"scheme": "zscore", "mask": "nonzero"})

    def test_rejects_regions_and_bad_folder(self):
        with tempfile.TemporaryDirectory() as tmp:
            folder = self.make_folder(tmp, folds=(0,), regions=True)
            r = run_tool("export_nnunet.py", folder, "-o", os.path.join(tmp, "pkg"))
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("region-based", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(tmp, "pkg")))
            r = run_tool("export_nnunet.py", tmp, "-o", os.path.join(tmp, "pkg"))
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("plans.json", r.stderr)

    def test_rejects_unknown_normalization(self):
        with tempfile.TemporaryDirectory() as tmp:
            folder = self.make_folder(tmp, scheme="RescaleTo01Normalization", folds=(0,))
            r = run_tool("export_nnunet.py", folder, "-o", os.path.join(tmp, "pkg"))
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("RescaleTo01Normalization", r.stderr)
            self.assertEqual([d for d in os.listdir(tmp) if d.startswith(".export-")], [])


class NnUNetPlansTest(unittest.TestCase):
    """The plans/trainer reading of export_nnunet.py (no framework needed)."""

    def setUp(self):
        sys.path.insert(0, TOOLS)
        import export_nnunet
        self.en = export_nnunet

    def test_primus_sizes_by_trainer_name(self):
        size = self.en.primus_size
        self.assertEqual(size("nnUNet_Primus_S_Trainer", None), (396, 12, 6))
        self.assertEqual(size("nnUNet_Primus_M_Trainer_BS8_2e4", None), (864, 16, 12))
        self.assertEqual(size("_Primus_L_48_BS1", None), (1056, 24, 16))
        self.assertIsNone(size("nnUNetTrainer", None))
        self.assertEqual(size("MyTrainer", "48,2,4"), (48, 2, 4))
        with self.assertRaises(SystemExit) as e:
            size("nnUNet_Primus_Huge_Trainer", None)
        self.assertIn("--primus EMBED,DEPTH,HEADS", str(e.exception))
        with self.assertRaises(SystemExit) as e:
            size("x", "48,2")
        self.assertIn("expected EMBED,DEPTH,HEADS", str(e.exception))

    def test_configuration_inherits(self):
        plans = {"configurations": {
            "3d_lowres": {"spacing": [2, 2, 2], "patch_size": [64, 64, 64], "batch_size": 2},
            "3d_cascade_fullres": {"inherits_from": "3d_lowres", "spacing": [1, 1, 1]},
            "loop_a": {"inherits_from": "loop_b"}, "loop_b": {"inherits_from": "loop_a"}}}
        c = self.en.configuration(plans, "3d_cascade_fullres")
        self.assertEqual((c["spacing"], c["patch_size"]), ([1, 1, 1], [64, 64, 64]))
        self.assertNotIn("inherits_from", c)
        with self.assertRaises(SystemExit) as e:
            self.en.configuration(plans, "loop_a")
        self.assertIn("loops", str(e.exception))
        with self.assertRaises(SystemExit) as e:
            self.en.configuration(plans, "2d")
        self.assertIn("not in plans.json", str(e.exception))

    def test_labels(self):
        named, n_out = self.en.labels_of({"labels": {"background": 0, "b": 2, "a": 1, "ignore": 3}})
        self.assertEqual((named, n_out), ([(1, "a"), (2, "b")], 3))
        with self.assertRaises(SystemExit) as e:
            self.en.labels_of({"labels": {"background": 0, "a": 2}})
        self.assertIn("consecutive", str(e.exception))

    def test_old_plans_without_architecture_are_refused(self):
        with self.assertRaises(SystemExit) as e:
            self.en.build_network({"patch_size": [32, 32, 32], "UNet_class_name": "PlainConvUNet"},
                                  1, 2, "nnUNetTrainer", None)
        self.assertIn("nnunetv2 >= 2.4", str(e.exception))


def write_bundle(root, transforms_extra=(), sigmoid=False):
    import torch
    from monai.networks.nets import UNet
    os.makedirs(os.path.join(root, "configs"))
    os.makedirs(os.path.join(root, "models"))
    net_def = {"_target_": "UNet", "spatial_dims": 3, "in_channels": 1, "out_channels": 3,
               "channels": [4, 8, 16], "strides": [2, 2], "num_res_units": 1, "norm": "instance"}
    pre = [{"_target_": "LoadImaged", "keys": "image"},
           {"_target_": "EnsureChannelFirstd", "keys": "image"},
           {"_target_": "Orientationd", "keys": "image", "axcodes": "RAS"},
           {"_target_": "Spacingd", "keys": "image", "pixdim": [1.5, 1.5, 2.0], "mode": "bilinear"},
           {"_target_": "ScaleIntensityRanged", "keys": "image", "a_min": -57, "a_max": 164,
            "b_min": 0.0, "b_max": 1.0, "clip": True},
           *transforms_extra,
           {"_target_": "EnsureTyped", "keys": "image"}]
    cfg = {"bundle_root": ".", "network_def": net_def,
           "preprocessing": {"_target_": "Compose", "transforms": pre},
           "inferer": {"_target_": "SlidingWindowInferer", "roi_size": [32, 32, 24],
                       "sw_batch_size": 2, "overlap": 0.25, "mode": "gaussian", "sigma_scale": 0.125},
           "postprocessing": {"_target_": "Compose", "transforms": [
               {"_target_": "Activationsd", "keys": "pred", "softmax": not sigmoid, "sigmoid": sigmoid},
               {"_target_": "AsDiscreted", "keys": "pred", "argmax": True}]}}
    json.dump(cfg, open(os.path.join(root, "configs", "inference.json"), "w"), indent=2)
    meta = {"name": "Tiny spleen", "version": "0.1.0", "license": "Apache-2.0",
            "network_data_format": {
                "inputs": {"image": {"modality": "CT", "num_channels": 1}},
                "outputs": {"pred": {"num_channels": 3,
                                     "channel_def": {"0": "background", "1": "spleen", "2": "liver"}}}}}
    json.dump(meta, open(os.path.join(root, "configs", "metadata.json"), "w"), indent=2)
    torch.manual_seed(3)
    net = UNet(spatial_dims=3, in_channels=1, out_channels=3, channels=(4, 8, 16), strides=(2, 2),
               num_res_units=1, norm="instance")
    torch.save(net.state_dict(), os.path.join(root, "models", "model.pt"))


def edit_bundle(b, fn):
    """fn(config dict) edits configs/inference.json in place."""
    path = os.path.join(b, "configs", "inference.json")
    cfg = json.load(open(path))
    fn(cfg)
    json.dump(cfg, open(path, "w"))


def with_invertd(cfg, nearest=False):
    cfg["postprocessing"]["transforms"].insert(1, {
        "_target_": "Invertd", "keys": "pred", "transform": "@preprocessing", "orig_keys": "image",
        "nearest_interp": nearest, "to_tensor": True})


@unittest.skipUnless(have("torch", "onnx", "monai"), "needs torch, onnx, monai (scripts/deps.sh)")
class ExportMonaiTest(unittest.TestCase):
    def export(self, tmp, extra=(), edit=None, args=()):
        b = os.path.join(tmp, "bundle")
        write_bundle(b, transforms_extra=extra)
        if edit:
            edit_bundle(b, edit)
        out = os.path.join(tmp, "pkg")
        return run_tool("export_monai.py", b, "-o", out, *args), out

    def test_bundle(self):
        # spleen_ct_segmentation's pipeline: one stage on MONAI's Spacingd grid.
        with tempfile.TemporaryDirectory() as tmp:
            r, out = self.export(tmp, edit=with_invertd)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            assert_checked(self, r)
            m = json.load(open(os.path.join(out, "model.json")))
            self.assertEqual(m["format_version"], 2)
            self.assertEqual(m["channels"], [{"modality": "CT"}])
            self.assertEqual((m["axis_order"], m["orientation"]), ("xyz", "RAS"))
            self.assertEqual(len(m["stages"]), 1)
            st = m["stages"][0]
            self.assertEqual((st["spacing_mm"], st["patch_size"]), ([1.5, 1.5, 2.0], [32, 32, 24]))
            self.assertEqual((st["grid"], st["interpolation"]), ("monai", "linear"))
            # MONAI: (x + 57) / 221, clipped to [0, 1]: the window [-57, 164] onto [0, 1]
            self.assertEqual(st["normalization"], {"scheme": "window", "window": [-57.0, 164.0],
                                                   "range": [0.0, 1.0]})
            self.assertEqual(st["output"], {"kind": "softmax"})
            self.assertEqual(st["inference"], {"overlap": 0.25, "gaussian": True, "gaussian_sigma_scale": 0.125,
                                               "mirror_axes": [], "convention": "monai"})
            self.assertEqual([(l["value"], l["name"]) for l in m["labels"]], [(1, "spleen"), (2, "liver")])
            self.assertEqual(m["license"], "Apache-2.0")
            self.assertEqual(st["sha256"], sha256(os.path.join(out, "model.onnx")))
            self.assertNotIn("Invertd", r.stderr)

    def test_without_invertd_warns(self):
        with tempfile.TemporaryDirectory() as tmp:
            r, out = self.export(tmp)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("no Invertd", r.stderr)

    def test_version_1_package(self):
        with tempfile.TemporaryDirectory() as tmp:
            r, out = self.export(tmp, extra=[{"_target_": "CropForegroundd", "keys": "image",
                                              "source_key": "image"}], args=["--format-version", "1"])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("CropForegroundd", r.stderr)
            m = json.load(open(os.path.join(out, "model.json")))
            self.assertEqual(m["format_version"], 1)
            n = m["channels"][0]["normalization"]
            # (clip(x, -57, 164) - mean) / std must equal (clip(x) + 57) / 221 exactly
            self.assertEqual((n["scheme"], n["clip"], n["std"], n["mean"]), ("ct", [-57.0, 164.0], 221.0, -57.0))
            self.assertEqual(m["spacing_mm"], [1.5, 1.5, 2.0])
            self.assertEqual((m["axis_order"], m["orientation"], m["output"]), ("xyz", "RAS", "softmax"))
            self.assertEqual(m["sha256"], sha256(os.path.join(out, "model.onnx")))

    def test_b_range_scaling_maps_exactly(self):
        # b range [-1, 1]: the window onto [-1, 1]; version 1: y = (x - mean) / std
        def b_range(cfg):
            t = cfg["preprocessing"]["transforms"][4]
            t["b_min"], t["b_max"] = -1.0, 1.0
        with tempfile.TemporaryDirectory() as tmp:
            r, out = self.export(tmp, edit=b_range)
            self.assertEqual(r.returncode, 0, r.stderr)
            n = json.load(open(os.path.join(out, "model.json")))["stages"][0]["normalization"]
            self.assertEqual((n["window"], n["range"]), ([-57.0, 164.0], [-1.0, 1.0]))
        with tempfile.TemporaryDirectory() as tmp:
            r, out = self.export(tmp, edit=b_range, args=["--format-version", "1"])
            self.assertEqual(r.returncode, 0, r.stderr)
            n = json.load(open(os.path.join(out, "model.json")))["channels"][0]["normalization"]
            for x in (-57.0, 0.0, 53.5, 164.0):
                self.assertAlmostEqual((x - n["mean"]) / n["std"], (x + 57.0) / 221.0 * 2.0 - 1.0, places=12)

    def refused(self, tmp, want, extra=(), edit=None):
        r, out = self.export(tmp, extra=extra, edit=edit)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot reproduce", r.stderr)
        self.assertIn(want, r.stderr)
        self.assertFalse(os.path.exists(out))

    def test_unreproducible_transform_is_an_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            self.refused(tmp, "GaussianSmoothd: no voxseg equivalent",
                         extra=[{"_target_": "GaussianSmoothd", "keys": "image", "sigma": 1.0}])

    def test_inexact_settings_are_refused_by_name(self):
        def spacing_mode(cfg):
            cfg["preprocessing"]["transforms"][3]["mode"] = "bicubic"

        def scale_first(cfg):
            t = cfg["preprocessing"]["transforms"]
            t[3], t[4] = t[4], t[3]

        def nearest_invert(cfg):
            with_invertd(cfg, nearest=True)

        def keep_largest(cfg):
            cfg["postprocessing"]["transforms"].append(
                {"_target_": "KeepLargestConnectedComponentd", "keys": "pred"})
        cases = [(spacing_mode, "Spacingd(mode='bicubic')"),
                 (scale_first, "ScaleIntensityRanged before Spacingd"),
                 (nearest_invert, "Invertd(nearest_interp=True)"),
                 (keep_largest, "KeepLargestConnectedComponentd")]
        for edit, want in cases:
            with self.subTest(want=want), tempfile.TemporaryDirectory() as tmp:
                self.refused(tmp, want, edit=edit)
        with tempfile.TemporaryDirectory() as tmp:
            self.refused(tmp, "CropForegroundd", extra=[{"_target_": "CropForegroundd", "keys": "image",
                                                         "source_key": "image"}])


if __name__ == "__main__":
    unittest.main()
