#!/usr/bin/env python3
"""Goldens for edit/interactive's prompt rasterisers, decay and normalisation, made by
nninteractive 2.6.0 itself (issue 38): tests/edit/data/interactive_prompts.json.

A real nnInteractiveInferenceSession (CPU, dense tensor storage) is set up without a network
(the capability fields the loader would set are assigned directly), given an image with
set_image, and fed prompts with run_prediction=False: points, 2-D and 3-D boxes (fractional
bounds, halves, boxes past the image, collapsing boxes), scribble and lasso masks, an initial
segmentation, undo and reset. After every step the file records the session's prompt channels
(nonzero fp16 entries), its intensity and its queued windows. One session uses decay 0.5 so the
fp16 renormalisation fires; the other 2.6.0's default 0.98. Also: build_point's kernels and the
normalised image of set_image (torch's mean and unbiased std).

The C++ test (tests/edit/interactive_session_test.cpp) rebuilds the same images from the formula
in image_values() and replays the steps. Needs nninteractive==2.6.0 (torch 2.15 here):
    /tmp/nnivenv/bin/python tools/gen_interactive_prompt_golden.py
"""
import hashlib
import json
import os
import sys
import types

import numpy as np
import torch

from nnInteractive.inference.inference_session import nnInteractiveInferenceSession
from nnInteractive.interaction.point import PointInteraction_stub, build_point

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "edit", "data",
                   "interactive_prompts.json")
SHAPE = (12, 14, 10)  # (z, y, x)
PATCH = [10, 12, 6]
MAPPING = {"prev_seg": 0, "bbox2d": [1, 2], "bbox3d": [1, 2], "lasso": [1, 2],
           "points": [3, 4], "scribble": [5, 6]}


def image_values(shape, border):
    """Deterministic image: zero outside [border, size - border) per axis; inside, integer
    values from a hash of the flat index (the C++ test computes the same)."""
    z, y, x = np.meshgrid(*[np.arange(s) for s in shape], indexing="ij")
    flat = (z * shape[1] + y) * shape[2] + x
    v = ((flat * 7919 + 13) % 2003 - 700).astype(np.float32) * np.float32(0.25)
    inside = np.ones(shape, bool)
    for a, b in enumerate(border):
        idx = [z, y, x][a]
        inside &= (idx >= b[0]) & (idx < shape[a] - b[1])
    return np.where(inside, v, np.float32(0)).astype(np.float32)


def make_session(decay, supported):
    s = nnInteractiveInferenceSession(device=torch.device("cpu"), verbose=False,
                                      torch_n_threads=1, interactions_storage="tensor")
    cap = {"supported_interactions": supported, "channel_mapping": MAPPING,
           "interaction_channels": 6}
    s._apply_capability(cap)
    s.interaction_decay = decay
    s.point_interaction = PointInteraction_stub(4, True)
    s.preferred_scribble_thickness = [2, 2, 2]
    s.pad_mode_data = "constant"
    s.configuration_manager = types.SimpleNamespace(patch_size=PATCH)
    return s


def nonzero_entries(interactions):
    bits = interactions.numpy().view(np.uint16)
    c, z, y, x = np.nonzero(bits)
    flat = (z * SHAPE[1] + y) * SHAPE[2] + x
    return [[int(a), int(b), int(v)] for a, b, v in zip(c, flat, bits[c, z, y, x])]


def mask_from_indices(indices):
    m = np.zeros(SHAPE, np.uint8)
    m.reshape(-1)[indices] = 1
    return m


def run_session(name, decay, supported, steps):
    s = make_session(decay, supported)
    img = image_values(SHAPE, [(1, 2), (2, 1), (0, 1)])
    s.set_image(img[None])
    s._finish_preprocessing_and_initialize_interactions()
    s.set_target_buffer(np.zeros(SHAPE, np.uint8))
    out = []
    for step in steps:
        op = step["op"]
        rec = dict(step)
        try:
            if op == "point":
                s.add_point_interaction(step["point"], step["include"], run_prediction=False)
            elif op == "box":
                s.add_bbox_interaction(step["box"], step["include"], run_prediction=False)
            elif op in ("scribble", "lasso"):
                fn = s.add_scribble_interaction if op == "scribble" else s.add_lasso_interaction
                fn(mask_from_indices(step["mask"]), step["include"], run_prediction=False)
            elif op == "initial_seg":
                s.add_initial_seg_interaction(mask_from_indices(step["mask"]),
                                              run_prediction=False)
            elif op == "undo":
                rec["undo_returned"] = bool(s.undo())
            elif op == "reset":
                s.reset_interactions()
            rec["error"] = None
        except ValueError as e:
            rec["error"] = str(e)
        rec["intensity"] = float(s.current_interaction_intensity)
        rec["queue"] = [[[int(c) for c in center], float(z)] for center, z in
                        zip(s.new_interaction_centers, s.new_interaction_zoom_out_factors)]
        bits = s.interactions.numpy().view(np.uint16)
        rec["channels_sha256"] = hashlib.sha256(bits.astype("<u2").tobytes()).hexdigest()
        rec["channel_nonzero"] = [int(np.count_nonzero(b)) for b in bits]
        entries = nonzero_entries(s.interactions)
        rec["channels"] = entries if len(entries) <= 400 else None  # full list when small
        rec["target_sum"] = int(np.asarray(s.target_buffer).sum())
        out.append(rec)
    return {"name": name, "decay": decay, "supported": supported, "steps": out}


def random_mask_indices(rng, n, plane_axis=None, plane=None):
    idx = []
    while len(idx) < n:
        p = [int(rng.integers(0, s)) for s in SHAPE]
        if plane_axis is not None:
            p[plane_axis] = plane
        f = (p[0] * SHAPE[1] + p[1]) * SHAPE[2] + p[2]
        if f not in idx:
            idx.append(f)
    return sorted(idx)


def steps_for(rng, many):
    steps = [
        {"op": "point", "point": [5, 6, 4], "include": True},
        {"op": "point", "point": [2.5, 3.5, 0.5], "include": False},  # halves to even
        {"op": "point", "point": [11, 0, 9], "include": True},  # ball past the corner
        {"op": "box", "box": [[2.5, 3.5], [1, 9], [0.5, 7.5]], "include": True},  # bbox2d
        {"op": "box", "box": [[3, 4], [-3, 20], [2, 5]], "include": False},  # clipped
        {"op": "box", "box": [[11.6, 12.4], [3, 5], [1, 2]], "include": True},  # collapses
        {"op": "box", "box": [[0.2, 0.4], [3, 5], [1, 2]], "include": True},  # collapses at 0
        {"op": "undo"},
        {"op": "undo"},  # single level: nothing left
        {"op": "box", "box": [[1, 6], [2, 9], [3, 5]], "include": True},  # 3-D
        {"op": "scribble", "mask": random_mask_indices(rng, 9, 0, 6), "include": True},
        {"op": "lasso", "mask": random_mask_indices(rng, 25, 2, 3), "include": False},
        {"op": "scribble", "mask": random_mask_indices(rng, 5, 1, 2), "include": False},
    ]
    if many:  # past fp16's max with decay 0.5: renormalisation
        for k in range(14):
            steps.append({"op": "point", "point": [k % 12, (3 * k) % 14, (5 * k) % 10],
                          "include": k % 3 != 0})
        steps.append({"op": "undo"})
        steps.append({"op": "point", "point": [6, 7, 5], "include": True})
    steps += [
        {"op": "initial_seg", "mask": random_mask_indices(rng, 40)},
        {"op": "point", "point": [4, 4, 4], "include": True},
        {"op": "undo"},
        {"op": "undo"},
        {"op": "box", "box": [[2, 3], [2, 12], [1, 9]], "include": False},
        {"op": "reset"},
        {"op": "undo"},
        {"op": "point", "point": [7, 8, 2], "include": True},
    ]
    return steps


def main():
    assert np.__version__ and torch.__version__
    from importlib.metadata import version
    assert version("nninteractive") == "2.6.0", version("nninteractive")
    rng = np.random.default_rng(38)
    all_sup = {"points": True, "bbox2d": True, "bbox3d": True, "scribble": True, "lasso": True}
    sessions = [
        run_session("decay_0.5_renormalise", 0.5, all_sup, steps_for(rng, True)),
        run_session("decay_0.98", 0.98, all_sup, steps_for(rng, False)),
    ]
    # Capability: no bbox3d (the official checkpoint), a 3-D box is refused.
    no3d = dict(all_sup, bbox3d=False)
    sessions.append(run_session("no_bbox3d", 0.98, no3d, [
        {"op": "box", "box": [[1, 6], [2, 9], [3, 5]], "include": True},
        {"op": "box", "box": [[1, 6], [2, 3], [3, 5]], "include": True},
    ]))

    kernels = {}
    for r in (1, 2, 3, 4, 5):
        k = build_point((r, r, r), True, False)
        kernels[str(r)] = [float(v) for v in np.asarray(k, np.float64).reshape(-1)]

    # set_image's statistics: torch's float32 sum depends on the thread count (the reduction is
    # split per thread above 32768 elements), so the larger images run with 1, 2 and 3 threads.
    norm = []
    for shape, border, threads in (((12, 14, 10), [(1, 2), (2, 1), (0, 1)], 1),
                                   ((40, 33, 27), [(3, 0), (0, 5), (2, 2)], 1),
                                   ((61, 47, 53), [(2, 3), (1, 0), (4, 1)], 1),
                                   ((61, 47, 53), [(2, 3), (1, 0), (4, 1)], 2),
                                   ((70, 90, 31), [(0, 0), (3, 3), (0, 2)], 3)):
        s = make_session(0.98, all_sup)
        torch.set_num_threads(threads)
        img = image_values(shape, border)
        s.set_image(img[None])
        s._finish_preprocessing_and_initialize_interactions()
        torch.set_num_threads(1)
        pre = s.preprocessed_image[0].numpy()
        norm.append({"shape": list(shape), "border": [list(b) for b in border],
                     "torch_threads": threads,
                     "normalised_bits": [int(v) for v in pre.reshape(-1).view(np.uint32)]
                     if pre.size < 5000 else None,
                     "sample_bits": [int(v) for v in pre.reshape(-1)[::97].view(np.uint32)]})

    # fp16 conversions of doubles as 2.6.0 does them: a box write (tensor[...] = float), a mask
    # write (NumPy: fp16 array *= float) and a point kernel (float64 tensor .to(float16)).
    conversions = []
    tricky = [1 + 2**-11 + 2**-40, 1 - 2**-12 - 2**-41, 1.0204081632653061, 6550.4, 65504.0,
              65519.99, 1e-7, 3.0517578125e-05 * 1.5 + 2**-60]
    for v in tricky + [float(x) for x in np.random.default_rng(1).uniform(0, 70000, 40)]:
        t = torch.zeros(1, dtype=torch.float16)
        t[:] = v
        a = np.ones(1, np.float16)
        a *= v
        p = torch.tensor([v], dtype=torch.float64).to(torch.float16)
        conversions.append([v, int(t.view(torch.int16).item()) & 0xFFFF,
                            int(a.view(np.uint16)[0]), int(p.view(torch.int16).item()) & 0xFFFF])

    doc = {"_generator": "tools/gen_interactive_prompt_golden.py (nninteractive 2.6.0, torch "
                         + torch.__version__ + ", numpy " + np.__version__ + ")",
           "shape": list(SHAPE), "patch": PATCH, "channel_mapping": MAPPING,
           "point_radius": 4, "sessions": sessions, "point_kernels": kernels,
           "normalisation": norm, "half_conversions": conversions}
    with open(OUT, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    sys.exit(main())
