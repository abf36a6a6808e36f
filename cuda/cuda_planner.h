// The CUDA backend's lowering state (internal to cuda/): Planner turns a shaped engine::Graph into
// CudaCompiledGraph's steps over planned arena buffers. Convolution-network ops (cuda_graph.cpp)
// work on rank-5 channels-last activations in the storage type (PView); the tensor ops of
// transformer layers (tensor_lowering.cpp, one converter per op) on packed row-major float32
// values (TRef), reading channels-last activations through strides. A rank-5 value a convolution
// op needs but a tensor op produced is converted once (activation()); graph outputs of rank 5 are
// always channels-last (the sliding window reads them with outputView()).
//
// Ownership: a Planner borrows the graph; it is used once, by one thread. Units: elements, bytes.
#pragma once

#include "core/status.h"
#include "cuda/cuda_graph.h"
#include "cuda/int8_conv.h"
#include "cuda/tensor_step.h"
#include "engine/quant/int8_policy.h"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace voxseg::cuda {

struct CudaCompiledGraph::Step {
    enum class Kind { kConv, kInt8Conv, kInstanceNorm, kEpilogue, kSoftmax, kBinary, kTensor };
    Kind kind = Kind::kEpilogue;
    std::string name;
    int64_t n = 0, spatial = 0;
    // Planned operands (resolved into views after the arena is allocated).
    struct Operand {
        int buffer = -1;
        int64_t channels = 0, ldc = 0, c_offset = 0;
    };
    Operand a, b, y, residual;
    int conv = -1;
    int int8 = -1;    // kInt8Conv: index into the int8 convolution plans (int8_conv.h)
    int tensor = -1;  // kTensor: index into the tensor steps
    struct ParamRef {
        int64_t offset = -1;
    };
    ParamRef weights, scale, shift, prelu;
    bool affine_per_image = false;  // scale/shift from the InstanceNorm scratch
    math::Act act = math::Act::kNone;
    float alpha = 0.0f, lo = 0.0f, hi = 0.0f, epsilon = 1e-5f;
    BinaryOp op = BinaryOp::kAdd;
    // Resolved.
    View va, vb, vy, vres;
    const void* w_ptr = nullptr;
    const float *scale_ptr = nullptr, *shift_ptr = nullptr, *prelu_ptr = nullptr;
};

namespace planning {

using engine::Graph;
using engine::Node;
using engine::OpKind;
using engine::Shape;
using engine::ValueId;
using Step = CudaCompiledGraph::Step;

constexpr size_t kAlign = 256;
inline size_t alignUp(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

struct Dims {  // rank-5 activation N, C, D, H, W
    int64_t n = 0, c = 0, d = 0, h = 0, w = 0;
    int64_t spatial() const { return d * h * w; }
    bool operator==(const Dims& o) const {
        return n == o.n && c == o.c && d == o.d && h == o.h && w == o.w;
    }
    std::string str() const { return fmt::format("[{}, {}, {}, {}, {}]", n, c, d, h, w); }
};

// A channels-last view before the arena exists: buffer index + channel slice.
using PView = Step::Operand;
inline bool isPacked(const PView& v) { return v.ldc == v.channels && v.c_offset == 0; }

using Param = Step::ParamRef;  // offset into the parameter blob, or none

inline const char* opName(const Node& node) { return engine::opKindName(node.op); }

inline Status nodeError(const Node& node, StatusCode code, const std::string& msg) {
    return {code, fmt::format("node '{}' ({}): {}", node.name, opName(node), msg), node.name};
}

// A constant broadcast per channel of a rank-5 activation (a scalar, [C], or [1, C, 1, 1, 1]).
Result<std::vector<float>> perChannel(const Graph& g, const Node& node, ValueId id, int64_t c,
                                      const char* what);

// Whether the convolution-network lowering (cuda_graph.cpp) runs `node` as it stands: rank-5
// operands and the op's own limits. The tensor-op lowering covers the rest
// (tensorOpSupported).
Status convPathSupports(const Graph& g, const Node& node);
// Ops the tensor-op lowering implements, whatever their rank (tensor_lowering.cpp).
bool isTensorOp(OpKind op);
Status tensorOpSupported(const Graph& g, const Node& node);

// What a plan is made with besides the storage type.
struct PlanOptions {
    // Precision int8: the package's calibration (engine/quant/int8_policy.h decides which Convs
    // run as int8 convolutions, int8_conv.h); nullptr: none.
    const engine::QuantizationRecord* quantization = nullptr;
    // Precision fp8: the same convolutions in e4m3 (packFp8Conv) from the same record.
    bool fp8 = false;
    // Bytes of one int8 im2col chunk plus its s32 results (int8ChunkRows).
    size_t int8_chunk_budget = size_t(64) << 20;
};

class Planner {
  public:
    Planner(const Graph& g, StorageType st, const PlanOptions& options = {})
        : g_(g), st_(st), options_(options) {}

    Status plan(const std::vector<Shape>& input_shapes);

    const Graph& g_;
    StorageType st_;
    std::vector<Dims> dims_;
    std::vector<bool> has_dims_;
    std::vector<int> consumers_;
    std::vector<PView> views_;
    std::vector<bool> has_view_;
    std::vector<TRef> trefs_;  // packed row-major float32 values of the tensor ops
    std::vector<bool> has_tref_;
    std::vector<size_t> buffer_bytes_;
    std::vector<uint8_t> params_;
    std::vector<Step> steps_;
    std::vector<TensorStep> tensor_steps_;
    std::vector<ConvShape> conv_shapes_;
    std::vector<std::string> conv_names_;  // "node (op)" for error messages
    std::vector<Int8ConvPlan> int8_convs_;
    size_t norm_scratch_bytes_ = 0;
    int64_t norm_max_nc_ = 0;

  private:
    PlanOptions options_;
    std::vector<engine::quant::Int8Layer> int8_layers_;  // per node, with options_.quantization
    bool half() const { return st_ != StorageType::kFloat32; }
    Status inferShapes(const std::vector<Shape>& input_shapes);
    Status lower(const Node& node);
    int newBuffer(const Dims& d, int64_t ldc) {
        return newBufferBytes(size_t(d.n * d.spatial() * ldc) * storageSize(st_));
    }
    int newBufferBytes(size_t bytes) {
        buffer_bytes_.push_back(alignUp(bytes));
        return int(buffer_bytes_.size() - 1);
    }
    PView packedView(const Dims& d) {
        PView v;
        v.buffer = newBuffer(d, d.c);
        v.channels = v.ldc = d.c;
        return v;
    }
    // The view a node writes its output value into (a concat slice when pre-assigned).
    PView outputView(ValueId id) {
        if (!has_view_[id]) {
            views_[id] = packedView(dims_[id]);
            has_view_[id] = true;
        }
        return views_[id];
    }
    Param addParam(const std::vector<float>& values);
    Param addParamRaw(const void* data, size_t bytes);
    // A rank-5 activation as channels-last view (converting a tensor op's packed result once).
    Result<PView> activation(const Node& node, ValueId id);
    Status applyFused(const Node& node, Step& step);
    void push(Step step) { steps_.push_back(std::move(step)); }
    Status lowerConv(const Node& node);
    Status lowerInt8Conv(const Node& node, const engine::quant::ActivationQuant& src);
    Status lowerElementwise(const Node& node);
    // Whether the convolution-network lowering takes `node` (its activations already
    // channels-last where that decides).
    bool convPath(const Node& node) const;

    // ---- tensor ops (tensor_lowering.cpp) ----
    Status lowerTensorOp(const Node& node);
    void pushTensor(TensorStep step);
    // A new packed row-major float32 tensor of `shape` in its own arena buffer.
    TRef newPacked(const Shape& shape);
    // Any operand as a TRef: channels-last views through strides, constants from the blob.
    Result<TRef> operand(const Node& node, ValueId id);
    // An operand as a packed row-major float32 tensor (copied when it is not one).
    Result<TRef> packedOperand(const Node& node, ValueId id);
    // Where a tensor op writes value `id`: its channels-last view when it has one, else a new
    // packed tensor (registered as the value's TRef).
    TRef outputRef(ValueId id);
    // Like outputRef, but always packed: a channels-last output gets a packed temporary and a
    // copy after the op (finishPacked).
    TRef packedOutput(ValueId id);
    void finishPacked(ValueId id, const TRef& written);
    TRef viewOf(const PView& v, const Dims& d) const;
    void alias(ValueId id, const TRef& packed, const Shape& shape);
    Status lowerEltwise(const Node& node);
    Status lowerCopyOp(const Node& node);
    Status lowerConcat(const Node& node);
    Status lowerRoll(const Node& node);
    Status lowerPad(const Node& node);
    Status lowerMatMul(const Node& node);
    Status lowerAttention(const Node& node);
    Status lowerMultiHeadAttention(const Node& node);
    // The fused attention step on packed Q [..., Tq, D], Kt [..., D, Tk], V [..., Tk, Dv] and
    // the node's optional biases (inputs 3 and 4) broadcast to the scores (batch axes also
    // tiled), writing packed y [..., Tq, Dv].
    Status attentionStep(const Node& node, const TRef& q, const TRef& kt, const TRef& v,
                         const TRef& y);
    // `x` copied into a new packed tensor.
    TRef packedCopy(const TRef& x);
    Status lowerChannelLayerNorm(const Node& node);
    Status lowerRowOp(const Node& node);
    Status lowerReduce(const Node& node);
    Status lowerPool(const Node& node);
    Status applyTensorEpilogue(const Node& node, const TRef& y);
    // Pushes `step` (whose y is the node's output) and the node's fused epilogue.
    Status emit(const Node& node, TensorStep step);
    // Pushes `step` (if any) writing packed `y` (packedOutput), the epilogue, and the copy into
    // the output's channels-last view where it has one (finishPacked).
    Status emitPacked(const Node& node, std::optional<TensorStep> step, const TRef& y);
};

// A graph planned for one set of input shapes: its steps over arena buffers placed by lifetime.
// Needs no device (tests plan graphs without a GPU).
struct PlannedGraph {
    std::unique_ptr<Graph> shaped;  // the graph with shapes inferred (the planner reads it)
    std::unique_ptr<Planner> planner;
    std::vector<size_t> offsets;  // arena offset of each planned buffer
    size_t arena_bytes = 0;
    size_t scratch_bytes = 0, norm_partials = 0;  // InstanceNorm statistics scratch
    size_t int8_scratch_bytes = 0;                // one int8 chunk: im2col rows, then s32 results
};
Result<PlannedGraph> planGraph(const Graph& graph, const std::vector<Shape>& input_shapes,
                               StorageType storage, const PlanOptions& options = {});

// The planned steps with every operand resolved against base addresses of the arena, the
// parameter blob (planner->params_) and the statistics scratch: device memory, or host memory
// in tests. Moves the steps out of the plan.
struct ResolvedSteps {
    std::vector<Step> steps;
    std::vector<TensorStep> tensor_steps;
    std::vector<Int8ConvPlan> int8_convs;               // parameter pointers resolved
    std::vector<View> input_views, output_views;        // rank-5 channels-last values
    std::vector<float*> packed_inputs, packed_outputs;  // others (row-major), else nullptr
};
ResolvedSteps resolveSteps(PlannedGraph& plan, uint8_t* arena, uint8_t* params, uint8_t* scratch);

}  // namespace planning
}  // namespace voxseg::cuda
