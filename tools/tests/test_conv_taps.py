"""tools/conv_taps.py on one-node ONNX models whose counts are worked out by hand."""
import importlib.util
import os
import unittest

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HAVE_ONNX = importlib.util.find_spec("onnx") is not None


def load_tool():
    spec = importlib.util.spec_from_file_location("conv_taps", os.path.join(TOOLS, "conv_taps.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def one_node(op, w_shape, attrs, in_ch):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.zeros(w_shape, np.float32), "w")
    node = helper.make_node(op, ["x", "w"], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, in_ch, 0, 0, 0])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@unittest.skipUnless(HAVE_ONNX, "onnx is not installed")
class ConvTapsTest(unittest.TestCase):
    def test_padded_conv_counts_only_taps_inside_the_image(self):
        # 2 -> 3 channels, 3x3x3, pad 1, on 4x5x6: per axis of size n, 3n taps of which 2 read
        # the padding.
        model = one_node("Conv", [3, 2, 3, 3, 3], {"pads": [1] * 6}, 2)
        nominal, valid = load_tool().count(model, [1, 2, 4, 5, 6])
        self.assertAlmostEqual(nominal, 2 * 3 * 2 * 27 * 120 / 1e9)
        share = (10 / 12) * (13 / 15) * (16 / 18)
        self.assertAlmostEqual(valid, nominal * share)

    def test_strided_unpadded_and_transposed_convs_have_no_padding_taps(self):
        tool = load_tool()
        strided = one_node("Conv", [4, 2, 2, 2, 2], {"strides": [2, 2, 2]}, 2)
        nominal, valid = tool.count(strided, [1, 2, 8, 8, 8])
        self.assertAlmostEqual(nominal, 2 * 4 * 2 * 8 * 64 / 1e9)
        self.assertAlmostEqual(valid, nominal)
        up = one_node("ConvTranspose", [4, 3, 2, 2, 2], {"strides": [2, 2, 2]}, 4)
        nominal, valid = tool.count(up, [1, 4, 5, 5, 5])
        self.assertAlmostEqual(nominal, 2 * 4 * 3 * 125 * 8 / 1e9)
        self.assertAlmostEqual(valid, nominal)


if __name__ == "__main__":
    unittest.main()
