#!/usr/bin/env python3
"""tools/export_nninteractive.py without torch: how it resolves an nnInteractive model folder as
nninteractive 2.6.0 does (modern inference_info.json, the legacy inference_session_class.json in
its string and object forms with their different decay defaults, negative channel indices,
inferred channel counts, the licence and its fallbacks) and what it refuses, naming the reason.
Where torch, onnx and dynamic_network_architectures are installed (skipped otherwise), the
fabricated folder of tools/nninteractive_parity.py is exported again and must give the committed
goldens' model.json (tests/edit/data/nninteractive/model), and weights for another channel count
are refused; the session parity itself is tests/edit/interactive_parity_test.cpp.

    python3 -m unittest tools/tests/test_export_nninteractive.py -v
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TOOLS)
import export_nninteractive as eni  # noqa: E402

DEFAULT_MAPPING = {"prev_seg": 0, "bbox2d": [1, 2], "bbox3d": [1, 2], "lasso": [1, 2],
                   "points": [3, 4], "scribble": [5, 6]}


def write(folder, name, obj):
    path = os.path.join(folder, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        if isinstance(obj, str) and name == "LICENSE":
            f.write(obj)
        else:
            json.dump(obj, f)


def model_folder(d, capability=None, legacy=None, licence=None, plans=True, dataset=True):
    if capability is not None:
        write(d, "inference_info.json", capability)
    if legacy is not None:
        write(d, "inference_session_class.json", legacy)
    if licence is not None:
        write(d, "LICENSE", licence)
    if plans:
        write(d, "plans.json", {"dataset_name": "Dataset001_Test", "configurations": {}})
    if dataset:
        write(d, "dataset.json", {"channel_names": {"0": "CT"}, "labels": {"background": 0}})
    return d


def run_cli(*args):
    return subprocess.run([sys.executable, os.path.join(TOOLS, "export_nninteractive.py"), *args],
                          capture_output=True, text=True)


class Resolution(unittest.TestCase):
    def test_legacy_string_form_decay_0_9_and_default_capability(self):
        with tempfile.TemporaryDirectory() as d:
            r = eni.resolve_folder(model_folder(d, legacy="nnInteractiveInferenceSessionV3"))
        self.assertEqual(r["interaction_decay"], 0.9)
        self.assertEqual(r["capability_file"], "inference_session_class.json")
        self.assertEqual((r["point_radius"], r["scribble_thickness"], r["pad_mode_image"]),
                         (4, [2, 2, 2], "constant"))
        self.assertEqual(r["channel_mapping"], DEFAULT_MAPPING)
        self.assertEqual(r["num_interaction_channels"], 7)
        self.assertFalse(r["supported_interactions"]["bbox3d"])
        self.assertTrue(r["supported_interactions"]["bbox2d"])
        self.assertTrue(r["supports_initial_label"])

    def test_legacy_object_form_default_decay_0_98_and_its_values(self):
        with tempfile.TemporaryDirectory() as d:
            r = eni.resolve_folder(model_folder(d, legacy={"point_radius": 3,
                                                           "preferred_scribble_thickness": 1}))
            self.assertEqual(r["interaction_decay"], 0.98)
            self.assertEqual(r["point_radius"], 3)
            self.assertEqual(r["scribble_thickness"], [1, 1, 1])   # scalar -> 3 axes
        with tempfile.TemporaryDirectory() as d:
            # 2.6.0 reads only the runtime values from a legacy object: its capability stays
            # the built-in default even when the object names interactions
            r = eni.resolve_folder(model_folder(d, legacy={
                "interaction_decay": 0.5, "supported_interactions": {"bbox3d": True}}))
            self.assertEqual(r["interaction_decay"], 0.5)
            self.assertFalse(r["supported_interactions"]["bbox3d"])

    def test_modern_file_wins_over_legacy_and_merges_over_defaults(self):
        cap = {"inference_class": "nnInteractiveInferenceSession",
               "inference_class_min_version": "2.6.0",
               "supported_interactions": {"bbox3d": True, "lasso": False},
               "supports_initial_label": False, "interaction_decay": 0.95,
               "point_radius": 5, "preferred_scribble_thickness": [1, 2, 3],
               "channel_mapping": {"points": [7, 8]}, "interaction_channels": 8}
        with tempfile.TemporaryDirectory() as d:
            r = eni.resolve_folder(model_folder(d, capability=cap, legacy="ignored"))
        self.assertEqual(r["capability_file"], "inference_info.json")
        self.assertEqual(r["interaction_decay"], 0.95)
        self.assertEqual(r["point_radius"], 5)
        self.assertEqual(r["scribble_thickness"], [1, 2, 3])
        self.assertEqual(r["num_interaction_channels"], 9)
        self.assertEqual(r["channel_mapping"]["points"], [7, 8])
        self.assertEqual(r["channel_mapping"]["scribble"], [5, 6])
        self.assertEqual(r["supported_interactions"],
                         {"scribble": True, "lasso": False, "points": True, "bbox2d": True,
                          "bbox3d": True})
        self.assertFalse(r["supports_initial_label"])

    def test_modern_defaults(self):
        with tempfile.TemporaryDirectory() as d:
            r = eni.resolve_folder(model_folder(d, capability={}))
        self.assertEqual(r["interaction_decay"], 0.98)
        self.assertEqual(r["num_interaction_channels"], 7)

    def test_negative_channel_indices_made_positive(self):
        cap = {"channel_mapping": {"prev_seg": -7, "scribble": [-2, -1]}, "interaction_channels": 6}
        with tempfile.TemporaryDirectory() as d:
            r = eni.resolve_folder(model_folder(d, capability=cap))
        self.assertEqual(r["channel_mapping"]["prev_seg"], 0)
        self.assertEqual(r["channel_mapping"]["scribble"], [5, 6])

    def test_channel_count_inferred_from_mapping(self):
        # positive indices count from 0, negative ones from the end (1-based)
        self.assertEqual(eni.infer_num_interaction_channels(
            {"prev_seg": 0, "points": [3, 4], "scribble": [5, 6]}), 7)
        self.assertEqual(eni.infer_num_interaction_channels({"prev_seg": -9, "points": [1, 2]}), 9)
        self.assertEqual(eni.infer_num_interaction_channels({"prev_seg": 0}), 1)
        cap = eni.apply_capability({"channel_mapping": {"points": [9, 10]}})
        self.assertEqual(cap["num_interaction_channels"], 11)

    def test_licence_first_line_then_fallbacks(self):
        with tempfile.TemporaryDirectory() as d:
            model_folder(d, capability={}, licence="\n  \nCC BY-NC-SA 4.0  \nhttps://...\n")
            self.assertEqual(eni.licence_of(d, {}, {}), "CC BY-NC-SA 4.0")
        with tempfile.TemporaryDirectory() as d:
            official = {"dataset_name": "Dataset225_nnInteractiveV2"}
            ckpt = {"init_args": {"configuration": "3d_fullres_ps192_bs24"}}
            self.assertEqual(eni.licence_of(d, official, ckpt), "CC BY-NC-SA 4.0")
            self.assertEqual(eni.licence_of(d, official, {"init_args": {"configuration": "x"}}),
                             "!!MISSING!!")
            self.assertEqual(eni.licence_of(d, {}, ckpt), "!!MISSING!!")
            write(d, "LICENSE", "\n\n")                          # empty file: still missing
            self.assertEqual(eni.licence_of(d, {}, {}), "!!MISSING!!")


class Refusals(unittest.TestCase):
    def expect(self, folder, *words):
        with self.assertRaises(eni.ResolveError) as e:
            eni.resolve_folder(folder)
        for w in words:
            self.assertIn(w, str(e.exception))

    def test_other_session_class_or_newer_version(self):
        with tempfile.TemporaryDirectory() as d:
            self.expect(model_folder(d, capability={"inference_class": "nnInteractiveSessionV4"}),
                        "nnInteractiveSessionV4", "2.6.0")
        with tempfile.TemporaryDirectory() as d:
            self.expect(model_folder(d, capability={"inference_class_min_version": "2.7.1"}),
                        ">=2.7.1", "2.6.0")
        with tempfile.TemporaryDirectory() as d:   # 2.10 > 2.6 numerically, not as text
            self.expect(model_folder(d, capability={"inference_class_min_version": "2.10"}), "2.10")
        with tempfile.TemporaryDirectory() as d:
            r = eni.resolve_folder(model_folder(d, capability={"inference_class_min_version": "2.5"}))
            self.assertEqual(r["num_interaction_channels"], 7)

    def test_unknown_interactions_and_mapping_keys(self):
        with tempfile.TemporaryDirectory() as d:
            self.expect(model_folder(d, capability={"supported_interactions": {"clicks": True}}),
                        "unsupported interactions", "clicks")
        with tempfile.TemporaryDirectory() as d:
            self.expect(model_folder(d, capability={"channel_mapping": {"text": [7, 8]}}),
                        "channel_mapping", "text")
        with tempfile.TemporaryDirectory() as d:
            self.expect(model_folder(d, capability={"channel_mapping": {"points": [3]}}),
                        "points", "pair")
        with tempfile.TemporaryDirectory() as d:
            self.expect(model_folder(d, capability={"channel_mapping": {"points": [3, -9]},
                                                    "interaction_channels": 6}),
                        "points", "-9", "outside")

    def test_bad_metadata(self):
        with tempfile.TemporaryDirectory() as d:
            self.expect(model_folder(d, capability=["not", "an", "object"]), "JSON object")
        with tempfile.TemporaryDirectory() as d:
            self.expect(model_folder(d, capability={"pad_mode_image": "reflect"}), "reflect")
        with tempfile.TemporaryDirectory() as d:
            self.expect(model_folder(d, capability={"interaction_decay": 1.5}), "(0, 1]")
        with tempfile.TemporaryDirectory() as d:
            self.expect(model_folder(d, capability={"point_radius": [3, 5]}), "point_radius",
                        "random")

    def test_missing_files_are_named(self):
        with tempfile.TemporaryDirectory() as d:
            self.expect(model_folder(d), "inference_info.json", "inference_session_class.json")
        with tempfile.TemporaryDirectory() as d:
            self.expect(model_folder(d, capability={}, plans=False), "plans.json")
        with tempfile.TemporaryDirectory() as d:
            self.expect(model_folder(d, capability={}, dataset=False), "dataset.json")

    def test_cli_names_the_missing_checkpoint_or_fold(self):
        with tempfile.TemporaryDirectory() as d:
            model_folder(d, capability={})
            out = run_cli(d, "-o", os.path.join(d, "pkg"))
            self.assertNotEqual(out.returncode, 0)
            self.assertIn("0 fold_ folders", out.stderr)
            os.makedirs(os.path.join(d, "fold_0"))
            out = run_cli(d, "-o", os.path.join(d, "pkg"))
            self.assertNotEqual(out.returncode, 0)
            self.assertIn(os.path.join("fold_0", "checkpoint_final.pth"), out.stderr)
            os.makedirs(os.path.join(d, "fold_1"))
            out = run_cli(d, "-o", os.path.join(d, "pkg"))
            self.assertIn("fold_0, fold_1", out.stderr)
            out = run_cli(d, "-o", os.path.join(d, "pkg"), "--fold", "3")
            self.assertIn("no fold_3", out.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "pkg")))
        with tempfile.TemporaryDirectory() as d:
            out = run_cli(os.path.join(d, "nope"), "-o", os.path.join(d, "pkg"))
            self.assertNotEqual(out.returncode, 0)
            self.assertIn("not a folder", out.stderr)


class Section(unittest.TestCase):
    def test_interactive_section_has_every_contract_key(self):
        with tempfile.TemporaryDirectory() as d:
            r = eni.resolve_folder(model_folder(d, legacy="x"))
        s = eni.interactive_section(r, {"patch_size": [192, 192, 192]}, "3d_fullres_ps192_bs24",
                                    "nnInteractiveTrainer_stub", "CC BY-NC-SA 4.0", "network.onnx", 1)
        self.assertEqual(set(s), {
            "source", "session_version", "network", "patch_size", "image_channels",
            "interaction_channels", "channel_mapping", "supported_interactions",
            "supports_initial_label", "point_radius", "scribble_thickness", "interaction_decay",
            "pad_mode_image", "autozoom", "normalization", "num_classes", "licence", "trainer",
            "configuration", "dataset"})
        self.assertEqual(s["autozoom"], {"max_factor": 4, "growth": 1.5})
        self.assertEqual((s["interaction_channels"], s["interaction_decay"], s["num_classes"]),
                         (7, 0.9, 2))
        json.dumps(s)   # plain JSON (no tuples left)
        self.assertTrue(all(isinstance(v, list) for k, v in s["channel_mapping"].items()
                            if k != "prev_seg"))

    def test_refinement_margin_scaled_explicit_and_refused(self):
        self.assertEqual(eni.refinement_margin("scaled", [192, 192, 192]), [24, 24, 24])
        self.assertEqual(eni.refinement_margin("scaled", [64, 64, 64]), [8, 8, 8])
        self.assertEqual(eni.refinement_margin("scaled", [72, 80, 88]), [9, 10, 11])
        self.assertEqual(eni.refinement_margin("5", [64, 64, 64]), [5, 5, 5])
        self.assertEqual(eni.refinement_margin("4,5,6", [64, 64, 64]), [4, 5, 6])
        for bad, why in (("32", "no inner part"), ("1,2", "expected"), ("-1", "expected"),
                         ("wide", "expected")):
            with self.assertRaises(eni.ResolveError) as e:
                eni.refinement_margin(bad, [64, 64, 64])
            self.assertIn(why, str(e.exception))


def has_export_deps():
    try:
        import dynamic_network_architectures  # noqa: F401
        import onnx  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


REPO = os.path.dirname(TOOLS)
COMMITTED = os.path.join(REPO, "tests", "edit", "data", "nninteractive", "model", "model.json")


@unittest.skipUnless(has_export_deps(), "needs torch, onnx and dynamic_network_architectures")
class FabricatedExport(unittest.TestCase):
    """tools/nninteractive_parity.py's fabricated folder exported again: the same model.json as
    the committed goldens' package (the network file aside, whose bytes depend on torch's
    version), and a network that does not match the capability's channel count refused."""

    def fabricate(self, d):
        folder = os.path.join(d, "fab")
        out = subprocess.run([sys.executable, os.path.join(TOOLS, "nninteractive_parity.py"),
                              "fabricate", folder], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        return folder

    def test_export_matches_the_committed_package(self):
        with tempfile.TemporaryDirectory() as d:
            folder = self.fabricate(d)
            out = run_cli(folder, "-o", os.path.join(d, "pkg"))
            self.assertEqual(out.returncode, 0, out.stderr)
            with open(os.path.join(d, "pkg", "model.json")) as f:
                fresh = json.load(f)
            import onnx
            graph = onnx.load(os.path.join(d, "pkg", "network.onnx")).graph
            dims = [d.dim_value or d.dim_param for d in graph.input[0].type.tensor_type.shape.dim]
        with open(COMMITTED) as f:
            committed = json.load(f)
        self.assertEqual(fresh["interactive"], committed["interactive"])
        for k in set(fresh) | set(committed):
            if k not in ("models", "_export"):
                self.assertEqual(fresh.get(k), committed.get(k), k)
        self.assertEqual([m["file"] for m in fresh["models"]], ["network.onnx"])
        self.assertEqual(dims, ["batch", 8, 72, 80, 88])

    def test_weights_for_another_channel_count_are_refused(self):
        with tempfile.TemporaryDirectory() as d:
            folder = self.fabricate(d)
            path = os.path.join(folder, "inference_info.json")
            with open(path) as f:
                cap = json.load(f)
            cap["interaction_channels"] = 7          # 8 channels + the image: 9 inputs
            with open(path, "w") as f:
                json.dump(cap, f)
            out = run_cli(folder, "-o", os.path.join(d, "pkg"))
            self.assertNotEqual(out.returncode, 0)
            self.assertIn("weights do not match the network", out.stderr)
            self.assertIn("9 input channels", out.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "pkg")))


if __name__ == "__main__":
    unittest.main()
