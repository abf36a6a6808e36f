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

from golden_ops import write_ops

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
    write_ops(index, OUT)
    (OUT / "index.json").write_text(json.dumps(index, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
