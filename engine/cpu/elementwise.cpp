// Elementwise ops on oneDNN: eltwise (Relu, LeakyRelu, Sigmoid, Tanh, Clip), PReLU, binary
// (Add/Sub/Mul/Div with broadcasting), softmax and concat; all in the producer's layout and in
// place where the input dies. Broadcasts oneDNN's binary cannot express (the first operand
// broadcast in Sub/Div, or both) run a plain-layout loop. Erf, Sin, Cos and Where, which oneDNN
// has no primitive for, are plain OpenMP loops on f32.
#include "engine/cpu/conv_int8.h"
#include "engine/cpu/plan.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

namespace voxseg::engine::cpu {

bool eltwiseFor(ActivationKind act, float alpha, dnnl::algorithm& alg, float& a, float& b) {
    b = 0.0f;
    switch (act) {
        case ActivationKind::kRelu:
            alg = dnnl::algorithm::eltwise_relu;
            a = 0.0f;
            return true;
        case ActivationKind::kLeakyRelu:
            alg = dnnl::algorithm::eltwise_relu;
            a = alpha;
            return true;
        case ActivationKind::kSigmoid:
            alg = dnnl::algorithm::eltwise_logistic;
            a = 0.0f;
            return true;
        case ActivationKind::kSilu:
            alg = dnnl::algorithm::eltwise_swish;  // x * sigmoid(alpha x)
            a = 1.0f;
            return true;
        case ActivationKind::kNone:
        case ActivationKind::kPRelu:
            return false;
    }
    return false;
}

namespace {

// PReLU slopes as a tensor broadcast against data of `shape` (ONNX: unidirectional).
Result<MemRef> preluWeights(Plan& plan, ValueId slope, const dnnl::memory::desc& data_md,
                            dnnl::prelu_forward::primitive_desc& pd) {
    const auto data_dims = data_md.dims();
    const Shape data_shape(data_dims.begin(), data_dims.end());
    Shape ws = withLeadingOnes(plan.graph().values[slope].shape, data_shape.size());
    // A per-channel slope stored as [C] (rank 1) means axis 1 in nnU-Net/MONAI exports.
    if (plan.graph().values[slope].shape.size() == 1 && ws.back() == data_shape[1] &&
        data_shape.back() != data_shape[1]) {
        ws.assign(data_shape.size(), 1);
        ws[1] = data_shape[1];
    }
    const auto w_any = dnnl::memory::desc(toDims(ws), data_md.data_type(), tag::any);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    pd = dnnl::prelu_forward::primitive_desc(
        dnnl::prelu_forward::desc(dnnl::prop_kind::forward_inference, data_md, w_any), attr,
        plan.engine());
    if (plan.graph().isConstant(slope)) {
        VOXSEG_ASSIGN_OR_RETURN(dnnl::memory m,
                                plan.constantMemory(plan.graph().constant(slope),
                                                    plainDesc(ws, dt::f32), pd.weights_desc()));
        return MemRef{-1, pd.weights_desc(), m};
    }
    return plan.ensure(slope, pd.weights_desc());
}

Status addPrelu(Plan& plan, const MemRef& src, const MemRef& dst, ValueId slope) {
    try {
        dnnl::prelu_forward::primitive_desc pd;
        VOXSEG_ASSIGN_OR_RETURN(MemRef w, preluWeights(plan, slope, src.md, pd));
        plan.addPrimitive(std::string("prelu ") + pd.impl_info_str(), dnnl::prelu_forward(pd),
                          {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, dst}},
                          pd.scratchpad_desc());
    } catch (const dnnl::error& e) {
        return nodeError(plan, std::string("oneDNN prelu: ") + e.what());
    }
    return Status::ok();
}

Status addEltwise(Plan& plan, const MemRef& src, const MemRef& dst, dnnl::algorithm alg, float a,
                  float b) {
    try {
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        dnnl::eltwise_forward::primitive_desc pd(
            dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, alg, src.md, a, b),
            attr, plan.engine());
        plan.addPrimitive(std::string("eltwise ") + pd.impl_info_str(), dnnl::eltwise_forward(pd),
                          {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}}, pd.scratchpad_desc());
    } catch (const dnnl::error& e) {
        return nodeError(plan, std::string("oneDNN eltwise: ") + e.what());
    }
    return Status::ok();
}

Status addBinary(Plan& plan, dnnl::algorithm alg, const MemRef& a, const MemRef& b,
                 const MemRef& dst) {
    try {
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        dnnl::binary::primitive_desc pd(dnnl::binary::desc(alg, a.md, b.md, dst.md), attr,
                                        plan.engine());
        plan.addPrimitive(std::string("binary ") + pd.impl_info_str(), dnnl::binary(pd),
                          {{DNNL_ARG_SRC_0, a}, {DNNL_ARG_SRC_1, b}, {DNNL_ARG_DST, dst}},
                          pd.scratchpad_desc());
    } catch (const dnnl::error& e) {
        return nodeError(plan, std::string("oneDNN binary: ") + e.what());
    }
    return Status::ok();
}

// Whether oneDNN has only its reference implementation for this binary.
bool binaryIsReference(Plan& plan, dnnl::algorithm alg, const dnnl::memory::desc& a,
                       const dnnl::memory::desc& b) {
    try {
        const dnnl::binary::primitive_desc pd(dnnl::binary::desc(alg, a, b, a), plan.engine());
        return std::string(pd.impl_info_str()).rfind("ref", 0) == 0;
    } catch (const dnnl::error&) {
        return false;  // addBinary reports the error
    }
}

// General numpy broadcasting on plain f32: a broadcast first operand of Sub/Div, and the
// broadcasts oneDNN only has its reference binary for (Swin's shifted-window mask, [B, nW, h,
// N, N] + [1, nW, 1, N, N]: 18 of 54 s of SwinUNETR at 96^3 ran in binary ref:any).
Status planPlainBinary(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const Shape& ys = g.values[n.outputs[0]].shape;
    VOXSEG_ASSIGN_OR_RETURN(MemRef a, plan.ensurePlainF32(n.inputs[0]));
    VOXSEG_ASSIGN_OR_RETURN(MemRef b, plan.ensurePlainF32(n.inputs[1]));
    // In place over the first operand when it has the output's shape and dies here (each
    // output element reads only its own element of it).
    std::optional<MemRef> in_place;
    if (g.values[n.inputs[0]].shape == ys && n.inputs[0] != n.inputs[1])
        in_place = plan.tryInPlace(n.inputs[0], plainDesc(ys, dt::f32));
    MemRef dst = in_place ? *in_place : plan.newBuffer(plainDesc(ys, dt::f32));
    const size_t rank = ys.size();
    const auto sa = broadcastStrides(g.values[n.inputs[0]].shape, ys);
    const auto sb = broadcastStrides(g.values[n.inputs[1]].shape, ys);
    const OpKind op = n.op;
    // A row (the output's last dim) at a time: one index decomposition per row, then a loop the
    // compiler vectorises (each operand's step along the row is 1 or 0).
    Kernel k = [=](const std::vector<dnnl::memory>& m) {
        const float* pa = static_cast<const float*>(m[0].get_data_handle());
        const float* pb = static_cast<const float*>(m[1].get_data_handle());
        float* py = static_cast<float*>(m[2].get_data_handle());
        const int64_t len = rank ? ys[rank - 1] : 1;
        const int64_t rows = len ? numel(ys) / len : 0;
        const int64_t da = rank ? sa[rank - 1] : 0, db = rank ? sb[rank - 1] : 0;
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            int64_t rem = r, ia = 0, ib = 0;
            for (int d = static_cast<int>(rank) - 2; d >= 0; --d) {
                const int64_t c = rem % ys[d];
                rem /= ys[d];
                ia += c * sa[d];
                ib += c * sb[d];
            }
            const float* x = pa + ia;
            const float* y = pb + ib;
            float* o = py + r * len;
            switch (op) {
                case OpKind::kAdd:
                    for (int64_t e = 0; e < len; ++e) o[e] = x[e * da] + y[e * db];
                    break;
                case OpKind::kSub:
                    for (int64_t e = 0; e < len; ++e) o[e] = x[e * da] - y[e * db];
                    break;
                case OpKind::kMul:
                    for (int64_t e = 0; e < len; ++e) o[e] = x[e * da] * y[e * db];
                    break;
                default:
                    for (int64_t e = 0; e < len; ++e) o[e] = x[e * da] / y[e * db];
            }
        }
    };
    plan.addKernel("binary plain loop", std::move(k), {a, b, dst});
    plan.define(n.outputs[0], dst);
    return planUnfusedEpilogue(plan, dst);
}

}  // namespace

Status planUnfusedEpilogue(Plan& plan, const MemRef& out, bool residual, bool activation) {
    const Node& n = plan.node();
    if (residual && n.fused_residual >= 0) {
        VOXSEG_ASSIGN_OR_RETURN(MemRef r, plan.ensure(n.fused_residual, out.md));
        VOXSEG_RETURN_IF_ERROR(addBinary(plan, dnnl::algorithm::binary_add, out, r, out));
    }
    if (!activation || n.fused_activation == ActivationKind::kNone) return Status::ok();
    if (n.fused_activation == ActivationKind::kPRelu)
        return addPrelu(plan, out, out, n.fused_prelu_slope);
    dnnl::algorithm alg;
    float a, b;
    eltwiseFor(n.fused_activation, n.fused_alpha, alg, a, b);
    return addEltwise(plan, out, out, alg, a, b);
}

Status planEltwise(Plan& plan) {
    const Node& n = plan.node();
    const ValueId x = n.inputs[0];
    const dnnl::memory::desc md = currentDesc(plan, x);
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensure(x, md));
    std::optional<MemRef> dst = plan.tryInPlace(x, md);
    if (!dst) dst = plan.newBuffer(md);
    if (n.op == OpKind::kPRelu) {
        VOXSEG_RETURN_IF_ERROR(addPrelu(plan, src, *dst, n.inputs[1]));
    } else {
        dnnl::algorithm alg;
        float a = 0, b = 0;
        switch (n.op) {
            case OpKind::kRelu:
                alg = dnnl::algorithm::eltwise_relu;
                break;
            case OpKind::kLeakyRelu:
                alg = dnnl::algorithm::eltwise_relu;
                a = n.alpha;
                break;
            case OpKind::kSigmoid:
                alg = dnnl::algorithm::eltwise_logistic;
                break;
            case OpKind::kTanh:
                alg = dnnl::algorithm::eltwise_tanh;
                break;
            case OpKind::kClip:
                alg = dnnl::algorithm::eltwise_clip_v2;
                a = n.clip_min;
                b = n.clip_max;
                break;
            case OpKind::kGelu:
                alg = n.gelu_tanh ? dnnl::algorithm::eltwise_gelu_tanh
                                  : dnnl::algorithm::eltwise_gelu_erf;
                break;
            case OpKind::kSilu:
                alg = dnnl::algorithm::eltwise_swish;  // x * sigmoid(alpha x)
                a = 1.0f;
                break;
            case OpKind::kSqrt:
                alg = dnnl::algorithm::eltwise_sqrt;
                break;
            default:
                return nodeError(plan, "not an elementwise activation");
        }
        VOXSEG_RETURN_IF_ERROR(addEltwise(plan, src, *dst, alg, a, b));
    }
    plan.define(n.outputs[0], *dst);
    return planUnfusedEpilogue(plan, *dst);
}

Status planBinary(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const Shape& ys = g.values[n.outputs[0]].shape;
    ValueId a = n.inputs[0], b = n.inputs[1];
    const bool commutative = n.op == OpKind::kAdd || n.op == OpKind::kMul;
    auto full = [&](ValueId v) { return withLeadingOnes(g.values[v].shape, ys.size()) == ys; };
    if (!full(a) && full(b) && commutative) std::swap(a, b);
    if (!full(a) || g.isConstant(a)) return planPlainBinary(plan);
    const dnnl::algorithm alg = n.op == OpKind::kAdd   ? dnnl::algorithm::binary_add
                                : n.op == OpKind::kSub ? dnnl::algorithm::binary_sub
                                : n.op == OpKind::kMul ? dnnl::algorithm::binary_mul
                                                       : dnnl::algorithm::binary_div;
    const dnnl::memory::desc md = currentDesc(plan, a);
    VOXSEG_ASSIGN_OR_RETURN(MemRef src0, plan.ensure(a, md));
    MemRef src1;
    if (full(b)) {
        VOXSEG_ASSIGN_OR_RETURN(src1, plan.ensure(b, md));
    } else {
        const auto bcast = plainDesc(withLeadingOnes(g.values[b].shape, ys.size()), md.data_type());
        if (g.isConstant(b)) {
            VOXSEG_ASSIGN_OR_RETURN(src1, plan.ensure(b, bcast));
        } else {
            // A run-time operand in its own plain layout, seen with the leading 1s of the
            // output's rank (there is no reorder between descriptors of different ranks).
            VOXSEG_ASSIGN_OR_RETURN(src1,
                                    plan.ensure(b, plainDesc(g.values[b].shape, md.data_type())));
            src1.md = bcast;
        }
    }
    // (In plain layout, reordered there if need be: Primus' channel LayerNormNd on the
    // decoder's blocked activations, x - mean[1, 1, D, H, W], ran 0.1-0.2 s per op in ref.)
    if (md.data_type() == dt::f32 && !full(b) && binaryIsReference(plan, alg, src0.md, src1.md))
        return planPlainBinary(plan);
    std::optional<MemRef> dst = plan.tryInPlace(a, md);
    if (!dst) dst = plan.newBuffer(md);
    VOXSEG_RETURN_IF_ERROR(addBinary(plan, alg, src0, src1, *dst));
    plan.define(n.outputs[0], *dst);
    return planUnfusedEpilogue(plan, *dst);
}

namespace {

// Softmax over a plain f32 tensor's axis of `channels` with `inner` > 1 elements after it (the
// channel axis of a segmentation head, [N, C, D, H, W]): oneDNN 2.6 runs that case with its
// reference kernel (13 of the 21 s of deepbet's 256^3 network here, docs/brain-extraction.md).
// Here runs of contiguous positions are processed channel by channel, so every loop is unit
// stride: max, exp and sum, scale. In place when src == dst (each element is read before it is
// written at the same position).
Kernel channelSoftmax(int64_t outer, int64_t channels, int64_t inner) {
    return [=](const std::vector<dnnl::memory>& m) {
        const float* src = static_cast<const float*>(m[0].get_data_handle());
        float* dst = static_cast<float*>(m[1].get_data_handle());
        constexpr int64_t kRun = 512;
        const int64_t runs_per_outer = (inner + kRun - 1) / kRun;
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < outer * runs_per_outer; ++r) {
            const int64_t o = r / runs_per_outer, start = (r % runs_per_outer) * kRun;
            const int64_t len = std::min(kRun, inner - start);
            const float* x = src + o * channels * inner + start;
            float* y = dst + o * channels * inner + start;
            float top[kRun], sum[kRun];
            std::copy(x, x + len, top);
            for (int64_t c = 1; c < channels; ++c)
                for (int64_t e = 0; e < len; ++e) top[e] = std::max(top[e], x[c * inner + e]);
            std::fill(sum, sum + len, 0.0f);
            for (int64_t c = 0; c < channels; ++c)
                for (int64_t e = 0; e < len; ++e) {
                    const float v = std::exp(x[c * inner + e] - top[e]);
                    y[c * inner + e] = v;
                    sum[e] += v;
                }
            for (int64_t e = 0; e < len; ++e) sum[e] = 1.0f / sum[e];
            for (int64_t c = 0; c < channels; ++c)
                for (int64_t e = 0; e < len; ++e) y[c * inner + e] *= sum[e];
        }
    };
}

}  // namespace

Status planSoftmax(Plan& plan) {
    const Node& n = plan.node();
    const ValueId x = n.inputs[0];
    const Shape& shape = plan.graph().values[x].shape;
    const int rank = static_cast<int>(shape.size());
    const int axis = static_cast<int>(n.axis < 0 ? n.axis + rank : n.axis);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= shape[d];
    for (int d = axis + 1; d < rank; ++d) inner *= shape[d];
    if (inner > 1 && axis >= 0 && axis < rank) {
        // Also in bf16 plans, on the f32 copy the reorder to plain layout makes anyway: oneDNN
        // 2.6 has only its reference kernel for a bf16 softmax over a non-innermost axis too
        // (4.0 of 4.6 s of deepbet's 256^3 network in bf16 on an AMD EPYC).
        VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensurePlainF32(x));
        std::optional<MemRef> dst = plan.tryInPlace(x, src.md);
        if (!dst) dst = plan.newBuffer(src.md);
        plan.addKernel("softmax channel loop", channelSoftmax(outer, shape[axis], inner),
                       {src, *dst});
        plan.define(n.outputs[0], *dst);
        return planUnfusedEpilogue(plan, *dst);
    }
    // Plain layout: oneDNN's optimised softmax wants the axis unblocked.
    const dnnl::memory::desc md = plainDesc(shape, currentDesc(plan, x).data_type());
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensure(x, md));
    std::optional<MemRef> dst = plan.tryInPlace(x, md);
    if (!dst) dst = plan.newBuffer(md);
    try {
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        dnnl::softmax_forward::primitive_desc pd(
            dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, md, axis), attr,
            plan.engine());
        plan.addPrimitive(std::string("softmax ") + pd.impl_info_str(), dnnl::softmax_forward(pd),
                          {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, *dst}}, pd.scratchpad_desc());
    } catch (const dnnl::error& e) {
        return nodeError(plan, std::string("oneDNN softmax: ") + e.what());
    }
    plan.define(n.outputs[0], *dst);
    return planUnfusedEpilogue(plan, *dst);
}

namespace {

// Byte offset in `dst` of the part [c0, c0 + part's size) along `axis` when that part, laid out
// as `part`, is one contiguous run of dst's bytes (every dim before the axis is 1, the axis is
// dst's outermost, both block the same way and c0 starts a block); else nullopt.
std::optional<size_t> contiguousPart(const dnnl::memory::desc& dst, const dnnl::memory::desc& part,
                                     int axis, int64_t c0) {
    const auto& d = dst.data;
    const auto& p = part.data;
    if (d.format_kind != dnnl_blocked || p.format_kind != dnnl_blocked || d.offset0 != 0 ||
        p.offset0 != 0 || d.data_type != p.data_type || d.ndims != p.ndims)
        return std::nullopt;
    const auto& db = d.format_desc.blocking;
    const auto& pb = p.format_desc.blocking;
    if (db.inner_nblks != pb.inner_nblks) return std::nullopt;
    int64_t block = 1;
    for (int k = 0; k < db.inner_nblks; ++k) {
        if (db.inner_blks[k] != pb.inner_blks[k] || db.inner_idxs[k] != pb.inner_idxs[k])
            return std::nullopt;
        if (db.inner_idxs[k] == axis) block *= db.inner_blks[k];
    }
    if (c0 % block != 0) return std::nullopt;
    for (int i = 0; i < d.ndims; ++i) {
        if (i == axis) continue;
        if (d.padded_dims[i] != p.padded_dims[i]) return std::nullopt;
        if (d.padded_dims[i] == 1) continue;
        if (i < axis || db.strides[i] != pb.strides[i] || db.strides[i] >= db.strides[axis])
            return std::nullopt;
    }
    const size_t elem = dnnl::memory::data_type_size(dst.data_type());
    const size_t run = static_cast<size_t>(db.strides[axis]) * elem;  // bytes per block of c
    if (p.padded_dims[axis] > block && pb.strides[axis] != db.strides[axis]) return std::nullopt;
    const size_t offset = static_cast<size_t>(c0 / block) * run;
    const size_t bytes = static_cast<size_t>(p.padded_dims[axis] / block) * run;
    if (bytes != part.get_size() || offset + bytes > dst.get_size()) return std::nullopt;
    return offset;
}

// Concat with no copy: when every input's part of the output is one contiguous run of its
// bytes (channels of blocked or plain layouts with batch 1) and every input dies here in a
// buffer of its own, those buffers become views into the output, so the steps that computed
// the inputs wrote the output (the U-Net skip connection and the up-sampled features: 0.12 s
// of a 2.8 s fp32 patch of the plain nnU-Net network at 128^3 was the 32+32-channel concat).
std::optional<MemRef> planConcatInPlace(Plan& plan, int axis, const dnnl::memory::desc& dst_md,
                                        const std::vector<dnnl::memory::desc>& mds,
                                        const std::vector<std::pair<int, MemRef>>& args) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    std::vector<size_t> offsets;
    int64_t c0 = 0;
    for (size_t i = 0; i < mds.size(); ++i) {
        const MemRef& r = args[i].second;
        const std::optional<size_t> at = contiguousPart(dst_md, mds[i], axis, c0);
        if (!at || !plan.canBecomeView(n.inputs[i], r, mds[i].get_size())) return std::nullopt;
        for (size_t j = 0; j < i; ++j)
            if (args[j].second.buffer == r.buffer) return std::nullopt;
        offsets.push_back(*at);
        c0 += g.values[n.inputs[i]].shape[axis];
    }
    const MemRef dst = plan.newBuffer(dst_md);
    for (size_t i = 0; i < mds.size(); ++i)
        plan.makeView(args[i].second.buffer, dst.buffer, offsets[i]);
    plan.addNote("concat in place " + descName(dst_md) + " (inputs written into the output)");
    plan.define(n.outputs[0], dst);
    return dst;
}

}  // namespace

// A quantising concat's input marked as written into its output already (not a Plan buffer).
constexpr int kWrittenInPlace = -2;

// A concat whose readers are all int8 convolutions (int8_policy.h): each input quantised by one
// reorder straight into its channels of the u8 output, which is never written in float. False
// (nothing planned) where a part is no view oneDNN can write (a channel block split by an input),
// and the float concat runs.
// `in_place`: the u8 output an input already wrote its channels of (Plan::concatInPlace); such
// inputs come with buffer kWrittenInPlace in `inputs` and need no step. Else the output is a new
// buffer.
bool planQuantizingConcat(Plan& plan, int axis, const dnnl::memory::desc& u8_md,
                          const std::vector<std::pair<int, MemRef>>& inputs,
                          const quant::ActivationQuant& q, const MemRef* in_place,
                          const std::optional<U8Halo>& halo) {
    std::vector<std::pair<dnnl::reorder, dnnl::memory::desc>> parts;
    dnnl::memory::dims offsets(u8_md.dims().size(), 0);
    if (halo)  // the inputs go into the interior
        for (int i = 0; i < 3; ++i) offsets[static_cast<size_t>(2 + i)] = halo->lo[i];
    try {
        for (const auto& [arg, src] : inputs) {
            if (src.buffer == kWrittenInPlace) {  // its channels are there already
                parts.emplace_back(dnnl::reorder(), dnnl::memory::desc());
                offsets[static_cast<size_t>(axis)] += src.md.dims()[static_cast<size_t>(axis)];
                continue;
            }
            const dnnl::memory::desc part = u8_md.submemory_desc(src.md.dims(), offsets);
            if (src.md.data_type() == dt::u8) {  // a norm's u8 in these parameters: a copy
                parts.emplace_back(dnnl::reorder(dnnl::reorder::primitive_desc(
                                       plan.engine(), src.md, plan.engine(), part)),
                                   part);
                offsets[static_cast<size_t>(axis)] += src.md.dims()[static_cast<size_t>(axis)];
                continue;
            }
            auto quantize = makeQuantizeReorder(plan.engine(), src.md, part, q);
            if (!quantize.isOk()) return false;
            parts.emplace_back(*quantize, part);
            offsets[static_cast<size_t>(axis)] += src.md.dims()[static_cast<size_t>(axis)];
        }
    } catch (const dnnl::error&) {
        return false;
    }
    if (in_place && in_place->md != u8_md) return false;
    const MemRef dst = in_place ? *in_place : plan.newBuffer(u8_md);
    for (size_t i = 0; i < inputs.size(); ++i) {
        const MemRef& src = inputs[i].second;
        if (src.buffer == kWrittenInPlace) continue;
        const bool copy = src.md.data_type() == dt::u8;
        plan.addPrimitive(
            (copy ? "concat copy " : "concat quantize ") + descName(src.md) + "->" +
                descName(u8_md),
            parts[i].first,
            {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, MemRef{dst.buffer, parts[i].second, {}}}}, {});
    }
    if (halo)
        plan.addKernel(
            "concat halo " + descName(u8_md),
            [h = *halo](const std::vector<dnnl::memory>& m) { h.fill(m[0].get_data_handle()); },
            {dst});
    plan.define(plan.node().outputs[0], dst);
    return true;
}

std::optional<ConcatTarget> concatInPlaceTarget(const Plan& plan, ValueId v, size_t spatial_rank,
                                                bool u8_readers) {
    const Graph& g = plan.graph();
    const Node* cat_node = nullptr;
    int reads = 0, concat_reads = 0;
    for (const Node& m : g.nodes) {
        const auto uses = std::count(m.inputs.begin(), m.inputs.end(), v);
        reads += static_cast<int>(uses) + (m.fused_residual == v) + (m.fused_prelu_slope == v);
        if (uses && m.op == OpKind::kConcat) {
            cat_node = &m;
            concat_reads += static_cast<int>(uses);
        }
    }
    if (!cat_node || concat_reads != 1 || (!u8_readers && reads != 1) || spatial_rank < 2 ||
        spatial_rank > 3)
        return std::nullopt;
    const Shape& cs = g.values[cat_node->outputs[0]].shape;
    const auto rank = static_cast<int64_t>(cs.size());
    if (rank != static_cast<int64_t>(spatial_rank) + 2 ||
        (cat_node->axis != 1 && cat_node->axis != 1 - rank))
        return std::nullopt;
    ConcatTarget t;
    t.channels = cs[1];
    for (ValueId u : cat_node->inputs) {
        if (u == v) break;
        t.c0 += g.values[u].shape[1];
    }
    if (const quant::Int8Layer* l = plan.int8LayerOf(static_cast<int>(cat_node - g.nodes.data())))
        t.halo = u8Halo(cs, *l);
    t.cat.md =
        t.halo ? t.halo->md()
               : dnnl::memory::desc(toDims(cs), dt::u8, spatial_rank == 3 ? tag::ndhwc : tag::nhwc);
    for (ValueId u : cat_node->inputs)  // another input made it already
        if (const MemRef* made = plan.concatInPlace(u)) {
            if (made->md != t.cat.md) return std::nullopt;
            t.cat = *made;
        }
    return t;
}

MemRef useConcatInPlace(Plan& plan, ValueId v, ConcatTarget& target) {
    if (target.cat.buffer < 0) target.cat = plan.newBuffer(target.cat.md);
    plan.defineConcatInPlace(v, target.cat);
    return target.cat;
}

Status planConcat(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const int rank = static_cast<int>(g.values[n.outputs[0]].shape.size());
    const int axis = static_cast<int>(n.axis < 0 ? n.axis + rank : n.axis);
    // One data type and one layout for all inputs (mixed layouts only have oneDNN's reference
    // concat): those of the input with the most channels, usually the skip connection.
    // An input a normalisation wrote as this concat's u8 (int8_policy.h, concat_u8) has no
    // float form: it is copied, never read as float.
    // An input written straight into this concat's u8 output (a ConvTranspose's quantising
    // scatter or a skip connection's norm, Plan::concatInPlace) has no float form either: it
    // counts as channels-last, and the concat writes only its other inputs.
    const MemRef* in_place = nullptr;
    for (ValueId v : n.inputs)
        if (const MemRef* cat = plan.concatInPlace(v)) in_place = cat;
    auto floatDesc = [&](ValueId v) {
        if (plan.concatInPlace(v))
            return sameLayout(in_place->md, toDims(g.values[v].shape), plan.actType());
        const MemRef* u8 = plan.concatU8(v);
        return u8 ? sameLayout(u8->md, u8->md.dims(), plan.actType()) : plan.desc(v);
    };
    auto known = [&](ValueId v) { return plan.has(v) || plan.concatInPlace(v); };
    std::optional<dnnl::memory::desc> like;
    int64_t most = -1;
    for (ValueId v : n.inputs)
        if (known(v) && g.values[v].shape.size() > 1 && g.values[v].shape[1] > most) {
            like = floatDesc(v);
            most = g.values[v].shape[1];
        }
    // Channels-last when any input is: oneDNN's convolutions pick it for few channels (the
    // full-resolution stages), so the convolution after the concat reads it without a reorder.
    for (ValueId v : n.inputs)
        if (known(v) && axis == 1 && isChannelsLast(floatDesc(v))) like = floatDesc(v);
    bool copies = in_place != nullptr;
    const dt type = like ? like->data_type() : plan.actType();
    std::vector<dnnl::memory::desc> mds;
    std::vector<std::pair<int, MemRef>> args;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
        const ValueId v = n.inputs[i];
        dnnl::memory::desc md = like ? sameLayout(*like, toDims(g.values[v].shape), type)
                                     : plainDesc(g.values[v].shape, type);
        if (plan.concatInPlace(v)) {  // marked for planQuantizingConcat
            mds.push_back(md);
            args.push_back(
                {DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), MemRef{kWrittenInPlace, md, {}}});
            continue;
        }
        if (const MemRef* u8 = plan.concatU8(v)) {
            copies = true;
            mds.push_back(u8->md);
            args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), *u8});
            continue;
        }
        VOXSEG_ASSIGN_OR_RETURN(MemRef r, plan.ensure(v, md));
        mds.push_back(md);
        args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), r});
    }
    // The output in the inputs' layout: left to itself oneDNN 2.6 picks a batch-outer blocking
    // (Bacde8b) for two 8-channel blocked inputs, whose concat ran at 2 GB/s (16 ms for 2 x 8
    // channels at 64x96x96) where copying the inputs' blocks one after another is a few memcpys.
    const dnnl::memory::desc dst_md =
        like ? sameLayout(*like, toDims(g.values[n.outputs[0]].shape), type)
             : plainDesc(g.values[n.outputs[0]].shape, type);
    if (const quant::Int8Layer* q8 = plan.int8Layer(); q8 && q8->dst_u8 && !q8->keep_float) {
        // A halo source (int8_policy.h): the u8 inside a halo of its zero point.
        const std::optional<U8Halo> halo =
            axis == 1 ? u8Halo(g.values[n.outputs[0]].shape, *q8) : std::nullopt;
        if (planQuantizingConcat(plan, axis,
                                 halo ? halo->md() : sameLayout(dst_md, dst_md.dims(), dt::u8),
                                 args, q8->dst, in_place, halo))
            return Status::ok();
    }
    if (copies)
        return nodeError(plan,
                         "int8: an input written as this concat's u8 cannot be placed in its "
                         "output's layout");
    if (std::optional<MemRef> dst = planConcatInPlace(plan, axis, dst_md, mds, args))
        return planUnfusedEpilogue(plan, *dst);
    try {
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        dnnl::concat::primitive_desc pd(dst_md, axis, mds, plan.engine(), attr);
        MemRef dst = plan.newBuffer(pd.dst_desc());
        args.push_back({DNNL_ARG_DST, dst});
        plan.addPrimitive(std::string("concat ") + pd.impl_info_str(), dnnl::concat(pd),
                          std::move(args), pd.scratchpad_desc());
        plan.define(n.outputs[0], dst);
        return planUnfusedEpilogue(plan, dst);
    } catch (const dnnl::error& e) {
        return nodeError(plan, std::string("oneDNN concat: ") + e.what());
    }
}

// y = f(x) elementwise on plain f32, for functions oneDNN's eltwise lacks.
Status planPlainUnary(Plan& plan) {
    const Node& n = plan.node();
    const Shape& xs = plan.graph().values[n.inputs[0]].shape;
    const auto md = plainDesc(xs, dt::f32);
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensurePlainF32(n.inputs[0]));
    std::optional<MemRef> dst = plan.tryInPlace(n.inputs[0], md);
    if (!dst) dst = plan.newBuffer(md);
    const OpKind op = n.op;
    const UnaryFn fn = *unaryFnOf(op);
    const float alpha = n.alpha, beta = n.beta;
    const int64_t total = numel(xs);
    // The formula every backend shares (engine/graph/unary_math.h); `fn` is loop-invariant, so
    // the compiler unswitches the loop (-O3).
    Kernel k = [=](const std::vector<dnnl::memory>& m) {
        const float* in = static_cast<const float*>(m[0].get_data_handle());
        float* out = static_cast<float*>(m[1].get_data_handle());
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < total; ++i) out[i] = unaryValue(fn, in[i], alpha, beta);
    };
    plan.addKernel(std::string(opKindName(op)) + " plain loop", std::move(k), {src, *dst});
    plan.define(n.outputs[0], *dst);
    return planUnfusedEpilogue(plan, *dst);
}

// Where with numpy broadcasting of its three operands, a plain f32 loop.
Status planWhere(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const Shape& ys = g.values[n.outputs[0]].shape;
    std::vector<MemRef> refs;
    std::vector<std::vector<int64_t>> strides;
    for (size_t i = 0; i < 3; ++i) {
        VOXSEG_ASSIGN_OR_RETURN(MemRef r, plan.ensurePlainF32(n.inputs[i]));
        refs.push_back(r);
        strides.push_back(broadcastStrides(g.values[n.inputs[i]].shape, ys));
    }
    MemRef dst = plan.newBuffer(plainDesc(ys, dt::f32));
    refs.push_back(dst);
    const int rank = static_cast<int>(ys.size());
    Kernel k = [=](const std::vector<dnnl::memory>& m) {
        const float* c = static_cast<const float*>(m[0].get_data_handle());
        const float* a = static_cast<const float*>(m[1].get_data_handle());
        const float* b = static_cast<const float*>(m[2].get_data_handle());
        float* out = static_cast<float*>(m[3].get_data_handle());
        const int64_t total = numel(ys);
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < total; ++i) {
            int64_t rem = i, ic = 0, ia = 0, ib = 0;
            for (int d = rank - 1; d >= 0; --d) {
                const int64_t q = rem % ys[d];
                rem /= ys[d];
                ic += q * strides[0][d];
                ia += q * strides[1][d];
                ib += q * strides[2][d];
            }
            out[i] = c[ic] != 0.0f ? a[ia] : b[ib];
        }
    };
    plan.addKernel("where plain loop", std::move(k), refs);
    plan.define(n.outputs[0], dst);
    return planUnfusedEpilogue(plan, dst);
}

}  // namespace voxseg::engine::cpu
