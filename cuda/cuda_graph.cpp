#include "cuda/cuda_graph.h"

#include "cuda/cuda_planner.h"

#include "core/log.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_errors.h"
#include "cuda/int8_kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

namespace voxseg::cuda {

using engine::Graph;
using engine::Node;
using engine::OpKind;
using engine::Shape;
using engine::ValueId;

namespace planning {

Param Planner::addParamRaw(const void* data, size_t bytes) {
    Param p;
    p.offset = int64_t(params_.size());
    params_.resize(alignUp(params_.size() + bytes));
    std::memcpy(params_.data() + p.offset, data, bytes);
    return p;
}

Param Planner::addParam(const std::vector<float>& values) {
    return addParamRaw(values.data(), values.size() * sizeof(float));
}

Result<std::vector<float>> perChannel(const Graph& g, const Node& node, ValueId id, int64_t c,
                                      const char* what) {
    if (!g.isConstant(id))
        return nodeError(node, StatusCode::kUnsupported, std::string(what) + " must be a constant");
    const auto& t = g.constant(id);
    std::vector<float> v = t.toFloats();
    if (int64_t(v.size()) == 1) return std::vector<float>(size_t(c), v[0]);
    // Right-aligned to rank 5, only the channel axis may differ from 1 (or [C] for norm params).
    Shape s = t.shape();
    bool ok = int64_t(v.size()) == c;
    if (ok && s.size() > 1) {
        Shape full(5, 1);
        if (s.size() <= 5) {
            std::copy(s.begin(), s.end(), full.end() - s.size());
            ok = full[1] == c;
        } else {
            ok = false;
        }
    }
    if (!ok)
        return nodeError(node, StatusCode::kUnsupported,
                         fmt::format("{} of shape {} is not per-channel for {} channels", what,
                                     engine::shapeToString(s), c));
    return v;
}

Status convPathSupports(const Graph& g, const Node& node) {
    // Activations are rank-5 (N, C, D, H, W) values the graph computes (shapes as inferred).
    auto activation5 = [&](ValueId id) -> Status {
        if (id < 0 || g.isConstant(id)) return Status::ok();
        const Shape& s = g.values[id].shape;
        if (s.size() != 5)
            return nodeError(node, StatusCode::kUnsupported,
                             fmt::format("value '{}' has shape {}: the CUDA backend runs 3D "
                                         "networks (N, C, D, H, W) only",
                                         g.values[id].name, engine::shapeToString(s)));
        return Status::ok();
    };
    for (ValueId in : node.inputs) VOXSEG_RETURN_IF_ERROR(activation5(in));
    for (ValueId out : node.outputs) VOXSEG_RETURN_IF_ERROR(activation5(out));
    if (node.fused_residual >= 0) {
        VOXSEG_RETURN_IF_ERROR(activation5(node.fused_residual));
        if (!node.outputs.empty() &&
            g.values[node.fused_residual].shape != g.values[node.outputs[0]].shape)
            return nodeError(node, StatusCode::kUnsupported, "fused residual of another shape");
    }
    const int64_t channels = !node.outputs.empty() && g.values[node.outputs[0]].shape.size() == 5
                                 ? g.values[node.outputs[0]].shape[1]
                                 : 0;
    if (node.fused_activation == engine::ActivationKind::kPRelu)
        VOXSEG_RETURN_IF_ERROR(
            perChannel(g, node, node.fused_prelu_slope, channels, "PReLU slope").status());
    switch (node.op) {
        case OpKind::kConv:
        case OpKind::kConvTranspose:
            if (node.conv.spatial_rank != 3 || node.conv.kernel.size() != 3)
                return nodeError(node, StatusCode::kUnsupported,
                                 "only 3D convolutions run on CUDA");
            if (!g.isConstant(node.inputs[1]))
                return nodeError(node, StatusCode::kUnsupported, "weights must be constant");
            for (size_t i = 0; i < 3; ++i) {
                const auto& a = node.conv;
                const int64_t pb = a.pads_begin.empty() ? 0 : a.pads_begin[i];
                const int64_t pe = a.pads_end.empty() ? 0 : a.pads_end[i];
                if (pb != pe)
                    return nodeError(node, StatusCode::kUnsupported,
                                     fmt::format("asymmetric padding ({} vs {}) is not supported "
                                                 "by cuDNN (use --device cpu)",
                                                 pb, pe));
            }
            return Status::ok();
        case OpKind::kConcat:
            if (!(node.axis == 1 || node.axis == -4))
                return nodeError(node, StatusCode::kUnsupported,
                                 "only channel concatenation runs on CUDA");
            return Status::ok();
        case OpKind::kSoftmax:
            if (!(node.axis == 1 || node.axis == -4))
                return nodeError(node, StatusCode::kUnsupported,
                                 "softmax over an axis other than channels");
            return Status::ok();
        case OpKind::kAdd:
        case OpKind::kSub:
        case OpKind::kMul:
        case OpKind::kDiv: {
            const bool c0 = g.isConstant(node.inputs[0]), c1 = g.isConstant(node.inputs[1]);
            if (c0 && c1) return nodeError(node, StatusCode::kUnsupported, "constant-only op");
            if (!c0 && !c1) {
                const Shape& a = g.values[node.inputs[0]].shape;
                const Shape& b = g.values[node.inputs[1]].shape;
                if (a != b)
                    return nodeError(node, StatusCode::kUnsupported,
                                     "broadcasting between activations " +
                                         engine::shapeToString(a) + " and " +
                                         engine::shapeToString(b) + " is not supported on CUDA");
                return Status::ok();
            }
            if (c0 && node.op == OpKind::kDiv)
                return nodeError(node, StatusCode::kUnsupported, "constant / activation");
            return perChannel(g, node, node.inputs[c0 ? 0 : 1], channels, "constant operand")
                .status();
        }
        case OpKind::kInstanceNorm:
        case OpKind::kBatchNorm:
        case OpKind::kRelu:
        case OpKind::kLeakyRelu:
        case OpKind::kPRelu:
        case OpKind::kSigmoid:
        case OpKind::kTanh:
        case OpKind::kClip:
        case OpKind::kIdentity:
            return Status::ok();
        default:
            return nodeError(node, StatusCode::kUnsupported,
                             "op not implemented by the CUDA backend (use --device cpu)");
    }
}

// The planner's dims come from Graph's own shape inference (engine/graph/graph.cpp), run by
// compile() on a copy of the graph for the requested input shapes; here they are only checked
// (every node one cudaSupportsNode accepts) and read as rank-5 activations.
Status Planner::inferShapes(const std::vector<Shape>& input_shapes) {
    dims_.assign(g_.values.size(), {});
    has_dims_.assign(g_.values.size(), false);
    if (input_shapes.size() != g_.inputs.size())
        return invalidArgument(fmt::format("graph has {} inputs, {} shapes given", g_.inputs.size(),
                                           input_shapes.size()));
    auto take = [&](ValueId id) {
        const Shape& s = g_.values[id].shape;
        if (s.size() != 5) return;
        dims_[id] = {s[0], s[1], s[2], s[3], s[4]};
        has_dims_[id] = true;
    };
    for (ValueId id : g_.inputs) take(id);
    for (const Node& node : g_.nodes) {
        VOXSEG_RETURN_IF_ERROR(cudaSupportsNode(g_, node));
        for (ValueId o : node.outputs)
            if (o >= 0) take(o);
    }
    return Status::ok();
}

Result<PView> Planner::activation(const Node& node, ValueId id) {
    if (id >= 0 && !g_.isConstant(id) && has_view_[id]) return views_[id];
    if (id < 0 || g_.isConstant(id) || !has_tref_[id] || !has_dims_[id])
        return nodeError(
            node, StatusCode::kUnsupported,
            "input " + std::to_string(id) + " is not an activation the CUDA backend computed");
    // A tensor op's packed result read by a convolution-network op: converted once.
    const PView v = packedView(dims_[id]);
    TensorStep copy;
    copy.kind = TensorStep::Kind::kCopy;
    copy.a = trefs_[id];
    copy.y = viewOf(v, dims_[id]);
    pushTensor(std::move(copy));
    steps_.back().name = fmt::format("{} (to channels-last for {})", g_.values[id].name, node.name);
    views_[id] = v;
    has_view_[id] = true;
    return v;
}

bool Planner::convPath(const Node& node) const {
    if (!convPathSupports(g_, node).isOk()) return false;
    switch (node.op) {
        case OpKind::kAdd:
        case OpKind::kSub:
        case OpKind::kMul:
        case OpKind::kDiv:
        case OpKind::kRelu:
        case OpKind::kLeakyRelu:
        case OpKind::kPRelu:
        case OpKind::kSigmoid:
        case OpKind::kTanh:
        case OpKind::kClip:
        case OpKind::kIdentity:
            // Element-wise ops stay in the channels-last epilogues when their activations are
            // channels-last already; on tensor-op results they run as tensor ops.
            for (ValueId in : node.inputs)
                if (in >= 0 && !g_.isConstant(in) && !has_view_[in]) return false;
            return node.fused_residual < 0 || has_view_[node.fused_residual];
        default:
            return true;
    }
}

Status Planner::plan(const std::vector<Shape>& input_shapes) {
    VOXSEG_RETURN_IF_ERROR(inferShapes(input_shapes));
    if (options_.quantization)
        int8_layers_ = engine::quant::int8LayerPlan(g_, *options_.quantization);
    const size_t nv = g_.values.size();
    consumers_.assign(nv, 0);
    std::vector<const Node*> producer(nv, nullptr);
    for (const Node& node : g_.nodes) {
        for (ValueId i : node.inputs)
            if (i >= 0) ++consumers_[i];
        if (node.fused_residual >= 0) ++consumers_[node.fused_residual];
        for (ValueId o : node.outputs)
            if (o >= 0) producer[o] = &node;
    }
    std::set<ValueId> graph_outputs(g_.outputs.begin(), g_.outputs.end());
    for (ValueId o : g_.outputs) ++consumers_[o];
    views_.assign(nv, {});
    has_view_.assign(nv, false);
    trefs_.assign(nv, {});
    has_tref_.assign(nv, false);

    // Graph inputs: zero-padded to 8 channels in fp16/bf16 when only plain convolutions read them.
    for (ValueId id : g_.inputs) {
        if (!has_dims_[id]) {  // tokens, matrices: packed row-major float32
            trefs_[id] = newPacked(g_.values[id].shape);
            has_tref_[id] = true;
            continue;
        }
        const Dims& d = dims_[id];
        bool only_convs = consumers_[id] > 0 && !graph_outputs.count(id);
        for (const Node& node : g_.nodes) {
            const bool reads =
                std::find(node.inputs.begin(), node.inputs.end(), id) != node.inputs.end() ||
                node.fused_residual == id;
            if (reads && !(node.op == OpKind::kConv && node.conv.group == 1 &&
                           node.inputs[0] == id && node.fused_residual != id))
                only_convs = false;
        }
        const int64_t ldc = only_convs ? math::paddedChannels(d.c, half()) : d.c;
        PView v;
        v.buffer = newBuffer(d, ldc);
        v.channels = d.c;
        v.ldc = ldc;
        views_[id] = v;
        has_view_[id] = true;
    }

    // Concatenations: producers that end in our own epilogue write straight into their slice.
    for (const Node& node : g_.nodes) {
        if (node.op != OpKind::kConcat || !convPathSupports(g_, node).isOk()) continue;
        const ValueId out = node.outputs[0];
        PView cat = packedView(dims_[out]);
        views_[out] = cat;
        has_view_[out] = true;
        int64_t offset = 0;
        for (ValueId in : node.inputs) {
            const Node* p = producer[in];
            const bool epilogue_producer =
                p &&
                (p->op == OpKind::kConv || p->op == OpKind::kConvTranspose ||
                 p->op == OpKind::kInstanceNorm || p->op == OpKind::kBatchNorm ||
                 p->op == OpKind::kRelu || p->op == OpKind::kLeakyRelu || p->op == OpKind::kPRelu ||
                 p->op == OpKind::kSigmoid || p->op == OpKind::kTanh || p->op == OpKind::kClip);
            const int64_t c = dims_[in].c;
            // Only once per value: a value listed twice in one concat keeps its own buffer.
            const bool once = std::count(node.inputs.begin(), node.inputs.end(), in) == 1;
            if (epilogue_producer && once && consumers_[in] == 1 && !graph_outputs.count(in) &&
                !has_view_[in]) {
                PView slice = cat;
                slice.channels = c;
                slice.c_offset = offset;
                views_[in] = slice;
                has_view_[in] = true;
            }
            offset += c;
        }
    }

    for (const Node& node : g_.nodes) {
        const size_t before = steps_.size();
        VOXSEG_RETURN_IF_ERROR(lower(node));
        for (size_t i = before; i < steps_.size(); ++i)
            if (steps_[i].name.empty())
                steps_[i].name = fmt::format("{} ({})", node.name, opName(node));
    }
    // Graph outputs: rank 5 channels-last (outputView), others packed.
    for (ValueId o : g_.outputs) {
        if (has_dims_[o]) {
            Node out_node;
            out_node.name = "graph output " + g_.values[o].name;
            VOXSEG_RETURN_IF_ERROR(activation(out_node, o).status());
        } else if (!has_tref_[o]) {
            return unsupported("graph output '" + g_.values[o].name + "' is not computed");
        }
    }
    return Status::ok();
}

Status Planner::applyFused(const Node& node, Step& step) {
    using engine::ActivationKind;
    const int64_t c = step.y.channels;
    switch (node.fused_activation) {
        case ActivationKind::kNone:
            break;
        case ActivationKind::kRelu:
            step.act = math::Act::kRelu;
            break;
        case ActivationKind::kLeakyRelu:
            step.act = math::Act::kLeakyRelu;
            step.alpha = node.fused_alpha;
            break;
        case ActivationKind::kSigmoid:
            step.act = math::Act::kSigmoid;
            break;
        case ActivationKind::kSilu:
            step.act = math::Act::kSilu;
            break;
        case ActivationKind::kPRelu: {
            VOXSEG_ASSIGN_OR_RETURN(auto slope,
                                    perChannel(g_, node, node.fused_prelu_slope, c, "PReLU slope"));
            step.act = math::Act::kPRelu;
            step.prelu = addParam(slope);
            break;
        }
    }
    if (node.fused_residual >= 0) {
        VOXSEG_ASSIGN_OR_RETURN(step.residual, activation(node, node.fused_residual));
        if (!(dims_[node.fused_residual] == dims_[node.outputs[0]]))
            return nodeError(node, StatusCode::kUnsupported, "fused residual of another shape");
    }
    return Status::ok();
}

Status Planner::lowerConv(const Node& node) {
    const bool transposed = node.op == OpKind::kConvTranspose;
    const auto& a = node.conv;
    if (!int8_layers_.empty()) {
        const engine::quant::Int8Layer& layer = int8_layers_[size_t(&node - g_.nodes.data())];
        if (layer.int8) return lowerInt8Conv(node, layer.src);
    }
    const ValueId out_id = node.outputs[0];
    const Dims& xd = dims_[node.inputs[0]];
    const Dims& yd = dims_[out_id];
    VOXSEG_ASSIGN_OR_RETURN(PView x, activation(node, node.inputs[0]));
    if (x.c_offset != 0)
        return nodeError(node, StatusCode::kInternal, "convolution input is a channel slice");
    if (x.ldc != x.channels && (transposed || a.group != 1))
        return nodeError(node, StatusCode::kInternal, "padded input for a grouped/transposed conv");
    ConvShape cs;
    cs.transposed = transposed;
    cs.type = st_;
    cs.n = xd.n;
    cs.in_channels = x.ldc;
    cs.out_channels = yd.c;
    cs.groups = a.group;
    cs.in = {xd.d, xd.h, xd.w};
    cs.out = {yd.d, yd.h, yd.w};
    for (int i = 0; i < 3; ++i) {
        cs.kernel[i] = a.kernel[i];
        cs.stride[i] = a.strides.empty() ? 1 : a.strides[i];
        cs.pad[i] = a.pads_begin.empty() ? 0 : a.pads_begin[i];
        cs.dilation[i] = a.dilations.empty() ? 1 : a.dilations[i];
    }

    // Weights: ONNX [K][C/g][k...] (conv) or [Cin][Cout/g][k...] (transposed) -> [K][k...][C/g]
    // in the storage type, C zero-padded to the stored input channels.
    const engine::Tensor& wt = g_.constant(node.inputs[1]);
    const std::vector<float> w = wt.toFloats();
    const int64_t k_dim = wt.shape()[0], c_dim = wt.shape()[1];
    const int64_t c_stored = transposed ? c_dim : x.ldc / a.group;
    const int64_t kvol = a.kernel[0] * a.kernel[1] * a.kernel[2];
    if (int64_t(w.size()) != k_dim * c_dim * kvol)
        return nodeError(node, StatusCode::kCorruptData, "weight size does not match its shape");
    const size_t count = size_t(k_dim * kvol * c_stored);
    std::vector<uint8_t> packed(count * storageSize(st_), 0);
    for (int64_t k = 0; k < k_dim; ++k)
        for (int64_t c = 0; c < c_dim; ++c)
            for (int64_t s = 0; s < kvol; ++s) {
                const float v = w[size_t((k * c_dim + c) * kvol + s)];
                const size_t dst = size_t((k * kvol + s) * c_stored + c);
                if (st_ == StorageType::kFloat32) {
                    std::memcpy(packed.data() + dst * 4, &v, 4);
                } else {
                    const uint16_t h = st_ == StorageType::kFloat16 ? engine::floatToHalf(v)
                                                                    : engine::floatToBFloat16(v);
                    std::memcpy(packed.data() + dst * 2, &h, 2);
                }
            }

    Step conv;
    conv.kind = Step::Kind::kConv;
    conv.n = yd.n;
    conv.spatial = yd.spatial();
    conv.a = x;
    conv.conv = int(conv_shapes_.size());
    conv_shapes_.push_back(cs);
    conv_names_.push_back(fmt::format("{} ({})", node.name, opName(node)));
    conv.weights = addParamRaw(packed.data(), packed.size());

    // Epilogue: bias (skipped when an InstanceNorm alone reads the output: its mean removes it),
    // fused activation/residual, or a copy into a concat slice.
    const bool has_bias = node.inputs.size() > 2 && node.inputs[2] >= 0;
    bool bias_needed = has_bias;
    if (has_bias && consumers_[out_id] == 1 &&
        node.fused_activation == engine::ActivationKind::kNone && node.fused_residual < 0) {
        for (const Node& other : g_.nodes)
            if (other.op == OpKind::kInstanceNorm && !other.inputs.empty() &&
                other.inputs[0] == out_id)
                bias_needed = false;
    }
    const bool slice_out = has_view_[out_id] && !isPacked(views_[out_id]);
    const bool epilogue = bias_needed || node.fused_activation != engine::ActivationKind::kNone ||
                          node.fused_residual >= 0 || slice_out;
    PView final_view = outputView(out_id);
    conv.y = slice_out ? packedView(yd) : final_view;
    push(conv);
    if (!epilogue) return Status::ok();
    Step epi;
    epi.kind = Step::Kind::kEpilogue;
    epi.n = yd.n;
    epi.spatial = yd.spatial();
    epi.a = conv.y;
    epi.y = final_view;
    if (bias_needed) {
        VOXSEG_ASSIGN_OR_RETURN(auto bias, perChannel(g_, node, node.inputs[2], yd.c, "bias"));
        epi.shift = addParam(bias);
    }
    VOXSEG_RETURN_IF_ERROR(applyFused(node, epi));
    push(epi);
    return Status::ok();
}

// An int8 Conv (int8_conv.h): one step for im2col, product and epilogue, writing the float
// storage into the output's view; a fused activation other than ReLU/LeakyReLU runs as a float
// epilogue step after it (as on the cpu backend).
Status Planner::lowerInt8Conv(const Node& node, const engine::quant::ActivationQuant& src) {
    const ValueId out_id = node.outputs[0];
    const Dims& xd = dims_[node.inputs[0]];
    const Dims& yd = dims_[out_id];
    VOXSEG_ASSIGN_OR_RETURN(PView x, activation(node, node.inputs[0]));
    Int8ConvPlan p;
    math::Int8Geometry& g = p.geometry;
    g.n = xd.n;
    g.cin = xd.c;
    g.ldc = x.ldc;
    g.c_offset = x.c_offset;
    const int64_t in[3] = {xd.d, xd.h, xd.w}, out[3] = {yd.d, yd.h, yd.w};
    for (int i = 0; i < 3; ++i) {
        const auto& a = node.conv;
        g.in[i] = in[i];
        g.out[i] = out[i];
        g.kernel[i] = a.kernel[i];
        g.stride[i] = a.strides.empty() ? 1 : a.strides[i];
        g.pad[i] = a.pads_begin.empty() ? 0 : a.pads_begin[i];
    }
    g.k = g.taps() * g.cin;
    g.kp = (g.k + 15) / 16 * 16;
    p.cout = yd.c;
    const bool has_bias = node.inputs.size() > 2 && node.inputs[2] >= 0;
    const std::vector<float> bias =
        has_bias ? g_.constant(node.inputs[2]).toFloats() : std::vector<float>{};
    const std::vector<float> weights = g_.constant(node.inputs[1]).toFloats();
    auto pack =
        options_.fp8
            ? packFp8Conv(p, weights, bias, src)
            : packInt8Conv(p, weights, bias, src,
                           engine::quant::weightQmaxForBits(options_.quantization->weight_bits));
    if (!pack.isOk()) return nodeError(node, pack.status().code(), pack.status().message());
    p.chunk_rows = int8ChunkRows(g.rows(), g.kp, p.cout_padded, options_.int8_chunk_budget);
    p.weights_offset = addParamRaw(pack->weights.data(), pack->weights.size()).offset;
    p.channels_offset =
        addParamRaw(pack->channels.data(), pack->channels.size() * sizeof(math::Int8Channel))
            .offset;

    Step step;
    step.kind = Step::Kind::kInt8Conv;
    step.n = yd.n;
    step.spatial = yd.spatial();
    step.a = x;
    step.y = outputView(out_id);
    using engine::ActivationKind;
    const ActivationKind act = node.fused_activation;
    if (act == ActivationKind::kRelu) {
        p.act = math::Act::kRelu;
    } else if (act == ActivationKind::kLeakyRelu) {
        p.act = math::Act::kLeakyRelu;
        p.alpha = node.fused_alpha;
    }
    if (node.fused_residual >= 0) {
        VOXSEG_ASSIGN_OR_RETURN(step.residual, activation(node, node.fused_residual));
        if (!(dims_[node.fused_residual] == yd))
            return nodeError(node, StatusCode::kUnsupported, "fused residual of another shape");
        p.has_residual = true;
    }
    step.int8 = int(int8_convs_.size());
    int8_convs_.push_back(p);
    const PView y = step.y;
    push(step);
    if (act == ActivationKind::kNone || act == ActivationKind::kRelu ||
        act == ActivationKind::kLeakyRelu)
        return Status::ok();
    Step epi;
    epi.kind = Step::Kind::kEpilogue;
    epi.n = yd.n;
    epi.spatial = yd.spatial();
    epi.a = epi.y = y;
    Node activation_only = node;
    activation_only.fused_residual = -1;  // added by the int8 step
    VOXSEG_RETURN_IF_ERROR(applyFused(activation_only, epi));
    push(epi);
    return Status::ok();
}

Status Planner::lowerElementwise(const Node& node) {
    const ValueId out_id = node.outputs[0];
    const Dims& yd = dims_[out_id];
    Step step;
    step.kind = Step::Kind::kEpilogue;
    step.n = yd.n;
    step.spatial = yd.spatial();
    step.y = outputView(out_id);
    const int64_t c = yd.c;
    switch (node.op) {
        case OpKind::kRelu:
            step.act = math::Act::kRelu;
            break;
        case OpKind::kLeakyRelu:
            step.act = math::Act::kLeakyRelu;
            step.alpha = node.alpha;
            break;
        case OpKind::kPRelu: {
            VOXSEG_ASSIGN_OR_RETURN(auto slope,
                                    perChannel(g_, node, node.inputs[1], c, "PReLU slope"));
            step.act = math::Act::kPRelu;
            step.prelu = addParam(slope);
            break;
        }
        case OpKind::kSigmoid:
            step.act = math::Act::kSigmoid;
            break;
        case OpKind::kTanh:
            step.act = math::Act::kTanh;
            break;
        case OpKind::kClip:
            step.act = math::Act::kClip;
            step.lo = node.clip_min;
            step.hi = node.clip_max;
            break;
        case OpKind::kBatchNorm: {
            VOXSEG_ASSIGN_OR_RETURN(auto gamma, perChannel(g_, node, node.inputs[1], c, "scale"));
            VOXSEG_ASSIGN_OR_RETURN(auto beta, perChannel(g_, node, node.inputs[2], c, "bias"));
            VOXSEG_ASSIGN_OR_RETURN(auto mean, perChannel(g_, node, node.inputs[3], c, "mean"));
            VOXSEG_ASSIGN_OR_RETURN(auto var, perChannel(g_, node, node.inputs[4], c, "variance"));
            std::vector<float> scale(static_cast<size_t>(c)), shift(static_cast<size_t>(c));
            for (size_t i = 0; i < size_t(c); ++i) {
                scale[i] = gamma[i] / std::sqrt(var[i] + node.norm.epsilon);
                shift[i] = beta[i] - mean[i] * scale[i];
            }
            step.scale = addParam(scale);
            step.shift = addParam(shift);
            break;
        }
        case OpKind::kAdd:
        case OpKind::kSub:
        case OpKind::kMul:
        case OpKind::kDiv: {
            const bool c0 = g_.isConstant(node.inputs[0]), c1 = g_.isConstant(node.inputs[1]);
            if (!c0 && !c1) {
                VOXSEG_ASSIGN_OR_RETURN(step.a, activation(node, node.inputs[0]));
                VOXSEG_ASSIGN_OR_RETURN(PView b, activation(node, node.inputs[1]));
                if (node.op == OpKind::kAdd) {
                    step.residual = b;
                } else {
                    Step bin;
                    bin.kind = Step::Kind::kBinary;
                    bin.n = step.n;
                    bin.spatial = step.spatial;
                    bin.a = step.a;
                    bin.b = b;
                    bin.y = step.y;
                    bin.op = node.op == OpKind::kSub   ? BinaryOp::kSub
                             : node.op == OpKind::kMul ? BinaryOp::kMul
                                                       : BinaryOp::kDiv;
                    push(bin);
                    if (node.fused_activation == engine::ActivationKind::kNone &&
                        node.fused_residual < 0)
                        return Status::ok();
                    step.a = step.y;  // fused epilogue in place
                }
                VOXSEG_RETURN_IF_ERROR(applyFused(node, step));
                push(step);
                return Status::ok();
            }
            const ValueId cid = c0 ? node.inputs[0] : node.inputs[1];
            VOXSEG_ASSIGN_OR_RETURN(auto k, perChannel(g_, node, cid, c, "constant operand"));
            VOXSEG_ASSIGN_OR_RETURN(step.a, activation(node, node.inputs[c0 ? 1 : 0]));
            std::vector<float> scale(size_t(c), 1.0f), shift(size_t(c), 0.0f);
            for (size_t i = 0; i < size_t(c); ++i) {
                switch (node.op) {
                    case OpKind::kAdd:
                        shift[i] = k[i];
                        break;
                    case OpKind::kSub:
                        if (c0) {
                            scale[i] = -1.0f;
                            shift[i] = k[i];
                        } else {
                            shift[i] = -k[i];
                        }
                        break;
                    case OpKind::kMul:
                        scale[i] = k[i];
                        break;
                    default:
                        if (c0)
                            return nodeError(node, StatusCode::kUnsupported,
                                             "constant / activation");
                        scale[i] = 1.0f / k[i];
                        break;
                }
            }
            step.scale = addParam(scale);
            step.shift = addParam(shift);
            VOXSEG_RETURN_IF_ERROR(applyFused(node, step));
            push(step);
            return Status::ok();
        }
        default:
            return nodeError(node, StatusCode::kInternal, "not an elementwise op");
    }
    VOXSEG_ASSIGN_OR_RETURN(step.a, activation(node, node.inputs[0]));
    VOXSEG_RETURN_IF_ERROR(applyFused(node, step));
    push(step);
    return Status::ok();
}

Status Planner::lower(const Node& node) {
    if (!convPath(node)) return lowerTensorOp(node);
    switch (node.op) {
        case OpKind::kConv:
        case OpKind::kConvTranspose:
            return lowerConv(node);
        case OpKind::kInstanceNorm: {
            const ValueId out_id = node.outputs[0];
            const Dims& d = dims_[out_id];
            Step stats;
            stats.kind = Step::Kind::kInstanceNorm;
            stats.n = d.n;
            stats.spatial = d.spatial();
            VOXSEG_ASSIGN_OR_RETURN(stats.a, activation(node, node.inputs[0]));
            stats.epsilon = node.norm.epsilon;
            if (node.inputs.size() > 1 && node.inputs[1] >= 0) {
                VOXSEG_ASSIGN_OR_RETURN(auto gamma,
                                        perChannel(g_, node, node.inputs[1], d.c, "scale"));
                stats.scale = addParam(gamma);
            }
            if (node.inputs.size() > 2 && node.inputs[2] >= 0) {
                VOXSEG_ASSIGN_OR_RETURN(auto beta,
                                        perChannel(g_, node, node.inputs[2], d.c, "bias"));
                stats.shift = addParam(beta);
            }
            norm_scratch_bytes_ =
                std::max(norm_scratch_bytes_, instanceNormScratchBytes(d.n, d.c, d.spatial()));
            norm_max_nc_ = std::max(norm_max_nc_, d.n * d.c);
            push(stats);
            Step apply;
            apply.kind = Step::Kind::kEpilogue;
            apply.n = d.n;
            apply.spatial = d.spatial();
            apply.a = stats.a;
            apply.y = outputView(out_id);
            apply.affine_per_image = true;
            VOXSEG_RETURN_IF_ERROR(applyFused(node, apply));
            push(apply);
            return Status::ok();
        }
        case OpKind::kIdentity: {
            VOXSEG_ASSIGN_OR_RETURN(PView v, activation(node, node.inputs[0]));
            if (has_view_[node.outputs[0]])
                return nodeError(node, StatusCode::kInternal, "identity output already placed");
            views_[node.outputs[0]] = v;
            has_view_[node.outputs[0]] = true;
            return Status::ok();
        }
        case OpKind::kSoftmax: {
            if (!(node.axis == 1 || node.axis == -4))
                return nodeError(node, StatusCode::kUnsupported,
                                 "softmax over an axis other than channels");
            const Dims& d = dims_[node.outputs[0]];
            Step s;
            s.kind = Step::Kind::kSoftmax;
            s.n = d.n;
            s.spatial = d.spatial();
            VOXSEG_ASSIGN_OR_RETURN(s.a, activation(node, node.inputs[0]));
            s.y = outputView(node.outputs[0]);
            push(s);
            return Status::ok();
        }
        case OpKind::kConcat: {
            const PView cat = views_[node.outputs[0]];
            const Dims& d = dims_[node.outputs[0]];
            int64_t offset = 0;
            for (ValueId in : node.inputs) {
                VOXSEG_ASSIGN_OR_RETURN(PView v, activation(node, in));
                const bool in_place = v.buffer == cat.buffer && v.c_offset == offset;
                if (!in_place) {
                    Step copy;
                    copy.kind = Step::Kind::kEpilogue;
                    copy.n = d.n;
                    copy.spatial = d.spatial();
                    copy.a = v;
                    copy.y = cat;
                    copy.y.channels = v.channels;
                    copy.y.c_offset = offset;
                    push(copy);
                }
                offset += v.channels;
            }
            return Status::ok();
        }
        default:
            return lowerElementwise(node);
    }
}

// Greedy-by-size placement of buffers with overlapping lifetimes (TFLite's arena planner idea).
size_t placeBuffers(const std::vector<size_t>& bytes, const std::vector<int>& first,
                    const std::vector<int>& last, std::vector<size_t>& offsets) {
    const size_t nb = bytes.size();
    std::vector<size_t> order(nb);
    for (size_t i = 0; i < nb; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return bytes[a] > bytes[b]; });
    offsets.assign(nb, 0);
    std::vector<size_t> placed;
    size_t total = 0;
    for (size_t i : order) {
        std::vector<std::pair<size_t, size_t>> busy;
        for (size_t j : placed)
            if (!(last[j] < first[i] || last[i] < first[j]))
                busy.push_back({offsets[j], offsets[j] + bytes[j]});
        std::sort(busy.begin(), busy.end());
        size_t offset = 0;
        for (auto [b, e] : busy) {
            if (offset + bytes[i] <= b) break;
            offset = std::max(offset, e);
        }
        offsets[i] = offset;
        total = std::max(total, offset + bytes[i]);
        placed.push_back(i);
    }
    return total;
}

}  // namespace planning

using namespace planning;

Status cudaSupportsNode(const Graph& g, const Node& node) {
    const Status conv = convPathSupports(g, node);
    if (conv.isOk() || !isTensorOp(node.op)) return conv;
    return tensorOpSupported(g, node);
}

CudaCompiledGraph::~CudaCompiledGraph() {
    tensor_steps_.clear();  // cuBLASLt plans before their handle
    if (lt_) cublasLtDestroy(lt_);
    if (cudnn_) cudnnDestroy(cudnn_);
    if (stream_) cudaStreamDestroy(stream_);
}

namespace planning {

Result<PlannedGraph> planGraph(const Graph& graph, const std::vector<Shape>& input_shapes,
                               StorageType storage, const PlanOptions& options) {
    PlannedGraph pg;
    pg.shaped = std::make_unique<Graph>(graph);
    VOXSEG_RETURN_IF_ERROR(pg.shaped->inferShapes(input_shapes));
    pg.planner = std::make_unique<Planner>(*pg.shaped, storage, options);
    Planner& planner = *pg.planner;
    VOXSEG_RETURN_IF_ERROR(planner.plan(input_shapes));

    // Buffer lifetimes in step indices; graph inputs live from the start, outputs to the end.
    const size_t nb = planner.buffer_bytes_.size();
    const int end = int(planner.steps_.size());
    std::vector<int> first(nb, end), last(nb, -1);
    auto touchBuffer = [&](int buffer, int s) {
        if (buffer < 0) return;
        first[buffer] = std::min(first[buffer], s);
        last[buffer] = std::max(last[buffer], s);
    };
    for (int s = 0; s < end; ++s) {
        const Step& st = planner.steps_[s];
        for (const PView* v : {&st.a, &st.b, &st.y, &st.residual}) touchBuffer(v->buffer, s);
        if (st.kind != Step::Kind::kTensor) continue;
        const TensorStep& t = planner.tensor_steps_[st.tensor];
        for (const TRef* r : {&t.y, &t.a, &t.b, &t.c, &t.residual, &t.scratch, &t.v})
            touchBuffer(r->buffer, s);
    }
    auto touchValue = [&](ValueId id, int s) {
        if (planner.has_view_[id]) touchBuffer(planner.views_[id].buffer, s);
        if (planner.has_tref_[id]) touchBuffer(planner.trefs_[id].buffer, s);
    };
    for (ValueId i : graph.inputs) touchValue(i, -1);
    for (ValueId o : graph.outputs) touchValue(o, end);
    for (size_t b = 0; b < nb; ++b)
        if (last[b] < first[b]) first[b] = last[b] = -1;  // unused buffer: no conflicts
    pg.arena_bytes = placeBuffers(planner.buffer_bytes_, first, last, pg.offsets);
    pg.norm_partials = alignUp(planner.norm_scratch_bytes_);
    pg.scratch_bytes = pg.norm_partials + 2 * alignUp(size_t(planner.norm_max_nc_) * sizeof(float));
    for (const Int8ConvPlan& p : planner.int8_convs_)
        pg.int8_scratch_bytes = std::max(pg.int8_scratch_bytes, p.im2colBytes() + p.resultBytes());
    return pg;
}

ResolvedSteps resolveSteps(PlannedGraph& pg, uint8_t* arena, uint8_t* params, uint8_t* scratch) {
    Planner& planner = *pg.planner;
    const std::vector<size_t>& offsets = pg.offsets;
    ResolvedSteps out;
    auto resolve = [&](const PView& v) {
        View r;
        if (v.buffer < 0) return r;
        r.data = arena + offsets[v.buffer];
        r.channels = v.channels;
        r.ldc = v.ldc;
        r.c_offset = v.c_offset;
        return r;
    };
    auto param = [&](Param p) -> const float* {
        return p.offset < 0 ? nullptr : reinterpret_cast<const float*>(params + p.offset);
    };
    out.steps = std::move(planner.steps_);
    const size_t affine_bytes = alignUp(size_t(planner.norm_max_nc_) * sizeof(float));
    for (Step& s : out.steps) {
        s.va = resolve(s.a);
        s.vb = resolve(s.b);
        s.vy = resolve(s.y);
        s.vres = resolve(s.residual);
        s.w_ptr = s.weights.offset < 0 ? nullptr : params + s.weights.offset;
        s.prelu_ptr = param(s.prelu);
        if (s.affine_per_image) {
            s.scale_ptr = reinterpret_cast<const float*>(scratch + pg.norm_partials);
            s.shift_ptr = reinterpret_cast<const float*>(scratch + pg.norm_partials + affine_bytes);
        } else {
            s.scale_ptr = param(s.scale);
            s.shift_ptr = param(s.shift);
        }
    }
    auto refPointer = [&](const TRef& r) -> void* {
        uint8_t* base = r.buffer >= 0  ? arena + offsets[r.buffer]
                        : r.param >= 0 ? params + r.param
                                       : nullptr;
        return base ? base + r.offset * int64_t(storageSize(r.type)) : nullptr;
    };
    auto desc = [&](const TRef& r) {
        TensorDesc d;
        d.data = refPointer(r);
        if (!d.data) return d;
        d.type = r.type;
        d.rank = int(r.shape.size());
        for (int a = 0; a < d.rank; ++a) {
            d.shape[a] = r.shape[a];
            d.mod[a] = r.mod[a];
            d.strides[a] = r.strides[a];
        }
        return d;
    };
    out.int8_convs = std::move(planner.int8_convs_);
    for (Int8ConvPlan& p : out.int8_convs) {
        p.weights = reinterpret_cast<const int8_t*>(params + p.weights_offset);
        p.channels = reinterpret_cast<const math::Int8Channel*>(params + p.channels_offset);
    }
    out.tensor_steps = std::move(planner.tensor_steps_);
    for (TensorStep& t : out.tensor_steps) {
        t.dy = desc(t.y);
        t.da = desc(t.a);
        t.db = desc(t.b);
        t.dc = desc(t.c);
        t.dres = desc(t.residual);
        t.dmask = desc(t.mask);
        t.scratch_ptr = static_cast<float*>(refPointer(t.scratch));
        t.v_ptr = static_cast<const float*>(refPointer(t.v));
    }
    auto ioValue = [&](ValueId id, std::vector<View>& views, std::vector<float*>& packed) {
        views.push_back(planner.has_view_[id] ? resolve(planner.views_[id]) : View{});
        packed.push_back(
            planner.has_view_[id] ? nullptr : static_cast<float*>(refPointer(planner.trefs_[id])));
    };
    for (ValueId i : pg.shaped->inputs) ioValue(i, out.input_views, out.packed_inputs);
    for (ValueId o : pg.shaped->outputs) ioValue(o, out.output_views, out.packed_outputs);
    return out;
}

}  // namespace planning

Result<std::unique_ptr<CudaCompiledGraph>> CudaCompiledGraph::compile(
    const Graph& graph, const std::vector<Shape>& input_shapes,
    const engine::CompileOptions& options, AlgoCache& cache) {
    std::unique_ptr<CudaCompiledGraph> cg(new CudaCompiledGraph());
    cg->device_ = options.device_index;
    cg->precision_ = options.precision;
    engine::Precision storage_precision = options.precision;
    PlanOptions plan_options;
    if (engine::usesCalibration(options.precision)) {
        if (!options.quantization)
            return invalidArgument(
                std::string("cuda backend: precision ") + engine::precisionName(options.precision) +
                " needs the package's calibration (CompileOptions::quantization, model.json "
                "\"quantization\"; docs/int8.md)");
        plan_options.quantization = options.quantization.get();
        plan_options.fp8 = options.precision == engine::Precision::kFp8;
        // The layers int8 / fp8 do not cover run in the GPU's automatic precision (bf16 on
        // sm_80+).
        VOXSEG_ASSIGN_OR_RETURN(int capability, computeCapability(cg->device_));
        storage_precision = cudaAutoPrecision(capability).precision;
    }
    cg->storage_ = storage_precision == engine::Precision::kFloat16    ? StorageType::kFloat16
                   : storage_precision == engine::Precision::kBFloat16 ? StorageType::kBFloat16
                                                                       : StorageType::kFloat32;
    VOXSEG_CUDA_CHECK(cudaSetDevice(cg->device_));
    VOXSEG_ASSIGN_OR_RETURN(PlannedGraph pg,
                            planGraph(graph, input_shapes, cg->storage_, plan_options));
    const Planner& planner = *pg.planner;
    cg->input_shapes_ = input_shapes;
    for (ValueId o : graph.outputs) cg->output_shapes_.push_back(pg.shaped->values[o].shape);

    const size_t arena_bytes = pg.arena_bytes;
    VOXSEG_ASSIGN_OR_RETURN(cg->arena_, DeviceBuffer::allocate(arena_bytes, "activations"));
    VOXSEG_ASSIGN_OR_RETURN(cg->params_, DeviceBuffer::allocate(planner.params_.size(), "weights"));
    if (!planner.params_.empty())
        VOXSEG_CUDA_CHECK(cudaMemcpy(cg->params_.data(), planner.params_.data(),
                                     planner.params_.size(), cudaMemcpyHostToDevice));
    VOXSEG_ASSIGN_OR_RETURN(cg->scratch_,
                            DeviceBuffer::allocate(pg.scratch_bytes, "normalisation statistics"));
    VOXSEG_ASSIGN_OR_RETURN(cg->int8_scratch_,
                            DeviceBuffer::allocate(pg.int8_scratch_bytes, "int8 im2col chunk"));
    size_t io_bytes = 0;
    for (const auto& s : input_shapes) io_bytes += alignUp(size_t(engine::numel(s)) * 4);
    for (const auto& s : cg->output_shapes_) io_bytes += alignUp(size_t(engine::numel(s)) * 4);
    VOXSEG_ASSIGN_OR_RETURN(cg->io_staging_,
                            DeviceBuffer::allocate(io_bytes, "input/output staging"));
    ResolvedSteps resolved = resolveSteps(pg, static_cast<uint8_t*>(cg->arena_.data()),
                                          static_cast<uint8_t*>(cg->params_.data()),
                                          static_cast<uint8_t*>(cg->scratch_.data()));
    cg->steps_ = std::move(resolved.steps);
    cg->tensor_steps_ = std::move(resolved.tensor_steps);
    cg->int8_convs_ = std::move(resolved.int8_convs);
    cg->input_views_ = std::move(resolved.input_views);
    cg->output_views_ = std::move(resolved.output_views);
    cg->packed_inputs_ = std::move(resolved.packed_inputs);
    cg->packed_outputs_ = std::move(resolved.packed_outputs);

    VOXSEG_CUDA_CHECK(cudaStreamCreateWithFlags(&cg->stream_, cudaStreamNonBlocking));
    VOXSEG_CUDNN_CHECK(cudnnCreate(&cg->cudnn_));
    VOXSEG_CUDNN_CHECK(cudnnSetStream(cg->cudnn_, cg->stream_));
    VOXSEG_RETURN_IF_ERROR(cg->planTensorSteps());

    // Convolutions: descriptors, then algorithms timed on the real buffers within a workspace
    // budget taken from the free memory.
    for (size_t i = 0; i < planner.conv_shapes_.size(); ++i) {
        auto conv = CudnnConv::create(planner.conv_shapes_[i]);
        if (!conv.isOk())
            return conv.status().withContext("node " + planner.conv_names_[i] + ", " +
                                             planner.conv_shapes_[i].key());
        cg->convs_.push_back(std::move(conv).value());
    }
    size_t free_bytes = 0, total_bytes = 0;
    VOXSEG_RETURN_IF_ERROR(deviceMemoryInfo(&free_bytes, &total_bytes));
    const size_t limit = std::min<size_t>(free_bytes / 4, size_t(4) << 30);
    size_t max_workspace = 0;
    {
        VOXSEG_ASSIGN_OR_RETURN(DeviceBuffer find_ws,
                                DeviceBuffer::allocate(limit, "cuDNN algorithm search"));
        for (Step& s : cg->steps_) {
            if (s.kind != Step::Kind::kConv) continue;
            Status st = cg->convs_[s.conv].chooseAlgorithm(cg->cudnn_, cache, s.va.data, s.w_ptr,
                                                           s.vy.data, find_ws.data(), limit);
            if (!st.isOk()) return st.withContext("node " + s.name);
            max_workspace = std::max(max_workspace, cg->convs_[s.conv].workspaceBytes());
        }
    }
    VOXSEG_ASSIGN_OR_RETURN(cg->workspace_,
                            DeviceBuffer::allocate(max_workspace, "cuDNN workspace"));
    VOXSEG_CUDA_CHECK(cudaDeviceSynchronize());

    std::map<std::string, int> algos;
    for (const auto& c : cg->convs_) ++algos[c.algoName()];
    std::string algo_list;
    for (const auto& [name, count] : algos) algo_list += fmt::format(" {}x{}", count, name);
    cg->summary_ = fmt::format(
        "cuda {} channels-last: {} steps, {} convs ({} ), {} {} convs (cuBLASLt), {} tensor-op "
        "steps, arena {:.1f} MiB, workspace {:.1f} MiB, weights {:.1f} MiB",
        engine::precisionName(cg->precision_), cg->steps_.size(), cg->convs_.size(), algo_list,
        cg->int8_convs_.size(), plan_options.fp8 ? "fp8" : "int8", cg->tensor_steps_.size(),
        arena_bytes / 1048576.0, max_workspace / 1048576.0, planner.params_.size() / 1048576.0);
    return cg;
}

Status CudaCompiledGraph::planTensorSteps() {
    bool any_gemm = !int8_convs_.empty();
    for (const TensorStep& t : tensor_steps_)
        any_gemm |= t.kind == TensorStep::Kind::kMatMul || t.kind == TensorStep::Kind::kAttention;
    if (!any_gemm) return Status::ok();
    const cublasStatus_t created = cublasLtCreate(&lt_);
    if (created != CUBLAS_STATUS_SUCCESS) return cublasStatus(created, "cublasLtCreate");
    constexpr size_t kLtWorkspace = size_t(32) << 20;  // what cuBLASLt asks for on Hopper
    VOXSEG_ASSIGN_OR_RETURN(lt_workspace_,
                            DeviceBuffer::allocate(kLtWorkspace, "cuBLASLt workspace"));
    const GemmMath math = storage_ == StorageType::kBFloat16  ? GemmMath::kBf16
                          : storage_ == StorageType::kFloat16 ? GemmMath::kFp16
                                                              : GemmMath::kFp32;
    int8_gemms_.resize(int8_convs_.size());
    for (const Step& s : steps_) {
        if (s.kind == Step::Kind::kInt8Conv) {
            const Int8ConvPlan& p = int8_convs_[size_t(s.int8)];
            auto gemm = LtInt8Gemm::create(lt_, p.cout_padded, p.geometry.kp, p.chunk_rows,
                                           lt_workspace_.bytes(), p.format);
            if (!gemm.isOk()) return gemm.status().withContext("node " + s.name);
            int8_gemms_[size_t(s.int8)] = std::move(gemm).value();
        }
        if (s.kind != Step::Kind::kTensor) continue;
        const Status st = planGemms(tensor_steps_[s.tensor], lt_, math, lt_workspace_.bytes());
        if (!st.isOk()) return st.withContext("node " + s.name);
    }
    return Status::ok();
}

// Chunk by chunk of output rows: im2col (quantising), the s32 product, the epilogue.
Status CudaCompiledGraph::runInt8Conv(const Step& s) {
    const Int8ConvPlan& p = int8_convs_[size_t(s.int8)];
    auto* a = static_cast<int8_t*>(int8_scratch_.data());
    void* d = static_cast<uint8_t*>(int8_scratch_.data()) + p.im2colBytes();  // s32 or fp32
    const int64_t rows = p.geometry.rows();
    for (int64_t row0 = 0; row0 < rows; row0 += p.chunk_rows) {
        const int64_t n = std::min(p.chunk_rows, rows - row0);
        VOXSEG_RETURN_IF_ERROR(launchInt8Im2col(p, s.va, storage_, row0, n, a, stream_));
        VOXSEG_RETURN_IF_ERROR(int8_gemms_[size_t(s.int8)].run(
            lt_, p.weights, a, d, lt_workspace_.data(), lt_workspace_.bytes(), stream_));
        VOXSEG_RETURN_IF_ERROR(launchInt8Epilogue(p, d, row0, n, s.vres, s.vy, storage_, stream_));
    }
    return Status::ok();
}

View CudaCompiledGraph::inputView(size_t i) const { return input_views_.at(i); }
View CudaCompiledGraph::outputView(size_t i) const { return output_views_.at(i); }

double CudaCompiledGraph::convFlops() const {
    double f = 0.0;
    for (const auto& c : convs_) f += c.flops();
    for (const auto& c : int8_convs_) f += c.flops();
    return f;
}

size_t CudaCompiledGraph::workspaceBytes() const {
    return arena_.bytes() + workspace_.bytes() + scratch_.bytes() + io_staging_.bytes() +
           params_.bytes() + int8_scratch_.bytes();
}

std::string CudaCompiledGraph::describe() const { return summary_; }

Status CudaCompiledGraph::runDevice() {
    for (const Step& s : steps_) {
        Status st;
        switch (s.kind) {
            case Step::Kind::kConv:
                st = convs_[s.conv].run(cudnn_, s.va.data, s.w_ptr, s.vy.data, workspace_.data(),
                                        workspace_.bytes());
                break;
            case Step::Kind::kInt8Conv:
                st = runInt8Conv(s);
                break;
            case Step::Kind::kInstanceNorm: {
                auto* scratch = static_cast<uint8_t*>(scratch_.data());
                // scale/shift live where the following epilogue step reads them.
                const Step& apply = *(&s + 1);
                st = launchInstanceNormStats(s.va, storage_, s.n, s.spatial, s.scale_ptr,
                                             s.shift_ptr, s.epsilon, scratch,
                                             const_cast<float*>(apply.scale_ptr),
                                             const_cast<float*>(apply.shift_ptr), stream_);
                break;
            }
            case Step::Kind::kEpilogue: {
                EpilogueArgs e;
                e.x = s.va;
                e.y = s.vy;
                e.residual = s.vres;
                e.scale = s.scale_ptr;
                e.shift = s.shift_ptr;
                e.affine_image_stride = s.affine_per_image ? s.va.channels : 0;
                e.act = s.act;
                e.alpha = s.alpha;
                e.prelu_slope = s.prelu_ptr;
                e.lo = s.lo;
                e.hi = s.hi;
                st = launchEpilogue(e, storage_, s.n, s.spatial, stream_);
                break;
            }
            case Step::Kind::kSoftmax:
                st = launchSoftmax(s.va, s.vy, storage_, s.n, s.spatial, stream_);
                break;
            case Step::Kind::kBinary:
                st = launchBinary(s.va, s.vb, s.vy, s.op, storage_, s.n, s.spatial, stream_);
                break;
            case Step::Kind::kTensor: {
                TensorRunContext ctx;
                ctx.lt = lt_;
                ctx.workspace = lt_workspace_.data();
                ctx.workspace_bytes = lt_workspace_.bytes();
                ctx.stream = stream_;
                st = runTensorStep(tensor_steps_[s.tensor], ctx);
                break;
            }
        }
        if (!st.isOk()) return st.withContext("node " + s.name);
    }
    return Status::ok();
}

Status CudaCompiledGraph::run(const std::vector<engine::Tensor>& inputs,
                              std::vector<engine::Tensor>& outputs) {
    if (inputs.size() != input_shapes_.size())
        return invalidArgument(fmt::format("{} inputs given, the graph takes {}", inputs.size(),
                                           input_shapes_.size()));
    VOXSEG_CUDA_CHECK(cudaSetDevice(device_));
    auto* staging = static_cast<uint8_t*>(io_staging_.data());
    size_t offset = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].shape() != input_shapes_[i] || inputs[i].dtype() != engine::DType::kFloat32)
            return invalidArgument(fmt::format("input {} is {} {}, compiled for float32 {}", i,
                                               engine::dtypeName(inputs[i].dtype()),
                                               engine::shapeToString(inputs[i].shape()),
                                               engine::shapeToString(input_shapes_[i])));
        if (packed_inputs_[i]) {  // row-major float32 already
            VOXSEG_CUDA_CHECK(cudaMemcpyAsync(packed_inputs_[i], inputs[i].raw(), inputs[i].bytes(),
                                              cudaMemcpyHostToDevice, stream_));
            continue;
        }
        float* dev = reinterpret_cast<float*>(staging + offset);
        VOXSEG_CUDA_CHECK(cudaMemcpyAsync(dev, inputs[i].raw(), inputs[i].bytes(),
                                          cudaMemcpyHostToDevice, stream_));
        const auto& s = input_shapes_[i];
        VOXSEG_RETURN_IF_ERROR(launchToChannelsLast(dev, input_views_[i], storage_, s[0],
                                                    s[2] * s[3] * s[4], stream_));
        offset += alignUp(inputs[i].bytes());
    }
    VOXSEG_RETURN_IF_ERROR(runDevice());
    outputs.resize(output_shapes_.size());
    for (size_t i = 0; i < output_shapes_.size(); ++i) {
        const auto& s = output_shapes_[i];
        outputs[i] = engine::Tensor(engine::DType::kFloat32, s);
        if (packed_outputs_[i]) {
            VOXSEG_CUDA_CHECK(cudaMemcpyAsync(outputs[i].raw(), packed_outputs_[i],
                                              outputs[i].bytes(), cudaMemcpyDeviceToHost, stream_));
            continue;
        }
        float* dev = reinterpret_cast<float*>(staging + offset);
        VOXSEG_RETURN_IF_ERROR(launchToChannelsFirst(output_views_[i], storage_, dev, s[0],
                                                     s[2] * s[3] * s[4], stream_));
        VOXSEG_CUDA_CHECK(cudaMemcpyAsync(outputs[i].raw(), dev, outputs[i].bytes(),
                                          cudaMemcpyDeviceToHost, stream_));
        offset += alignUp(outputs[i].bytes());
    }
    VOXSEG_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return Status::ok();
}

}  // namespace voxseg::cuda
