// InstanceNorm and GroupNorm with their fused epilogue (residual add, activation) and the
// channel LayerNorm on the kernels of cpu_norm_kernels.cpp, in the producer's layout; BatchNorm on
// oneDNN's batch normalisation primitive (global statistics), normally folded into the Conv by
// optimize(). LayerNorm over the trailing axes on oneDNN's layer normalisation, or on
// rowLayerNorm when it writes the bf16 rows of MatMuls.
#include "engine/cpu/norm_kernels.h"
#include "engine/cpu/plan.h"

#include <algorithm>
#include <cmath>

namespace voxseg::engine::cpu {
namespace {

Result<std::vector<float>> constantFloats(Plan& plan, ValueId v, const char* what) {
    if (v < 0 || !plan.graph().isConstant(v))
        return nodeError(plan, std::string(what) + " must be a constant initializer");
    return plan.graph().constant(v).toFloats();
}

// The layout `x` has when the lane kernels can walk it (f32 or bf16), else plain.
dnnl::memory::desc laneWalkableDesc(const Plan& plan, ValueId x) {
    const Shape& xs = plan.graph().values[x].shape;
    dnnl::memory::desc md = plan.has(x) ? plan.desc(x) : plainDesc(xs, plan.actType());
    if (md.data_type() != dt::f32 && md.data_type() != dt::bf16) md = plainDesc(xs, plan.actType());
    if (!laneLayout(md)) md = plainDesc(xs, md.data_type());
    return md;
}

// The u8 tensor with md's layout (same element offsets), for the layouts the norm kernels walk
// in five dimensions; an empty desc for others.
dnnl::memory::desc u8Twin(const dnnl::memory::desc& md) {
    using tag = dnnl::memory::format_tag;
    if (md.dims().size() != 5) return {};
    for (tag t : {tag::ndhwc, tag::ncdhw, tag::nCdhw16c, tag::nCdhw8c})
        if (dnnl::memory::desc(md.dims(), md.data_type(), t) == md)
            return dnnl::memory::desc(md.dims(), dt::u8, t);
    return {};
}

Status planInstanceOrGroupNorm(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const ValueId x = n.inputs[0];
    const int64_t channels = g.values[x].shape[1];
    VOXSEG_ASSIGN_OR_RETURN(std::vector<float> gamma, constantFloats(plan, n.inputs[1], "scale"));
    VOXSEG_ASSIGN_OR_RETURN(std::vector<float> beta, constantFloats(plan, n.inputs[2], "bias"));
    const bool group_norm = n.op == OpKind::kGroupNorm;
    const int64_t groups = group_norm ? n.norm.num_groups : channels;
    if (groups <= 0 || channels % groups != 0)
        return nodeError(plan, "num_groups " + std::to_string(groups) + " does not divide " +
                                   std::to_string(channels) + " channels");
    // GroupNormalization-18 has per-group scale/bias, -21 per-channel ones.
    for (auto* p : {&gamma, &beta}) {
        if (static_cast<int64_t>(p->size()) == groups && groups != channels) {
            std::vector<float> per_channel(channels);
            for (int64_t c = 0; c < channels; ++c) per_channel[c] = (*p)[c / (channels / groups)];
            *p = per_channel;
        }
        if (static_cast<int64_t>(p->size()) != channels)
            return nodeError(plan, "scale/bias have " + std::to_string(p->size()) + " values for " +
                                       std::to_string(channels) + " channels");
    }
    std::vector<float> slope;
    if (n.fused_activation == ActivationKind::kPRelu) {
        VOXSEG_ASSIGN_OR_RETURN(slope, constantFloats(plan, n.fused_prelu_slope, "PReLU slope"));
        if (slope.size() == 1) slope.assign(channels, slope[0]);
        if (static_cast<int64_t>(slope.size()) != channels)
            return nodeError(plan, "PReLU slope must have 1 or C values");
    }

    // Work in the producer's layout when the kernels can walk it.
    const dnnl::memory::desc md = laneWalkableDesc(plan, x);
    const std::optional<LaneLayout> layout = laneLayout(md);
    const LaneLayout L = *layout;
    // int8 readers: their u8 source written in this pass (int8_policy.h), the float only if needed.
    const quant::Int8Layer* q8 = plan.int8Layer();
    const dnnl::memory::desc u8_md =
        q8 && q8->dst_u8 && L.paddedChannels() == L.channels && L.spatial_stride == L.lanes
            ? u8Twin(md)
            : dnnl::memory::desc();
    const bool to_u8 = u8_md != dnnl::memory::desc();
    const bool keep_float = !to_u8 || q8->keep_float;
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensure(x, md));
    std::vector<MemRef> refs = {src};
    std::optional<MemRef> dst;
    if (keep_float) {
        dst = plan.tryInPlace(x, md);
        if (!dst) dst = plan.newBuffer(md);
        refs.push_back(*dst);
    }
    std::optional<MemRef> dst_u8;
    if (to_u8) refs.push_back(*(dst_u8 = plan.newBuffer(u8_md)));
    const bool residual = n.fused_residual >= 0;
    if (residual) {
        VOXSEG_ASSIGN_OR_RETURN(MemRef r, plan.ensure(n.fused_residual, md));
        refs.push_back(r);
    }
    const bool bf16 = md.data_type() == dt::bf16;
    const double eps = n.norm.epsilon;
    const ActivationKind act = n.fused_activation;
    const float alpha = n.fused_alpha;
    const int64_t cp = L.paddedChannels();
    std::vector<float> slope_padded;
    if (!slope.empty()) {
        slope_padded.assign(cp, 0.0f);
        std::copy(slope.begin(), slope.end(), slope_padded.begin());
    }
    const float inv_scale = to_u8 ? 1.0f / q8->dst.scale : 1.0f;
    const float zero_point = to_u8 ? static_cast<float>(q8->dst.zero_point) : 0.0f;
    Kernel kernel = [=](const std::vector<dnnl::memory>& m) {
        size_t k = 0;
        const void* xp = m[k++].get_data_handle();
        void* yp = keep_float ? m[k++].get_data_handle() : nullptr;
        void* qp = to_u8 ? m[k++].get_data_handle() : nullptr;
        const void* rp = residual ? m[k++].get_data_handle() : nullptr;
        std::vector<double> mean, m2;
        channelMoments(xp, bf16, L, mean, m2);
        std::vector<float> a(L.batch * cp, 0.0f), b(L.batch * cp, 0.0f);
        const int64_t cpg = L.channels / groups;
        const double count = static_cast<double>(L.spatial);
        for (int64_t nn = 0; nn < L.batch; ++nn) {
            for (int64_t grp = 0; grp < groups; ++grp) {
                // Merge the channels of the group (equal counts).
                double mu = 0, sq = 0, cnt = 0;
                for (int64_t k = 0; k < cpg; ++k) {
                    const int64_t c = nn * L.channels + grp * cpg + k;
                    const double delta = mean[c] - mu, total = cnt + count;
                    mu += delta * count / total;
                    sq += m2[c] + delta * delta * cnt * count / total;
                    cnt = total;
                }
                const double rstd = 1.0 / std::sqrt(sq / cnt + eps);
                for (int64_t k = 0; k < cpg; ++k) {
                    const int64_t c = grp * cpg + k;
                    const double sc = gamma[c] * rstd;
                    a[nn * cp + c] = static_cast<float>(sc);
                    b[nn * cp + c] = static_cast<float>(beta[c] - mu * sc);
                }
            }
        }
        const float* sl = slope_padded.empty() ? nullptr : slope_padded.data();
        if (qp)
            affineActivationU8(xp, yp, static_cast<uint8_t*>(qp), rp, bf16, L, a.data(), b.data(),
                               act, alpha, sl, inv_scale, zero_point);
        else
            affineActivation(xp, yp, rp, bf16, L, a.data(), b.data(), act, alpha, sl);
    };
    plan.addKernel(std::string(group_norm ? "groupnorm" : "instancenorm") + " " + descName(md) +
                       (to_u8 ? (keep_float ? " +" : " ->") + descName(u8_md) : "") + " " +
                       normKernelIsa(),
                   std::move(kernel), refs);
    if (keep_float) {
        plan.define(n.outputs[0], *dst);
        if (to_u8) plan.defineQuantized(n.outputs[0], *dst_u8);
    } else {
        plan.define(n.outputs[0], *dst_u8);
    }
    return Status::ok();
}

Status planBatchNorm(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const ValueId x = n.inputs[0];
    const int64_t channels = g.values[x].shape[1];
    dnnl::memory::desc md =
        plan.has(x) ? plan.desc(x) : plainDesc(g.values[x].shape, plan.actType());
    const bool relu_fused = n.fused_activation == ActivationKind::kRelu && n.fused_residual < 0;
    auto flags = dnnl::normalization_flags::use_global_stats |
                 dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    if (relu_fused) flags |= dnnl::normalization_flags::fuse_norm_relu;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::batch_normalization_forward::primitive_desc pd;
    try {
        pd = dnnl::batch_normalization_forward::primitive_desc(
            dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_inference, md,
                                                    n.norm.epsilon, flags),
            attr, plan.engine());
    } catch (const dnnl::error& e) {
        return nodeError(plan, std::string("oneDNN batch normalization: ") + e.what());
    }
    const dnnl::memory::desc vec({channels}, dt::f32, tag::a);
    static const int kArgs[] = {DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE};
    static const char* kNames[] = {"scale", "bias", "mean", "var"};
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensure(x, md));
    std::vector<std::pair<int, MemRef>> args = {{DNNL_ARG_SRC, src}};
    for (int i = 0; i < 4; ++i) {
        const ValueId v = n.inputs.size() > static_cast<size_t>(i + 1) ? n.inputs[i + 1] : -1;
        if (v < 0 || !g.isConstant(v))
            return nodeError(plan, std::string(kNames[i]) + " must be a constant initializer");
        VOXSEG_ASSIGN_OR_RETURN(dnnl::memory m, plan.constantMemory(v, vec));
        args.push_back({kArgs[i], MemRef{-1, vec, m}});
    }
    std::optional<MemRef> dst = plan.tryInPlace(x, md);
    if (!dst) dst = plan.newBuffer(md);
    args.push_back({DNNL_ARG_DST, *dst});
    plan.addPrimitive(std::string("batchnorm ") + pd.impl_info_str(),
                      dnnl::batch_normalization_forward(pd), std::move(args), pd.scratchpad_desc());
    plan.define(n.outputs[0], *dst);
    return planUnfusedEpilogue(plan, *dst, true, !relu_fused);
}

// LayerNorm over the channels at each position, in the producer's layout (Primus' decoder:
// the blocked output of the ConvTranspose before it, read and written without reorders).
Status planChannelLayerNorm(Plan& plan) {
    const Node& n = plan.node();
    const ValueId x = n.inputs[0];
    VOXSEG_ASSIGN_OR_RETURN(std::vector<float> gamma, constantFloats(plan, n.inputs[1], "scale"));
    std::vector<float> beta;
    if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
        VOXSEG_ASSIGN_OR_RETURN(beta, constantFloats(plan, n.inputs[2], "bias"));
    }
    const dnnl::memory::desc md = laneWalkableDesc(plan, x);
    const LaneLayout L = *laneLayout(md);
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensure(x, md));
    std::optional<MemRef> dst = plan.tryInPlace(x, md);
    if (!dst) dst = plan.newBuffer(md);
    const bool bf16 = md.data_type() == dt::bf16;
    const float eps = n.norm.epsilon;
    Kernel kernel = [=](const std::vector<dnnl::memory>& m) {
        channelLayerNorm(m[0].get_data_handle(), m[1].get_data_handle(), bf16, L, gamma.data(),
                         beta.empty() ? nullptr : beta.data(), eps);
    };
    plan.addKernel("channel_layernorm " + descName(md) + " " + normKernelIsa(), std::move(kernel),
                   {src, *dst});
    plan.define(n.outputs[0], *dst);
    return planUnfusedEpilogue(plan, *dst);
}

}  // namespace

Status planNorm(Plan& plan) {
    if (plan.node().op == OpKind::kChannelLayerNorm) return planChannelLayerNorm(plan);
    if (plan.node().op == OpKind::kBatchNorm) return planBatchNorm(plan);
    return planInstanceOrGroupNorm(plan);
}

namespace {

// Whether `v` is read, and only as an operand of MatMuls (not a graph output, no fused use).
bool onlyMatMulsRead(const Graph& g, ValueId v) {
    if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) return false;
    bool read = false;
    for (const Node& n : g.nodes) {
        const bool operand = std::find(n.inputs.begin(), n.inputs.end(), v) != n.inputs.end();
        if (n.fused_residual == v || n.fused_prelu_slope == v) return false;
        if (operand && n.op != OpKind::kMatMul) return false;
        read = read || operand;
    }
    return read;
}

// LayerNorm over rows of `inner` floats writing the bf16 rows its MatMuls multiply
// (rowLayerNorm): one pass less than oneDNN 2.6's layer normalisation, which writes its
// source's type, and the reorder to bf16 after it.
Status planLayerNormToBf16(Plan& plan, int64_t outer, int64_t inner) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const std::vector<float> gamma = g.constant(n.inputs[1]).toFloats();
    std::vector<float> beta(static_cast<size_t>(inner), 0.0f);
    if (n.inputs.size() > 2 && n.inputs[2] >= 0) beta = g.constant(n.inputs[2]).toFloats();
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensurePlainF32(n.inputs[0]));
    const MemRef dst = plan.newBuffer(plainDesc(g.values[n.outputs[0]].shape, dt::bf16));
    const float eps = n.norm.epsilon;
    Kernel kernel = [=](const std::vector<dnnl::memory>& m) {
        rowLayerNorm(static_cast<const float*>(m[0].get_data_handle()), m[1].get_data_handle(),
                     true, outer, inner, gamma.data(), beta.data(), eps);
    };
    plan.addKernel(std::string("layer_norm rows f32->bf16 ") + normKernelIsa(), std::move(kernel),
                   {src, dst});
    plan.define(n.outputs[0], dst);
    return Status::ok();
}

}  // namespace

// LayerNorm over the trailing axes: oneDNN layer normalisation on plain f32, or rowLayerNorm
// writing bf16 when only MatMuls read it (bf16 plans).
Status planLayerNorm(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const Shape& xs = g.values[n.inputs[0]].shape;
    int64_t inner = 1;
    for (size_t i = static_cast<size_t>(n.axis); i < xs.size(); ++i) inner *= xs[i];
    const int64_t outer = numel(xs) / inner;
    const auto md = plainDesc({outer, inner}, dt::f32);
    const auto vec_md = plainDesc({inner}, dt::f32);
    const bool has_bias = n.inputs.size() > 2 && n.inputs[2] >= 0;
    for (size_t k = 1; k < n.inputs.size(); ++k)
        if (n.inputs[k] >= 0 && !g.isConstant(n.inputs[k]))
            return nodeError(plan, "scale/bias must be constants");
    // bf16 plans: a LayerNorm read only by MatMuls (which multiply bf16) writes bf16 itself
    // (4 per Primus block).
    if (plan.actType() == dt::bf16 && n.fused_activation == ActivationKind::kNone &&
        n.fused_residual < 0 && onlyMatMulsRead(g, n.outputs[0]))
        return planLayerNormToBf16(plan, outer, inner);
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensurePlainF32(n.inputs[0]));
    std::optional<MemRef> in_place = plan.tryInPlace(n.inputs[0], plainDesc(xs, dt::f32));
    MemRef dst = in_place ? *in_place : plan.newBuffer(plainDesc(xs, dt::f32));
    VOXSEG_ASSIGN_OR_RETURN(dnnl::memory scale, plan.constantMemory(n.inputs[1], vec_md));
    std::vector<std::pair<int, MemRef>> args = {{DNNL_ARG_SRC, viewAs(plan, src, md)},
                                                {DNNL_ARG_DST, viewAs(plan, dst, md)},
                                                {DNNL_ARG_SCALE, MemRef{-1, vec_md, scale}}};
    auto flags = dnnl::normalization_flags::use_scale;
    if (has_bias) {
        VOXSEG_ASSIGN_OR_RETURN(dnnl::memory shift, plan.constantMemory(n.inputs[2], vec_md));
        args.push_back({DNNL_ARG_SHIFT, MemRef{-1, vec_md, shift}});
        flags = flags | dnnl::normalization_flags::use_shift;
    }
    try {
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        dnnl::layer_normalization_forward::primitive_desc pd(
            dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_inference, md,
                                                    n.norm.epsilon, flags),
            attr, plan.engine());
        plan.addPrimitive(std::string("layer_norm ") + pd.impl_info_str(),
                          dnnl::layer_normalization_forward(pd), std::move(args),
                          pd.scratchpad_desc());
    } catch (const dnnl::error& e) {
        return nodeError(plan, std::string("oneDNN layer normalization: ") + e.what());
    }
    plan.define(n.outputs[0], dst);
    return planUnfusedEpilogue(plan, dst);
}

}  // namespace voxseg::engine::cpu
