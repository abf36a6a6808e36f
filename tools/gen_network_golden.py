#!/usr/bin/python3
"""Generates the whole-network goldens of issue 14 part 2: networks built by the real libraries at
tiny configurations, exported to ONNX (opset 17, SwinUNETR 16; static shapes) and run in PyTorch
on a seeded input.

  swinunetr_v1   MONAI SwinUNETR, img 64^3 (32^3 leaves a 1-voxel InstanceNorm), feature_size 12,
                 depths (2,2,2,2) (the second block of each stage has the shifted window: roll
                 as Slice+Concat, attention mask built by ScatterND, folded at import),
                 heads (3,6,12,24), 1 in / 3 out
  swinunetr_v2   the same with use_v2=True (residual conv block before each stage)
  swinunetr_v2_small  committed: feature_size 3 (past MONAI's multiple-of-12 check), heads
                 (1,1,1,1), 2 out, 64^3, input quantised to 1/8, output stored on the 32^3 centre
  resenc_m_small dynamic_network_architectures ResidualEncoderUNet, ResEnc-M layout
                 (n_blocks_per_stage [1,3,4,6], n_conv_per_stage_decoder 1, 4 stages) with
                 features [4,8,12,16], input 16^3
  resenc_l_small the ResEnc-L layout: 6 stages, n_blocks_per_stage [1,3,4,6,6,6], features
                 [4,6,8,10,12,12], anisotropic first kernel and strides, input 16x32x32
  primus_v3_tiny dynamic_network_architectures PrimusV3 (nnU-Net's Primus: 8x8x8 patch tokens,
                 EVA blocks with 3D rotary embeddings, SwiGLU, LayerScale), embed 48, 2 blocks,
                 4 heads, conv stem channels (4,8,16,32), input 32^3
  unetr_tiny     MONAI UNETR (12 ViT layers), img 32x16x16 (patch 16: 2 tokens), hidden 12,
                 2 heads, mlp 24, feature_size 2, instance norm, res blocks
  segresnetds    MONAI SegResNetDS, init_filters 2, blocks_down (1,2,2,4), dsdepth 3, input 16^3
  dynunet_ds     MONAI DynUNet, filters [4,8,8,16], res blocks, deep_supervision=True
                 (deep_supr_num 2); at eval() the forward returns only the main head, which is
                 what is exported (as nnU-Net and MONAI run it at inference); input 16^3

Writes tests/engine/golden/networks/<name>.onnx, .input.f32, .output.f32 (raw little-endian
float32, C order NCDHW) and index.json. Files too large to commit (see index.json "committed")
are kept out of git by tests/engine/golden/networks/.gitignore; the C++ test skips those cases
when the files are absent and runs them when this script has been run locally.

MONAI 1.4.0, not 1.3.x: 1.3 passes a traced tensor to F.layer_norm in SwinUNETR.proj_out and
cannot be exported (fixed in 1.4 by int(x.shape[1])).

index.json also records bf16_emulated_rel_error: PyTorch's own error with bf16 autocast's
rounding (the C++ test's bf16 bound is max(3 %, 1.5 x that)).

Pinned: Debian bookworm's python3-torch 1.13.1, python3-onnx 1.12 and python3-torchvision
0.14.1 (timm imports it), plus pure-Python packages installed without dependencies (what
scripts/deps.sh puts into build/pylib):
    /usr/bin/python3 -m pip install --no-deps --target build/pylib \
        monai==1.4.0 dynamic-network-architectures==0.4.4 timm==1.0.22 einops==0.8.1
    PYTHONPATH=build/pylib /usr/bin/python3 tools/gen_network_golden.py [names...]
(dynamic_network_architectures 0.4.4 needs timm < 1.0.23; the goldens before Primus were made
with 0.3.1, whose ResidualEncoderUNet is the same.)
"""
import json
import pathlib
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn

warnings.filterwarnings("ignore")
SEED = 1234
OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "engine" / "golden" / "networks"


def swinunetr(v2):
    from monai.networks.nets import SwinUNETR
    return SwinUNETR(img_size=(64, 64, 64), in_channels=1, out_channels=3, feature_size=12,
                     depths=(2, 2, 2, 2), num_heads=(3, 6, 12, 24), use_v2=v2), (1, 1, 64, 64, 64)


class _Width(int):
    """A SwinUNETR feature_size that passes MONAI's 'divisible by 12' check (there for its default
    heads (3,6,12,24)); with one head per stage width 3 builds the same modules at 1/16 of the
    weights."""

    def __mod__(self, other):
        return 0


def swinunetr_small():
    # 64^3 is the smallest input MONAI 1.4 exports (a side of 32 leaves 1 voxel at the bottleneck and
    # the tracer loses the channel count); stage 1 (32^3 tokens) and stage 2 (16^3) have 7^3
    # windows with the shifted-window mask, stage 3 pads 8 to 14, stage 4 shrinks the window to 4.
    from monai.networks.nets import SwinUNETR
    return SwinUNETR(img_size=(64, 64, 64), in_channels=1, out_channels=2, feature_size=_Width(3),
                     depths=(2, 2, 2, 2), num_heads=(1, 1, 1, 1), use_v2=True), (1, 1, 64, 64, 64)


def resenc_unet(features, strides, kernels, n_blocks):
    from dynamic_network_architectures.architectures.unet import ResidualEncoderUNet
    return ResidualEncoderUNet(
        input_channels=1, n_stages=len(features), features_per_stage=features, conv_op=nn.Conv3d,
        kernel_sizes=kernels, strides=strides, n_blocks_per_stage=n_blocks, num_classes=3,
        n_conv_per_stage_decoder=[1] * (len(features) - 1), conv_bias=True,
        norm_op=nn.InstanceNorm3d, norm_op_kwargs={"eps": 1e-5, "affine": True}, dropout_op=None,
        dropout_op_kwargs=None, nonlin=nn.LeakyReLU, nonlin_kwargs={"inplace": True},
        deep_supervision=False)


def resenc():
    return resenc_unet([4, 8, 12, 16], [1, 2, 2, 2], 3, [1, 3, 4, 6]), (1, 1, 16, 16, 16)


def resenc_l():
    # nnU-Net ResEnc L preset (nnUNetResEncUNetLPlans): 6 stages, n_blocks [1,3,4,6,6,6]; an
    # anisotropic first kernel and last stride as the planner writes them for thick-slice CT
    kernels = [[1, 3, 3]] + [[3, 3, 3]] * 5
    strides = [[1, 1, 1], [1, 2, 2], [2, 2, 2], [2, 2, 2], [1, 2, 2], [2, 1, 1]]
    return resenc_unet([4, 6, 8, 10, 12, 12], strides, kernels, [1, 3, 4, 6, 6, 6]), (1, 1, 16, 32, 32)


def primus():
    # nnU-Net's PrimusV3 (dynamic_network_architectures 0.4.4) at a tiny width: 8x8x8 patch tokens
    # after the deeper conv stem, EVA blocks with 3D rotary embeddings (RotaryEmbeddingCat),
    # SwiGLU MLP, LayerScale (init_values 0.1), scaled inner attention norm; patch decoder.
    # V3-S is embed 396, 12 blocks, 6 heads; here embed 48, 2 blocks, 4 heads (rope dim 8).
    from dynamic_network_architectures.architectures.primus import PrimusV3
    return PrimusV3(1, 48, (8, 8, 8), 3, eva_depth=2, eva_numheads=4, input_shape=(32, 32, 32),
                    ch_per_level=(4, 8, 16, 32)), (1, 1, 32, 32, 32)


def unetr():
    from monai.networks.nets import UNETR
    return UNETR(in_channels=1, out_channels=3, img_size=(32, 16, 16), feature_size=2,
                 hidden_size=12, mlp_dim=24, num_heads=2, norm_name="instance",
                 res_block=True), (1, 1, 32, 16, 16)


def segresnetds():
    from monai.networks.nets import SegResNetDS
    return SegResNetDS(spatial_dims=3, init_filters=2, in_channels=1, out_channels=3,
                       blocks_down=(1, 2, 2, 4), dsdepth=3), (1, 1, 16, 16, 16)


def dynunet():
    from monai.networks.nets import DynUNet
    return DynUNet(spatial_dims=3, in_channels=1, out_channels=3, kernel_size=[3, 3, 3, 3],
                   strides=[1, 2, 2, 2], upsample_kernel_size=[2, 2, 2], filters=[4, 8, 8, 16],
                   norm_name="instance", deep_supervision=True, deep_supr_num=2,
                   res_block=True), (1, 1, 16, 16, 16)


SPECS = {"swinunetr_v1": lambda: swinunetr(False), "swinunetr_v2": lambda: swinunetr(True),
         "resenc_m_small": resenc, "resenc_l_small": resenc_l, "primus_v3_tiny": primus,
         "swinunetr_v2_small": swinunetr_small, "unetr_tiny": unetr, "segresnetds": segresnetds,
         "dynunet_ds": dynunet}

# torch 1.13 exports F.layer_norm without weight (SwinUNETR.proj_out) at opset 17 as a
# LayerNormalization with an empty scale input, which the ONNX checker rejects: SwinUNETR is
# exported at opset 16, where LayerNorm is spelled out (ReduceMean/Sub/Pow/Sqrt/Div; fused at import).
OPSET = {"swinunetr_v1": 16, "swinunetr_v2": 16, "swinunetr_v2_small": 16}
# SwinUNETR's smallest configuration is 19-22 MB of ONNX (feature_size must be a multiple of 12;
# encoder10 alone is two 3^3 convolutions of 192 channels): listed in .gitignore, over the
# repository's budget for committed goldens; the test runs them when generated locally.
NOT_COMMITTED = {"swinunetr_v1", "swinunetr_v2"}
# Committed with a smaller footprint: the input quantised to multiples of 1/8 (git's zlib packs it
# to a fraction), the output stored (and compared) on a centred crop of the spatial dims.
QUANTISED_INPUT = {"swinunetr_v2_small"}
OUTPUT_CROP = {"swinunetr_v2_small": ([16, 16, 16], [32, 32, 32])}


def randomized(model, gen):
    """Norm affine parameters and LayerScale gammas get random values (a backend ignoring them
    fails)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.rsplit(".", 1)[-1] in ("gamma_1", "gamma_2"):
                p.copy_(0.05 + 0.2 * torch.rand(p.shape, generator=gen))
        for m in model.modules():
            if (isinstance(m, (nn.LayerNorm, nn.InstanceNorm3d, nn.GroupNorm, nn.BatchNorm3d))
                    or type(m).__name__ == "LayerNormNd") \
                    and getattr(m, "weight", None) is not None:
                m.weight.copy_(0.5 + torch.rand(m.weight.shape, generator=gen))
                m.bias.copy_(torch.rand(m.bias.shape, generator=gen) - 0.5)
    return model.eval()


class _Bf16Autocast:
    """PyTorch in fp32 with the rounding bf16 autocast does: the operands and outputs of every
    convolution, linear layer and matmul rounded to bf16 (torch 1.13's CPU autocast cannot run
    Primus). The error it gives is the network's own bf16 sensitivity; the C++ test allows
    1.5 x that when it is above its default bf16 bound."""

    def __enter__(self):
        import torch.nn.functional as F
        r = lambda t: t.bfloat16().float()  # noqa: E731
        self.saved = (F.linear, F.conv3d, F.conv_transpose3d, torch.matmul, torch.Tensor.__matmul__)
        lin, conv, convt, mm, _ = self.saved
        F.linear = lambda a, w, b=None: r(lin(r(a), r(w), b))
        F.conv3d = lambda a, w, b=None, *k: r(conv(r(a), r(w), b, *k))
        F.conv_transpose3d = lambda a, w, b=None, *k: r(convt(r(a), r(w), b, *k))
        torch.matmul = torch.Tensor.__matmul__ = lambda a, b: r(mm(r(a), r(b)))
        return self

    def __exit__(self, *exc):
        import torch.nn.functional as F
        F.linear, F.conv3d, F.conv_transpose3d, torch.matmul, torch.Tensor.__matmul__ = self.saved


def first(y):
    return y[0] if isinstance(y, (list, tuple)) else y


def main():
    import onnx
    OUT.mkdir(parents=True, exist_ok=True)
    names = sys.argv[1:] or list(SPECS)
    index_path = OUT / "index.json"
    old = json.loads(index_path.read_text())["nets"] if index_path.exists() else []
    entries = {e["name"]: e for e in old}
    for name in names:
        torch.manual_seed(SEED)
        gen = torch.Generator().manual_seed(SEED)
        model, shape = SPECS[name]()
        model = randomized(model, gen)
        x = torch.randn(shape, generator=gen)
        if name in QUANTISED_INPUT:
            x = torch.round(x * 8) / 8
        with torch.no_grad():
            y = first(model(x))
            with _Bf16Autocast():
                y_bf16 = first(model(x))
        bf16_error = float((y_bf16 - y).abs().max() / y.abs().max())
        full_shape = list(y.shape)
        path = OUT / f"{name}.onnx"
        opset = OPSET.get(name, 17)
        torch.onnx.export(model, x, str(path), opset_version=opset, input_names=["image"],
                          output_names=["logits"], do_constant_folding=True)
        x.numpy().astype("<f4").tofile(OUT / f"{name}.input.f32")
        crop = OUTPUT_CROP.get(name)
        if crop:
            y = y[(slice(None), slice(None)) + tuple(slice(b, b + n) for b, n in zip(*crop))]
        y.numpy().astype("<f4").tofile(OUT / f"{name}.output.f32")
        ops = sorted({n.op_type for n in onnx.load(str(path)).graph.node})
        entries[name] = {"name": name, "opset": opset, "input_shape": list(shape),
                         "output_shape": full_shape, "max_abs_output": float(y.abs().max()),
                         "parameters": sum(p.numel() for p in model.parameters()),
                         "onnx_bytes": path.stat().st_size, "onnx_ops": ops,
                         "bf16_emulated_rel_error": bf16_error,
                         "committed": name not in NOT_COMMITTED}
        if crop:
            entries[name]["output_crop"] = {"begin": crop[0], "shape": crop[1]}
        print(name, list(y.shape), "max |y|", round(float(y.abs().max()), 4), "bf16 autocast error",
              round(bf16_error, 4), "params",
              entries[name]["parameters"], "onnx", path.stat().st_size, "ops", ops, flush=True)
    import monai
    from importlib.metadata import version
    index = {"generator": "tools/gen_network_golden.py",
             "versions": {"torch": torch.__version__, "onnx": onnx.__version__,
                          "numpy": np.__version__, "monai": monai.__version__,
                          "dynamic_network_architectures": version("dynamic_network_architectures"),
                          "timm": version("timm")},
             "seed": SEED, "format": "raw little-endian float32, C order NCDHW",
             "nets": [entries[k] for k in SPECS if k in entries]}
    index_path.write_text(json.dumps(index, indent=2) + "\n")


if __name__ == "__main__":
    main()
