#!/usr/bin/env python3
"""The official-size nnInteractive network on the GPU (issue 38 item 7: <= 60 ms per point
click on an H200): builds a ResEnc-L-shaped network in plain PyTorch (the shape of nnU-Net's
ResidualEncoderUNet as nnInteractive 2.6.0 configures it: 8 input channels, features
32-64-128-256-320-320, residual blocks 1-3-4-6-6-6, patch 192^3, 2 classes; random weights, for
timing only), exports it to ONNX for voxseg_gpu_bench, and times PyTorch's autocast bf16/fp16
forward at batch 1 (channels_last_3d, cudnn.benchmark, inference_mode): the runtime nnInteractive
itself uses. A point click at zoom 1 is one forward plus the session's own work (docs/
perf-interactive.md: 2-30 ms of CPU).

Usage: torch_resencl.py --workdir DIR [--export-only] [--seconds 2] [--json OUT.json]
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn

FEATURES = [32, 64, 128, 256, 320, 320]
BLOCKS = [1, 3, 4, 6, 6, 6]
PATCH = 192
IN_CH, OUT_CH = 8, 2
SEED = 4321


def conv_norm(cin, cout, k, stride):
    return nn.Sequential(nn.Conv3d(cin, cout, k, stride=stride, padding=k // 2, bias=True),
                         nn.InstanceNorm3d(cout, eps=1e-5, affine=True))


class BasicBlockD(nn.Module):
    """conv-norm-LeakyReLU-conv-norm plus a skip (average pool and 1x1 conv-norm where the
    stride or width changes), then LeakyReLU: nnU-Net's BasicBlockD."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = conv_norm(cin, cout, 3, stride)
        self.act = nn.LeakyReLU(0.01, inplace=True)
        self.conv2 = conv_norm(cout, cout, 3, 1)
        skip = []
        if stride != 1:
            skip.append(nn.AvgPool3d(stride, stride))
        if stride != 1 or cin != cout:
            skip.append(conv_norm(cin, cout, 1, 1))
        self.skip = nn.Sequential(*skip)

    def forward(self, x):
        return self.act(self.conv2(self.act(self.conv1(x))) + self.skip(x))


class ResEncUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(conv_norm(IN_CH, FEATURES[0], 3, 1), nn.LeakyReLU(0.01, True))
        self.stages = nn.ModuleList()
        prev = FEATURES[0]
        for i, (f, n) in enumerate(zip(FEATURES, BLOCKS)):
            stride = 1 if i == 0 else 2
            blocks = [BasicBlockD(prev, f, stride)] + [BasicBlockD(f, f, 1) for _ in range(n - 1)]
            self.stages.append(nn.Sequential(*blocks))
            prev = f
        self.up = nn.ModuleList()
        self.dec = nn.ModuleList()
        for i in range(len(FEATURES) - 2, -1, -1):
            self.up.append(nn.ConvTranspose3d(FEATURES[i + 1], FEATURES[i], 2, stride=2))
            self.dec.append(nn.Sequential(conv_norm(2 * FEATURES[i], FEATURES[i], 3, 1),
                                          nn.LeakyReLU(0.01, True)))
        self.head = nn.Conv3d(FEATURES[0], OUT_CH, 1)

    def forward(self, x):
        x = self.stem(x)
        skips = []
        for stage in self.stages:
            x = stage(x)
            skips.append(x)
        skips.pop()
        for up, dec in zip(self.up, self.dec):
            x = dec(torch.cat([up(x), skips.pop()], dim=1))
        return self.head(x)


def build_model():
    torch.manual_seed(SEED)
    return ResEncUNet().eval()


def export(model, workdir):
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, "resencl.onnx")
    x = torch.zeros(1, IN_CH, PATCH, PATCH, PATCH)
    kwargs = dict(input_names=["input"], output_names=["logits"], opset_version=17)
    try:
        torch.onnx.export(model, (x,), path, dynamo=False, **kwargs)
    except TypeError:
        torch.onnx.export(model, (x,), path, **kwargs)
    print(f"exported {path} ({os.path.getsize(path) / 2**20:.1f} MiB)", flush=True)


def time_torch(model, seconds):
    torch.backends.cudnn.benchmark = True
    m = model.to("cuda").to(memory_format=torch.channels_last_3d)
    x = torch.randn(1, IN_CH, PATCH, PATCH, PATCH, device="cuda").to(
        memory_format=torch.channels_last_3d)
    rows = []
    for name, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        row = {"impl": "pytorch-autocast", "network": "resenc-l", "precision": name, "batch": 1}
        try:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            with torch.inference_mode(), torch.autocast("cuda", dtype=dt):
                for _ in range(3):
                    m(x)
                torch.cuda.synchronize()
                times = []
                t_end = time.time() + seconds
                while time.time() < t_end or len(times) < 5:
                    start = torch.cuda.Event(enable_timing=True)
                    end = torch.cuda.Event(enable_timing=True)
                    start.record()
                    m(x).argmax(1)
                    end.record()
                    end.synchronize()
                    times.append(start.elapsed_time(end) / 1000.0)
            times.sort()
            row.update({"iters": len(times), "median_s": times[len(times) // 2],
                        "min_s": times[0],
                        "peak_allocated_bytes": torch.cuda.max_memory_allocated()})
        except Exception as e:  # OOM or anything else: record and go on
            row["error"] = repr(e)[:300]
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--export-only", action="store_true")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    model = build_model()
    params = sum(p.numel() for p in model.parameters())
    export(model, a.workdir)
    info = {"torch": torch.__version__, "parameters": params, "patch": PATCH}
    rows = []
    if not a.export_only and torch.cuda.is_available():
        info["device_name"] = torch.cuda.get_device_name(0)
        rows = time_torch(model, a.seconds)
    print(json.dumps(info), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"info": info, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
