// InstanceNorm and GroupNorm with their fused epilogue (residual add, activation) and the
// channel LayerNorm on the kernels of cpu_norm_kernels.cpp, in the producer's layout; BatchNorm on
// oneDNN's batch normalisation primitive (global statistics), normally folded into the Conv by
// optimize(). LayerNorm over the trailing axes on oneDNN's layer normalisation, or on
// rowLayerNorm when it writes the bf16 rows of MatMuls.
#include "engine/cpu/norm_kernels.h"
#include "engine/cpu/plan.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>

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

// The tensor of type `type` with md's layout (same element offsets), for the layouts the norm
// kernels walk in five dimensions; an empty desc for others.
dnnl::memory::desc twinOf(const dnnl::memory::desc& md, dt type) {
    using tag = dnnl::memory::format_tag;
    if (md.dims().size() != 5) return {};
    for (tag t : {tag::ndhwc, tag::ncdhw, tag::nCdhw16c, tag::nCdhw8c})
        if (dnnl::memory::desc(md.dims(), md.data_type(), t) == md)
            return dnnl::memory::desc(md.dims(), type, t);
    return {};
}

// An InstanceNorm's or GroupNorm's constants and epilogue, checked.
struct NormParams {
    std::vector<float> gamma, beta, slope;  // slope: PReLU's, per channel, or empty
    int64_t groups = 0;
    double eps = 0;
    ActivationKind act = ActivationKind::kNone;
    float alpha = 0;
    bool group_norm = false;
};

Result<NormParams> normParams(Plan& plan) {
    const Node& n = plan.node();
    const int64_t channels = plan.graph().values[n.inputs[0]].shape[1];
    NormParams p;
    VOXSEG_ASSIGN_OR_RETURN(p.gamma, constantFloats(plan, n.inputs[1], "scale"));
    VOXSEG_ASSIGN_OR_RETURN(p.beta, constantFloats(plan, n.inputs[2], "bias"));
    p.group_norm = n.op == OpKind::kGroupNorm;
    p.groups = p.group_norm ? n.norm.num_groups : channels;
    if (p.groups <= 0 || channels % p.groups != 0)
        return nodeError(plan, "num_groups " + std::to_string(p.groups) + " does not divide " +
                                   std::to_string(channels) + " channels");
    // GroupNormalization-18 has per-group scale/bias, -21 per-channel ones.
    for (auto* v : {&p.gamma, &p.beta}) {
        if (static_cast<int64_t>(v->size()) == p.groups && p.groups != channels) {
            std::vector<float> per_channel(channels);
            for (int64_t c = 0; c < channels; ++c) per_channel[c] = (*v)[c / (channels / p.groups)];
            *v = per_channel;
        }
        if (static_cast<int64_t>(v->size()) != channels)
            return nodeError(plan, "scale/bias have " + std::to_string(v->size()) + " values for " +
                                       std::to_string(channels) + " channels");
    }
    if (n.fused_activation == ActivationKind::kPRelu) {
        VOXSEG_ASSIGN_OR_RETURN(p.slope, constantFloats(plan, n.fused_prelu_slope, "PReLU slope"));
        if (p.slope.size() == 1) p.slope.assign(channels, p.slope[0]);
        if (static_cast<int64_t>(p.slope.size()) != channels)
            return nodeError(plan, "PReLU slope must have 1 or C values");
    }
    p.eps = n.norm.epsilon;
    p.act = n.fused_activation;
    p.alpha = n.fused_alpha;
    return p;
}

// The per-(n, c) affine map y = a x + b of the normalisation from the per-channel moments (the
// channels of a group merged, equal counts); a and b have batch * paddedChannels() entries.
void normAffine(const NormParams& p, const LaneLayout& L, const std::vector<double>& mean,
                const std::vector<double>& m2, std::vector<float>& a, std::vector<float>& b) {
    const int64_t cp = L.paddedChannels();
    a.assign(L.batch * cp, 0.0f);
    b.assign(L.batch * cp, 0.0f);
    const int64_t cpg = L.channels / p.groups;
    const double count = static_cast<double>(L.spatial);
    for (int64_t nn = 0; nn < L.batch; ++nn) {
        for (int64_t grp = 0; grp < p.groups; ++grp) {
            double mu = 0, sq = 0, cnt = 0;
            for (int64_t k = 0; k < cpg; ++k) {
                const int64_t c = nn * L.channels + grp * cpg + k;
                const double delta = mean[c] - mu, total = cnt + count;
                mu += delta * count / total;
                sq += m2[c] + delta * delta * cnt * count / total;
                cnt = total;
            }
            const double rstd = 1.0 / std::sqrt(sq / cnt + p.eps);
            for (int64_t k = 0; k < cpg; ++k) {
                const int64_t c = grp * cpg + k;
                const double sc = p.gamma[c] * rstd;
                a[nn * cp + c] = static_cast<float>(sc);
                b[nn * cp + c] = static_cast<float>(p.beta[c] - mu * sc);
            }
        }
    }
}

std::vector<float> paddedSlope(const NormParams& p, int64_t padded_channels) {
    if (p.slope.empty()) return {};
    std::vector<float> out(padded_channels, 0.0f);
    std::copy(p.slope.begin(), p.slope.end(), out.begin());
    return out;
}

// "instancenorm <in> [->|+<u8>] [-><float>] <isa>": `->u8` writes the u8 alone, `+u8` the float
// (in its input's type) too; `out` names a float result of another type than the input's.
std::string normStepName(const NormParams& p, const dnnl::memory::desc& in,
                         const dnnl::memory::desc& u8, bool keep_float,
                         const dnnl::memory::desc& out = {}) {
    return std::string(p.group_norm ? "groupnorm" : "instancenorm") + " " + descName(in) +
           (u8 != dnnl::memory::desc() ? (keep_float ? " +" : " ->") + descName(u8) : "") +
           (out != dnnl::memory::desc() ? " ->" + descName(out) : "") + " " + normKernelIsa();
}

// The norm's output: its float result (and the u8 beside it for int8 readers), or the u8 alone.
void defineNormOutputs(Plan& plan, const std::optional<MemRef>& dst,
                       const std::optional<MemRef>& dst_u8) {
    const ValueId y = plan.node().outputs[0];
    if (!dst) {
        plan.define(y, *dst_u8);
        return;
    }
    plan.define(y, *dst);
    if (dst_u8) plan.defineQuantized(y, *dst_u8);
}

// The kernels' target for a halo source's interior: `base` + `c0` (a concat's channel), `stride`
// elements per position (0: its own channels).
U8Target haloTarget(const U8Halo& h, void* base, float inv_scale, int64_t c0 = 0,
                    int64_t stride = 0) {
    U8Target t{static_cast<uint8_t*>(base) + c0, inv_scale, static_cast<float>(h.zero_point),
               stride};
    t.size = h.size;
    t.padded = h.padded;
    t.lo = h.lo;
    return t;
}

// Where a norm with concat_u8 writes the concat's u8: straight into its channels of the
// concat's output (channels-last x: U8Target::stride, the concat then needs no copy), else a
// buffer of its own in x's layout that the concat copies (Plan::defineConcatU8).
struct CatU8 {
    MemRef ref;
    int64_t c0 = 0, stride = 0;  // stride 0: x's element offsets
    float inv_scale = 1.0f, zero_point = 0.0f;
    std::optional<U8Halo> halo;  // the concat's u8 is a halo source: its interior
    // The kernels' second target, `base` being ref's memory at run time.
    U8Target at(void* base) const {
        if (halo) return haloTarget(*halo, base, inv_scale, c0, stride);
        return {static_cast<uint8_t*>(base) + c0, inv_scale, zero_point, stride};
    }
    const char* stepName() const { return stride ? " +into concat u8" : " +concat u8"; }
};
CatU8 planCatU8(Plan& plan, const LaneLayout& L, const dnnl::memory::desc& u8_md,
                const quant::ActivationQuant& q) {
    const Node& n = plan.node();
    const float inv = 1.0f / q.scale, zp = static_cast<float>(q.zero_point);
    const size_t spatial_rank = plan.graph().values[n.outputs[0]].shape.size() - 2;
    if (L.groups == 1 && L.lanes == L.channels && L.spatial_stride == L.lanes)
        if (std::optional<ConcatTarget> t =
                concatInPlaceTarget(plan, n.outputs[0], spatial_rank, true))
            return {useConcatInPlace(plan, n.outputs[0], *t), t->c0, t->channels, inv, zp, t->halo};
    const MemRef own = plan.newBuffer(u8_md);
    plan.defineConcatU8(n.outputs[0], own);
    return {own, 0, 0, inv, zp, std::nullopt};
}

// Halo sources (int8_policy.h, halo_lo / halo_hi): the int8 Convs' u8 written inside a halo of
// its zero point as wide as their padding (they run unpadded on it, conv_int8_plan.cpp); the
// norm's step fills the halo. Channels-last x only (the kernels' U8Target::at).
std::optional<U8Halo> planHaloU8(const Plan& plan, const LaneLayout& L,
                                 const quant::Int8Layer& q8) {
    if (q8.concat_u8 || L.groups != 1 || L.lanes != L.channels || L.spatial_stride != L.lanes)
        return std::nullopt;
    return u8Halo(plan.graph().values[plan.node().outputs[0]].shape, q8);
}

// 8-bit normalisation inputs (int8_policy.h, src_s8): the s8 the Conv before wrote, x = q *
// scale[c]; moments from the integers, the affine map applied to q, the u8 source of the int8
// Convs after it written (dst_u8) and the float result where other nodes read it.
Status planNormFromS8(Plan& plan, const NormParams& p, const quant::Int8Layer& q8) {
    const Node& n = plan.node();
    const ValueId x = n.inputs[0];
    const dnnl::memory::desc md = plan.has(x) ? plan.desc(x) : dnnl::memory::desc();
    const std::optional<LaneLayout> layout =
        md.data_type() == dt::s8 ? laneLayout(md) : std::nullopt;
    const dnnl::memory::desc u8_md = twinOf(md, dt::u8), float_md = twinOf(md, plan.actType());
    if (!layout || layout->paddedChannels() != layout->channels ||
        layout->spatial_stride != layout->lanes || u8_md == dnnl::memory::desc())
        return nodeError(plan, "int8: its 8-bit input is not in a layout the kernels walk");
    const LaneLayout L = *layout;
    const bool to_u8 = q8.dst_u8, keep_float = !q8.dst_u8 || q8.keep_float;
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensure(x, md));
    std::vector<MemRef> refs = {src};
    std::optional<MemRef> dst, dst_u8;
    const std::optional<U8Halo> halo = to_u8 ? planHaloU8(plan, L, q8) : std::nullopt;
    if (keep_float) refs.push_back(*(dst = plan.newBuffer(float_md)));
    if (to_u8) refs.push_back(*(dst_u8 = plan.newBuffer(halo ? halo->md() : u8_md)));
    std::optional<CatU8> cat_u8;
    if (to_u8 && q8.concat_u8)
        refs.push_back((cat_u8 = planCatU8(plan, L, u8_md, q8.concat_dst))->ref);
    const bool residual = n.fused_residual >= 0;
    if (residual) {
        VOXSEG_ASSIGN_OR_RETURN(MemRef r, plan.ensure(n.fused_residual, float_md));
        refs.push_back(r);
    }
    const bool y_bf16 = float_md.data_type() == dt::bf16;
    const std::vector<float> slope = paddedSlope(p, L.paddedChannels());
    const std::vector<float> scales = q8.s8_scales;
    const float inv_scale = to_u8 ? 1.0f / q8.dst.scale : 1.0f;
    const float zero_point = static_cast<float>(q8.dst.zero_point);
    Kernel kernel = [=](const std::vector<dnnl::memory>& m) {
        size_t k = 0;
        const auto* xp = static_cast<const int8_t*>(m[k++].get_data_handle());
        void* yp = keep_float ? m[k++].get_data_handle() : nullptr;
        auto* qp = to_u8 ? static_cast<uint8_t*>(m[k++].get_data_handle()) : nullptr;
        const U8Target cat = cat_u8 ? cat_u8->at(m[k++].get_data_handle()) : U8Target{};
        const void* rp = residual ? m[k++].get_data_handle() : nullptr;
        std::vector<double> mean, m2;
        channelMomentsS8(xp, L, mean, m2);
        for (int64_t i = 0; i < L.batch * L.channels; ++i) {  // integer units -> x
            const double s = scales[i % L.channels];
            mean[i] *= s;
            m2[i] *= s * s;
        }
        std::vector<float> a, b;
        normAffine(p, L, mean, m2, a, b);
        for (int64_t i = 0; i < L.batch * L.channels; ++i) a[i] *= scales[i % L.channels];
        const float* sl = slope.empty() ? nullptr : slope.data();
        if (qp && halo) {
            halo->fill(qp);
            affineActivationU8FromS8(xp, yp, nullptr, rp, y_bf16, L, a.data(), b.data(), p.act,
                                     p.alpha, sl, inv_scale, zero_point,
                                     haloTarget(*halo, qp, inv_scale));
        } else if (qp) {
            affineActivationU8FromS8(xp, yp, qp, rp, y_bf16, L, a.data(), b.data(), p.act, p.alpha,
                                     sl, inv_scale, zero_point, cat);
        } else {
            affineActivationFromS8(xp, yp, rp, y_bf16, L, a.data(), b.data(), p.act, p.alpha, sl);
        }
    };
    plan.addKernel(normStepName(p, md, to_u8 ? u8_md : dnnl::memory::desc(), keep_float,
                                keep_float ? float_md : dnnl::memory::desc()) +
                       (cat_u8 ? cat_u8->stepName() : "") + (halo ? " +halo" : ""),
                   std::move(kernel), refs);
    defineNormOutputs(plan, dst, dst_u8);
    return Status::ok();
}

Status planInstanceOrGroupNorm(Plan& plan) {
    const Node& n = plan.node();
    const ValueId x = n.inputs[0];
    VOXSEG_ASSIGN_OR_RETURN(const NormParams p, normParams(plan));
    const quant::Int8Layer* q8 = plan.int8Layer();
    if (q8 && q8->src_s8) return planNormFromS8(plan, p, *q8);

    // Work in the producer's layout when the kernels can walk it.
    const dnnl::memory::desc md = laneWalkableDesc(plan, x);
    const std::optional<LaneLayout> layout = laneLayout(md);
    const LaneLayout L = *layout;
    // int8 readers: their u8 source written in this pass (int8_policy.h), the float only if needed.
    const dnnl::memory::desc u8_md =
        q8 && q8->dst_u8 && L.paddedChannels() == L.channels && L.spatial_stride == L.lanes
            ? twinOf(md, dt::u8)
            : dnnl::memory::desc();
    const bool to_u8 = u8_md != dnnl::memory::desc();
    // concat_u8 without a u8 pass here (a padded layout): the float for the concat instead.
    const bool to_cat = to_u8 && q8->concat_u8;
    const bool keep_float = !to_u8 || q8->keep_float || (q8->concat_u8 && !to_cat);
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensure(x, md));
    std::vector<MemRef> refs = {src};
    std::optional<MemRef> dst;
    if (keep_float) {
        dst = plan.tryInPlace(x, md);
        if (!dst) dst = plan.newBuffer(md);
        refs.push_back(*dst);
    }
    std::optional<MemRef> dst_u8;
    std::optional<CatU8> cat_u8;
    const std::optional<U8Halo> halo = to_u8 ? planHaloU8(plan, L, *q8) : std::nullopt;
    if (to_u8) refs.push_back(*(dst_u8 = plan.newBuffer(halo ? halo->md() : u8_md)));
    if (to_cat) refs.push_back((cat_u8 = planCatU8(plan, L, u8_md, q8->concat_dst))->ref);
    const bool residual = n.fused_residual >= 0;
    if (residual) {
        VOXSEG_ASSIGN_OR_RETURN(MemRef r, plan.ensure(n.fused_residual, md));
        refs.push_back(r);
    }
    const bool bf16 = md.data_type() == dt::bf16;
    const std::vector<float> slope = paddedSlope(p, L.paddedChannels());
    const float inv_scale = to_u8 ? 1.0f / q8->dst.scale : 1.0f;
    const float zero_point = to_u8 ? static_cast<float>(q8->dst.zero_point) : 0.0f;
    Kernel kernel = [=](const std::vector<dnnl::memory>& m) {
        size_t k = 0;
        const void* xp = m[k++].get_data_handle();
        void* yp = keep_float ? m[k++].get_data_handle() : nullptr;
        void* qp = to_u8 ? m[k++].get_data_handle() : nullptr;
        const U8Target cat = cat_u8 ? cat_u8->at(m[k++].get_data_handle()) : U8Target{};
        const void* rp = residual ? m[k++].get_data_handle() : nullptr;
        std::vector<double> mean, m2;
        channelMoments(xp, bf16, L, mean, m2);
        std::vector<float> a, b;
        normAffine(p, L, mean, m2, a, b);
        const float* sl = slope.empty() ? nullptr : slope.data();
        if (qp && halo) {
            halo->fill(qp);
            affineActivationU8(xp, yp, nullptr, rp, bf16, L, a.data(), b.data(), p.act, p.alpha, sl,
                               inv_scale, zero_point, haloTarget(*halo, qp, inv_scale));
        } else if (qp) {
            affineActivationU8(xp, yp, static_cast<uint8_t*>(qp), rp, bf16, L, a.data(), b.data(),
                               p.act, p.alpha, sl, inv_scale, zero_point, cat);
        } else {
            affineActivation(xp, yp, rp, bf16, L, a.data(), b.data(), p.act, p.alpha, sl);
        }
    };
    plan.addKernel(normStepName(p, md, u8_md, keep_float) + (cat_u8 ? cat_u8->stepName() : "") +
                       (halo ? " +halo" : ""),
                   std::move(kernel), refs);
    defineNormOutputs(plan, dst, dst_u8);
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
