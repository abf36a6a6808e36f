// MatMul on the CPU backend: oneDNN matmul on plain layouts with the batch dims broadcast, the
// bias, residual Add and activation fused by optimize() as its bias and post-ops. bf16 plans
// multiply in bf16 (f32 accumulation and output).
#include "engine/cpu/plan.h"

namespace voxseg::engine::cpu {

Status planMatMul(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const Shape& ys = g.values[n.outputs[0]].shape;
    const size_t rank = ys.size();
    const Shape as = withLeadingOnes(g.values[n.inputs[0]].shape, rank);
    const Shape bs = withLeadingOnes(g.values[n.inputs[1]].shape, rank);
    // bf16 plans multiply in bf16 (f32 accumulation and output), fp32 plans in f32.
    const dt in_type = plan.actType();
    const auto a_md = plainDesc(as, in_type), b_md = plainDesc(bs, in_type),
               y_md = plainDesc(ys, dt::f32);
    // Each operand in its own plain layout, seen with the output's rank; constants are
    // converted once, at compile time.
    auto operand = [&](ValueId v, const dnnl::memory::desc& md) -> Result<MemRef> {
        if (g.isConstant(v)) {
            VOXSEG_ASSIGN_OR_RETURN(dnnl::memory m, plan.constantMemory(v, md));
            return MemRef{-1, md, m};
        }
        VOXSEG_ASSIGN_OR_RETURN(MemRef r, plan.ensure(v, plainDesc(g.values[v].shape, in_type)));
        r.md = md;
        return r;
    };
    VOXSEG_ASSIGN_OR_RETURN(MemRef a, operand(n.inputs[0], a_md));
    VOXSEG_ASSIGN_OR_RETURN(MemRef b, operand(n.inputs[1], b_md));
    MemRef dst = plan.newBuffer(y_md);
    std::vector<std::pair<int, MemRef>> args = {
        {DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, dst}};
    // The bias (optimize()) as oneDNN's bias, the residual Add and the activation as post-ops:
    // one pass over the output.
    dnnl::memory::desc bias_md;
    const bool has_bias = n.inputs.size() > 2 && n.inputs[2] >= 0;
    if (has_bias) {
        Shape bias_shape(rank, 1);
        bias_shape.back() = ys.back();
        bias_md = plainDesc(bias_shape, dt::f32);
        VOXSEG_ASSIGN_OR_RETURN(dnnl::memory bias, plan.constantMemory(n.inputs[2], bias_md));
        args.push_back({DNNL_ARG_BIAS, MemRef{-1, bias_md, bias}});
    }
    dnnl::post_ops ops;
    if (n.fused_residual >= 0) {
        VOXSEG_ASSIGN_OR_RETURN(MemRef r, plan.ensure(n.fused_residual, y_md));
        ops.append_binary(dnnl::algorithm::binary_add, y_md);
        args.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, r});
    }
    dnnl::algorithm alg;
    float alpha = 0, beta = 0;
    const bool act_fused = n.fused_activation != ActivationKind::kNone &&
                           eltwiseFor(n.fused_activation, n.fused_alpha, alg, alpha, beta);
    if (act_fused) ops.append_eltwise(1.0f, alg, alpha, beta);
    try {
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        attr.set_post_ops(ops);
        const auto desc = has_bias ? dnnl::matmul::desc(a_md, b_md, bias_md, y_md)
                                   : dnnl::matmul::desc(a_md, b_md, y_md);
        dnnl::matmul::primitive_desc pd(desc, attr, plan.engine());
        plan.addPrimitive(std::string("matmul ") + pd.impl_info_str(), dnnl::matmul(pd), args,
                          pd.scratchpad_desc());
    } catch (const dnnl::error& e) {
        return nodeError(plan, std::string("oneDNN matmul ") + shapeToString(as) + " x " +
                                   shapeToString(bs) + ": " + e.what());
    }
    plan.define(n.outputs[0], dst);
    return planUnfusedEpilogue(plan, dst, /*residual=*/false, /*activation=*/!act_fused);
}

}  // namespace voxseg::engine::cpu
