// ReduceMean / ReduceSum / ReduceMax on the CPU backend: oneDNN reduction over plain f32 (bf16
// plans reorder into f32 here, and the reorders after them convert back).
#include "engine/cpu/plan.h"

namespace voxseg::engine::cpu {

Status planReduce(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const Shape& xs = g.values[n.inputs[0]].shape;
    const Shape& ys = g.values[n.outputs[0]].shape;
    Shape kept = xs;
    for (int64_t ax : n.reduce_axes) kept[ax] = 1;
    const dnnl::algorithm alg = n.op == OpKind::kReduceMean  ? dnnl::algorithm::reduction_mean
                                : n.op == OpKind::kReduceSum ? dnnl::algorithm::reduction_sum
                                                             : dnnl::algorithm::reduction_max;
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensurePlainF32(n.inputs[0]));
    MemRef dst = plan.newBuffer(plainDesc(ys, dt::f32));
    const auto kept_md = plainDesc(kept, dt::f32);
    try {
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        dnnl::reduction::primitive_desc pd(dnnl::reduction::desc(alg, src.md, kept_md, 0.f, 0.f),
                                           attr, plan.engine());
        plan.addPrimitive(std::string("reduction ") + pd.impl_info_str(), dnnl::reduction(pd),
                          {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, viewAs(plan, dst, kept_md)}},
                          pd.scratchpad_desc());
    } catch (const dnnl::error& e) {
        return nodeError(plan, std::string("oneDNN reduction: ") + e.what());
    }
    plan.define(n.outputs[0], dst);
    return planUnfusedEpilogue(plan, dst);
}

}  // namespace voxseg::engine::cpu
