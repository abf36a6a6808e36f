// The transformer / attention ops on the CPU backend: MatMul (oneDNN matmul, batch dims
// broadcast), LayerNorm (oneDNN layer normalisation over the trailing axes), ReduceMean /
// ReduceSum / ReduceMax (oneDNN reduction), and the memory-bound ops oneDNN has no primitive
// for as plain OpenMP loops: Erf, Sin, Cos, Where, Expand, Tile, Rotary. All on plain f32 (the
// activations of attention blocks are rows of tokens, not blocked channels); bf16 plans reorder
// into f32 here, and the reorders after them convert back.
#include "engine/cpu_plan.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>

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

// Element strides of `s` broadcast to `rank` dims (0 along broadcast axes).
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

// Fused scaled-dot-product attention: per batch item, blocks of query rows whose scores
// (rows x Tk floats) fit in 256 KiB: S = Q_blk Kt * scale (oneDNN matmul, output scale), + bias,
// row softmax in place (oneDNN softmax), O_blk = S V (oneDNN matmul). The full Tq x Tk matrix is
// never stored. Work items (batch item, row block) run in parallel, one per thread.
Status planAttention(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const Shape& qs = g.values[n.inputs[0]].shape;
    const size_t r = qs.size();
    const int64_t Tq = qs[r - 2], D = qs[r - 1];
    const int64_t Tk = g.values[n.inputs[1]].shape[r - 1];
    const int64_t Dv = g.values[n.inputs[2]].shape[r - 1];
    const int64_t batches = numel(qs) / (Tq * D);
    const Shape& ys = g.values[n.outputs[0]].shape;
    const bool has_bias = n.inputs.size() > 3 && n.inputs[3] >= 0;
    std::vector<MemRef> refs;
    for (size_t i = 0; i < (has_bias ? 4u : 3u); ++i) {
        VOXSEG_ASSIGN_OR_RETURN(MemRef m, plan.ensurePlainF32(n.inputs[i]));
        refs.push_back(m);
    }
    MemRef dst = plan.newBuffer(plainDesc(ys, dt::f32));
    refs.push_back(dst);
    // Bias offsets: per batch item a base, then row and column strides (0 where broadcast).
    Shape scores = qs;
    scores[r - 1] = Tk;
    std::vector<int64_t> bias_base(static_cast<size_t>(batches), 0);
    int64_t bias_row = 0, bias_col = 0;
    if (has_bias) {
        const std::vector<int64_t> st = broadcastStrides(g.values[n.inputs[3]].shape, scores);
        bias_row = st[r - 2];
        bias_col = st[r - 1];
        for (int64_t b = 0; b < batches; ++b) {
            int64_t rem = b, off = 0;
            for (size_t d = r - 2; d-- > 0;) {
                off += (rem % scores[d]) * st[d];
                rem /= scores[d];
            }
            bias_base[b] = off;
        }
    }
    const int64_t rows = std::clamp<int64_t>((int64_t{256} << 10) / (4 * Tk), 1, Tq);
    struct Gemms {
        int64_t rows = 0;
        dnnl::memory::desc q_md, k_md, s_md, v_md, o_md;
        dnnl::matmul qk, pv;
        dnnl::softmax_forward softmax;
    };
    auto make = [&](int64_t m) {
        Gemms gm;
        gm.rows = m;
        gm.q_md = plainDesc({m, D}, dt::f32);
        gm.k_md = plainDesc({D, Tk}, dt::f32);
        gm.s_md = plainDesc({m, Tk}, dt::f32);
        gm.v_md = plainDesc({Tk, Dv}, dt::f32);
        gm.o_md = plainDesc({m, Dv}, dt::f32);
        dnnl::primitive_attr scaled;
        scaled.set_output_scales(0, {n.attention_scale});
        gm.qk = dnnl::matmul(dnnl::matmul::primitive_desc(
            dnnl::matmul::desc(gm.q_md, gm.k_md, gm.s_md), scaled, plan.engine()));
        gm.pv = dnnl::matmul(dnnl::matmul::primitive_desc(
            dnnl::matmul::desc(gm.s_md, gm.v_md, gm.o_md), plan.engine()));
        gm.softmax = dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(
            dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, gm.s_md, 1),
            plan.engine()));
        return gm;
    };
    // (batch item, row block) pairs spread over the threads when there are enough of them
    // (Swin: ~10^3 windows x heads of 343 tokens; Primus: 6 heads x 47 blocks), each thread
    // running its small matmuls and softmax on its own scores block; oneDNN splitting each
    // 37x1728 matmul over the threads spent more time synchronising than multiplying. Those
    // matmuls go through dnnl::sgemm, which picks its thread count per call (oneDNN's matmul
    // primitive fixes its work split at creation and, run inside a parallel region, dropped
    // part of the rows: the parity test caught it); the softmax is created for one thread.
    // Too few items: oneDNN's matmul primitives with their threads, one item at a time.
    const int64_t blocks = (Tq + rows - 1) / rows;
    const int nthr = omp_get_max_threads();
    const bool spread = nthr > 1 && batches * blocks >= 2 * nthr;
    std::vector<Gemms> gemms;
    try {
        if (spread) omp_set_num_threads(1);
        gemms.push_back(make(rows));
        if (Tq % rows) gemms.push_back(make(Tq % rows));
        if (spread) omp_set_num_threads(nthr);
    } catch (const dnnl::error& e) {
        if (spread) omp_set_num_threads(nthr);
        return nodeError(plan, std::string("oneDNN matmul for attention: ") + e.what());
    }
    const dnnl::engine engine = plan.engine();
    const float n_scale = n.attention_scale;
    auto scratch = std::make_shared<std::vector<float>>();
    Kernel k = [=](const std::vector<dnnl::memory>& m) mutable {
        float* q = static_cast<float*>(m[0].get_data_handle());
        float* kt = static_cast<float*>(m[1].get_data_handle());
        float* v = static_cast<float*>(m[2].get_data_handle());
        const float* bias = has_bias ? static_cast<const float*>(m[3].get_data_handle()) : nullptr;
        float* out = static_cast<float*>(m[has_bias ? 4 : 3].get_data_handle());
        const int64_t items = batches * blocks;
        const size_t per_thread = static_cast<size_t>(rows * Tk);
        if (scratch->size() < per_thread * (spread ? nthr : 1))
            scratch->resize(per_thread * (spread ? nthr : 1));
#pragma omp parallel num_threads(nthr) if (spread)
        {
            dnnl::stream stream(engine);
            float* s = scratch->data() + (spread ? omp_get_thread_num() : 0) * per_thread;
#pragma omp for schedule(dynamic)
            for (int64_t it = 0; it < items; ++it) {
                const int64_t b = it / blocks, i0 = (it % blocks) * rows;
                const Gemms& gm = Tq - i0 >= rows ? gemms[0] : gemms[1];
                const int64_t mrows = gm.rows;
                dnnl::memory km(gemms[0].k_md, engine, kt + b * D * Tk);
                dnnl::memory vm(gemms[0].v_md, engine, v + b * Tk * Dv);
                dnnl::memory qm(gm.q_md, engine, q + (b * Tq + i0) * D);
                dnnl::memory sm(gm.s_md, engine, s);
                dnnl::memory om(gm.o_md, engine, out + (b * Tq + i0) * Dv);
                if (spread) {  // oneDNN's sgemm picks its threads per call: one, here
                    dnnl::sgemm('N', 'N', mrows, Tk, D, n_scale, q + (b * Tq + i0) * D, D,
                                kt + b * D * Tk, Tk, 0.0f, s, Tk);
                } else {
                    gm.qk.execute(stream,
                                  {{DNNL_ARG_SRC, qm}, {DNNL_ARG_WEIGHTS, km}, {DNNL_ARG_DST, sm}});
                    stream.wait();
                }
                if (bias) {
#pragma omp parallel for schedule(static) if (!spread)
                    for (int64_t i = 0; i < mrows; ++i) {
                        float* row = s + i * Tk;
                        const float* br = bias + bias_base[b] + (i0 + i) * bias_row;
                        for (int64_t j = 0; j < Tk; ++j) row[j] += br[j * bias_col];
                    }
                }
                gm.softmax.execute(stream, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_DST, sm}});
                if (spread) {
                    stream.wait();
                    dnnl::sgemm('N', 'N', mrows, Dv, Tk, 1.0f, s, Tk, v + b * Tk * Dv, Dv, 0.0f,
                                out + (b * Tq + i0) * Dv, Dv);
                } else {
                    gm.pv.execute(stream,
                                  {{DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, vm}, {DNNL_ARG_DST, om}});
                }
                stream.wait();
            }
        }
    };
    plan.addKernel("attention blocked " + std::to_string(rows) + "x" + std::to_string(Tk) +
                       " rows, oneDNN matmul" + (spread ? ", blocks per thread" : ""),
                   std::move(k), refs);
    plan.define(n.outputs[0], dst);
    return planUnfusedEpilogue(plan, dst);
}

// Rotary embedding of interleaved pairs in one pass (in place when the input dies here):
// y[2i] = x[2i] cos[2i] - x[2i+1] sin[2i], y[2i+1] = x[2i+1] cos[2i+1] + x[2i] sin[2i+1], the
// tables indexed by token (row modulo T).
Status planRotary(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const Shape& xs = g.values[n.inputs[0]].shape;
    const int64_t d = xs.back(), tokens = xs[xs.size() - 2], rows = numel(xs) / d;
    const auto md = plainDesc(xs, dt::f32), table_md = plainDesc({tokens, d}, dt::f32);
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensurePlainF32(n.inputs[0]));
    VOXSEG_ASSIGN_OR_RETURN(dnnl::memory cs, plan.constantMemory(n.inputs[1], table_md));
    VOXSEG_ASSIGN_OR_RETURN(dnnl::memory sn, plan.constantMemory(n.inputs[2], table_md));
    std::optional<MemRef> dst = plan.tryInPlace(n.inputs[0], md);
    if (!dst) dst = plan.newBuffer(md);
    Kernel k = [=](const std::vector<dnnl::memory>& m) {
        const float* x = static_cast<const float*>(m[0].get_data_handle());
        const float* c = static_cast<const float*>(m[1].get_data_handle());
        const float* s = static_cast<const float*>(m[2].get_data_handle());
        float* y = static_cast<float*>(m[3].get_data_handle());
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            const float* xr = x + r * d;
            const float* cr = c + (r % tokens) * d;
            const float* sr = s + (r % tokens) * d;
            float* yr = y + r * d;
#pragma omp simd
            for (int64_t i = 0; i < d; i += 2) {
                const float x0 = xr[i], x1 = xr[i + 1];
                yr[i] = x0 * cr[i] - x1 * sr[i];
                yr[i + 1] = x1 * cr[i + 1] + x0 * sr[i + 1];
            }
        }
    };
    plan.addKernel("rotary plain loop", std::move(k),
                   {src, MemRef{-1, table_md, cs}, MemRef{-1, table_md, sn}, *dst});
    plan.define(n.outputs[0], *dst);
    return planUnfusedEpilogue(plan, *dst);
}

}  // namespace

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
            return planAttention(plan);
        case OpKind::kRotary:
            return planRotary(plan);
        default:
            return nodeError(plan, "not a transformer op");
    }
}

}  // namespace voxseg::engine::cpu
