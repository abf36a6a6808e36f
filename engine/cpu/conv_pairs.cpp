// A Conv with 8 output channels as one with 16 on voxel pairs. oneDNN's AVX-512 convolutions
// compute 16 output channels per register, so 8 leave half of every register idle: the
// interactive network's 64^3 x 8 -> 8 3x3x3 convolutions ran at 48 % of this CPU's bf16 peak.
// Two neighbouring voxels along W as one voxel of 16 channels (parity p, channel o) fill it:
// output channel p * 8 + o at x' is y's channel o at 2x' + p, a convolution of stride 2 along W
// with a kernel one wider there (k + 1) and weights w'[p * 8 + o, c, a, b, j] = w[o, c, a, b,
// j - p] (0 outside the kernel). Its output [N, 16, D, H, W / 2] channels-last is the same bytes
// as y [N, 8, D, H, W] channels-last, so the value is defined on its buffer as it is; no copy.
// It does (k + 1) / k of the multiply-adds (4/3 for k = 3) at about twice the rate.
//
// Where: a forward Conv, 5-D, group 1, 8 output channels, stride 1 and dilation 1, W even, an
// odd kernel along W with symmetric padding (k - 1) / 2 and the same W out as in, no fused
// residual, on an AVX-512 CPU, when Plan::pairNarrowConvs() (CompileOptions::pair_narrow_convs).
#include "engine/cpu/norm_kernels.h"
#include "engine/cpu/plan.h"

#include <vector>

namespace voxseg::engine::cpu {

bool pairedConvApplies(const Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    if (!plan.pairNarrowConvs() || kernelIsa() != KernelIsa::kAvx512) return false;
    if (n.op != OpKind::kConv || n.inputs.size() < 2 || n.fused_residual >= 0) return false;
    if (!g.isConstant(n.inputs[1]) ||
        (n.inputs.size() > 2 && n.inputs[2] >= 0 && !g.isConstant(n.inputs[2])))
        return false;
    const Shape& xs = g.values[n.inputs[0]].shape;
    const Shape& ys = g.values[n.outputs[0]].shape;
    const ConvAttrs& c = n.conv;
    if (c.group != 1 || xs.size() != 5 || ys.size() != 5 || c.kernel.size() != 3 || ys[1] != 8)
        return false;
    // A bf16 plan computes a convolution of at most 4 input channels in fp32 (conv.cpp).
    if (plan.actType() == dt::bf16 && xs[1] <= 4) return false;
    for (size_t i = 0; i < 3; ++i) {
        if ((!c.strides.empty() && c.strides[i] != 1) ||
            (!c.dilations.empty() && c.dilations[i] != 1))
            return false;
        const int64_t pb = c.pads_begin.empty() ? 0 : c.pads_begin[i];
        const int64_t pe = c.pads_end.empty() ? 0 : c.pads_end[i];
        if (pb != pe || 2 * pb != c.kernel[i] - 1 || ys[2 + i] != xs[2 + i]) return false;
    }
    return ys[4] % 2 == 0;
}

namespace {

// w' [16, C, kd, kh, k + 1] from w [8, C, kd, kh, k] (both ONNX order).
Tensor pairedWeights(const Tensor& w) {
    const Shape& s = w.shape();
    const int64_t oc = s[0], ic = s[1], kd = s[2], kh = s[3], kw = s[4];
    const std::vector<float> v = w.toFloats();
    std::vector<float> out(static_cast<size_t>(2 * oc * ic * kd * kh * (kw + 1)), 0.0f);
    for (int64_t p = 0; p < 2; ++p)
        for (int64_t o = 0; o < oc; ++o)
            for (int64_t c = 0; c < ic; ++c)
                for (int64_t a = 0; a < kd * kh; ++a)
                    for (int64_t j = 0; j < kw; ++j)
                        out[static_cast<size_t>((((p * oc + o) * ic + c) * kd * kh + a) * (kw + 1) +
                                                j + p)] =
                            v[static_cast<size_t>(((o * ic + c) * kd * kh + a) * kw + j)];
    return Tensor::fromFloats({2 * oc, ic, kd, kh, kw + 1}, out);
}

}  // namespace

Status planPairedConv(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const ValueId x = n.inputs[0];
    const ValueId b = n.inputs.size() > 2 ? n.inputs[2] : -1;
    const Shape& xs = g.values[x].shape;
    const Shape& ys = g.values[n.outputs[0]].shape;
    const dt act = plan.actType();
    const Tensor w2 = pairedWeights(g.constant(n.inputs[1]));
    const dnnl::memory::dims pair_dims{ys[0], 16, ys[2], ys[3], ys[4] / 2};
    const dnnl::memory::desc dst_md(pair_dims, act, tag::ndhwc);
    const dnnl::memory::desc w_any(toDims(w2.shape()), act, tag::any);
    const dnnl::memory::desc bias_md =
        b >= 0 ? dnnl::memory::desc({16}, dt::f32, tag::a) : dnnl::memory::desc();
    const int64_t pd = n.conv.kernel[0] / 2, ph = n.conv.kernel[1] / 2, pw = n.conv.kernel[2] / 2;
    const dnnl::memory::dims strides{1, 1, 2}, dilations{0, 0, 0}, pads{pd, ph, pw};

    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::algorithm alg;
    float alpha = 0, beta = 0;
    const bool fuse_act = eltwiseFor(n.fused_activation, n.fused_alpha, alg, alpha, beta);
    if (fuse_act) {
        dnnl::post_ops ops;
        ops.append_eltwise(1.0f, alg, alpha, beta);
        attr.set_post_ops(ops);
    }
    auto build = [&](const dnnl::memory::desc& src_md) {
        return dnnl::convolution_forward::primitive_desc(
            dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                            dnnl::algorithm::convolution_direct, src_md, w_any,
                                            bias_md, dst_md, strides, dilations, pads, pads),
            attr, plan.engine());
    };
    dnnl::convolution_forward::primitive_desc pdesc;
    // The producer's layout when the same kind of implementation takes it (no reorder).
    bool built = false;
    if (plan.has(x) && plan.desc(x).data_type() == act) {
        try {
            pdesc = build(plan.desc(x));
            const std::string impl = pdesc.impl_info_str();
            built = impl.find("ref") == std::string::npos && impl.find("gemm") == std::string::npos;
        } catch (const dnnl::error&) {
        }
    }
    if (!built) pdesc = build(dnnl::memory::desc(toDims(xs), act, tag::any));

    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensure(x, pdesc.src_desc()));
    const dnnl::memory::desc w_plain(toDims(w2.shape()), dt::f32, tag::oidhw);
    VOXSEG_ASSIGN_OR_RETURN(dnnl::memory wm,
                            plan.constantMemory(w2, w_plain, pdesc.weights_desc()));
    std::vector<std::pair<int, MemRef>> args = {
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, MemRef{-1, pdesc.weights_desc(), wm}}};
    if (b >= 0) {
        const std::vector<float> one = g.constant(b).toFloats();
        std::vector<float> bias = one;
        bias.insert(bias.end(), one.begin(), one.end());  // both parities
        VOXSEG_ASSIGN_OR_RETURN(dnnl::memory bm, plan.constantMemory(Tensor::fromFloats({16}, bias),
                                                                     bias_md, pdesc.bias_desc()));
        args.push_back({DNNL_ARG_BIAS, MemRef{-1, pdesc.bias_desc(), bm}});
    }
    const MemRef dst = plan.newBuffer(dst_md);
    args.push_back({DNNL_ARG_DST, dst});
    plan.addPrimitive("conv " + std::string(pdesc.impl_info_str()) + " " + descName(src.md) + "->" +
                          descName(dst_md) + " (voxel pairs)",
                      dnnl::convolution_forward(pdesc), std::move(args), pdesc.scratchpad_desc());
    // The same bytes as y in channels-last.
    const MemRef y{dst.buffer, dnnl::memory::desc(toDims(ys), act, tag::ndhwc), {}};
    plan.define(n.outputs[0], y);
    if (!fuse_act && n.fused_activation != ActivationKind::kNone)
        return planUnfusedEpilogue(plan, y, false, true);
    return Status::ok();
}

}  // namespace voxseg::engine::cpu
