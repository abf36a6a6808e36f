// Graph: voxseg's own inference IR, produced from ONNX by onnx_import and consumed by backends.
//
// Nodes are in topological order and refer to values by index. Every ONNX attribute is checked
// and converted into the typed fields below once, at import (shape inference and attribute
// checks are written once per op; backends only compute). Shape-only subgraphs of exports
// (Shape/Gather/Unsqueeze/Cast/...) are constant-folded at import, so the ops left here are the
// ones that compute. Activations are float32 NCDHW (rank 5 for 3D nets; rank 4 2D and rank 3
// 1D work where an op says so). A Graph is a plain value: copy it to optimise it.
#pragma once

#include "core/status.h"
#include "engine/graph/op_kind.h"
#include "engine/graph/tensor.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace voxseg::engine {

using ValueId = int32_t;

struct Value {
    std::string name;
    Shape shape;  // static; batch (dim 0) is re-inferred per compile
    DType dtype = DType::kFloat32;
    std::optional<Tensor> constant;  // initializer or folded constant
};

// Epilogue a backend may fuse into the producing op (set by optimize(), not the importer).
enum class ActivationKind { kNone, kRelu, kLeakyRelu, kPRelu, kSigmoid, kSilu };

struct ConvAttrs {  // Conv and ConvTranspose
    int spatial_rank = 3;
    std::vector<int64_t> kernel;  // per spatial axis
    std::vector<int64_t> strides;
    std::vector<int64_t> dilations;
    std::vector<int64_t> pads_begin;
    std::vector<int64_t> pads_end;
    std::vector<int64_t> output_padding;  // ConvTranspose only
    int64_t group = 1;
    int64_t in_channels = 0;
    int64_t out_channels = 0;
    bool has_bias = false;
};

struct PoolAttrs {  // MaxPool, AveragePool
    std::vector<int64_t> kernel, strides, pads_begin, pads_end, dilations;
    bool count_include_pad = false;
    bool ceil_mode = false;
};

struct NormAttrs {  // InstanceNorm, BatchNorm, GroupNorm
    float epsilon = 1e-5f;
    int64_t num_groups = 1;  // GroupNorm
};

enum class ResizeMode { kNearest, kLinear };
// How output coordinates map to input ones (ONNX coordinate_transformation_mode).
enum class ResizeCoord { kHalfPixel, kAlignCorners, kAsymmetric, kPytorchHalfPixel };
enum class NearestRounding { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

struct ResizeAttrs {
    ResizeMode mode = ResizeMode::kNearest;
    ResizeCoord coord = ResizeCoord::kHalfPixel;
    NearestRounding nearest = NearestRounding::kRoundPreferFloor;
    // Per axis of the full tensor (N, C, spatial...); N and C are 1. Output dim =
    // floor(input dim * scale), and coordinates map through the scale (ONNX Resize rules),
    // computed in float32 as ONNX Runtime does (nearest modes differ at exact ties otherwise).
    std::vector<float> scales;
};

struct PadAttrs {
    enum class Mode { kConstant, kReflect, kEdge } mode = Mode::kConstant;
    std::vector<int64_t> pads_begin, pads_end;  // per axis of the full tensor
    float value = 0.0f;
};

struct Node {
    OpKind op = OpKind::kIdentity;
    std::string name;             // ONNX node name (or "<op>_<index>"): used in every error message
    std::vector<ValueId> inputs;  // ONNX order; optional inputs absent -> -1
    std::vector<ValueId> outputs;

    ConvAttrs conv;
    PoolAttrs pool;
    NormAttrs norm;
    ResizeAttrs resize;
    PadAttrs pad;
    float alpha = 0.01f;  // LeakyRelu slope; Elu, Selu, Celu, HardSigmoid alpha
    float beta = 0.0f;    // Selu gamma, HardSigmoid beta
    float clip_min = 0.0f, clip_max = 0.0f;
    int64_t axis = 1;           // Softmax, Concat
    std::vector<int64_t> perm;  // Transpose
    std::vector<int64_t> slice_starts, slice_ends, slice_axes, slice_steps;
    std::vector<int64_t> shape;        // Reshape target, Expand shape
    std::vector<int64_t> reduce_axes;  // Reduce*: sorted, non-negative
    bool keepdims = true;              // Reduce*
    bool gelu_tanh = false;            // Gelu
    std::vector<int64_t> repeats;      // Tile
    std::vector<int64_t> roll_shifts;  // Roll: one per axis
    float attention_scale = 1.0f;      // Attention, MultiHeadAttention
    int64_t attention_heads = 0;       // MultiHeadAttention
    std::vector<int64_t> subpixel;     // SubpixelAdd: the factor (1 or 2) per spatial axis

    // Fused epilogue (optimize()): out = act(op(x) [+ residual]).
    ActivationKind fused_activation = ActivationKind::kNone;
    float fused_alpha = 0.0f;
    ValueId fused_prelu_slope = -1;  // constant value holding PReLU slopes
    ValueId fused_residual = -1;     // value added before the activation
};

struct Graph {
    std::vector<Value> values;
    std::vector<Node> nodes;      // topological order
    std::vector<ValueId> inputs;  // non-constant graph inputs
    std::vector<ValueId> outputs;

    ValueId addValue(Value v) {
        values.push_back(std::move(v));
        return static_cast<ValueId>(values.size() - 1);
    }
    bool isConstant(ValueId id) const { return id >= 0 && values[id].constant.has_value(); }
    const Tensor& constant(ValueId id) const { return *values[id].constant; }

    // Recomputes every non-constant value's shape for the given input shapes (e.g. a new batch
    // size); fails naming the node when an op cannot accept its inputs.
    Status inferShapes(const std::vector<Shape>& input_shapes);
    // Recomputes the output shape of nodes[index] from its inputs' current shapes.
    Status inferNodeShape(size_t index);
    // Total multiply-add based FLOP count (2 per MAC) of Conv/ConvTranspose for the current shapes.
    double convFlops() const;
};

// numpy broadcasting of two shapes; fails when a pair of dims is neither equal nor 1.
Result<Shape> broadcastShapes(const Shape& a, const Shape& b);

// One axis of a resolved Slice: output index i reads input index start + i * step.
struct SliceAxis {
    int64_t start = 0;
    int64_t step = 1;
    int64_t count = 0;
};
// Slice node -> one SliceAxis per axis of `input` (axes not sliced: start 0, step 1, full count).
std::vector<SliceAxis> resolveSlice(const Node& node, const Shape& input);

}  // namespace voxseg::engine
