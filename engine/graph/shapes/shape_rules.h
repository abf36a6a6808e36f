// Internal to the Graph (not a public header): shape inference, one rule per IR op (or op
// family), in the file named after the family as the ONNX converters are (engine/onnx/):
//     conv.cpp         Conv, ConvTranspose
//     norm.cpp         InstanceNorm, BatchNorm, GroupNorm, LayerNorm, ChannelLayerNorm
//     elementwise.cpp  Relu, LeakyRelu, Sigmoid, Tanh, Clip, Identity, Erf, Gelu, Silu, Sqrt,
//                      Sin, Cos, PRelu, Add/Sub/Mul/Div, Where
//     reduce.cpp       Softmax, ReduceMean, ReduceSum, ReduceMax
//     matmul.cpp       MatMul, Attention, MultiHeadAttention, Rotary
//     pool.cpp         MaxPool, AveragePool, GlobalAveragePool
//     resize.cpp       Resize
//     shape_ops.cpp    Reshape, Transpose, Slice, Pad, Concat, Expand, Tile, Roll
// shape_rules.cpp holds the table (shapeRule) and what the rules share. Graph::inferShapes
// (graph.cpp) checks the node's value ids, runs the op's rule, then checks what every output
// must satisfy (at most kMaxDim elements; a fused residual of the output's shape).
//
// A rule reads the node's input shapes and attributes and returns its output shape, or an
// invalid-argument status naming the node (NodeShapes::error). Shapes and attributes come from
// model files: a rule computes sizes in 128 bits or with explicit bounds, never overflowing.
#pragma once

#include "engine/graph/graph.h"

#include <cstdint>
#include <string>

namespace voxseg::engine::shapes {

// The largest size of one axis, and of a whole value, that shape inference accepts (far beyond
// any volume; keeps sizes and their byte counts inside int64).
inline constexpr int64_t kMaxDim = int64_t{1} << 40;

// One node and its inputs' shapes, as a rule sees them (the value ids are checked before).
class NodeShapes {
  public:
    NodeShapes(const Graph& g, const Node& n) : node(n), g_(g) {}

    const Node& node;
    const Shape& in(size_t i) const { return g_.values[node.inputs[i]].shape; }
    // The first n inputs are present and the node has an output.
    Status need(size_t n) const;
    // "<Op> node '<name>': <what>" (invalid argument).
    Status error(const std::string& what) const;

  private:
    const Graph& g_;
};

using ShapeRule = Result<Shape> (*)(const NodeShapes&);
ShapeRule shapeRule(OpKind op);

// Output size of a sliding window along one axis (Conv, pools); 0 where the window does not fit
// or the output would pass kMaxDim.
int64_t windowOutput(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, int64_t pb,
                     int64_t pe, bool ceil_mode);

Result<Shape> convShape(const NodeShapes& s);
Result<Shape> subpixelAddShape(const NodeShapes& s);
Result<Shape> channelNormShape(const NodeShapes& s);
Result<Shape> layerNormShape(const NodeShapes& s);
Result<Shape> channelLayerNormShape(const NodeShapes& s);
Result<Shape> unaryShape(const NodeShapes& s);
Result<Shape> preluShape(const NodeShapes& s);
Result<Shape> binaryShape(const NodeShapes& s);
Result<Shape> whereShape(const NodeShapes& s);
Result<Shape> softmaxShape(const NodeShapes& s);
Result<Shape> reduceShape(const NodeShapes& s);
Result<Shape> matMulShape(const NodeShapes& s);
Result<Shape> attentionShape(const NodeShapes& s);
Result<Shape> multiHeadAttentionShape(const NodeShapes& s);
Result<Shape> rotaryShape(const NodeShapes& s);
Result<Shape> poolShape(const NodeShapes& s);
Result<Shape> globalAveragePoolShape(const NodeShapes& s);
Result<Shape> resizeShape(const NodeShapes& s);
Result<Shape> reshapeShape(const NodeShapes& s);
Result<Shape> transposeShape(const NodeShapes& s);
Result<Shape> sliceShape(const NodeShapes& s);
Result<Shape> padShape(const NodeShapes& s);
Result<Shape> concatShape(const NodeShapes& s);
Result<Shape> expandShape(const NodeShapes& s);
Result<Shape> tileShape(const NodeShapes& s);
Result<Shape> rollShape(const NodeShapes& s);

}  // namespace voxseg::engine::shapes
