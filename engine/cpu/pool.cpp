// MaxPool, AveragePool, GlobalAveragePool on oneDNN pooling (Resize: resize.cpp).
#include "engine/cpu/plan.h"

#include <omp.h>

#include <cmath>

namespace voxseg::engine::cpu {
namespace {

// ONNX/PyTorch average pooling with count_include_pad divides by the taps inside the declared
// padding; ceil_mode's extra overhang is not counted, while oneDNN divides by the whole kernel.
// Scales the few affected outputs by kernel / counted taps (a broadcast multiply).
Status correctCeilOverhang(Plan& plan, const MemRef& out, const Shape& xs, const Shape& ys,
                           const dnnl::memory::dims& kernel, const dnnl::memory::dims& strides,
                           const dnnl::memory::dims& pl) {
    const PoolAttrs& p = plan.node().pool;
    const size_t sp = xs.size() - 2;
    std::vector<std::vector<double>> axis_factor(sp);
    bool any = false;
    for (size_t a = 0; a < sp; ++a) {
        const int64_t hi = xs[2 + a] + (p.pads_end.empty() ? 0 : p.pads_end[a]);
        for (int64_t o = 0; o < ys[2 + a]; ++o) {
            const int64_t start = o * strides[a] - pl[a];
            const int64_t end = std::min(start + kernel[a], hi);
            const double f = static_cast<double>(kernel[a]) / std::max<int64_t>(end - start, 1);
            any = any || f != 1.0;
            axis_factor[a].push_back(f);
        }
    }
    if (!any) return Status::ok();
    Shape fs(2, 1);
    for (size_t a = 0; a < sp; ++a) fs.push_back(ys[2 + a]);
    std::vector<float> values(numel(fs));
    for (int64_t i = 0; i < static_cast<int64_t>(values.size()); ++i) {
        int64_t rem = i;
        double f = 1.0;
        for (int a = static_cast<int>(sp) - 1; a >= 0; --a) {
            f *= axis_factor[a][rem % ys[2 + a]];
            rem /= ys[2 + a];
        }
        values[i] = static_cast<float>(f);
    }
    const auto md = plainDesc(fs, out.md.data_type());
    VOXSEG_ASSIGN_OR_RETURN(dnnl::memory m, plan.constantMemory(Tensor::fromFloats(fs, values),
                                                                plainDesc(fs, dt::f32), md));
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::binary::primitive_desc pd(
        dnnl::binary::desc(dnnl::algorithm::binary_mul, out.md, md, out.md), attr, plan.engine());
    plan.addPrimitive(
        std::string("binary ") + pd.impl_info_str() + " (ceil_mode divisor)", dnnl::binary(pd),
        {{DNNL_ARG_SRC_0, out}, {DNNL_ARG_SRC_1, MemRef{-1, md, m}}, {DNNL_ARG_DST, out}},
        pd.scratchpad_desc());
    return Status::ok();
}

}  // namespace

Status planPool(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const ValueId x = n.inputs[0];
    const Shape& xs = g.values[x].shape;
    const Shape& ys = g.values[n.outputs[0]].shape;
    const size_t sp = xs.size() - 2;
    dnnl::memory::dims kernel, strides, dil, pl, pr;
    dnnl::algorithm alg;
    if (n.op == OpKind::kGlobalAveragePool) {
        alg = dnnl::algorithm::pooling_avg_exclude_padding;
        for (size_t i = 0; i < sp; ++i) {
            kernel.push_back(xs[2 + i]);
            strides.push_back(1);
            dil.push_back(0);
            pl.push_back(0);
            pr.push_back(0);
        }
    } else {
        const PoolAttrs& p = n.pool;
        alg = n.op == OpKind::kMaxPool ? dnnl::algorithm::pooling_max
              : p.count_include_pad    ? dnnl::algorithm::pooling_avg_include_padding
                                       : dnnl::algorithm::pooling_avg_exclude_padding;
        for (size_t i = 0; i < sp; ++i) {
            const int64_t k = p.kernel[i];
            const int64_t s = p.strides.empty() ? 1 : p.strides[i];
            const int64_t d = p.dilations.empty() ? 1 : p.dilations[i];
            const int64_t b = p.pads_begin.empty() ? 0 : p.pads_begin[i];
            kernel.push_back(k);
            strides.push_back(s);
            dil.push_back(d - 1);
            pl.push_back(b);
            // Right padding from the inferred output size (covers ceil_mode).
            pr.push_back((ys[2 + i] - 1) * s + (k - 1) * d + 1 - xs[2 + i] - b);
        }
    }
    const dnnl::memory::desc md = currentDesc(plan, x);
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensure(x, md));
    try {
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        const auto dst_any = dnnl::memory::desc(toDims(ys), md.data_type(), tag::any);
        dnnl::pooling_v2_forward::primitive_desc pd(
            dnnl::pooling_v2_forward::desc(dnnl::prop_kind::forward_inference, alg, md, dst_any,
                                           strides, kernel, dil, pl, pr),
            attr, plan.engine());
        MemRef dst = plan.newBuffer(pd.dst_desc());
        plan.addPrimitive(std::string("pool ") + pd.impl_info_str(), dnnl::pooling_v2_forward(pd),
                          {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}}, pd.scratchpad_desc());
        plan.define(n.outputs[0], dst);
        if (alg == dnnl::algorithm::pooling_avg_include_padding)
            VOXSEG_RETURN_IF_ERROR(correctCeilOverhang(plan, dst, xs, ys, kernel, strides, pl));
        return planUnfusedEpilogue(plan, dst);
    } catch (const dnnl::error& e) {
        return nodeError(plan, std::string("oneDNN pooling: ") + e.what());
    }
}

}  // namespace voxseg::engine::cpu
