#!/usr/bin/env python3
"""voxseg vs TotalSegmentator 2.18.0: wall time and peak memory at its real network sizes (issue 37).

Steps (each alone; weights, CTs and outputs stay under --work, outside the repo):
  phantom    `voxseg phantom` -> a 512x512x300 CT (0.78x0.78x1.5 mm, NIfTI int16, ct300.nii.gz)
             and its middle 128 slices (ct128.nii.gz, for the slow `total` runs).
  fabricate  seeded random nnU-Net v2 models in TotalSegmentator's folder layout at the sizes of
             its released networks (NETS below): parts 291-295 (old plans format) and 297 (--fast).
             The final 1x1 convolution is balanced on features of a 96^3 crop of the CT so that
             most classes win somewhere (tools/totalseg_parity.py's balance_head).
  export     tools/export_totalsegmentator.py -> packages total (--no-roi-subset) and total_fast.
  run        one after another: TotalSegmentator --fast, voxseg total_fast fp32 / bf16,
             TotalSegmentator total, voxseg total fp32 / bf16; wall time, peak RSS, voxel
             agreement of voxseg fp32 with TotalSegmentator; results.json under --work.

Both runtimes use 2 threads (TotalSegmentator sets torch threads to the core count, 2 here;
OMP/MKL_NUM_THREADS=2 as well; voxseg --threads 2), pinned with taskset -c 0,1.
Needs the TotalSegmentator venv (torch, nnunetv2, totalsegmentator 2.18.0; onnx for the export):

    python3 -m venv /tmp/tsvenv && /tmp/tsvenv/bin/pip install totalsegmentator==2.18.0 torch==2.15.0 onnx==1.23.2

    P=/tmp/tsvenv/bin/python; W=/tmp/tsbench
    $P bench/totalseg/bench_totalseg.py phantom --work $W
    $P bench/totalseg/bench_totalseg.py fabricate --work $W
    $P bench/totalseg/bench_totalseg.py export --work $W
    $P bench/totalseg/bench_totalseg.py run --work $W
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../.."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import totalseg_parity as tp  # noqa: E402  (layout, labels, randomisation, head balancing)

VOXSEG = os.path.join(ROOT, "build/app/voxseg")
TS = "/tmp/tsvenv/bin/TotalSegmentator"
THREADS = 2
TOTAL_SLICES = 128  # `total` runs on the middle 128 slices (one 128-voxel patch along z at 1.5 mm)

# Network sizes (nnU-Net 3d_fullres PlainConvUNet as nnU-Net's default planner makes it for
# isotropic CT): 6 stages, features 32,64,128,256,320,320, 2 convs per stage, 3^3 kernels.
# Patches: 128^3 for the 1.5 mm parts, 112x112x128 for the 3 mm model (as a third-party benchmark
# that loads the released checkpoints sets them); 112 pools 4 times down to 7, so the 3 mm net's
# last stride is (1, 1, 2).
FEATURES = [32, 64, 128, 256, 320, 320]
NETS = {  # dataset id -> patch (z, y, x), strides
    **{d: ([128, 128, 128], [[1, 1, 1]] + [[2, 2, 2]] * 5) for d in range(291, 296)},
    297: ([112, 112, 128], [[1, 1, 1]] + [[2, 2, 2]] * 4 + [[1, 1, 2]]),
}


def make_plans(did):
    """tools/totalseg_parity.py's plans with the real sizes put in."""
    plans = tp.make_plans(did)
    conf = plans["configurations"][tp.CONFIG]
    patch, strides = NETS[did]
    conf["patch_size"] = patch
    kernels = [[3, 3, 3]] * len(FEATURES)
    if "architecture" in conf:
        kw = conf["architecture"]["arch_kwargs"]
        kw.update({"n_stages": len(FEATURES), "features_per_stage": FEATURES, "kernel_sizes": kernels,
                   "strides": strides, "n_conv_per_stage": [2] * len(FEATURES),
                   "n_conv_per_stage_decoder": [2] * (len(FEATURES) - 1)})
    else:
        conf.update({"UNet_base_num_features": FEATURES[0], "unet_max_num_features": FEATURES[-1],
                     "n_conv_per_stage_encoder": [2] * len(FEATURES),
                     "n_conv_per_stage_decoder": [2] * (len(FEATURES) - 1),
                     "num_pool_per_axis": [sum(s[i] == 2 for s in strides) for i in range(3)],
                     "pool_op_kernel_sizes": strides, "conv_kernel_sizes": kernels})
    return plans


def head_features(net, data):
    """Inputs of the final 1x1 convolution on a 96^3 crop around the volume's centre."""
    import torch
    crop = []
    for n in data.shape:
        c = min(n, 96)
        crop.append(slice((n - c) // 2, (n - c) // 2 + c))
    x = np.zeros((96, 96, 96), np.float32)
    part = data[tuple(crop)]
    x[:part.shape[0], :part.shape[1], :part.shape[2]] = part
    got = {}
    head = net.decoder.seg_layers[-1]
    h = head.register_forward_hook(lambda m, i, o: got.setdefault("f", i[0]))
    net.decoder.deep_supervision = False
    with torch.no_grad():
        net.eval()(torch.from_numpy(x)[None, None])
    h.remove()
    f = got["f"][0].numpy()
    return f.reshape(f.shape[0], -1).astype(np.float64)


def stage_fabricate(a):
    import torch
    torch.set_num_threads(THREADS)
    root = os.path.join(a.work, "weights")
    ct = os.path.join(a.work, "ct300.nii.gz")
    report = {"seed": a.seed, "features_per_stage": FEATURES, "datasets": {}}
    inputs = {}
    for did in NETS:
        out = tp.dataset_dir(root, did)
        os.makedirs(os.path.join(out, "fold_0"), exist_ok=True)
        plans, ds = make_plans(did), tp.make_dataset_json(did)
        trainer = tp.DATASETS[did][1]
        for name, obj in (("plans.json", plans), ("dataset.json", ds)):
            with open(os.path.join(out, name), "w") as f:
                json.dump(obj, f, indent=4)
        net = tp.build_network(plans, ds, trainer)
        tp.randomize(net, torch.Generator().manual_seed(a.seed * 1000 + did))
        spacing = tp.DATASETS[did][2]
        if spacing not in inputs:
            inputs[spacing] = tp.model_input(ct, plans)
        t0 = time.time()
        feats = head_features(net, inputs[spacing])
        n_cls = len(ds["labels"])
        w, b = tp.balance_head(feats, n_cls, tp.BG_TARGET["part" if did <= 295 else "total"],
                               np.random.default_rng(a.seed * 1000 + did))
        tp.set_head(net.decoder.seg_layers[-1], w, b)
        net.decoder.deep_supervision = True
        tp.save_checkpoint(os.path.join(out, "fold_0", "checkpoint_final.pth"), net, plans, ds, trainer)
        info = {"dataset": tp.DATASETS[did][0], "trainer": trainer, "spacing": spacing,
                "patch": NETS[did][0], "strides": NETS[did][1], "classes": n_cls,
                "parameters": int(sum(q.numel() for q in net.parameters())),
                "plans_format": tp.DATASETS[did][4], "fit_s": round(time.time() - t0, 1)}
        report["datasets"][str(did)] = info
        print(did, json.dumps(info), flush=True)
    with open(os.path.join(root, "fabricate.json"), "w") as f:
        json.dump(report, f, indent=1)


def stage_phantom(a):
    import nibabel as nib
    os.makedirs(a.work, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([VOXSEG, "phantom", os.path.join(tmp, "p"), "--seed", str(a.seed),
                        "--size", "512x512x300", "--spacing", "0.78x0.78x1.5", "--outputs", "image",
                        "--threads", str(THREADS)], check=True)
        img = nib.load(os.path.join(tmp, "p", "image.nii.gz"))
        data = np.asanyarray(img.dataobj).astype(np.int16)
        full = nib.Nifti1Image(data, img.affine)
        full.set_data_dtype(np.int16)
        nib.save(full, os.path.join(a.work, "ct300.nii.gz"))
        k0 = (data.shape[2] - TOTAL_SLICES) // 2
        nib.save(full.slicer[:, :, k0:k0 + TOTAL_SLICES], os.path.join(a.work, "ct128.nii.gz"))
    print("phantom:", data.shape, img.header.get_zooms(), "HU", int(data.min()), int(data.max()))


def stage_export(a):
    root = os.path.join(a.work, "weights")
    for task in ("total", "total_fast"):  # no crop model (298): --labels is not measured
        subprocess.run([sys.executable, os.path.join(ROOT, "tools/export_totalsegmentator.py"), root,
                        "--task", task, "-o", os.path.join(a.work, "pkg_" + task), "--force", "--no-roi-subset"],
                       check=True)


def tree_memory(pid):
    """(PSS, RSS) sums in bytes over pid and its descendants (/proc/*/smaps_rollup). PSS splits
    pages shared between processes (TotalSegmentator forks workers), so its sum is what the run
    occupies; the RSS sum counts shared pages once per process."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    pss = rss = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for ln in f:
                    if ln.startswith("Pss:"):
                        pss += int(ln.split()[1]) * 1024
                    elif ln.startswith("Rss:"):
                        rss += int(ln.split()[1]) * 1024
        except OSError:
            pass
    return pss, rss


def measure(cmd, env, log):
    """Runs cmd under taskset: wall s, peak PSS and RSS sums over its process tree (polled every
    0.3 s) and /usr/bin/time's maximum RSS (of the largest single process)."""
    tfile = log + ".time"
    full = ["/usr/bin/time", "-v", "-o", tfile, "taskset", "-c", "0,1"] + cmd
    peak = [0, 0]
    loads = []  # 1-minute load average, every 15 s (2.0 = this run alone on 2 cores)
    t0 = time.time()
    with open(log, "w") as f:
        proc = subprocess.Popen(full, env=env, stdout=f, stderr=subprocess.STDOUT)
        stop = threading.Event()

        def poll():
            last_load = 0.0
            while not stop.is_set():
                if time.time() - last_load >= 15:
                    loads.append(os.getloadavg()[0])
                    last_load = time.time()
                pss, rss = tree_memory(proc.pid)
                peak[0], peak[1] = max(peak[0], pss), max(peak[1], rss)
                stop.wait(0.3)
        th = threading.Thread(target=poll)
        th.start()
        rc = proc.wait()
        stop.set()
        th.join()
    wall = time.time() - t0
    maxrss_kb = 0
    with open(tfile) as f:
        for ln in f:
            if "Maximum resident set size" in ln:
                maxrss_kb = int(ln.split(":")[1])
    return {"rc": rc, "wall_s": round(wall, 1), "peak_pss_gb": round(peak[0] / 1e9, 3),
            "peak_rss_sum_gb": round(peak[1] / 1e9, 3),
            "max_rss_gb": round(maxrss_kb * 1024 / 1e9, 3),
            "load": [round(min(loads), 1), round(max(loads), 1)] if loads else None}


def agreement(a_path, b_path):
    import nibabel as nib
    a = np.asanyarray(nib.load(a_path).dataobj)
    b = np.asanyarray(nib.load(b_path).dataobj)
    if a.shape != b.shape:
        return {"error": f"shapes {a.shape} vs {b.shape}"}
    return {"agreement_pct": round(100.0 * float((a == b).mean()), 4),
            "labels_ts": int(len(np.unique(a))), "labels_voxseg": int(len(np.unique(b)))}


def voxseg_labels(out):
    for name in ("segmentation.nii.gz", "labels.nii.gz", "seg.nii.gz"):
        if os.path.exists(os.path.join(out, name)):
            return os.path.join(out, name)
    found = [f for f in os.listdir(out) if f.endswith(".nii.gz")]
    return os.path.join(out, found[0]) if found else None


RUNS = [  # name, runtime, task, ct, precision
    ("ts_fast", "ts", "total_fast", "ct300.nii.gz", None),
    ("voxseg_fast_fp32", "voxseg", "total_fast", "ct300.nii.gz", "fp32"),
    ("voxseg_fast_bf16", "voxseg", "total_fast", "ct300.nii.gz", "bf16"),
    ("ts_total", "ts", "total", "ct128.nii.gz", None),
    ("voxseg_total_fp32", "voxseg", "total", "ct128.nii.gz", "fp32"),
    ("voxseg_total_bf16", "voxseg", "total", "ct128.nii.gz", "bf16"),
]


def stage_run(a):
    home = os.path.join(a.work, "tshome")
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, "config.json"), "w") as f:
        json.dump({"send_usage_stats": False, "statistics_disclaimer_shown": True}, f)
    env = dict(os.environ, TOTALSEG_WEIGHTS_PATH=os.path.join(a.work, "weights"), TOTALSEG_HOME_DIR=home,
               OMP_NUM_THREADS=str(THREADS), MKL_NUM_THREADS=str(THREADS))
    path = os.path.join(a.work, "results.json")
    results = {}
    if os.path.exists(path):
        with open(path) as f:
            results = json.load(f)
    for name, rt, task, ct, prec in RUNS:
        if a.only and name not in a.only:
            continue
        out = os.path.join(a.work, "out", name)
        os.makedirs(out, exist_ok=True)
        ct_path = os.path.join(a.work, ct)
        if rt == "ts":
            cmd = [TS, "-i", ct_path, "-o", os.path.join(out, "seg.nii.gz"), "--ml", "--device", "cpu",
                   "-nr", "1", "-ns", "1"] + (["--fast"] if task == "total_fast" else [])
        else:
            cmd = [a.voxseg, "segment", ct_path, "-m", os.path.join(a.work, "pkg_" + task), "-o", out,
                   "--device", "cpu", "--outputs", "nifti", "--precision", prec, "--threads", str(THREADS)]
        print(f"{time.strftime('%H:%M:%S')} {name}: {' '.join(cmd)}", flush=True)
        r = measure(cmd, env, os.path.join(a.work, "out", name + ".log"))
        if r["rc"] != 0:
            print(f"{name} failed (rc {r['rc']}), log {a.work}/out/{name}.log", flush=True)
        r.update({"runtime": rt, "task": task, "ct": ct, "precision": prec or "torch fp32",
                  "command": " ".join(cmd).replace(a.work, "$W"), "finished": time.strftime("%H:%M:%S")})
        if rt == "voxseg":
            ts_name = "ts_fast" if task == "total_fast" else "ts_total"
            ts_seg = os.path.join(a.work, "out", ts_name, "seg.nii.gz")
            mine = voxseg_labels(out)
            if os.path.exists(ts_seg) and mine:
                r.update(agreement(ts_seg, mine))
            if ts_name in results and r["rc"] == 0:
                r["time_ratio_ts_over_voxseg"] = round(results[ts_name]["wall_s"] / r["wall_s"], 2)
                if results[ts_name].get("peak_pss_gb"):  # older results.json rows lack it
                    r["pss_ratio_voxseg_over_ts"] = round(
                        r["peak_pss_gb"] / results[ts_name]["peak_pss_gb"], 3)
        results[name] = r
        print(name, json.dumps(r), flush=True)
        with open(path, "w") as f:
            json.dump(results, f, indent=1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", choices=["phantom", "fabricate", "export", "run"])
    p.add_argument("--work", default="/tmp/tsbench", help="weights, CTs, packages, outputs")
    p.add_argument("--seed", type=int, default=37)
    p.add_argument("--only", nargs="+", choices=[r[0] for r in RUNS], help="run only these")
    p.add_argument("--voxseg", default=VOXSEG,
                   help="the voxseg binary (default build/app/voxseg; a copy keeps a run's binary fixed "
                        "while the build tree changes)")
    a = p.parse_args()
    {"phantom": stage_phantom, "fabricate": stage_fabricate, "export": stage_export,
     "run": stage_run}[a.step](a)


if __name__ == "__main__":
    main()
