#!/usr/bin/env python3
"""CPU inference benchmark: voxseg (oneDNN, fp32 and bf16) vs OpenVINO vs PyTorch vs ONNX Runtime.

Same weights (one PyTorch model, seeded, exported to ONNX), same input, same thread count, one
process per framework (so peak RSS is each framework's own). Networks:
  big:   nnU-Net 3d_fullres / MLPerf 3D U-Net layout: 1 in, 3 out, features 32,64,128,256,320,320,
         (conv3x3x3 -> InstanceNorm -> LeakyReLU(0.01)) x2 per stage, strided-conv down,
         ConvTranspose up, 128^3 patch.
  small: the same layout with features 16,32,64,128, 96^3 patch.
Issue 14's families, built by the real libraries (MONAI 1.4.0, dynamic_network_architectures
0.4.4 from build/pylib, see tools/gen_network_golden.py), static shapes:
  swinunetr: MONAI SwinUNETR as the swin_unetr_btcv bundle configures it: feature_size 48,
         depths (2,2,2,2), heads (3,6,12,24), 1 in, 14 out, 96^3 (ONNX opset 16).
  resenc_m: nnU-Net ResidualEncoderUNet, the ResEnc-M preset (nnUNetResEncUNetMPlans):
         features 32,64,128,256,320,320, n_blocks 1,3,4,6,6,6, 1 decoder conv, --patch (96).
  primus_s: nnU-Net's Primus-S (PrimusS: embed 396, 12 EVA blocks, 6 heads, 8^3 patch tokens,
         LayerScale 0.1, scaled inner attention norm), 3 out, --patch (96).
PyTorch runs fp32 eager ("torch") and bf16 autocast ("torch_bf16", channels-last for the
convolutional nets); a runtime that fails is reported, not fatal. OpenVINO (the CPU peer to
beat, issue 40) reads the same ONNX file: "ov" (f32 inference precision), "ov_bf16" (bf16
inference precision; refused by name where the CPU has no bf16) and "ov_int8" (NNCF
post-training quantisation, preset performance, of the OpenVINO model on --calib seeded inputs of
the patch shape, kept in --workdir as <net>.calib<i>.f32 so that other runtimes can calibrate on
the same inputs; the quantised IR is cached there too). voxseg "int8" calibrates on the same
--calib inputs (voxseg_bench_cpu --calib: the fp32 network observed, --calib-method percentile
99.99 or minmax ranges, the first and last conv kept float; docs/int8.md); "int8u" the same with
the decoder's up-sampling in int8 (--upsampling int8), "int8n" with 8-bit normalisation inputs
(--norm-inputs int8), "int8all" int8n with the first and last conv and the up-sampling in int8
too (--keep-float none --upsampling int8, as NNCF quantises them), "int8allz" that without zero
points where the negatives are small (--zero-points where-needed; INT8_KINDS). The OpenVINO children run under
--ov-python (a venv with `pip install openvino nncf`; default: this Python). --repeat N runs the whole
sequence N times (interleaved: A B C A B C) and reports the median of the per-round bests.
The ONNX files are generated into --workdir (never committed).

Usage (from the repository root, after building voxseg_bench_cpu):
  python3 tools/bench_cpu.py --net small --threads 2 --runs 3
  python3 tools/bench_cpu.py --net big --threads 2 --runs 2
  PYTHONPATH=build/pylib:<onnxruntime> /usr/bin/python3 tools/bench_cpu.py --net swinunetr \
      --only fp32,bf16,torch,torch_bf16,ort --repeat 2
  python3 tools/bench_cpu.py --net big --only fp32,ov,ov_int8 --ov-python /tmp/ovvenv/bin/python
  python3 tools/bench_cpu.py --net small --only fp32,int8,ov,ov_int8 --ov-python /tmp/ovvenv/bin/python
Prints a markdown table (docs/perf-cpu.md) and writes results JSON into --workdir.
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time

NETS = {
    "big": dict(features=[32, 64, 128, 256, 320, 320], patch=128, in_ch=1, out_ch=3),
    "small": dict(features=[16, 32, 64, 128], patch=96, in_ch=1, out_ch=3),
    "swinunetr": dict(family=True, patch=96, in_ch=1, out_ch=14, opset=16),
    "resenc_m": dict(family=True, features=[32, 64, 128, 256, 320, 320], patch=96, in_ch=1,
                     out_ch=3, opset=17),
    "primus_s": dict(family=True, patch=96, in_ch=1, out_ch=3, opset=17),
}
SEED = 1234
# voxseg's int8 variants: the voxseg_bench_cpu options on top of --calib, and the report's name.
INT8_KINDS = {
    "int8": ([], "voxseg cpu int8"),
    "int8u": (["--upsampling", "int8"], "voxseg cpu int8, int8 up-sampling"),
    "int8n": (["--norm-inputs", "int8"], "voxseg cpu int8, 8-bit norm inputs"),
    "int8all": (["--norm-inputs", "int8", "--keep-float", "none", "--upsampling", "int8"],
                "voxseg cpu int8, 8-bit norm inputs, every conv and up-sampling"),
    "int8allz": (["--norm-inputs", "int8", "--keep-float", "none", "--upsampling", "int8",
                  "--zero-points", "where-needed"],
                 "voxseg cpu int8, 8-bit norm inputs, every conv and up-sampling, zero points "
                 "where needed"),
}


def build_family(name, cfg):
    """The issue-14 networks from MONAI / dynamic_network_architectures, seeded, with random norm
    affine parameters and LayerScale gammas (tools/gen_network_golden.py's randomized())."""
    import torch
    from torch import nn
    torch.manual_seed(SEED)
    p = cfg["patch"]
    if name == "swinunetr":
        from monai.networks.nets import SwinUNETR
        model = SwinUNETR(img_size=(p, p, p), in_channels=cfg["in_ch"], out_channels=cfg["out_ch"],
                          feature_size=48, depths=(2, 2, 2, 2), num_heads=(3, 6, 12, 24))
    elif name == "resenc_m":
        from dynamic_network_architectures.architectures.unet import ResidualEncoderUNet
        f = cfg["features"]
        model = ResidualEncoderUNet(
            input_channels=cfg["in_ch"], n_stages=len(f), features_per_stage=f,
            conv_op=nn.Conv3d, kernel_sizes=3, strides=[1] + [2] * (len(f) - 1),
            n_blocks_per_stage=[1, 3, 4, 6, 6, 6], num_classes=cfg["out_ch"],
            n_conv_per_stage_decoder=[1] * (len(f) - 1), conv_bias=True,
            norm_op=nn.InstanceNorm3d, norm_op_kwargs={"eps": 1e-5, "affine": True},
            dropout_op=None, dropout_op_kwargs=None, nonlin=nn.LeakyReLU,
            nonlin_kwargs={"inplace": True}, deep_supervision=False)
    else:
        from dynamic_network_architectures.architectures.primus import PrimusS
        model = PrimusS(cfg["in_ch"], cfg["out_ch"], (8, 8, 8), input_shape=(p, p, p))
    gen = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for pname, prm in model.named_parameters():
            if pname.rsplit(".", 1)[-1] in ("gamma_1", "gamma_2"):
                prm.copy_(0.05 + 0.2 * torch.rand(prm.shape, generator=gen))
        for m in model.modules():
            w = getattr(m, "weight", None)
            if w is not None and getattr(m, "bias", None) is not None and (
                    isinstance(m, (nn.LayerNorm, nn.InstanceNorm3d, nn.GroupNorm))
                    or type(m).__name__ == "LayerNormNd"):
                m.weight.copy_(0.5 + torch.rand(w.shape, generator=gen))
                m.bias.copy_(torch.rand(m.bias.shape, generator=gen) - 0.5)
    return model.eval()


def make_model(net):
    cfg = NETS[net]
    if cfg.get("family"):
        return build_family(net, cfg)
    return build_model(cfg["features"], cfg["in_ch"], cfg["out_ch"])


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


def net_tag(args):
    """File name stem in --workdir: the net, and for the families the patch side."""
    cfg = NETS[args.net]
    return f"{args.net}{cfg['patch']}" if cfg.get("family") else args.net


def paths(workdir, net):
    return {k: os.path.join(workdir, f"{net}.{k}") for k in ("onnx", "pt", "input", "out_torch",
                                                            "out_torch_bf16", "out_ort",
                                                            "out_vx_fp32", "out_vx_bf16",
                                                            *(f"out_vx_{k}" for k in INT8_KINDS),
                                                            "out_ov", "out_ov_bf16",
                                                            "out_ov_int8")}


def calibration_inputs(args, cfg, shape):
    """--calib seeded inputs of the patch shape (not the timed input), written once into the
    workdir as <net>.calib<i>.f32: OpenVINO's NNCF calibrates on them, and so can voxseg."""
    import numpy as np
    out = []
    for i in range(args.calib):
        path = os.path.join(args.workdir, f"{net_tag(args)}.calib{i}.f32")
        if not os.path.exists(path):
            np.random.default_rng(SEED + 1 + i).standard_normal(shape, dtype=np.float32).tofile(path)
        out.append(np.fromfile(path, dtype=np.float32).reshape(shape))
    return out


def run_openvino(args, kind):
    """OpenVINO on the same ONNX file: kind "f32", "bf16" or "int8" (NNCF)."""
    import numpy as np
    import openvino as ov

    cfg = NETS[args.net]
    p = paths(args.workdir, net_tag(args))
    shape = (1, cfg["in_ch"], cfg["patch"], cfg["patch"], cfg["patch"])
    core = ov.Core()
    caps = core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    if kind == "bf16" and "BF16" not in caps:
        print(json.dumps({"error": f"OpenVINO: no bf16 on this CPU (capabilities {caps})"}))
        return
    model = core.read_model(p["onnx"])
    model.reshape({model.inputs[0]: ov.PartialShape(list(shape))})
    calib_s = None
    if kind == "int8":
        ir = os.path.join(args.workdir, f"{net_tag(args)}.ov_int8_calib{args.calib}.xml")
        if os.path.exists(ir):
            model = core.read_model(ir)
        else:
            import nncf
            t = time.perf_counter()
            data = nncf.Dataset(calibration_inputs(args, cfg, shape))
            model = nncf.quantize(model, data, preset=nncf.QuantizationPreset.PERFORMANCE,
                                  subset_size=args.calib)
            calib_s = time.perf_counter() - t
            ov.save_model(model, ir)
    config = {"INFERENCE_NUM_THREADS": args.threads, "NUM_STREAMS": 1,
              "PERFORMANCE_HINT": "LATENCY",
              "INFERENCE_PRECISION_HINT": "bf16" if kind == "bf16" else "f32"}
    if args.profile:
        config["PERF_COUNT"] = True
    compiled = core.compile_model(model, "CPU", config)
    used = str(compiled.get_property("INFERENCE_PRECISION_HINT"))
    request = compiled.create_infer_request()
    x = np.fromfile(p["input"], dtype=np.float32).reshape(shape)
    times = []
    for i in range(args.warmup + args.runs):
        t = time.perf_counter()
        y = request.infer({0: x})[compiled.outputs[0]]
        if i >= args.warmup:
            times.append(time.perf_counter() - t)
    np.ascontiguousarray(y, dtype=np.float32).tofile(
        p[{"f32": "out_ov", "bf16": "out_ov_bf16", "int8": "out_ov_int8"}[kind]])
    out = {"times": times, "peak_rss_mib": peak_rss_mib(), "version": ov.__version__,
           "inference_precision": used, "capabilities": caps,
           "calibration_s": calib_s, "calibration_inputs": args.calib}
    if args.profile:  # the last run, seconds per node type (OpenVINO's PERF_COUNT)
        prof = {}
        for info in request.profiling_info:
            prof[info.node_type] = prof.get(info.node_type, 0.0) + info.real_time.total_seconds()
        out["profile"] = {k: round(v, 4) for k, v in prof.items() if v > 0}
    print(json.dumps(out))


def export(args):
    import numpy as np
    import torch

    cfg = NETS[args.net]
    p = paths(args.workdir, net_tag(args))
    os.makedirs(args.workdir, exist_ok=True)
    model = make_model(args.net)
    torch.save(model.state_dict(), p["pt"])
    shape = (1, cfg["in_ch"], cfg["patch"], cfg["patch"], cfg["patch"])
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal(shape, dtype=np.float32)
    x.tofile(p["input"])
    legacy = {"dynamo": False} if int(torch.__version__.split(".")[0]) >= 2 else {}
    if cfg.get("family"):  # static shapes, as tools/gen_network_golden.py exports them
        with torch.no_grad():
            torch.onnx.export(model, torch.from_numpy(x), p["onnx"], input_names=["input"],
                              output_names=["logits"], opset_version=cfg["opset"],
                              do_constant_folding=True, **legacy)
        return
    dummy = torch.from_numpy(x[:, :, :64, :64, :64].copy())  # >= 2 voxels at the bottom
    kwargs = dict(input_names=["input"], output_names=["logits"], opset_version=17,
                  dynamic_axes={"input": {0: "b", 2: "d", 3: "h", 4: "w"},
                                "logits": {0: "b", 2: "d", 3: "h", 4: "w"}})
    # the TorchScript exporter (torch 1.13 has no dynamo flag; torch 2's dynamo needs onnxscript)
    torch.onnx.export(model, dummy, p["onnx"], **kwargs, **legacy)


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_torch(args, bf16=False):
    import contextlib

    import numpy as np
    import torch

    cfg = NETS[args.net]
    p = paths(args.workdir, net_tag(args))
    torch.set_num_threads(args.threads)
    model = make_model(args.net)
    model.load_state_dict(torch.load(p["pt"]))
    shape = (1, cfg["in_ch"], cfg["patch"], cfg["patch"], cfg["patch"])
    x = torch.from_numpy(np.fromfile(p["input"], dtype=np.float32).reshape(shape))
    amp = contextlib.nullcontext()
    if bf16:
        amp = torch.autocast("cpu", dtype=torch.bfloat16)
        if args.net != "primus_s":  # channels-last helps oneDNN's bf16 convolutions
            model = model.to(memory_format=torch.channels_last_3d)
            x = x.to(memory_format=torch.channels_last_3d)
    times = []
    with torch.inference_mode(), amp:
        for i in range(args.warmup + args.runs):
            t = time.perf_counter()
            y = model(x)
            if i >= args.warmup:
                times.append(time.perf_counter() - t)
    y = y[0] if isinstance(y, (list, tuple)) else y
    y.float().contiguous().numpy().tofile(p["out_torch_bf16" if bf16 else "out_torch"])
    print(json.dumps({"times": times, "peak_rss_mib": peak_rss_mib(),
                      "version": torch.__version__}))


def run_ort(args):
    import numpy as np
    import onnxruntime as ort

    cfg = NETS[args.net]
    p = paths(args.workdir, net_tag(args))
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


CEILING = dict(channels=64, side=64)  # one Conv3d 64->64 3x3x3 pad 1 on 64^3: 58 GFLOP


def export_ceiling(path):
    """The single large convolution the plain network's GFLOP/s is compared with (--ceiling)."""
    import torch
    torch.manual_seed(SEED)
    c, n = CEILING["channels"], CEILING["side"]
    conv = torch.nn.Conv3d(c, c, 3, 1, 1, bias=True).eval()
    torch.onnx.export(conv, torch.zeros(1, c, n, n, n), path, input_names=["input"],
                      output_names=["y"], opset_version=17)


def run_voxseg(args, precision):
    cfg = NETS[args.net]
    p = paths(args.workdir, net_tag(args))
    shape = f"1,{cfg['in_ch']},{cfg['patch']},{cfg['patch']},{cfg['patch']}"
    cmd = [args.voxseg_bench, "--model", p["onnx"], "--input-shape", shape,
           "--input", p["input"], "--output", p[f"out_vx_{precision}"],
           "--precision", precision[:4], "--threads", str(args.threads),
           "--runs", str(args.runs), "--warmup", str(args.warmup)]
    if precision.startswith("int8"):  # the inputs OpenVINO's NNCF calibrates on
        calibration_inputs(args, cfg, (1, cfg["in_ch"], cfg["patch"], cfg["patch"], cfg["patch"]))
        calib = [os.path.join(args.workdir, f"{net_tag(args)}.calib{i}.f32")
                 for i in range(args.calib)]
        cmd += ["--calib", ",".join(calib), "--calib-method", args.calib_method]
        cmd += INT8_KINDS[precision][0]
    elif args.ceiling:
        ceiling = os.path.join(args.workdir, "ceiling_conv.onnx")
        if not os.path.exists(ceiling):
            export_ceiling(ceiling)
        c, n = CEILING["channels"], CEILING["side"]
        cmd += ["--ceiling-model", ceiling, "--ceiling-shape", f"1,{c},{n},{n},{n}"]
    if not args.profile:
        return run_json(cmd)
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict(os.environ, VOXSEG_CPU_PROFILE="1"))
    out = run_json_result(r)
    # The last run's per-kind summary ("info [cpu] profile: conv 0.834 s (68.4%), ...").
    prof, last_kind = {}, ""
    for line in r.stderr.splitlines():
        m = re.match(r"info \[cpu\] profile: (\w+)\s+([\d.]+) s \(", line)
        if m:
            if m.group(1) <= last_kind:  # kinds come sorted: a later run's summary begins
                prof = {}
            prof[m.group(1)] = float(m.group(2))
            last_kind = m.group(1)
    if prof:
        out["profile"] = prof
    return out


def run_json(cmd):
    """The last stdout line of a child as JSON, or {"error": ...} when it failed."""
    return run_json_result(subprocess.run(cmd, capture_output=True, text=True))


def run_json_result(r):
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or ["exit status %d" % r.returncode])[-1]
        return {"error": tail[:300]}
    lines = r.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def child(args, which):
    python = args.ov_python if which.startswith("ov") else sys.executable
    cmd = [python, __file__, "--net", args.net, "--patch", str(NETS[args.net]["patch"]),
           *(["--profile"] if args.profile else []),
           "--threads", str(args.threads), "--calib", str(args.calib),
           "--runs", str(args.runs), "--warmup", str(args.warmup), "--workdir", args.workdir,
           "--mode", which]
    return run_json(cmd)


def max_abs_diff(a_path, b_path):
    import numpy as np
    a = np.fromfile(a_path, dtype=np.float32)
    b = np.fromfile(b_path, dtype=np.float32)
    return float(np.max(np.abs(a - b))) if a.size == b.size else float("inf")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--net", choices=NETS, default="small")
    ap.add_argument("--patch", type=int, default=0, help="cube side (default: the net's)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1, help="rounds of the whole sequence")
    ap.add_argument("--profile", action="store_true",
                    help="time per operation kind in voxseg (VOXSEG_CPU_PROFILE) and OpenVINO "
                         "(PERF_COUNT), last run of the last round; profiling costs a little time")
    ap.add_argument("--workdir", default="/tmp/voxseg-bench")
    ap.add_argument("--voxseg-bench", default="build/bench/voxseg_bench_cpu")
    ap.add_argument("--only", default="torch,ort,fp32,bf16",
                    help="comma list of torch, torch_bf16, ort, fp32, bf16, int8, int8u (int8 "
                         "with int8 up-sampling), int8n (int8 with 8-bit normalisation inputs), "
                         "int8all (int8n with the first and last conv and the up-sampling in "
                         "int8 too), int8allz (int8all, zero points only where needed), ov, "
                         "ov_bf16, ov_int8")
    ap.add_argument("--ov-python", default=sys.executable,
                    help="Python with openvino and nncf for the ov* runtimes")
    ap.add_argument("--calib", type=int, default=2,
                    help="calibration inputs for OpenVINO's NNCF INT8 and voxseg int8 "
                         "(as measured in issue 40)")
    ap.add_argument("--calib-method", choices=["percentile", "minmax"], default="percentile",
                    help="voxseg int8's activation ranges (percentile: 99.99)")
    ap.add_argument("--ceiling", action="store_true",
                    help="voxseg also times one Conv3d 64->64 3x3x3 on 64^3 in the same process")
    ap.add_argument("--mode", default="all", help=argparse.SUPPRESS)
    args = ap.parse_args()
    cfg = NETS[args.net]
    if args.patch:
        cfg["patch"] = args.patch
    if args.mode != "all":
        return {"torch": run_torch, "ort": run_ort, "export": export,
                "torch_bf16": lambda a: run_torch(a, bf16=True),
                "ov": lambda a: run_openvino(a, "f32"), "ov_bf16": lambda a: run_openvino(a, "bf16"),
                "ov_int8": lambda a: run_openvino(a, "int8")}[args.mode](args)

    p = paths(args.workdir, net_tag(args))
    os.makedirs(args.workdir, exist_ok=True)
    if not os.path.exists(p["onnx"]):
        r = child(args, "export")
        if "error" in r or not os.path.exists(p["onnx"]):
            sys.exit(f"export failed: {r}")
    gflop = (conv_flops(cfg["features"], cfg["in_ch"], cfg["out_ch"], cfg["patch"]) / 1e9
             if not cfg.get("family") else None)
    rounds = []
    for rnd in range(args.repeat):
        res = {}
        for which in args.only.split(","):
            load = load_average()
            r = child(args, which) if which.startswith(("torch", "ov")) or which == "ort" \
                else run_voxseg(args, which)
            r["load"] = load
            res[which] = r
            print(f"# round {rnd + 1} {which}: {r}", file=sys.stderr, flush=True)
        rounds.append(res)
    report(args, cfg, p, gflop, rounds)


def profile_lines(keys, last):
    """--profile: seconds per operation kind of each runtime's last run (last round)."""
    rows = [(k, last[k]["profile"]) for k in keys if "profile" in last.get(k, {})]
    if not rows:
        return
    print("\nwhere the time goes (last run of the last round, s; kinds as each runtime names "
          "them):")
    for k, prof in rows:
        total = sum(prof.values())
        print(f"  {k}: " + ", ".join(f"{kind} {t:.3f} ({100 * t / total:.0f} %)" for kind, t in
                                     sorted(prof.items(), key=lambda kv: -kv[1])))


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2])


def label_agreement(a_path, b_path, ch):
    """Share of voxels whose argmax over the channels (the label) is the same in both outputs."""
    import numpy as np
    a = np.fromfile(a_path, dtype=np.float32)
    b = np.fromfile(b_path, dtype=np.float32)
    if a.size != b.size:
        return float("nan")
    return float(np.mean(a.reshape(ch, -1).argmax(0) == b.reshape(ch, -1).argmax(0)))


def int8_lines(keys, best, outs, ref, ch):
    """voxseg int8 against its own bf16/fp32 and OpenVINO INT8, and the labels' agreement."""
    for mine in INT8_KINDS:
        if mine not in best or best[mine] != best[mine]:
            continue
        t = best[mine]
        parts = [f"{best[k] / t:.2f}x voxseg {k}" for k in ("fp32", "bf16")
                 if k in best and best[k] == best[k]]
        if "ov_int8" in best and best["ov_int8"] == best["ov_int8"]:
            parts.append(f"{best['ov_int8'] / t:.2f}x OpenVINO INT8")
        print(f"\nvoxseg {mine}: " + ", ".join(parts))
    if ref:
        agree = [f"{k} {100 * label_agreement(outs[k], ref, ch):.3f} %" for k in keys
                 if (k in INT8_KINDS or k in ("ov_int8", "bf16", "ov_bf16"))
                 and os.path.exists(outs[k])]
        if agree:
            print("voxels with the PyTorch fp32 label (argmax): " + ", ".join(agree))


def report(args, cfg, p, gflop, rounds):
    names = {"torch": "PyTorch eager fp32", "torch_bf16": "PyTorch bf16 autocast",
             "ort": "ONNX Runtime fp32", "fp32": "voxseg cpu fp32", "bf16": "voxseg cpu bf16",
             "ov": "OpenVINO fp32", "ov_bf16": "OpenVINO bf16",
             "ov_int8": f"OpenVINO INT8 (NNCF, {args.calib} calibration inputs)",
             **{k: f"{name} ({args.calib} calibration inputs, {args.calib_method})"
                for k, (_, name) in INT8_KINDS.items()}}
    outs = {"torch": p["out_torch"], "torch_bf16": p["out_torch_bf16"], "ort": p["out_ort"],
            "fp32": p["out_vx_fp32"], "bf16": p["out_vx_bf16"],
            **{k: p[f"out_vx_{k}"] for k in INT8_KINDS},
            "ov": p["out_ov"],
            "ov_bf16": p["out_ov_bf16"], "ov_int8": p["out_ov_int8"]}
    # the OpenVINO run of the same precision, for voxseg's rows
    ov_peer = {"fp32": "ov", "bf16": "ov_bf16", **{k: "ov_int8" for k in INT8_KINDS}}
    keys = list(rounds[0])
    best = {k: median([min(r[k]["times"]) for r in rounds if "times" in r[k]] or [float("nan")])
            for k in keys}
    if gflop is None:  # families: the conv GFLOP voxseg counts (Graph::convFlops), no matmuls
        gflop = next((r[k]["gflop"] for r in rounds for k in ("fp32", "bf16")
                      if k in r and "gflop" in r[k]), float("nan"))
    ref = p["out_torch"] if os.path.exists(p["out_torch"]) else None
    print(f"\n{args.net}: patch {cfg['patch']}^3, conv {gflop:.1f} GFLOP/patch, {args.threads} "
          f"threads, median over {args.repeat} round(s) of the best of {args.runs} after "
          f"{args.warmup} warm-up; load average {rounds[0][keys[0]]['load']} .. "
          f"{rounds[-1][keys[-1]]['load']}\n")
    print("| runtime | s/patch | conv GFLOP/s | peak RSS MiB | vs PyTorch (same precision) | "
          "vs ORT fp32 | vs OpenVINO (same precision) | max abs diff vs PyTorch fp32 |")
    print("|---|---|---|---|---|---|---|---|")
    for k in keys:
        last = rounds[-1][k]
        if "times" not in last:
            print(f"| {names[k]} | fails: {last.get('error', '?')} | | | | | | |")
            continue
        t = best[k]
        peer = {"bf16": "torch_bf16", "torch_bf16": "torch_bf16", "ov_bf16": "torch_bf16",
                "ov_int8": None, **{k: None for k in INT8_KINDS}}.get(k, "torch")
        vs_t = f"{best[peer] / t:.2f}x" if peer in best and best[peer] == best[peer] else "-"
        vs_o = f"{best['ort'] / t:.2f}x" if "ort" in best and best["ort"] == best["ort"] else "-"
        ov = ov_peer.get(k)
        vs_ov = f"{best[ov] / t:.2f}x" if ov in best and best[ov] == best[ov] else "-"
        diff = f"{max_abs_diff(outs[k], ref):.2e}" if ref and k != "torch" else "-"
        print(f"| {names[k]} | {t:.3f} | {gflop / t:.0f} | {last['peak_rss_mib']:.0f} | {vs_t} | "
              f"{vs_o} | {vs_ov} | {diff} |")
    for k in ("fp32", "bf16"):  # the share per round (network and conv in one process)
        shares = [(gflop / min(r[k]["times"])) / (r[k]["ceiling"]["gflop"] /
                                                  r[k]["ceiling"]["best_s"])
                  for r in rounds if "ceiling" in r.get(k, {})]
        if shares:
            print(f"\nvoxseg {k}: network GFLOP/s as a share of one Conv3d "
                  f"{CEILING['channels']}->{CEILING['channels']} 3x3x3 on {CEILING['side']}^3 in "
                  f"the same process, per round: " + ", ".join(f"{100 * x:.0f} %" for x in shares)
                  + f" (median {100 * median(shares):.0f} %); conv alone " + ", ".join(
                      f"{r[k]['ceiling']['gflop'] / r[k]['ceiling']['best_s']:.0f}"
                      for r in rounds if "ceiling" in r.get(k, {})) + " GFLOP/s")
    int8_lines(keys, best, outs, ref, cfg["out_ch"])
    profile_lines(keys, rounds[-1])
    print("\nper round (best s): " + "; ".join(
        ", ".join(f"{k} {min(r[k]['times']):.2f}" for k in keys if "times" in r[k])
        for r in rounds))
    with open(os.path.splitext(p["onnx"])[0] + ".results.json", "w") as f:
        json.dump({"net": args.net, "patch": cfg["patch"], "gflop": gflop,
                   "threads": args.threads, "rounds": rounds}, f, indent=1)


if __name__ == "__main__":
    main()
