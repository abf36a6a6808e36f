#!/usr/bin/env python3
"""Generates the engine golden tests: small networks of the kinds users bring (nnU-Net
PlainConvUNet, MONAI UNet / BasicUNet / SegResNet), exported to ONNX (opset 17, static shapes,
TorchScript exporter as nnU-Net/MONAI export scripts use), run in PyTorch on a seeded input.

Writes tests/engine/golden/<name>.onnx, <name>.input.f32, <name>.output.f32 (raw little-endian
float32, C order) and index.json. The files are committed so that CI needs no Python.

    pip install -r tools/requirements-golden.txt
    python3 tools/gen_golden.py            # rewrites tests/engine/golden/

Parameters that PyTorch initialises to constants (norm affine weights, PReLU slopes, BatchNorm
running statistics) are randomised so that a backend that ignores them fails.
"""
import json
import pathlib
import sys

import numpy as np
import torch
import torch.nn as nn

OPSET = 17
SEED = 1234
OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "engine" / "golden"


def randomize_constant_params(model: nn.Module, gen: torch.Generator) -> None:
    """Norm scales/biases, PReLU slopes and BatchNorm statistics get random values."""
    for m in model.modules():
        if isinstance(m, (nn.InstanceNorm3d, nn.GroupNorm, nn.BatchNorm3d)) and getattr(m, "weight", None) is not None:
            with torch.no_grad():
                m.weight.copy_(0.5 + torch.rand(m.weight.shape, generator=gen))
                m.bias.copy_(torch.rand(m.bias.shape, generator=gen) - 0.5)
        if isinstance(m, nn.BatchNorm3d) and m.running_mean is not None:
            with torch.no_grad():
                m.running_mean.copy_(torch.rand(m.running_mean.shape, generator=gen) - 0.5)
                m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=gen))
        if isinstance(m, nn.PReLU):
            with torch.no_grad():
                m.weight.copy_(torch.rand(m.weight.shape, generator=gen) * 0.5)


def nnunet_plain():
    from dynamic_network_architectures.architectures.unet import PlainConvUNet

    return PlainConvUNet(
        input_channels=1, n_stages=3, features_per_stage=[4, 8, 16], conv_op=nn.Conv3d,
        kernel_sizes=3, strides=[1, 2, 2], n_conv_per_stage=2, num_classes=3,
        n_conv_per_stage_decoder=2, conv_bias=True, norm_op=nn.InstanceNorm3d,
        norm_op_kwargs={"eps": 1e-5, "affine": True}, nonlin=nn.LeakyReLU,
        nonlin_kwargs={"inplace": True}), (1, 1, 16, 24, 20)


def nnunet_plain_aniso():
    """nnU-Net plans for anisotropic data: 1x3x3 kernels and 1x2x2 strides in the first stages."""
    from dynamic_network_architectures.architectures.unet import PlainConvUNet

    return PlainConvUNet(
        input_channels=2, n_stages=3, features_per_stage=[4, 8, 12], conv_op=nn.Conv3d,
        kernel_sizes=[[1, 3, 3], [3, 3, 3], [3, 3, 3]], strides=[[1, 1, 1], [1, 2, 2], [2, 2, 2]],
        n_conv_per_stage=2, num_classes=2, n_conv_per_stage_decoder=2, conv_bias=True,
        norm_op=nn.InstanceNorm3d, norm_op_kwargs={"eps": 1e-5, "affine": True},
        nonlin=nn.LeakyReLU, nonlin_kwargs={"inplace": True}), (1, 2, 8, 20, 16)


def monai_unet():
    from monai.networks.nets import UNet

    return UNet(spatial_dims=3, in_channels=1, out_channels=2, channels=(4, 8, 16),
                strides=(2, 2), num_res_units=2, act="PRELU", norm="INSTANCE"), (1, 1, 16, 20, 24)


def monai_unet_batchnorm():
    from monai.networks.nets import UNet

    return UNet(spatial_dims=3, in_channels=1, out_channels=3, channels=(4, 8, 16),
                strides=(2, 2), num_res_units=1, act="RELU", norm="BATCH"), (1, 1, 16, 16, 16)


class WithSoftmax(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return torch.softmax(self.net(x), dim=1)


def monai_basicunet_softmax():
    from monai.networks.nets import BasicUNet

    return WithSoftmax(BasicUNet(spatial_dims=3, in_channels=1, out_channels=3,
                                 features=(4, 4, 8, 8, 16, 4))), (1, 1, 16, 16, 32)


def monai_segresnet():
    from monai.networks.nets import SegResNet

    return SegResNet(spatial_dims=3, init_filters=4, in_channels=1, out_channels=2,
                     blocks_down=(1, 2, 2), blocks_up=(1, 1), norm=("GROUP", {"num_groups": 2}),
                     upsample_mode="nontrainable"), (1, 1, 16, 20, 24)


def monai_segresnet_deconv():
    from monai.networks.nets import SegResNet

    return SegResNet(spatial_dims=3, init_filters=4, in_channels=2, out_channels=3,
                     blocks_down=(1, 1, 1), blocks_up=(1, 1), norm=("GROUP", {"num_groups": 4}),
                     upsample_mode="deconv"), (1, 2, 16, 16, 16)


NETS = {
    "nnunet_plain": nnunet_plain,
    "nnunet_plain_aniso": nnunet_plain_aniso,
    "monai_unet": monai_unet,
    "monai_unet_batchnorm": monai_unet_batchnorm,
    "monai_basicunet_softmax": monai_basicunet_softmax,
    "monai_segresnet": monai_segresnet,
    "monai_segresnet_deconv": monai_segresnet_deconv,
}


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
    return cases


def main() -> int:
    import monai
    import onnx

    OUT.mkdir(parents=True, exist_ok=True)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    index = {
        "generator": "tools/gen_golden.py",
        "versions": {"torch": torch.__version__, "onnx": onnx.__version__,
                     "monai": monai.__version__, "numpy": np.__version__},
        "opset": OPSET,
        "seed": SEED,
        "format": "raw little-endian float32, C order (NCDHW)",
        "nets": [],
    }
    for i, (name, factory) in enumerate(NETS.items()):
        torch.manual_seed(SEED + i)
        gen = torch.Generator().manual_seed(SEED + 100 + i)
        net, shape = factory()
        randomize_constant_params(net, gen)
        net.eval()
        x = torch.randn(shape, generator=gen, dtype=torch.float32)
        with torch.no_grad():
            y = net(x)
        path = OUT / f"{name}.onnx"
        torch.onnx.export(net, (x,), str(path), opset_version=OPSET, dynamo=False,
                          input_names=["input"], output_names=["output"],
                          do_constant_folding=True)
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
        ops = sorted({n.op_type for n in model.graph.node})
        x.numpy().astype("<f4").tofile(OUT / f"{name}.input.f32")
        y.numpy().astype("<f4").tofile(OUT / f"{name}.output.f32")
        index["nets"].append({
            "name": name, "onnx": path.name, "input": f"{name}.input.f32",
            "output": f"{name}.output.f32", "input_shape": list(shape),
            "output_shape": list(y.shape), "onnx_ops": ops,
            "parameters": int(sum(p.numel() for p in net.parameters())),
        })
        print(f"{name}: in {list(shape)} out {list(y.shape)} ops {ops}", file=sys.stderr)
    import onnxruntime as ort

    index["versions"]["onnxruntime"] = ort.__version__
    index["ops"] = []
    ops_dir = OUT / "ops"
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
    (OUT / "index.json").write_text(json.dumps(index, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
