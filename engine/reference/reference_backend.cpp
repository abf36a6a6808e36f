// The reference backend: every op as plain loops over float32 row-major tensors. It is the oracle
// for the other backends, so it favours obviously-correct code over speed (double accumulators,
// no blocking, no threads). Spatial ops work on ranks 3..5 by treating missing spatial axes as
// size 1.
//
// This file: the Backend and CompiledGraph; the op loops are in this folder's per-family files
// (ops.h).
#include "engine/backend.h"
#include "engine/reference/ops.h"

#include <new>
#include <string>
#include <utility>
#include <vector>

namespace voxseg::engine {
namespace {

Status runNode(const Graph& g, const Node& n, std::vector<Tensor>& env) {
    std::vector<const Tensor*> in;
    for (ValueId v : n.inputs) in.push_back(v >= 0 ? &env[v] : nullptr);
    for (size_t i = 0; i < in.size(); ++i)
        if (in[i] && in[i]->empty())
            return internalError("reference: node '" + n.name + "' input " + std::to_string(i) +
                                 " was not computed");
    Tensor y(DType::kFloat32, g.values[n.outputs[0]].shape);
    switch (n.op) {
        case OpKind::kConv:
            reference::conv(n, *in[0], *in[1], in.size() > 2 ? in[2] : nullptr, y);
            break;
        case OpKind::kConvTranspose:
            reference::convTranspose(n, *in[0], *in[1], in.size() > 2 ? in[2] : nullptr, y);
            break;
        case OpKind::kSubpixelAdd:
            reference::subpixelAdd(n, *in[0], *in[1], in.size() > 2 ? in[2] : nullptr, y);
            break;
        case OpKind::kInstanceNorm:
            reference::groupNorm(*in[0], *in[1], *in[2], in[0]->dim(1), n.norm.epsilon, y);
            break;
        case OpKind::kGroupNorm:
            reference::groupNorm(*in[0], *in[1], *in[2], n.norm.num_groups, n.norm.epsilon, y);
            break;
        case OpKind::kBatchNorm:
            reference::batchNorm(n, in, y);
            break;
        case OpKind::kLayerNorm:
            reference::layerNorm(n, *in[0], *in[1], in.size() > 2 ? in[2] : nullptr, y);
            break;
        case OpKind::kChannelLayerNorm:
            reference::channelLayerNorm(n, *in[0], *in[1], in.size() > 2 ? in[2] : nullptr, y);
            break;
        case OpKind::kPRelu:
            reference::prelu(*in[0], *in[1], y);
            break;
        case OpKind::kAdd:
        case OpKind::kSub:
        case OpKind::kMul:
        case OpKind::kDiv:
            reference::binary(n.op, *in[0], *in[1], y);
            break;
        case OpKind::kWhere:
            reference::where(*in[0], *in[1], *in[2], y);
            break;
        case OpKind::kReduceMean:
        case OpKind::kReduceSum:
        case OpKind::kReduceMax:
            reference::reduce(n, *in[0], y);
            break;
        case OpKind::kSoftmax:
            reference::softmax(n.axis, *in[0], y);
            break;
        case OpKind::kMatMul:
            reference::matmul(*in[0], *in[1], in.size() > 2 ? in[2] : nullptr, y);
            break;
        case OpKind::kMaxPool:
        case OpKind::kAveragePool:
            reference::pool(n, *in[0], y);
            break;
        case OpKind::kGlobalAveragePool:
            reference::globalAveragePool(*in[0], y);
            break;
        case OpKind::kResize:
            reference::resize(n, *in[0], y);
            break;
        case OpKind::kIdentity:
        case OpKind::kReshape:
            reference::copy(*in[0], y);
            break;
        case OpKind::kConcat:
            reference::concat(n.axis, in, y);
            break;
        case OpKind::kPad:
            reference::pad(n, *in[0], y);
            break;
        case OpKind::kTranspose:
            reference::transpose(n, *in[0], y);
            break;
        case OpKind::kSlice:
            reference::slice(n, *in[0], y);
            break;
        case OpKind::kExpand:
            reference::expand(*in[0], y);
            break;
        case OpKind::kTile:
            reference::tile(*in[0], y);
            break;
        case OpKind::kRoll:
            reference::roll(*in[0], n.roll_shifts, y);
            break;
        case OpKind::kAttention:
            reference::attention(n, in, y);
            break;
        case OpKind::kMultiHeadAttention:
            reference::multiHeadAttention(n, in, y);
            break;
        case OpKind::kRotary:
            reference::rotary(*in[0], *in[1], *in[2], y);
            break;
        default:  // the unary family, one function (engine/reference/elementwise.cpp)
            if (opCategory(n.op) != OpCategory::kUnaryElementwise)
                return internalError(std::string("reference: no kernel for ") + opKindName(n.op));
            reference::unary(n, *in[0], y);
            break;
    }
    reference::applyEpilogue(n, env, y);
    env[n.outputs[0]] = std::move(y);
    return Status::ok();
}

class ReferenceCompiled : public CompiledGraph {
  public:
    explicit ReferenceCompiled(Graph g) : graph_(std::move(g)) {
        for (ValueId v : graph_.inputs) input_shapes_.push_back(graph_.values[v].shape);
        for (ValueId v : graph_.outputs) output_shapes_.push_back(graph_.values[v].shape);
    }
    const std::vector<Shape>& inputShapes() const override { return input_shapes_; }
    const std::vector<Shape>& outputShapes() const override { return output_shapes_; }

    Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
        if (inputs.size() != input_shapes_.size())
            return invalidArgument("reference: expected " + std::to_string(input_shapes_.size()) +
                                   " inputs, got " + std::to_string(inputs.size()));
        std::vector<Tensor> env(graph_.values.size());
        for (size_t i = 0; i < graph_.values.size(); ++i)
            if (graph_.values[i].constant) {
                const Tensor& c = *graph_.values[i].constant;
                env[i] =
                    c.dtype() == DType::kFloat32 ? c : Tensor::fromFloats(c.shape(), c.toFloats());
            }
        for (size_t i = 0; i < inputs.size(); ++i) {
            if (inputs[i].shape() != input_shapes_[i] || inputs[i].dtype() != DType::kFloat32)
                return invalidArgument("reference: input " + std::to_string(i) + " is " +
                                       std::string(dtypeName(inputs[i].dtype())) + " " +
                                       shapeToString(inputs[i].shape()) +
                                       ", compiled for float32 " + shapeToString(input_shapes_[i]));
            env[graph_.inputs[i]] = inputs[i];
        }
        try {
            for (const Node& n : graph_.nodes) VOXSEG_RETURN_IF_ERROR(runNode(graph_, n, env));
        } catch (const std::bad_alloc&) {
            return Status(StatusCode::kOutOfMemory,
                          "reference backend: out of host memory for the activations");
        }
        outputs.clear();
        for (ValueId v : graph_.outputs) {
            if (env[v].empty())
                return internalError("reference: output '" + graph_.values[v].name +
                                     "' was not computed");
            outputs.push_back(env[v]);
        }
        return Status::ok();
    }

    size_t workspaceBytes() const override {
        size_t bytes = 0;
        for (const Node& n : graph_.nodes)
            bytes += static_cast<size_t>(numel(graph_.values[n.outputs[0]].shape)) * 4;
        return bytes;
    }
    std::string describe() const override {
        return "reference: " + std::to_string(graph_.nodes.size()) +
               " nodes, plain loops, fp32, NCDHW, no buffer reuse";
    }

  private:
    Graph graph_;
    std::vector<Shape> input_shapes_, output_shapes_;
};

class ReferenceBackend : public Backend {
  public:
    std::string name() const override { return "reference"; }
    std::string deviceDescription() const override { return "host CPU, plain loops, 1 thread"; }
    bool supportsPrecision(Precision p) const override { return p == Precision::kFloat32; }

    Result<std::unique_ptr<CompiledGraph>> compile(const Graph& graph,
                                                   const std::vector<Shape>& input_shapes,
                                                   const CompileOptions& options) override {
        if (options.precision != Precision::kFloat32)
            return unsupported(std::string("reference backend computes in fp32 only, not ") +
                               precisionName(options.precision));
        if (options.observer.active())
            return unsupported(
                "reference backend: activation observers are a cpu backend feature "
                "(engine/activation_observer.h); compile on the cpu backend");
        Graph g = graph;
        VOXSEG_RETURN_IF_ERROR(g.inferShapes(input_shapes));
        for (const Node& n : g.nodes)
            if (n.outputs.empty() || n.outputs[0] < 0)
                return invalidArgument("node '" + n.name + "' has no output");
        return std::unique_ptr<CompiledGraph>(new ReferenceCompiled(std::move(g)));
    }
};

}  // namespace

std::unique_ptr<Backend> makeReferenceBackend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace voxseg::engine
