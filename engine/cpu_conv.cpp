// Conv and ConvTranspose on oneDNN convolution/deconvolution primitives. Layouts are left to
// oneDNN (format_tag::any); the producer's layout is kept when the same implementation accepts
// it, so consecutive layers need no reorder. Bias, activation and a residual add (sum post-op)
// are fused; an epilogue the primitive refuses is applied by separate in-place primitives.
#include "engine/cpu_plan.h"

namespace voxseg::engine::cpu {
namespace {

struct ConvGeometry {
    dnnl::memory::dims strides, dilations, pads_l, pads_r;
};

// oneDNN counts dilation from 0 (0 = dense).
ConvGeometry geometry(const ConvAttrs& c) {
    ConvGeometry g;
    for (size_t i = 0; i < c.kernel.size(); ++i) {
        g.strides.push_back(c.strides.empty() ? 1 : c.strides[i]);
        g.dilations.push_back((c.dilations.empty() ? 1 : c.dilations[i]) - 1);
        g.pads_l.push_back(c.pads_begin.empty() ? 0 : c.pads_begin[i]);
        g.pads_r.push_back(c.pads_end.empty() ? 0 : c.pads_end[i]);
    }
    return g;
}

// Weights of an ONNX Conv ([O, I/g, k...]) or ConvTranspose ([I, O/g, k...]) as oneDNN sees them:
// dims ([g,] O/g, I/g, k...) with the strides of the ONNX storage order.
dnnl::memory::desc onnxWeightsDesc(const Shape& w, int64_t groups, bool transposed) {
    const size_t sp = w.size() - 2;
    int64_t k = 1;
    for (size_t i = 0; i < sp; ++i) k *= w[2 + i];
    dnnl::memory::dims dims, strides;
    int64_t oc, ic;  // per group
    if (!transposed) {
        oc = w[0] / groups;
        ic = w[1];
    } else {
        ic = w[0] / groups;
        oc = w[1];
    }
    if (groups > 1) {
        dims.push_back(groups);
        strides.push_back(oc * ic * k);
    }
    dims.push_back(oc);
    dims.push_back(ic);
    if (!transposed) {
        strides.push_back(ic * k);
        strides.push_back(k);
    } else {
        strides.push_back(k);
        strides.push_back(oc * k);
    }
    int64_t s = k;
    for (size_t i = 0; i < sp; ++i) {
        s /= w[2 + i];
        dims.push_back(w[2 + i]);
        strides.push_back(s);
    }
    return dnnl::memory::desc(dims, dt::f32, strides);
}

dnnl::memory::desc anyLike(const dnnl::memory::dims& dims, dt type) {
    return dnnl::memory::desc(dims, type, tag::any);
}

// Post-ops for the node's epilogue: sum (residual) first, then the activation. PReLU is not
// fused (returns false for `fused_act`).
dnnl::primitive_attr epilogueAttr(const Node& n, bool with_epilogue, bool& fused_act) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    fused_act = false;
    if (!with_epilogue) return attr;
    dnnl::post_ops ops;
    if (n.fused_residual >= 0) ops.append_sum(1.0f);
    dnnl::algorithm alg;
    float a = 0, b = 0;
    if (eltwiseFor(n.fused_activation, n.fused_alpha, alg, a, b)) {
        ops.append_eltwise(1.0f, alg, a, b);
        fused_act = true;
    }
    attr.set_post_ops(ops);
    return attr;
}

template <typename Prim, typename MakeDesc>
Status planConvLike(Plan& plan, bool transposed, MakeDesc make_desc) {
    using Pd = typename Prim::primitive_desc;
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const ValueId x = n.inputs[0], w = n.inputs[1];
    const ValueId b = n.inputs.size() > 2 ? n.inputs[2] : -1;
    if (!g.isConstant(w)) return nodeError(plan, "weights must be a constant initializer");
    if (b >= 0 && !g.isConstant(b)) return nodeError(plan, "bias must be a constant initializer");
    const Shape& ws = g.values[w].shape;
    const Shape& xs = g.values[x].shape;
    const Shape& ys = g.values[n.outputs[0]].shape;
    const dnnl::memory::desc w_onnx = onnxWeightsDesc(ws, n.conv.group, transposed);
    const dt act = plan.actType();
    const auto src_any = anyLike(toDims(xs), act);
    const auto w_any = anyLike(w_onnx.dims(), act);
    const auto dst_any = anyLike(toDims(ys), act);
    const auto bias_md =
        b >= 0 ? dnnl::memory::desc({ys[1]}, dt::f32, tag::a) : dnnl::memory::desc();
    ConvGeometry geo = geometry(n.conv);
    if (transposed) {
        // Right padding from the inferred output size (covers output_padding).
        for (size_t i = 0; i < geo.pads_r.size(); ++i) {
            const int64_t k = (n.conv.kernel[i] - 1) * (geo.dilations[i] + 1) + 1;
            geo.pads_r[i] = (xs[2 + i] - 1) * geo.strides[i] + k - ys[2 + i] - geo.pads_l[i];
        }
    }
    const bool has_epilogue = n.fused_residual >= 0 || n.fused_activation != ActivationKind::kNone;

    // Build with the epilogue fused when oneDNN accepts it; prefer the producer's layout.
    auto build = [&](const dnnl::memory::desc& src_md, const dnnl::memory::desc& dst_md, bool fuse,
                     bool& fused_act) {
        const auto attr = epilogueAttr(n, fuse, fused_act);
        return Pd(make_desc(src_md, w_any, bias_md, dst_md, geo), attr, plan.engine());
    };
    bool fused = has_epilogue, fused_act = false;
    Pd pd;
    try {
        pd = build(src_any, dst_any, fused, fused_act);
    } catch (const dnnl::error&) {
        fused = false;
        try {
            pd = build(src_any, dst_any, false, fused_act);
        } catch (const dnnl::error& e) {
            return nodeError(plan, std::string("oneDNN has no implementation: ") + e.what());
        }
    }
    if (!g.isConstant(x) && plan.has(x) && plan.desc(x).data_type() == act) {
        // A reorder per layer costs a memory pass: keep the producer's layout (for src and dst)
        // unless only a reference or gemm fallback takes it.
        const auto& prev = plan.desc(x);
        const auto same_dst = sameLayout(prev, toDims(ys), act);
        const bool src_ok = pd.src_desc() == prev, dst_ok = pd.dst_desc() == same_dst;
        for (const auto& dst_try : {same_dst, dst_any}) {
            if (src_ok && (dst_ok || &dst_try == &dst_any)) break;
            try {
                bool fa2 = false;
                Pd keep = build(prev, dst_try, fused, fa2);
                const std::string impl = keep.impl_info_str();
                if (impl == pd.impl_info_str() || (impl.find("ref") == std::string::npos &&
                                                   impl.find("gemm") == std::string::npos)) {
                    pd = keep;
                    fused_act = fa2;
                    break;
                }
            } catch (const dnnl::error&) {
            }
        }
    }

    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensure(x, pd.src_desc()));
    VOXSEG_ASSIGN_OR_RETURN(dnnl::memory wm,
                            plan.constantMemory(g.constant(w), w_onnx, pd.weights_desc()));
    std::vector<std::pair<int, MemRef>> args = {
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, MemRef{-1, pd.weights_desc(), wm}}};
    if (b >= 0) {
        VOXSEG_ASSIGN_OR_RETURN(dnnl::memory bm, plan.constantMemory(b, pd.bias_desc()));
        args.push_back({DNNL_ARG_BIAS, MemRef{-1, pd.bias_desc(), bm}});
    }
    const auto dst_md = pd.dst_desc();
    MemRef dst;
    if (fused && n.fused_residual >= 0) {
        // The sum post-op accumulates into dst: start from the residual, in place if it dies here.
        std::optional<MemRef> in_place;
        if (n.fused_residual != x) in_place = plan.tryInPlace(n.fused_residual, dst_md);
        if (in_place) {
            dst = *in_place;
        } else {
            dst = plan.newBuffer(dst_md);
            VOXSEG_ASSIGN_OR_RETURN(MemRef r, plan.ensure(n.fused_residual, dst_md));
            VOXSEG_RETURN_IF_ERROR(plan.addCopy(r, dst));
        }
    } else {
        dst = plan.newBuffer(dst_md);
    }
    args.push_back({DNNL_ARG_DST, dst});
    const char* kind = transposed ? "deconv " : "conv ";
    plan.addPrimitive(
        kind + std::string(pd.impl_info_str()) + " " + descName(src.md) + "->" + descName(dst_md),
        Prim(pd), std::move(args), pd.scratchpad_desc());
    plan.define(n.outputs[0], dst);
    if (!fused) return planUnfusedEpilogue(plan, dst, true, true);
    // The residual was fused but the activation (PReLU) has no eltwise post-op.
    if (!fused_act && n.fused_activation != ActivationKind::kNone)
        return planUnfusedEpilogue(plan, dst, false, true);
    return Status::ok();
}

}  // namespace

Status planConv(Plan& plan) {
    return planConvLike<dnnl::convolution_forward>(
        plan, false,
        [](const dnnl::memory::desc& s, const dnnl::memory::desc& w, const dnnl::memory::desc& b,
           const dnnl::memory::desc& d, const ConvGeometry& geo) {
            return dnnl::convolution_forward::desc(
                dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, s, w, b, d,
                geo.strides, geo.dilations, geo.pads_l, geo.pads_r);
        });
}

Status planConvTranspose(Plan& plan) {
    return planConvLike<dnnl::deconvolution_forward>(
        plan, true,
        [](const dnnl::memory::desc& s, const dnnl::memory::desc& w, const dnnl::memory::desc& b,
           const dnnl::memory::desc& d, const ConvGeometry& geo) {
            return dnnl::deconvolution_forward::desc(
                dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct, s, w, b,
                d, geo.strides, geo.dilations, geo.pads_l, geo.pads_r);
        });
}

}  // namespace voxseg::engine::cpu
