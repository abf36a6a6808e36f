#!/usr/bin/env python3
"""The house's arrows point down: a file may include its own room or a lower one, never a higher
one nor a sibling on its level. Product code never includes bench/ or tests/.

    scripts/check_layers.py [REPO]     # exit 1 naming every upward include
    scripts/check_layers.py --self-test

Rooms and levels are listed once, here (docs/engine-ops.md and README's layout table describe
them). The longest matching prefix names a file's room.
"""
import os
import re
import sys
import tempfile

# Lowest first. Rooms on one level must not include each other.
LEVELS = [
    ["core"],
    ["io", "engine/graph"],
    ["engine"],  # the Backend contract (engine/backend.h)
    ["engine/passes"],
    ["engine/quant"],  # int8: the scheme, the calibrated record, which layers run int8
    ["engine/onnx", "engine/reference", "engine/cpu"],
    ["engine/inference"],
    ["engine/model"],
    ["cuda"],
    ["backends"],
    ["pipeline"],
    ["edit", "batch"],
    ["node"],
    ["app", "ui"],
]
LEVEL = {room: n for n, rooms in enumerate(LEVELS) for room in rooms}
# Not product: may include anything below them (bench/ and tests/ drive the product).
NOT_PRODUCT = re.compile(r"(^|/)(bench|tests)(/|$)")
SOURCE = re.compile(r"\.(h|hpp|cpp|cc|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def room_of(path):
    best = None
    for room in LEVEL:
        if path == room or path.startswith(room + "/"):
            if best is None or len(room) > len(best):
                best = room
    return best


def violations(repo):
    found = []
    for top, dirs, files in os.walk(repo):
        rel_top = os.path.relpath(top, repo)
        parts = [] if rel_top == "." else rel_top.split(os.sep)
        if parts and (parts[0].startswith("build") or any(p.startswith(".") for p in parts)):
            dirs[:] = []
            continue
        for name in files:
            if not SOURCE.search(name):
                continue
            rel = os.path.normpath(os.path.join(rel_top, name))
            with open(os.path.join(top, name), encoding="utf-8", errors="replace") as f:
                text = f.read()
            product = not NOT_PRODUCT.search(rel)
            src = room_of(rel)
            for inc in INCLUDE.findall(text):
                if product and NOT_PRODUCT.search(inc.split("/")[0]):
                    found.append(f"{rel}: includes {inc} (bench/ and tests/ are not product code)")
                    continue
                dst = room_of(inc)
                if src is None or dst is None or dst == src or not product:
                    continue
                if LEVEL[dst] >= LEVEL[src]:
                    how = "a sibling room" if LEVEL[dst] == LEVEL[src] else "a higher room"
                    found.append(f"{rel} ({src}): includes {inc} ({dst}, {how})")
    return sorted(found)


def self_test():
    cases = {
        "engine/graph/a.h": '#include "core/status.h"\n',  # down: fine
        "engine/cpu/b.cpp": '#include "engine/graph/a.h"\n#include "engine/reference/r.h"\n',
        "engine/backend.cpp": '#include "engine/inference/sliding_window.h"\n',
        "backends/registry.cpp": '#include "cuda/cuda_backend.h"\n',  # down: fine
        "ui/view.cpp": '#include "bench/ct_phantom.h"\n',
        "ui/bench/x.cpp": '#include "bench/ct_phantom.h"\n',  # bench target: fine
    }
    with tempfile.TemporaryDirectory() as repo:
        for rel, text in cases.items():
            os.makedirs(os.path.dirname(os.path.join(repo, rel)), exist_ok=True)
            with open(os.path.join(repo, rel), "w") as f:
                f.write(text)
        got = violations(repo)
    want = [
        "engine/backend.cpp (engine): includes engine/inference/sliding_window.h "
        "(engine/inference, a higher room)",
        "engine/cpu/b.cpp (engine/cpu): includes engine/reference/r.h (engine/reference, a sibling room)",
        "ui/view.cpp: includes bench/ct_phantom.h (bench/ and tests/ are not product code)",
    ]
    if got != want:
        print("self-test failed:\n  got:  " + "\n        ".join(got) + "\n  want: " + "\n        ".join(want))
        return 1
    print("self-test passed: 3 of 3 planted upward includes found, 3 downward ones accepted")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    repo = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    bad = violations(repo)
    for line in bad:
        print(line)
    rooms = sum(len(r) for r in LEVELS)
    print(f"{len(bad)} upward include(s) across {rooms} rooms" if bad else
          f"no upward includes: every include points to its own room or a lower one ({rooms} rooms)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
