#!/usr/bin/env python3
"""CPU inference benchmark: voxseg (oneDNN, fp32 and bf16) vs PyTorch eager vs ONNX Runtime.

Same weights (one PyTorch model, seeded, exported to ONNX), same input, same thread count, one
process per framework (so peak RSS is each framework's own). Networks:
  big:   nnU-Net 3d_fullres / MLPerf 3D U-Net layout: 1 in, 3 out, features 32,64,128,256,320,320,
         (conv3x3x3 -> InstanceNorm -> LeakyReLU(0.01)) x2 per stage, strided-conv down,
         ConvTranspose up, 128^3 patch.
  small: the same layout with features 16,32,64,128, 96^3 patch.
The ONNX files are generated into --workdir (never committed).

Usage (from the repository root, after building voxseg_bench_cpu):
  python3 tools/bench_cpu.py --net small --threads 2 --runs 3
  python3 tools/bench_cpu.py --net big --threads 2 --runs 2
Prints a markdown table (docs/perf-cpu.md) and writes results JSON into --workdir.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

NETS = {
    "big": dict(features=[32, 64, 128, 256, 320, 320], patch=128, in_ch=1, out_ch=3),
    "small": dict(features=[16, 32, 64, 128], patch=96, in_ch=1, out_ch=3),
}
SEED = 1234


def build_model(features, in_ch, out_ch):
    import torch
    from torch import nn

    def block(cin, cout, stride):
        return nn.Sequential(
            nn.Conv3d(cin, cout, 3, stride, 1, bias=True),
            nn.InstanceNorm3d(cout, eps=1e-5, affine=True),
            nn.LeakyReLU(0.01, inplace=True),
            nn.Conv3d(cout, cout, 3, 1, 1, bias=True),
            nn.InstanceNorm3d(cout, eps=1e-5, affine=True),
            nn.LeakyReLU(0.01, inplace=True),
        )

    class PlainConvUNet(nn.Module):
        """dynamic_network_architectures' PlainConvUNet as nnU-Net 3d_fullres configures it."""

        def __init__(self):
            super().__init__()
            self.encoder = nn.ModuleList()
            cin = in_ch
            for i, f in enumerate(features):
                self.encoder.append(block(cin, f, 1 if i == 0 else 2))
                cin = f
            self.up = nn.ModuleList()
            self.decoder = nn.ModuleList()
            for i in range(len(features) - 1, 0, -1):
                below, skip = features[i], features[i - 1]
                self.up.append(nn.ConvTranspose3d(below, skip, 2, 2, bias=True))
                self.decoder.append(block(2 * skip, skip, 1))
            self.head = nn.Conv3d(features[0], out_ch, 1, 1, 0, bias=True)

        def forward(self, x):
            skips = []
            for stage in self.encoder:
                x = stage(x)
                skips.append(x)
            x = skips.pop()
            for up, dec in zip(self.up, self.decoder):
                x = up(x)
                x = torch.cat((x, skips.pop()), 1)
                x = dec(x)
            return self.head(x)

    torch.manual_seed(SEED)
    model = PlainConvUNet().eval()
    # Non-trivial affine parameters (defaults 1/0 would hide norm bugs).
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.InstanceNorm3d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    return model


def conv_flops(features, in_ch, out_ch, patch):
    """2 * MACs of all Conv/ConvTranspose layers (what Graph::convFlops counts)."""
    flops, cin, size = 0, in_ch, patch
    sizes = []
    for i, f in enumerate(features):
        if i > 0:
            size //= 2
        flops += 2 * 27 * cin * f * size**3 + 2 * 27 * f * f * size**3
        sizes.append(size)
        cin = f
    for i in range(len(features) - 1, 0, -1):
        below, skip, s = features[i], features[i - 1], sizes[i - 1]
        flops += 2 * 8 * below * skip * (s // 2) ** 3  # ConvTranspose k2 s2
        flops += 2 * 27 * 2 * skip * skip * s**3 + 2 * 27 * skip * skip * s**3
    flops += 2 * features[0] * out_ch * patch**3
    return flops


def paths(workdir, net):
    return {k: os.path.join(workdir, f"{net}.{k}") for k in ("onnx", "pt", "input", "out_torch",
                                                            "out_ort", "out_vx_fp32",
                                                            "out_vx_bf16")}


def export(args):
    import numpy as np
    import torch

    cfg = NETS[args.net]
    p = paths(args.workdir, args.net)
    os.makedirs(args.workdir, exist_ok=True)
    model = build_model(cfg["features"], cfg["in_ch"], cfg["out_ch"])
    torch.save(model.state_dict(), p["pt"])
    shape = (1, cfg["in_ch"], cfg["patch"], cfg["patch"], cfg["patch"])
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal(shape, dtype=np.float32)
    x.tofile(p["input"])
    dummy = torch.from_numpy(x[:, :, :64, :64, :64].copy())  # >= 2 voxels at the bottom
    torch.onnx.export(model, dummy, p["onnx"], input_names=["input"], output_names=["logits"],
                      opset_version=17, dynamo=False,
                      dynamic_axes={"input": {0: "b", 2: "d", 3: "h", 4: "w"},
                                    "logits": {0: "b", 2: "d", 3: "h", 4: "w"}})


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_torch(args):
    import numpy as np
    import torch

    cfg = NETS[args.net]
    p = paths(args.workdir, args.net)
    torch.set_num_threads(args.threads)
    model = build_model(cfg["features"], cfg["in_ch"], cfg["out_ch"])
    model.load_state_dict(torch.load(p["pt"]))
    shape = (1, cfg["in_ch"], cfg["patch"], cfg["patch"], cfg["patch"])
    x = torch.from_numpy(np.fromfile(p["input"], dtype=np.float32).reshape(shape))
    times = []
    with torch.inference_mode():
        for i in range(args.warmup + args.runs):
            t = time.perf_counter()
            y = model(x)
            if i >= args.warmup:
                times.append(time.perf_counter() - t)
    y.numpy().tofile(p["out_torch"])
    print(json.dumps({"times": times, "peak_rss_mib": peak_rss_mib(),
                      "version": torch.__version__}))


def run_ort(args):
    import numpy as np
    import onnxruntime as ort

    cfg = NETS[args.net]
    p = paths(args.workdir, args.net)
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(p["onnx"], so, providers=["CPUExecutionProvider"])
    shape = (1, cfg["in_ch"], cfg["patch"], cfg["patch"], cfg["patch"])
    x = np.fromfile(p["input"], dtype=np.float32).reshape(shape)
    times = []
    for i in range(args.warmup + args.runs):
        t = time.perf_counter()
        y = sess.run(None, {"input": x})[0]
        if i >= args.warmup:
            times.append(time.perf_counter() - t)
    y.tofile(p["out_ort"])
    print(json.dumps({"times": times, "peak_rss_mib": peak_rss_mib(),
                      "version": ort.__version__}))


def run_voxseg(args, precision):
    cfg = NETS[args.net]
    p = paths(args.workdir, args.net)
    shape = f"1,{cfg['in_ch']},{cfg['patch']},{cfg['patch']},{cfg['patch']}"
    cmd = [args.voxseg_bench, "--model", p["onnx"], "--input-shape", shape,
           "--input", p["input"], "--output", p[f"out_vx_{precision}"],
           "--precision", precision, "--threads", str(args.threads),
           "--runs", str(args.runs), "--warmup", str(args.warmup)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def child(args, which):
    cmd = [sys.executable, __file__, "--net", args.net, "--threads", str(args.threads),
           "--runs", str(args.runs), "--warmup", str(args.warmup), "--workdir", args.workdir,
           "--mode", which]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def max_abs_diff(a_path, b_path):
    import numpy as np
    a = np.fromfile(a_path, dtype=np.float32)
    b = np.fromfile(b_path, dtype=np.float32)
    return float(np.max(np.abs(a - b))) if a.size == b.size else float("inf")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--net", choices=NETS, default="small")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--workdir", default="/tmp/voxseg-bench")
    ap.add_argument("--voxseg-bench", default="build/bench/voxseg_bench_cpu")
    ap.add_argument("--only", default="torch,ort,fp32,bf16")
    ap.add_argument("--mode", default="all", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mode == "torch":
        return run_torch(args)
    if args.mode == "ort":
        return run_ort(args)

    cfg = NETS[args.net]
    p = paths(args.workdir, args.net)
    if not os.path.exists(p["onnx"]):
        child(args, "export") if False else export(args)
    gflop = conv_flops(cfg["features"], cfg["in_ch"], cfg["out_ch"], cfg["patch"]) / 1e9
    results = {}
    for which in args.only.split(","):
        if which in ("torch", "ort"):
            results[which] = child(args, which)
        else:
            results[which] = run_voxseg(args, which)
        print(f"# {which}: {results[which]}", file=sys.stderr)
    ref = p["out_torch"] if "torch" in results else None
    names = {"torch": "PyTorch eager", "ort": "ONNX Runtime", "fp32": "voxseg cpu fp32",
             "bf16": "voxseg cpu bf16"}
    outs = {"torch": p["out_torch"], "ort": p["out_ort"], "fp32": p["out_vx_fp32"],
            "bf16": p["out_vx_bf16"]}
    print(f"\n{args.net}: features {cfg['features']}, patch {cfg['patch']}^3, "
          f"{gflop:.1f} GFLOP/patch, {args.threads} threads, best of {args.runs} "
          f"after {args.warmup} warm-up\n")
    print("| runtime | s/patch (best) | patches/s | GFLOP/s | peak RSS MiB | vs PyTorch | "
          "vs ORT | max abs diff vs PyTorch |")
    print("|---|---|---|---|---|---|---|---|")
    best = {k: min(v["times"]) for k, v in results.items()}
    for k, v in results.items():
        t = best[k]
        vs_t = f"{best['torch'] / t:.2f}x" if "torch" in best else "-"
        vs_o = f"{best['ort'] / t:.2f}x" if "ort" in best else "-"
        diff = f"{max_abs_diff(outs[k], ref):.2e}" if ref and k != "torch" else "-"
        print(f"| {names[k]} | {t:.3f} | {1 / t:.3f} | {gflop / t:.0f} | "
              f"{v['peak_rss_mib']:.0f} | {vs_t} | {vs_o} | {diff} |")
    with open(os.path.join(args.workdir, f"{args.net}.results.json"), "w") as f:
        json.dump({"net": args.net, "gflop": gflop, "threads": args.threads,
                   "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
