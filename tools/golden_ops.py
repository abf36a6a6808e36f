"""The single-op golden cases of the engine tests: ONNX models of one node whose semantics are easy
to get subtly wrong, run in ONNX Runtime as the reference. Needs onnx, onnxruntime and numpy
only (no torch): tools/gen_golden.py writes them with its networks, tools/gen_op_golden.py alone.

Writes tests/engine/golden/ops/<name>.onnx, .input.f32, .output.f32 and the index's "ops" list.
Cases draw from one seeded generator in order: append new cases at the end so that existing
files stay byte-identical.
"""
import sys

import numpy as np

OPSET = 17
SEED = 1234


def op_cases():
    """Single-op ONNX models whose semantics are easy to get subtly wrong (coordinate modes,
    ceil mode, padding rules, opset-dependent axes), run in ONNX Runtime as the reference."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(SEED)
    cases = []

    def add(name, op, x_shape, attrs=None, inits=(), extra_inputs=(), opset=OPSET, lo=-1.0, hi=1.0):
        x = rng.uniform(lo, hi, size=x_shape).astype(np.float32)
        init_protos = [numpy_helper.from_array(np.asarray(v), n) for n, v in inits]
        node = helper.make_node(op, ["x", *extra_inputs], ["y"], name=name, **(attrs or {}))
        graph = helper.make_graph(
            [node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], init_protos)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8
        cases.append((name, model, x))

    f32 = lambda a: np.asarray(a, dtype=np.float32)
    i64 = lambda a: np.asarray(a, dtype=np.int64)
    s5 = (1, 3, 7, 6, 5)
    for coord in ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]:
        add(f"resize_linear_{coord}_x1p5", "Resize", s5,
            {"mode": "linear", "coordinate_transformation_mode": coord},
            [("scales", f32([1, 1, 1.5, 2, 0.6]))], ["", "scales"])
    for nm in ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]:
        add(f"resize_nearest_halfpixel_{nm}", "Resize", s5,
            {"mode": "nearest", "coordinate_transformation_mode": "half_pixel", "nearest_mode": nm},
            [("scales", f32([1, 1, 1.5, 2, 0.6]))], ["", "scales"])
    add("resize_nearest_asym_floor_sizes", "Resize", s5,
        {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
        [("sizes", i64([1, 3, 14, 12, 10]))], ["", "", "sizes"])
    add("resize_linear_sizes_11to7", "Resize", (1, 2, 11, 13, 4),
        {"mode": "linear", "coordinate_transformation_mode": "half_pixel"},
        [("sizes", i64([1, 2, 7, 5, 9]))], ["", "", "sizes"])
    add("upsample_opset9_nearest", "Upsample", s5, {"mode": "nearest"},
        [("scales", f32([1, 1, 2, 2, 2]))], ["scales"], opset=9)
    add("maxpool_k3_s2_p1_ceil", "MaxPool", s5,
        {"kernel_shape": [3, 3, 3], "strides": [2, 2, 2], "pads": [1, 1, 1, 1, 1, 1], "ceil_mode": 1})
    add("maxpool_k2_dil2", "MaxPool", s5, {"kernel_shape": [2, 2, 2], "dilations": [2, 2, 1]})
    add("avgpool_k3_s2_p1_ceil_inclpad", "AveragePool", s5,
        {"kernel_shape": [3, 3, 3], "strides": [2, 2, 2], "pads": [1, 1, 1, 1, 1, 1],
         "ceil_mode": 1, "count_include_pad": 1})
    add("avgpool_k2_s1_samelower", "AveragePool", s5,
        {"kernel_shape": [2, 2, 2], "auto_pad": "SAME_LOWER"})
    add("globalavgpool", "GlobalAveragePool", s5)
    for mode in ["constant", "reflect", "edge"]:
        add(f"pad_{mode}", "Pad", s5, {"mode": mode},
            [("pads", i64([0, 0, 1, 2, 0, 0, 0, 2, 0, 3])), ("v", f32(0.5))], ["pads", "v"])
    add("softmax_opset11_axis1", "Softmax", (1, 3, 4, 5), {"axis": 1}, opset=11)
    add("softmax_opset13_axis1", "Softmax", s5, {"axis": 1}, opset=13)
    add("slice_negative_steps", "Slice", s5, None,
        [("st", i64([-1, 5, 1])), ("en", i64([-100, 0, 100])), ("ax", i64([2, 3, 1])),
         ("sp", i64([-2, -2, 1]))], ["st", "en", "ax", "sp"])
    w = rng.uniform(-0.3, 0.3, size=(6, 2, 3, 3, 3)).astype(np.float32)
    add("convtranspose_group_dil_outpad", "ConvTranspose", (1, 6, 4, 5, 3),
        {"strides": [2, 2, 2], "dilations": [1, 2, 1], "group": 3, "pads": [1, 0, 1, 0, 1, 1],
         "output_padding": [1, 0, 1]},
        [("w", w), ("b", f32(rng.uniform(-1, 1, 6)))], ["w", "b"])
    add("convtranspose_same_upper", "ConvTranspose", (1, 6, 4, 5, 3),
        {"strides": [2, 2, 2], "auto_pad": "SAME_UPPER", "group": 3}, [("w", w)], ["w"])
    wc = rng.uniform(-0.3, 0.3, size=(4, 3, 3, 2, 3)).astype(np.float32)
    add("conv_same_lower_s2", "Conv", s5, {"strides": [2, 2, 2], "auto_pad": "SAME_LOWER"},
        [("w", wc)], ["w"])
    add("conv_pads_dil", "Conv", s5, {"dilations": [2, 1, 2], "pads": [2, 0, 1, 1, 1, 2]},
        [("w", wc), ("b", f32(rng.uniform(-1, 1, 4)))], ["w", "b"])
    add("groupnorm_opset18", "GroupNormalization", (1, 6, 4, 5, 3),
        {"num_groups": 3, "epsilon": 1e-5},
        [("s", f32(rng.uniform(0.5, 1.5, 3))), ("b", f32(rng.uniform(-1, 1, 3)))], ["s", "b"],
        opset=18)
    add("instancenorm", "InstanceNormalization", s5, {"epsilon": 1e-3},
        [("s", f32(rng.uniform(0.5, 1.5, 3))), ("b", f32(rng.uniform(-1, 1, 3)))], ["s", "b"])
    add("batchnorm", "BatchNormalization", s5, {"epsilon": 1e-3},
        [("s", f32(rng.uniform(0.5, 1.5, 3))), ("b", f32(rng.uniform(-1, 1, 3))),
         ("m", f32(rng.uniform(-1, 1, 3))), ("v", f32(rng.uniform(0.5, 2, 3)))],
        ["s", "b", "m", "v"])
    add("prelu_channel", "PRelu", s5, None, [("slope", f32(rng.uniform(0, 0.5, (3, 1, 1, 1))))],
        ["slope"])
    add("clip_opset13", "Clip", s5, None, [("lo", f32(-0.4)), ("hi", f32(0.3))], ["lo", "hi"])
    add("div_broadcast", "Div", s5, None, [("d", f32(rng.uniform(0.5, 2, (7, 1, 5))))], ["d"])
    add("transpose", "Transpose", s5, {"perm": [0, 3, 1, 4, 2]})
    # The less common activations (issue 36's "add a unary op" example): parameters other than
    # ONNX's defaults where an op has them, inputs over [-6, 6] so every branch is taken.
    add("elu_alpha0p7", "Elu", s5, {"alpha": 0.7}, lo=-6.0, hi=6.0)
    add("selu", "Selu", s5, lo=-6.0, hi=6.0)
    add("celu_alpha1p3", "Celu", s5, {"alpha": 1.3}, lo=-6.0, hi=6.0, opset=12)
    add("softplus", "Softplus", s5, lo=-30.0, hi=30.0)
    add("mish_opset18", "Mish", s5, lo=-6.0, hi=6.0, opset=18)
    add("hardsigmoid", "HardSigmoid", s5, {"alpha": 0.25, "beta": 0.4}, lo=-6.0, hi=6.0)
    add("hardswish_opset14", "HardSwish", s5, lo=-6.0, hi=6.0, opset=14)
    return cases



def write_ops(index, out_dir):
    """Writes every case under out_dir/ops and sets index["ops"] (and the ORT version)."""
    import onnx
    import onnxruntime as ort

    index["versions"]["onnxruntime"] = ort.__version__
    index["ops"] = []
    ops_dir = out_dir / "ops"
    ops_dir.mkdir(exist_ok=True)
    for name, model, x in op_cases():
        path = ops_dir / f"{name}.onnx"
        onnx.save(model, str(path))
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        y = sess.run(None, {"x": x})[0]
        x.astype("<f4").tofile(ops_dir / f"{name}.input.f32")
        y.astype("<f4").tofile(ops_dir / f"{name}.output.f32")
        index["ops"].append({"name": name, "onnx": f"ops/{name}.onnx",
                             "input": f"ops/{name}.input.f32", "output": f"ops/{name}.output.f32",
                             "input_shape": list(x.shape), "output_shape": list(y.shape)})
        print(f"op {name}: {list(x.shape)} -> {list(y.shape)}", file=sys.stderr)
