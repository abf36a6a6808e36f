// Resize / Upsample on the CPU backend: oneDNN resampling where its coordinate mapping equals
// ONNX's (linear half-pixel; nearest with integer factors), else a plain-layout loop that
// implements every ONNX coordinate mode.
#include "engine/cpu/plan.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

namespace voxseg::engine::cpu {

namespace {

// Input coordinate of output index `o` on one axis (ONNX Resize coordinate modes), in float32
// like ONNX Runtime: in double, nearest modes pick the other neighbour at exact ties
// (tests/engine/golden/ops/resize_nearest_halfpixel_floor).
double sourceCoord(ResizeCoord mode, int64_t o, int64_t in, int64_t out, double scale) {
    const float of = static_cast<float>(o);
    const float s = static_cast<float>(scale);
    switch (mode) {
        case ResizeCoord::kHalfPixel:
            return (of + 0.5f) / s - 0.5f;
        case ResizeCoord::kPytorchHalfPixel:
            return out > 1 ? (of + 0.5f) / s - 0.5f : 0.0f;
        case ResizeCoord::kAlignCorners:
            return out > 1 ? of * static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
        case ResizeCoord::kAsymmetric:
            return of / s;
    }
    return 0.0;
}

int64_t nearestIndex(NearestRounding r, double x, int64_t in) {
    double v;
    switch (r) {
        case NearestRounding::kRoundPreferFloor:
            v = (x - std::floor(x) == 0.5) ? std::floor(x) : std::round(x);
            break;
        case NearestRounding::kRoundPreferCeil:
            v = (x - std::floor(x) == 0.5) ? std::ceil(x) : std::round(x);
            break;
        case NearestRounding::kFloor:
            v = std::floor(x);
            break;
        default:
            v = std::ceil(x);
            break;
    }
    return std::clamp<int64_t>(static_cast<int64_t>(v), 0, in - 1);
}

// Per output index of one axis: up to two taps (index, weight).
struct AxisTaps {
    std::vector<int64_t> i0, i1;
    std::vector<float> w1;  // weight of i1; i0 gets 1 - w1
};

AxisTaps axisTaps(const ResizeAttrs& r, int64_t in, int64_t out, double scale) {
    AxisTaps t;
    for (int64_t o = 0; o < out; ++o) {
        const double x = sourceCoord(r.coord, o, in, out, scale);
        if (r.mode == ResizeMode::kNearest) {
            const int64_t i = nearestIndex(r.nearest, x, in);
            t.i0.push_back(i);
            t.i1.push_back(i);
            t.w1.push_back(0.0f);
        } else {
            const double xc = std::clamp(x, 0.0, static_cast<double>(in - 1));
            const int64_t i0 = static_cast<int64_t>(std::floor(xc));
            const int64_t i1 = std::min(i0 + 1, in - 1);
            t.i0.push_back(i0);
            t.i1.push_back(i1);
            t.w1.push_back(static_cast<float>(xc - i0));
        }
    }
    return t;
}

Status planPlainResize(Plan& plan, const std::vector<double>& scales) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const ValueId x = n.inputs[0];
    const Shape xs = g.values[x].shape;
    const Shape ys = g.values[n.outputs[0]].shape;
    const size_t rank = xs.size();
    std::vector<AxisTaps> taps;
    for (size_t a = 0; a < rank; ++a) taps.push_back(axisTaps(n.resize, xs[a], ys[a], scales[a]));
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensurePlainF32(x));
    MemRef dst = plan.newBuffer(plainDesc(ys, dt::f32));
    Kernel k = [=](const std::vector<dnnl::memory>& m) {
        const float* in = static_cast<const float*>(m[0].get_data_handle());
        float* out = static_cast<float*>(m[1].get_data_handle());
        std::vector<int64_t> in_strides(rank, 1);
        for (int i = static_cast<int>(rank) - 2; i >= 0; --i)
            in_strides[i] = in_strides[i + 1] * xs[i + 1];
        const int64_t total = numel(ys);
#pragma omp parallel for schedule(static)
        for (int64_t idx = 0; idx < total; ++idx) {
            int64_t coord[8];
            int64_t rem = idx;
            for (int d = static_cast<int>(rank) - 1; d >= 0; --d) {
                coord[d] = rem % ys[d];
                rem /= ys[d];
            }
            float acc = 0.0f;
            for (int corner = 0; corner < (1 << rank); ++corner) {
                float w = 1.0f;
                int64_t off = 0;
                for (size_t d = 0; d < rank && w != 0.0f; ++d) {
                    const bool hi = (corner >> d) & 1;
                    const float w1 = taps[d].w1[coord[d]];
                    w *= hi ? w1 : 1.0f - w1;
                    off += (hi ? taps[d].i1[coord[d]] : taps[d].i0[coord[d]]) * in_strides[d];
                }
                if (w != 0.0f) acc += w * in[off];
            }
            out[idx] = acc;
        }
    };
    plan.addKernel("resize plain loop", std::move(k), {src, dst});
    plan.define(n.outputs[0], dst);
    return planUnfusedEpilogue(plan, dst);
}

}  // namespace

Status planResize(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const ValueId x = n.inputs[0];
    const Shape& xs = g.values[x].shape;
    const Shape& ys = g.values[n.outputs[0]].shape;
    if (xs.size() > 8) return nodeError(plan, "rank above 8");
    std::vector<double> scales(xs.size());
    bool integer = true, exact = true;
    for (size_t a = 0; a < xs.size(); ++a) {
        scales[a] = n.resize.scales.size() == xs.size() ? n.resize.scales[a]
                                                        : static_cast<double>(ys[a]) / xs[a];
        if (std::abs(scales[a] * xs[a] - ys[a]) > 1e-6 * ys[a]) exact = false;
        if (ys[a] % xs[a] != 0) integer = false;
    }
    const ResizeAttrs& r = n.resize;
    const bool half = r.coord == ResizeCoord::kHalfPixel ||
                      (r.coord == ResizeCoord::kPytorchHalfPixel && ys.back() > 1);
    bool use_onednn = exact && ys[0] == xs[0] && ys[1] == xs[1] && xs.size() >= 3;
    if (r.mode == ResizeMode::kLinear)
        use_onednn = use_onednn && half;
    else  // oneDNN nearest is round((o + 0.5) / s - 0.5): ONNX's for integer factors only
        use_onednn =
            use_onednn && integer &&
            (half || (r.coord == ResizeCoord::kAsymmetric && r.nearest == NearestRounding::kFloor));
    if (!use_onednn) return planPlainResize(plan, scales);
    const dnnl::memory::desc md = currentDesc(plan, x);
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensure(x, md));
    try {
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        const auto dst_any = dnnl::memory::desc(toDims(ys), md.data_type(), tag::any);
        const auto alg = r.mode == ResizeMode::kLinear ? dnnl::algorithm::resampling_linear
                                                       : dnnl::algorithm::resampling_nearest;
        dnnl::resampling_forward::primitive_desc pd(
            dnnl::resampling_forward::desc(dnnl::prop_kind::forward_inference, alg, md, dst_any),
            attr, plan.engine());
        MemRef dst = plan.newBuffer(pd.dst_desc());
        plan.addPrimitive(std::string("resample ") + pd.impl_info_str(),
                          dnnl::resampling_forward(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}},
                          pd.scratchpad_desc());
        plan.define(n.outputs[0], dst);
        return planUnfusedEpilogue(plan, dst);
    } catch (const dnnl::error& e) {
        return nodeError(plan, std::string("oneDNN resampling: ") + e.what());
    }
}

}  // namespace voxseg::engine::cpu
