#!/usr/bin/env python3
"""Writes the goldens of edit/interactive/resample.h: torch's own results for the resampling and
rounding nnInteractive 2.6.0's prediction uses on CPU (issue 38), so the C++ test compares
bit for bit without PyTorch.

    PYTHONPATH=/tmp/nni/src /tmp/tsvenv/bin/python tools/gen_interactive_resample_golden.py
    (torch, numpy; nninteractive 2.6.0's source on the path for its pooling, optional)

Cases (each a raw little-endian input/output pair plus an entry of index.json):
  nearest    fp16 [1,1,D,H,W] -> size      (prev_seg into the patch, _build_network_input)
  area       fp16 [1,1,D,H,W] -> size      (interaction channels, adaptive average pooling)
  trilinear  fp32 [1,1,D,H,W] -> size      (image down, coarse prediction up, align_corners=False)
  maxpool / minpool  fp16, iterative_3x3_same_padding_pool3d semantics, kernel k
  divide     fp16 tensor / python float    (_normalize_interaction_channels_for_network_)
  numpy_choice  np.random.seed(s); np.random.choice(n) sequence (random_sampling_fallback)
and round_to_nearest_odd / round() tables.
Shapes include thin volumes with the full-size axis lengths nnInteractive meets (patch 64..192
scaled by its AutoZoom factors), so index and weight arithmetic is checked at real sizes.
"""
import json
import math
import pathlib

import numpy as np
import torch
import torch.nn.functional as F

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "edit" / "data" / "interactive_resample"


def pool_reference(x: torch.Tensor, k: int, use_min: bool) -> torch.Tensor:
    """2.6.0's definition (replicate padding, then (k-1)/2 3x3x3 max pools), the original form."""
    r = (k - 1) // 2
    y = F.pad(x[None] if x.ndim == 4 else x, (r,) * 6, mode="replicate")
    sign = -1 if use_min else 1
    y = sign * y
    for _ in range(r):
        y = F.max_pool3d(y, 3, 1, 0)
    return sign * y


try:  # 2.6.0's own pooling (PYTHONPATH=<nninteractive 2.6.0 src>), else its definition
    from nnInteractive.utils.erosion_dilation import iterative_3x3_same_padding_pool3d as pool
except ImportError:
    def pool(x, k, use_min_pool=False):
        return pool_reference(x, k, use_min_pool)


def round_to_nearest_odd(number: float) -> int:  # utils/rounding.py, restated
    cl, fl = math.ceil(number), math.floor(number)
    if cl % 2 == 1:
        return cl
    if fl % 2 == 1:
        return fl
    return round(number) + 1


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for f in OUT.glob("*.bin"):
        f.unlink()
    torch.manual_seed(38)
    rng = np.random.default_rng(38)
    index = {"torch": torch.__version__, "numpy": np.__version__, "cases": []}
    counter = [0]

    def save(arr: np.ndarray) -> str:
        name = f"c{counter[0]:03d}.bin"
        counter[0] += 1
        (OUT / name).write_bytes(np.ascontiguousarray(arr).tobytes())
        return name

    def add(kind, x: torch.Tensor, y: torch.Tensor, **extra):
        entry = {"kind": kind, "dtype": str(x.dtype).replace("torch.", ""),
                 "in_shape": list(x.shape[-3:]), "out_shape": list(y.shape[-3:]),
                 "input": save(x.numpy()), "output": save(y.numpy())}
        entry.update(extra)
        index["cases"].append(entry)

    def fp16_prompt(shape):
        """Sparse prompt-like fp16 channel: zeros, balls of decayed intensities, some noise."""
        a = np.zeros(shape, np.float32)
        n = a.size
        idx = rng.choice(n, size=max(1, n // 12), replace=False)
        a.flat[idx] = rng.choice([1.0, 1.0204082, 1.0412328, 0.98, 2.5, 1e-3], size=idx.size)
        a.flat[rng.choice(n, size=max(1, n // 20), replace=False)] = rng.uniform(0, 3, n // 20 or 1)
        return torch.from_numpy(a).half()

    # Full-size thin volumes: the axis pairs of patch p scaled by zoom z (round(p * z)).
    pairs = []
    for p in (64, 96, 128, 192):
        for z in (1.5, 2.25, 3.375, 4.0, 1.2345):
            s = round(p * z)
            pairs.append((s, p))
    small = [((12, 15, 18), (8, 10, 12)), ((9, 14, 27), (6, 9, 8)), ((7, 11, 13), (7, 5, 13)),
             ((5, 6, 7), (10, 12, 14)), ((6, 9, 10), (9, 20, 23)), ((4, 5, 6), (8, 10, 12))]

    def shapes_for(down: bool):
        out = [(a, b) if down else (b, a) for a, b in small if (np.prod(a) > np.prod(b)) == down]
        for i, (s, p) in enumerate(pairs):
            big, little = (s, p) if down else (p, s)
            thin = [((1, 2, big), (1, 2, little)), ((2, big, 1), (2, little, 1)),
                    ((big, 1, 2), (little, 1, 2))]
            out.append(thin[i % 3])
        return out

    # 2.6.0 shrinks (scaled window -> patch) with nearest (prev_seg), area (interactions) and
    # trilinear (image), and enlarges only the coarse 0/1 prediction (trilinear, then >= 0.5).
    for in_s, out_s in shapes_for(True):
        x = (torch.rand(1, 1, *in_s) > 0.5).half()
        add("nearest", x, F.interpolate(x, size=out_s, mode="nearest"))
        x = fp16_prompt(in_s)[None, None]
        add("area", x, F.interpolate(x, size=out_s, mode="area"))
        x = torch.randn(1, 1, *in_s)
        add("trilinear", x, F.interpolate(x, size=out_s, mode="trilinear"))
    for in_s, out_s in shapes_for(False):
        x = (torch.rand(1, 1, *in_s) > 0.5).float()
        add("trilinear", x, F.interpolate(x, size=out_s, mode="trilinear"))

    for k in (3, 5, 7, 9):
        for shape in ((9, 11, 13), (30, 3, 4), (2, 3, 5)):
            x = fp16_prompt(shape)[None, None]
            # the session's implementation itself, and the definition it claims to equal
            y = pool(x, k)
            assert torch.equal(y, pool_reference(x, k, False))
            add("maxpool", x, y, k=k)
            y = pool(x, k, use_min_pool=True)
            assert torch.equal(y, pool_reference(x, k, True))
            add("minpool", x, y, k=k)

    intensity = 1.0
    for _ in range(40):
        intensity *= 1 / 0.98
    for d in (1 / 0.98, 1 / 0.98 ** 2, intensity, 3.3, 6553.7):
        x = fp16_prompt((6, 7, 8))
        x = x * torch.tensor(d).half()  # stored pre-multiplied values
        y = x.clone()
        y /= d
        add("divide", x, y, divisor=d)

    # generate_bounding_boxes (utils/bboxes.py) on blob masks, np.random seeded first: greedy
    # cover, stride halving, and the random fallback (inner box patch - 48 narrower than the grid)
    try:
        from nnInteractive.utils.bboxes import generate_bounding_boxes
    except ImportError:
        generate_bounding_boxes = None
    if generate_bounding_boxes is not None:
        index["cover"] = []
        shape = (32, 41, 47)
        zz, yy, xx = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
        for k, (patch, blobs) in enumerate([((64, 64, 64), 1), ((56, 60, 64), 3), ((72, 80, 88), 2),
                                            ((60, 58, 60), 4), ((100, 100, 100), 2)]):
            mask = np.zeros(shape, bool)
            for _ in range(blobs):
                c = [rng.integers(0, n) for n in shape]
                r = rng.uniform(4, 18, 3)
                mask |= ((zz - c[0]) / r[0]) ** 2 + ((yy - c[1]) / r[1]) ** 2 + ((xx - c[2]) / r[2]) ** 2 <= 1
            if k == 3:  # thin diagonal line: no grid point on it until the stride shrinks
                for i in range(26):
                    mask[5 + i, 3 + i, 10 + i] = True
            seed = 77 + k
            np.random.seed(seed)
            boxes = generate_bounding_boxes(torch.from_numpy(mask.astype(np.uint8)), patch,
                                            stride="auto", margin=(24, 24, 24), max_depth=3)
            index["cover"].append({"shape": list(shape), "patch": list(patch), "seed": seed,
                                   "mask_bits": save(np.packbits(mask.ravel())),  # MSB first
                                   "boxes": [[[int(a), int(b)] for a, b in bb] for bb in boxes]})

    seeds = []
    for seed in (0, 1, 12345):
        np.random.seed(seed)
        draws = []
        for n in (1, 2, 3, 7, 100, 1000, 123457, 2**31 + 5, 17):
            draws.append([n, [int(np.random.choice(n)) for _ in range(6)]])
        seeds.append({"seed": seed, "draws": draws})
    index["numpy_choice"] = seeds

    values = [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 7.0, 0.5, 2.2, 2.999, 6.0, 1.25 * 2 - 1]
    index["round_to_nearest_odd"] = [[v, round_to_nearest_odd(v)] for v in values]
    halves = [0.5, 1.5, 2.5, -0.5, -1.5, 95.5, 96.5, 42.0, 43.49999, 64 * 1.5, 64 * 2.25,
              64 * 3.375, 97 * 1.5, 99 * 2.25 / 2, 1.2345 * 192]
    index["round"] = [[v, round(v)] for v in halves]

    (OUT / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    total = sum(f.stat().st_size for f in OUT.iterdir())
    print(f"{len(index['cases'])} cases, {total / 1e6:.2f} MB in {OUT}")


if __name__ == "__main__":
    main()
