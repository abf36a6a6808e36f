// Internal to the ONNX importer (not a public header): the state one import builds, the context a
// converter receives for one ONNX node, and the converter table.
//
// One converter per ONNX op (or op family), in the file named after the family:
//     conv.cpp         Conv, ConvTranspose
//     norm.cpp         InstanceNormalization, BatchNormalization, GroupNormalization,
//                      LayerNormalization
//     elementwise.cpp  Relu, LeakyRelu, PRelu, Sigmoid, Tanh, Clip, Add/Sub/Mul/Div, Pow, Sqrt,
//                      Erf, Gelu, Sin, Cos, Where, Elu, Selu, Celu, Softplus, Mish, HardSigmoid,
//                      HardSwish
//     reduce.cpp       Softmax, ReduceMean, ReduceSum, ReduceMax
//     matmul.cpp       MatMul, Gemm, Einsum
//     pool.cpp         MaxPool, AveragePool, GlobalAveragePool
//     resize.cpp       Resize, Upsample
//     shape_ops.cpp    Identity, Dropout, Cast, Reshape, Flatten, Squeeze, Unsqueeze, Transpose,
//                      Slice, Pad, Concat, Split, Expand, Tile
// Constant, Shape and shape arithmetic on constants are evaluated by the importer itself
// (engine/onnx/import.cpp, engine/onnx/fold.cpp) before any converter sees a node.
// converter_table.cpp holds the table and the model-family hints for ops voxseg does not run.
//
// A converter reads ctx.a (attributes), ctx.in (input value ids, -1 for absent optional inputs)
// and fills ctx.n (one IR node, whose output becomes the ONNX node's output 0); the importer then
// rejects unread attributes, folds the node when all its inputs are constant and infers its
// shape (Graph::inferNodeShape: shape inference lives in the Graph, once). A converter that
// lowers one ONNX node into several IR nodes emits them itself with ImportState::emit() and sets
// ctx.emitted.
#pragma once

#include "engine/onnx/internal.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace voxseg::engine::onnx_detail {

// Everything one import builds: the graph, ONNX names -> values, the opset.
struct ImportState {
    std::string subject;  // the model (path) in error messages
    Graph g;
    int opset = 0;
    std::unordered_map<std::string, ValueId> ids;
    // ONNX outputs voxseg does not compute (MaxPool indices, BatchNorm training stats...).
    std::unordered_map<std::string, std::string> dropped_outputs;

    ValueId newValue(const std::string& name);
    ValueId constantValue(const std::string& name, Tensor t);
    // A value's tensor when it is constant (nullptr otherwise).
    const Tensor* constantOf(ValueId id) const {
        return id >= 0 && g.isConstant(id) ? &g.constant(id) : nullptr;
    }
    Status err(StatusCode code, const std::string& msg) const { return {code, msg, subject}; }

    // Adds IR node `node` whose output is named `out_name` and infers its shape. When all its
    // inputs are constant it is evaluated on the reference backend instead (weight
    // preprocessing some exporters leave in the graph). Integer constants feeding a computing op
    // become float32. Fails on a non-float activation input.
    Status emit(Node node, const std::string& out_name);
    // The id of the value `emit` gave `out_name` (after emit).
    ValueId idOf(const std::string& name) const { return ids.at(name); }

    // "Reshape node 'x' (its input 1)" for the node producing a value; "" for graph inputs.
    std::string producerOf(ValueId v) const;

  private:
    Status addNode(Node node, const std::string& out_name);
    Status foldWithReference(const Node& node, const std::string& out_name);
};

// One ONNX node being converted.
class NodeContext {
  public:
    NodeContext(ImportState& state, const onnx::NodeProto& node, std::string node_desc,
                std::vector<ValueId> inputs);

    ImportState& s;
    const onnx::NodeProto& proto;
    const std::string desc;  // "Conv node 'name'"
    Attrs a;
    Node n;  // filled by the converter: op, attributes, inputs (default: the ONNX inputs)
    std::vector<ValueId> in;
    bool emitted = false;  // the converter emitted its IR nodes itself

    int opset() const { return s.opset; }
    Graph& g() { return s.g; }
    ValueId input(size_t i) const { return i < in.size() ? in[i] : -1; }
    const Shape& shapeOf(size_t i) const { return s.g.values[in[i]].shape; }
    const Tensor& constant(size_t i) const { return s.g.constant(in[i]); }
    bool isConstant(size_t i) const { return input(i) >= 0 && s.g.isConstant(in[i]); }
    // kCorruptData when one of the first `count` inputs is absent.
    Status need(size_t count) const;
    // kUnsupported when input i is present but computed at run time, saying what produced it
    // (voxseg folds shape arithmetic only when it depends on the static input shapes).
    Status needConstant(size_t i, const char* what) const;
    // Marks outputs 1.. as produced-but-not-computed, so that a later use is a clear error.
    void dropExtraOutputs(const std::string& what);
    Status err(StatusCode code, const std::string& msg) const { return s.err(code, msg); }
    // A fresh name for an intermediate value of a lowering ("<output 0>/<suffix>").
    std::string tmpName(const std::string& suffix) const { return proto.output(0) + "/" + suffix; }
    // An IR node named after this ONNX node (suffix for lowerings into several nodes).
    Node subNode(OpKind op, std::vector<ValueId> inputs, const std::string& suffix = "") const;
};

using Converter = Status (*)(NodeContext& ctx);
struct ConverterEntry {
    const char* op_type;
    Converter convert;
};
using ConverterTable = std::unordered_map<std::string, Converter>;

// Each family file registers its converters.
void addConvConverters(ConverterTable& t);
void addNormConverters(ConverterTable& t);
void addElementwiseConverters(ConverterTable& t);
void addReduceConverters(ConverterTable& t);
void addMatMulConverters(ConverterTable& t);
void addPoolConverters(ConverterTable& t);
void addResizeConverters(ConverterTable& t);
void addShapeConverters(ConverterTable& t);

// The converter of an ONNX op type (nullptr: voxseg does not run it).
Converter findConverter(const std::string& op_type);
// Which kind of network an op voxseg does not run usually comes from, for the error message
// ("" when there is no good guess).
std::string modelFamilyHint(const std::string& op_type);

// Attribute helpers shared by Conv / ConvTranspose / pools (conv.cpp).
struct WindowAttrs {
    std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end;
    std::string auto_pad;
};
Status readWindow(Attrs& a, size_t sr, const std::vector<int64_t>& kernel_default, WindowAttrs& w);
// Resolves auto_pad for a forward window op (Conv, pools) on input shape `x`; an error (without
// the node's name) when the pads do not fit in int64.
Status applyAutoPad(WindowAttrs& w, const Shape& x);

// Axis in [0, rank) from an ONNX axis (negative counts from the end); -1 when out of range.
inline int64_t normalizeAxis(int64_t axis, size_t rank) {
    const int64_t r = static_cast<int64_t>(rank);
    if (axis < 0) axis += r;
    return axis >= 0 && axis < r ? axis : -1;
}

}  // namespace voxseg::engine::onnx_detail
