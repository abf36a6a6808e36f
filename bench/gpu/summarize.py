#!/usr/bin/env python3
"""Merges torch.json (torch_unet.py) and voxseg.json (voxseg_gpu_bench, JSON lines) into the
markdown tables of docs/perf-gpu.md, and, when given, the official-size nnInteractive network's
pair (torch_resencl.py's JSON, voxseg_gpu_bench's JSON lines with --input-shape 8,192,192,192).
Usage: summarize.py torch.json voxseg.json [torch_resencl.json voxseg_resencl.json]"""
import json
import sys

PEAK = 989.4  # H200 SXM dense bf16/fp16 TFLOP/s (datasheet; 1979 with sparsity)
MLPERF_HALF_RATE = 3.42 * 64  # 0.5 x 6.84 cases/s x ~64 patches per case, in patches/s


def load_torch(path):
    try:
        with open(path) as f:
            return json.load(f)
    except Exception as e:  # noqa: BLE001 - report and continue
        print(f"(no PyTorch results: {e})\n")
        return {"info": {}, "rows": []}


def load_voxseg(path):
    rows = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        print(f"(unparsable line: {line[:200]})")
    except Exception as e:  # noqa: BLE001
        print(f"(no voxseg results: {e})\n")
    return rows


def gib(b):
    return f"{b / 2**30:.2f}" if isinstance(b, (int, float)) and b else "-"


def main():
    torch = load_torch(sys.argv[1])
    vox = load_voxseg(sys.argv[2])
    info = torch.get("info", {})
    flops = info.get("analytic_conv_flops_per_patch")
    print("# voxseg GPU benchmark summary\n")
    for r in vox:
        if r.get("kind") in ("device", "import"):
            print(f"- {r['kind']}: " + ", ".join(f"{k}={v}" for k, v in r.items() if k != "kind"))
    print(f"- PyTorch {info.get('torch')} cuDNN {info.get('cudnn')} on {info.get('device_name')}")
    if flops:
        print(f"- conv FLOP per 128^3 patch (analytic, Python): {flops / 1e9:.1f} GFLOP")
    print(f"- share of peak against {PEAK} TFLOP/s dense bf16/fp16 (H100 and H200 SXM datasheets)\n")

    print("## Accuracy on a fixed patch vs PyTorch fp32 (TF32 off)\n")
    print("| impl | precision | max abs | rel L2 | label agreement |")
    print("|---|---|---|---|---|")
    for r in vox:
        if r.get("kind") == "check":
            if "error" in r:
                print(f"| voxseg | {r.get('precision', '?')} | error: {r['error'][:120]} | | |")
            else:
                print(f"| voxseg | {r['precision']} | {r['max_abs_vs_torch_fp32']:.4g} | "
                      f"{r['rel_l2_vs_torch_fp32']:.3g} | {100 * r['label_agreement_vs_torch_fp32']:.3f} % |")
    for name, c in (info.get("autocast_check") or {}).items():
        print(f"| pytorch autocast | {name} | {c['max_abs_vs_fp32']:.4g} | | "
              f"{100 * c['label_agreement_vs_fp32']:.3f} % |")

    print("\n## Throughput, 128^3 patches (median of timed runs)\n")
    print("| precision | batch | voxseg patches/s | voxseg TFLOP/s | % of peak | voxseg GiB held / device used "
          "| PyTorch patches/s | PyTorch TFLOP/s | PyTorch GiB peak alloc | voxseg / PyTorch |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    trows = {(r["precision"], r["batch"]): r for r in torch.get("rows", [])}
    best = {"ratio": 0, "share": 0, "rate": 0}
    keys = sorted({(r["precision"], r["batch"]) for r in vox if r.get("kind") == "throughput"} | set(trows))
    for p, b in keys:
        v = next((r for r in vox if r.get("kind") == "throughput" and r["precision"] == p and r["batch"] == b), {})
        t = trows.get((p, b), {})
        vr = v.get("patches_per_s")
        tr = t.get("patches_per_s")
        cells = [p, str(b)]
        cells.append(f"{vr:.1f}" if vr else ("error: " + v.get("error", "-")[:80] if v else "-"))
        cells.append(f"{v['tflops']:.1f}" if vr else "-")
        cells.append(f"{100 * v['share_of_dense_bf16_peak']:.1f} %" if vr else "-")
        cells.append(f"{gib(v.get('held_bytes'))} / {gib(v.get('device_used_bytes'))}" if vr else "-")
        cells.append(f"{tr:.1f}" if tr else ("error" if t.get("error") else "-"))
        cells.append(f"{tr * flops / 1e12:.1f}" if tr and flops else "-")
        cells.append(gib(t.get("peak_allocated_bytes")) if tr else "-")
        cells.append(f"{vr / tr:.2f}x" if vr and tr else "-")
        print("| " + " | ".join(cells) + " |")
        if vr:
            best["rate"] = max(best["rate"], vr)
            best["share"] = max(best["share"], v["share_of_dense_bf16_peak"])
            if tr:
                best["ratio"] = max(best["ratio"], vr / tr)
    best_torch = {p: max([r["patches_per_s"] for r in torch.get("rows", []) if r.get("precision") == p
                          and r.get("patches_per_s")] or [0]) for p in ("fp16", "bf16")}
    best_vox = {p: max([r["patches_per_s"] for r in vox if r.get("kind") == "throughput"
                        and r.get("precision") == p and r.get("patches_per_s")] or [0]) for p in ("fp16", "bf16")}

    print("\n## Whole-volume sliding window (the `voxseg segment --device cuda` path: "
          "Backend::makeSlidingWindow, scores downloaded)\n")
    print("| precision | volume | batch | patches | seconds/case | patches/s | device used GiB | path |")
    print("|---|---|---|---|---|---|---|---|")
    for r in vox:
        if r.get("kind") == "window":
            if "error" in r:
                print(f"| {r['precision']} | error: {r['error'][:150]} | | | | | | |")
            else:
                print(f"| {r['precision']} | {'x'.join(map(str, r['volume']))} | {r['batch']} | {r['patches']} | "
                      f"{r['seconds_per_case']:.3f} | {r['patches_per_s']:.1f} | {gib(r['device_used_bytes'])} | "
                      f"{r.get('path', '')} |")

    print("\n## Targets (issue 5)\n")
    for p in ("fp16", "bf16"):
        if best_vox[p] and best_torch[p]:
            print(f"- best {p}: voxseg {best_vox[p]:.1f} vs PyTorch {best_torch[p]:.1f} patches/s = "
                  f"{best_vox[p] / best_torch[p]:.2f}x (target >= 2x)")
    print(f"- best share of dense peak: {100 * best['share']:.1f} % (target >= 30 %)")
    print(f"- best voxseg rate {best['rate']:.1f} patches/s vs stretch 0.5x MLPerf INT8 "
          f"~{MLPERF_HALF_RATE:.0f} patches/s: {best['rate'] / MLPERF_HALF_RATE:.2f} of it")


def resencl(torch_path, vox_path):
    """Per-forward time of the ResEnc-L network (issue 38 item 7: <= 60 ms per point click)."""
    torch = load_torch(torch_path)
    vox = load_voxseg(vox_path)
    print("\n## Official-size nnInteractive network (ResEnc-L, 8 x 192^3, batch 1)\n")
    print(f"- {torch.get('info', {}).get('parameters', '?')} parameters; a point click at zoom 1 "
          "is one forward plus the session's work (target <= 60 ms per click)\n")
    print("| impl | precision | median ms | min ms | host tensors in and out, median ms | error |")
    print("|---|---|---|---|---|---|")
    for r in torch.get("rows", []):
        print(f"| PyTorch autocast | {r['precision']} | "
              f"{1000 * r['median_s']:.1f} | {1000 * r['min_s']:.1f} | | {r.get('error', '')[:80]} |"
              if "median_s" in r else f"| PyTorch autocast | {r['precision']} | | | | {r.get('error', '')[:80]} |")
    for r in vox:
        if r.get("kind") != "throughput":
            continue
        if "median_s" in r:
            host = r.get("host_round_trip_s")
            host = f"{1000 * host:.1f}" if host is not None else ""
            print(f"| voxseg | {r['precision']} | {1000 * r['median_s']:.1f} | "
                  f"{1000 * r['min_s']:.1f} | {host} | |")
        else:
            print(f"| voxseg | {r['precision']} | | | | {r.get('error', '')[:80]} |")


if __name__ == "__main__":
    main()
    if len(sys.argv) > 4:
        resencl(sys.argv[3], sys.argv[4])
