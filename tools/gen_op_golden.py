#!/usr/bin/env python3
"""Regenerates the single-op goldens (tools/golden_ops.py) into tests/engine/golden without
torch: the networks' entries of index.json are kept as they are.

    pip install onnx onnxruntime numpy
    python3 tools/gen_op_golden.py
"""
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from golden_ops import write_ops  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "engine" / "golden"


def main() -> int:
    index = json.loads((OUT / "index.json").read_text())
    write_ops(index, OUT)
    (OUT / "index.json").write_text(json.dumps(index, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
