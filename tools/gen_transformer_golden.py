#!/usr/bin/python3
"""Generates the transformer-block goldens of the engine (issue 14): small pre-norm transformer
blocks of the kind SwinUNETR / UNETR / Primus stack, exported from PyTorch to ONNX and run in
PyTorch on a seeded input.

  block_gelu_opset17  LayerNorm -> QKV Linear -> heads -> Q K^T * scale -> Softmax -> x V ->
                      proj -> residual -> LayerNorm -> Linear -> GELU -> Linear -> residual.
                      Opset 17: LayerNormalization ops; GELU exported as Div/Erf/Add/Mul/Mul.
  block_gelu_opset13  the same module exported at opset 13: LayerNorm spelled out as
                      ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add (fused at import).
  block_swiglu_einsum attention written with torch.einsum ("bhid,bhjd->bhij", "bhij,bhjd->bhid"),
                      a SwiGLU MLP (SiLU exported as Sigmoid + Mul), LayerScale, opset 17.

Writes tests/engine/golden/transformer/<name>.onnx, .input.f32, .output.f32 (raw little-endian
float32, C order) and index.json; the files are committed so CI needs no Python.

Pinned: Debian bookworm's python3-torch 1.13.1 and python3-onnx (small, no pip wheels):
    apt-get install -y python3-torch python3-onnx
    /usr/bin/python3 tools/gen_transformer_golden.py
"""
import json
import math
import pathlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 1234
TOKENS, WIDTH, HEADS = 11, 24, 3  # odd token count, 8 channels per head
OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "engine" / "golden" / "transformer"


class Attention(nn.Module):
    def __init__(self, dim, heads, einsum=False):
        super().__init__()
        self.heads, self.einsum = heads, einsum
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        qkv = self.qkv(x).reshape(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        if self.einsum:
            att = torch.einsum("bhid,bhjd->bhij", q, k) * self.scale
            att = att.softmax(dim=-1)
            o = torch.einsum("bhij,bhjd->bhid", att, v)
        else:
            att = (q @ k.transpose(-2, -1)) * self.scale
            att = att.softmax(dim=-1)
            o = att @ v
        return self.proj(o.transpose(1, 2).reshape(b, t, c))


class GeluMlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class SwiGluMlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1, self.w2, self.w3 = nn.Linear(dim, hidden), nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x):
        return self.w3(F.silu(self.w1(x)) * self.w2(x))


class Block(nn.Module):
    def __init__(self, dim, heads, swiglu=False, einsum=False):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, einsum)
        self.mlp = SwiGluMlp(dim, 2 * dim) if swiglu else GeluMlp(dim, 2 * dim)
        # LayerScale (Primus), 1 when absent.
        self.gamma = nn.Parameter(torch.ones(dim)) if swiglu else None

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        y = self.mlp(self.norm2(x))
        return x + (y * self.gamma if self.gamma is not None else y)


def randomized(model, gen):
    """LayerNorm affine parameters and LayerScale get random values (a backend ignoring them fails)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.copy_(0.5 + torch.rand(m.weight.shape, generator=gen))
                m.bias.copy_(torch.rand(m.bias.shape, generator=gen) - 0.5)
        for name, p in model.named_parameters():
            if name == "gamma":
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
    return model.eval()


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    gelu_block = randomized(Block(WIDTH, HEADS), gen)
    swiglu_block = randomized(Block(WIDTH, HEADS, swiglu=True, einsum=True), gen)
    specs = [("block_gelu_opset17", gelu_block, 17), ("block_gelu_opset13", gelu_block, 13),
             ("block_swiglu_einsum", swiglu_block, 17)]
    shape = (1, TOKENS, WIDTH)
    x = torch.randn(shape, generator=gen)
    entries = []
    for name, model, opset in specs:
        with torch.no_grad():
            y = model(x)
        torch.onnx.export(model, x, str(OUT / f"{name}.onnx"), opset_version=opset,
                          input_names=["tokens"], output_names=["out"], do_constant_folding=True)
        x.numpy().astype("<f4").tofile(OUT / f"{name}.input.f32")
        y.numpy().astype("<f4").tofile(OUT / f"{name}.output.f32")
        entries.append({"name": name, "opset": opset, "input_shape": list(shape),
                        "output_shape": list(y.shape), "max_abs_output": float(y.abs().max())})
    import onnx
    index = {"generator": "tools/gen_transformer_golden.py",
             "versions": {"torch": torch.__version__, "onnx": onnx.__version__,
                          "numpy": np.__version__},
             "seed": SEED, "format": "raw little-endian float32, C order [batch, tokens, width]",
             "nets": entries}
    (OUT / "index.json").write_text(json.dumps(index, indent=2) + "\n")
    for e in entries:
        print(e["name"], e["output_shape"], "max |y|", round(e["max_abs_output"], 4))


if __name__ == "__main__":
    main()
