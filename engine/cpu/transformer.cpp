// The transformer / attention ops on the CPU backend: MatMul (oneDNN matmul, batch dims
// broadcast), LayerNorm (oneDNN layer normalisation over the trailing axes), ReduceMean /
// ReduceSum / ReduceMax (oneDNN reduction), and the memory-bound ops oneDNN has no primitive
// for as plain OpenMP loops: Erf, Sin, Cos, Where, Expand, Tile, Rotary (attention:
// cpu_attention.cpp). All on plain f32 (the
// activations of attention blocks are rows of tokens, not blocked channels); bf16 plans reorder
// into f32 here, and the reorders after them convert back.
#include "engine/cpu/norm_kernels.h"
#include "engine/cpu/plan.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

namespace voxseg::engine::cpu {
namespace {

std::vector<int64_t> plainStrides(const Shape& s) {
    std::vector<int64_t> st(s.size(), 1);
    for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
    return st;
}

// The same bytes seen through another (plain) descriptor of the same size.
MemRef viewAs(Plan& plan, const MemRef& r, const dnnl::memory::desc& md) {
    MemRef v{r.buffer, md, r.fixed};
    if (r.buffer < 0) v.fixed = dnnl::memory(md, plan.engine(), r.fixed.get_data_handle());
    return v;
}

Shape withLeadingOnes(const Shape& s, size_t rank) {
    Shape out(rank - s.size(), 1);
    out.insert(out.end(), s.begin(), s.end());
    return out;
}

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

// y = f(x) elementwise on plain f32, for functions oneDNN's eltwise lacks.
Status planPlainUnary(Plan& plan) {
    const Node& n = plan.node();
    const Shape& xs = plan.graph().values[n.inputs[0]].shape;
    const auto md = plainDesc(xs, dt::f32);
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensurePlainF32(n.inputs[0]));
    std::optional<MemRef> dst = plan.tryInPlace(n.inputs[0], md);
    if (!dst) dst = plan.newBuffer(md);
    const OpKind op = n.op;
    const int64_t total = numel(xs);
    Kernel k = [=](const std::vector<dnnl::memory>& m) {
        const float* in = static_cast<const float*>(m[0].get_data_handle());
        float* out = static_cast<float*>(m[1].get_data_handle());
        if (op == OpKind::kErf) {
#pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < total; ++i) out[i] = std::erf(in[i]);
        } else if (op == OpKind::kSin) {
#pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < total; ++i) out[i] = std::sin(in[i]);
        } else {
#pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < total; ++i) out[i] = std::cos(in[i]);
        }
    };
    plan.addKernel(std::string(opKindName(op)) + " plain loop", std::move(k), {src, *dst});
    plan.define(n.outputs[0], *dst);
    return planUnfusedEpilogue(plan, *dst);
}

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

// Expand (strides 0 along broadcast axes) and Tile (index modulo the input dim).
Status planExpandOrTile(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const Shape xs = g.values[n.inputs[0]].shape;
    const Shape ys = g.values[n.outputs[0]].shape;
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensurePlainF32(n.inputs[0]));
    MemRef dst = plan.newBuffer(plainDesc(ys, dt::f32));
    const bool tile = n.op == OpKind::kTile;
    const std::vector<int64_t> st = tile ? plainStrides(xs) : broadcastStrides(xs, ys);
    const Shape in_dims = withLeadingOnes(xs, ys.size());
    const int rank = static_cast<int>(ys.size());
    Kernel k = [=](const std::vector<dnnl::memory>& m) {
        const float* in = static_cast<const float*>(m[0].get_data_handle());
        float* out = static_cast<float*>(m[1].get_data_handle());
        const int64_t total = numel(ys);
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < total; ++i) {
            int64_t rem = i, off = 0;
            for (int d = rank - 1; d >= 0; --d) {
                const int64_t q = rem % ys[d];
                rem /= ys[d];
                off += (tile ? q % in_dims[d] : q) * st[d];
            }
            out[i] = in[off];
        }
    };
    plan.addKernel(tile ? "tile plain loop" : "expand plain loop", std::move(k), {src, dst});
    plan.define(n.outputs[0], dst);
    return planUnfusedEpilogue(plan, dst);
}

// The smallest even p dividing d with t[i][j] == t[i][j % p] in every row i (rows `d` floats
// apart) of both tables, d if none.
int64_t columnPeriod(const std::vector<float>& a, const std::vector<float>& b, int64_t d) {
    auto repeats = [d](const std::vector<float>& t, int64_t p) {
        for (size_t k = 0; k < t.size(); ++k) {
            const int64_t j = static_cast<int64_t>(k) % d;
            if (t[k] != t[k - static_cast<size_t>(j - j % p)]) return false;
        }
        return true;
    };
    for (int64_t p = 2; p < d; p += 2)
        if (d % p == 0 && repeats(a, p) && repeats(b, p)) return p;
    return d;
}

// A Rotary's cos/sin tables [tokens, d] cut to their column period (columnPeriod).
struct RotaryTables {
    int64_t period = 0;
    std::vector<float> cos, sin;  // [tokens, period]
};

RotaryTables rotaryTables(const Tensor& cos, const Tensor& sin, int64_t tokens, int64_t d) {
    const std::vector<float> c = cos.toFloats(), s = sin.toFloats();
    RotaryTables t;
    t.period = columnPeriod(c, s, d);
    for (int64_t i = 0; i < tokens; ++i) {
        t.cos.insert(t.cos.end(), c.begin() + i * d, c.begin() + i * d + t.period);
        t.sin.insert(t.sin.end(), s.begin() + i * d, s.begin() + i * d + t.period);
    }
    return t;
}

// Rotary embedding of interleaved pairs in one pass (in place when the input dies here):
// y[2i] = x[2i] cos[2i] - x[2i+1] sin[2i], y[2i+1] = x[2i+1] cos[2i+1] + x[2i] sin[2i+1], the
// tables indexed by token (row modulo T). Packed heads ([B, T, H x D]) tile one head's table H
// times; the kernel then reads that one (Primus-S: 1728 x 66 instead of 1728 x 396 floats per
// table, which then stay in L2), made once and shared by every block's Rotary.
Status planRotary(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const Shape& xs = g.values[n.inputs[0]].shape;
    const int64_t d = xs.back(), tokens = xs[xs.size() - 2], rows = numel(xs) / d;
    const auto md = plainDesc(xs, dt::f32);
    const Tensor &cos = g.constant(n.inputs[1]), &sin = g.constant(n.inputs[2]);
    if (cos.numel() != tokens * d || sin.numel() != tokens * d)
        return nodeError(plan, "rotary tables do not hold " + std::to_string(tokens) + " x " +
                                   std::to_string(d) + " values");
    const auto tables = plan.derivedConstant<RotaryTables>(
        "rotary " + std::to_string(n.inputs[1]) + " " + std::to_string(n.inputs[2]),
        [&] { return rotaryTables(cos, sin, tokens, d); });
    const int64_t period = tables->period;
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensurePlainF32(n.inputs[0]));
    std::optional<MemRef> dst = plan.tryInPlace(n.inputs[0], md);
    if (!dst) dst = plan.newBuffer(md);
    Kernel k = [=](const std::vector<dnnl::memory>& m) {
        const float* x = static_cast<const float*>(m[0].get_data_handle());
        float* y = static_cast<float*>(m[1].get_data_handle());
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            const float* cr = tables->cos.data() + (r % tokens) * period;
            const float* sr = tables->sin.data() + (r % tokens) * period;
            for (int64_t h = 0; h < d; h += period) {
                const float* xr = x + r * d + h;
                float* yr = y + r * d + h;
#pragma omp simd
                for (int64_t i = 0; i < period; i += 2) {
                    const float x0 = xr[i], x1 = xr[i + 1];
                    yr[i] = x0 * cr[i] - x1 * sr[i];
                    yr[i + 1] = x1 * cr[i + 1] + x0 * sr[i + 1];
                }
            }
        }
    };
    plan.addKernel("rotary plain loop, table period " + std::to_string(period), std::move(k),
                   {src, *dst});
    plan.define(n.outputs[0], *dst);
    return planUnfusedEpilogue(plan, *dst);
}

}  // namespace

std::vector<int64_t> broadcastStrides(const Shape& s, const Shape& to) {
    const Shape bs = withLeadingOnes(s, to.size());
    std::vector<int64_t> st(to.size(), 0);
    int64_t k = 1;
    for (int i = static_cast<int>(to.size()) - 1; i >= 0; --i) {
        st[i] = bs[i] == 1 ? 0 : k;
        k *= bs[i];
    }
    return st;
}

Status planTransformerOp(Plan& plan) {
    switch (plan.node().op) {
        case OpKind::kMatMul:
            return planMatMul(plan);
        case OpKind::kLayerNorm:
            return planLayerNorm(plan);
        case OpKind::kReduceMean:
        case OpKind::kReduceSum:
        case OpKind::kReduceMax:
            return planReduce(plan);
        case OpKind::kErf:
        case OpKind::kSin:
        case OpKind::kCos:
            return planPlainUnary(plan);
        case OpKind::kWhere:
            return planWhere(plan);
        case OpKind::kExpand:
        case OpKind::kTile:
            return planExpandOrTile(plan);
        case OpKind::kAttention:
        case OpKind::kMultiHeadAttention:
            return planAttention(plan);
        case OpKind::kRotary:
            return planRotary(plan);
        default:
            return nodeError(plan, "not a transformer op");
    }
}

}  // namespace voxseg::engine::cpu
