#!/usr/bin/env python3
"""Multiply-adds of an ONNX network's convolutions: all kernel taps, and only the taps that read
the image (not the zero padding, which oneDNN's brgconv kernels skip). The share of a CPU's
multiply-add peak a convolution time reaches is counted against the second (docs/perf-int8.md).

Usage:
  python3 tools/conv_taps.py <model.onnx> <input shape, e.g. 1,1,128,128,128>
Prints the operations (2 per multiply-add) of Conv and ConvTranspose nodes in GOP.
"""
import sys

import onnx
from onnx import shape_inference


def taps_in_image(size_in, size_out, kernel, stride, pad):
    """Of size_out * kernel taps along one axis, how many read a position inside the input."""
    return sum(0 <= o * stride - pad + t < size_in for o in range(size_out) for t in range(kernel))


def count(model, input_shape):
    for d, v in zip(model.graph.input[0].type.tensor_type.shape.dim, input_shape):
        d.dim_value = v
    m = shape_inference.infer_shapes(model)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output)}
    weights = {i.name: list(i.dims) for i in m.graph.initializer}
    nominal = valid = 0.0
    for n in m.graph.node:
        if n.op_type not in ("Conv", "ConvTranspose"):
            continue
        a = {x.name: onnx.helper.get_attribute_value(x) for x in n.attribute}
        w, xs, ys = weights[n.input[1]], shapes[n.input[0]], shapes[n.output[0]]
        rank = len(w) - 2
        if n.op_type == "ConvTranspose":  # every tap of every input voxel is written
            macs = xs[0] * xs[1] * w[1] * a.get("group", 1)
            for i in range(rank):
                macs *= xs[2 + i] * w[2 + i]
            nominal += macs
            valid += macs
            continue
        stride = a.get("strides", [1] * rank)
        pads = a.get("pads", [0] * (2 * rank))
        macs = ys[0] * w[0] * w[1]
        share = 1.0
        for i in range(rank):
            macs *= ys[2 + i] * w[2 + i]
            share *= taps_in_image(xs[2 + i], ys[2 + i], w[2 + i], stride[i], pads[i]) / (
                ys[2 + i] * w[2 + i])
        nominal += macs
        valid += macs * share
    return 2 * nominal / 1e9, 2 * valid / 1e9


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    nominal, valid = count(onnx.load(sys.argv[1]), [int(v) for v in sys.argv[2].split(",")])
    print(f"all taps {nominal:.1f} GOP, taps reading the image {valid:.1f} GOP "
          f"({100 * valid / nominal:.1f} %)")


if __name__ == "__main__":
    main()
