#!/usr/bin/env python3
"""PyTorch peer of the voxseg GPU benchmark.

Builds the MLPerf-sized 3D U-Net (nnU-Net 3d_fullres / MLPerf KiTS19 shape: 1 input channel,
3 classes, features 32, 64, 128, 256, 320, 320, two conv3x3x3 -> InstanceNorm -> LeakyReLU(0.01)
per stage, strided conv down, ConvTranspose up) with a fixed seed, exports it to ONNX (the file
voxseg imports, so both run the SAME weights), writes a check patch and PyTorch's fp32 logits for
it, and (unless --export-only) times PyTorch autocast fp16/bf16 with channels_last_3d,
cudnn.benchmark=True and torch.inference_mode for each batch size.

Usage: torch_unet.py --workdir DIR [--export-only] [--batches 1,2,4,8] [--json OUT.json]
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn

FEATURES = [32, 64, 128, 256, 320, 320]
PATCH = 128
SEED = 1234


class ConvBlock(nn.Sequential):
    def __init__(self, cin, cout, stride):
        super().__init__(
            nn.Conv3d(cin, cout, 3, stride=stride, padding=1, bias=True),
            nn.InstanceNorm3d(cout, eps=1e-5, affine=True),
            nn.LeakyReLU(0.01, inplace=True),
        )


class UNet3D(nn.Module):
    def __init__(self, in_ch=1, out_ch=3, features=FEATURES):
        super().__init__()
        self.enc = nn.ModuleList()
        prev = in_ch
        for i, f in enumerate(features):
            stride = 1 if i == 0 else 2
            self.enc.append(nn.Sequential(ConvBlock(prev, f, stride), ConvBlock(f, f, 1)))
            prev = f
        self.up = nn.ModuleList()
        self.dec = nn.ModuleList()
        for i in range(len(features) - 2, -1, -1):
            self.up.append(nn.ConvTranspose3d(features[i + 1], features[i], 2, stride=2, bias=True))
            self.dec.append(nn.Sequential(ConvBlock(2 * features[i], features[i], 1),
                                          ConvBlock(features[i], features[i], 1)))
        self.head = nn.Conv3d(features[0], out_ch, 1, bias=True)

    def forward(self, x):
        skips = []
        for stage in self.enc:
            x = stage(x)
            skips.append(x)
        skips.pop()
        for up, dec in zip(self.up, self.dec):
            x = up(x)
            x = torch.cat([x, skips.pop()], dim=1)
            x = dec(x)
        return self.head(x)


def build_model():
    torch.manual_seed(SEED)
    model = UNet3D()
    # Non-trivial norm parameters so that a wrong gamma/beta path shows in the check.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.InstanceNorm3d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    return model.eval()


def conv_flops(patch=PATCH, features=FEATURES, in_ch=1, out_ch=3):
    """2 * multiply-adds of all convolutions for one patch (analytic cross-check)."""
    macs = 0
    size = patch
    prev = in_ch
    sizes = []
    for i, f in enumerate(features):
        if i > 0:
            size //= 2
        macs += size ** 3 * 27 * prev * f + size ** 3 * 27 * f * f
        sizes.append(size)
        prev = f
    for i in range(len(features) - 2, -1, -1):
        s = sizes[i]
        macs += (s // 2) ** 3 * 8 * features[i + 1] * features[i]  # ConvTranspose k2 s2
        macs += s ** 3 * 27 * 2 * features[i] * features[i] + s ** 3 * 27 * features[i] ** 2
    macs += patch ** 3 * features[0] * out_ch
    return 2 * macs


def export(model, workdir):
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, "unet.onnx")
    x = torch.zeros(1, 1, PATCH, PATCH, PATCH)
    kwargs = dict(input_names=["input"], output_names=["logits"], opset_version=17,
                  dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    try:
        torch.onnx.export(model, (x,), path, dynamo=False, **kwargs)
    except TypeError:
        torch.onnx.export(model, (x,), path, **kwargs)
    print(f"exported {path} ({os.path.getsize(path) / 2**20:.1f} MiB)", flush=True)
    return path


def write_check(model, workdir, device):
    """A fixed input patch and PyTorch's fp32 logits (TF32 off) for voxseg's accuracy check."""
    g = torch.Generator().manual_seed(SEED + 1)
    x = torch.randn(1, 1, PATCH, PATCH, PATCH, generator=g)
    x.numpy().astype("float32").tofile(os.path.join(workdir, "check_input.f32"))
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    m = model.to(device)
    with torch.inference_mode():
        ref = m(x.to(device)).float().cpu()
    ref.numpy().astype("float32").tofile(os.path.join(workdir, "check_fp32_logits.f32"))
    results = {}
    if device == "cuda":
        torch.backends.cudnn.allow_tf32 = True
        mc = m.to(memory_format=torch.channels_last_3d)
        xc = x.to(device).to(memory_format=torch.channels_last_3d)
        for name, dt in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
            with torch.inference_mode(), torch.autocast("cuda", dtype=dt):
                out = mc(xc).float().cpu()
            agree = (out.argmax(1) == ref.argmax(1)).float().mean().item()
            results[name] = {"max_abs_vs_fp32": (out - ref).abs().max().item(),
                             "label_agreement_vs_fp32": agree}
    return results


def time_torch(model, batches, seconds_per_config):
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = True
    m = model.to("cuda").to(memory_format=torch.channels_last_3d).eval()
    rows = []
    for name, dt in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        for b in batches:
            row = {"impl": "pytorch-autocast", "precision": name, "batch": b}
            try:
                x = torch.randn(b, 1, PATCH, PATCH, PATCH, device="cuda").to(
                    memory_format=torch.channels_last_3d)
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
                with torch.inference_mode(), torch.autocast("cuda", dtype=dt):
                    t0 = time.time()
                    for _ in range(3):  # warm-up incl. cudnn.benchmark autotuning
                        m(x)
                    torch.cuda.synchronize()
                    warm = time.time() - t0
                    start = torch.cuda.Event(enable_timing=True)
                    end = torch.cuda.Event(enable_timing=True)
                    start.record()
                    m(x)
                    end.record()
                    torch.cuda.synchronize()
                    one = start.elapsed_time(end) / 1000.0
                    iters = max(3, min(50, int(seconds_per_config / max(one, 1e-4))))
                    times = []
                    for _ in range(iters):
                        start.record()
                        m(x)
                        end.record()
                        end.synchronize()
                        times.append(start.elapsed_time(end) / 1000.0)
                times.sort()
                median = times[len(times) // 2]
                row.update({"iters": iters, "median_s": median, "patches_per_s": b / median,
                            "warmup_s": warm,
                            "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
                            "peak_reserved_bytes": torch.cuda.max_memory_reserved()})
            except Exception as e:  # OOM or anything else: record and go on
                row["error"] = repr(e)[:300]
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--export-only", action="store_true")
    ap.add_argument("--skip-export", action="store_true", help="unet.onnx was written before")
    ap.add_argument("--batches", default="1,2,4,8")
    ap.add_argument("--seconds", type=float, default=2.0, help="timed seconds per configuration")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    model = build_model()
    info = {"torch": torch.__version__, "cuda_available": torch.cuda.is_available(),
            "analytic_conv_flops_per_patch": conv_flops(), "seed": SEED}
    os.makedirs(args.workdir, exist_ok=True)
    if not args.skip_export:
        export(model, args.workdir)
    device = "cuda" if torch.cuda.is_available() and not args.export_only else "cpu"
    if args.export_only:
        print(json.dumps(info))
        return 0
    info["cudnn"] = torch.backends.cudnn.version()
    info["device_name"] = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    info["autocast_check"] = write_check(model, args.workdir, device)
    print(json.dumps(info), flush=True)
    rows = []
    if device == "cuda":
        rows = time_torch(model, [int(b) for b in args.batches.split(",")], args.seconds)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"info": info, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
