// Fused attention, rows form (cpu_attention.h): per block of query rows S = Q_blk K^T * scale
// (oneDNN matmul, output scale), + biases, P = exp(S - row max) with the rows' 1/sum
// (cpu_attention_softmax.h), O_blk = P V, each row of O_blk times its 1/sum. K^T and V are packed
// once per work item straight into the matmuls' own weights layouts (bf16 on AMX needs a blocked,
// pair-interleaved one); bf16 plans convert Q, K and V while packing and the softmax writes a
// bf16 P from the f32 scores.
#include "engine/cpu/attention.h"
#include "engine/cpu/attention_softmax.h"

#include <omp.h>

#include <algorithm>
#include <optional>

namespace voxseg::engine::cpu::attention {
namespace {

// dst row i = src row i * scale[i] (in place allowed).
void scaleRows(const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows,
               int64_t cols, const float* scale) {
    for (int64_t i = 0; i < rows; ++i) {
        const float* x = src + i * src_ld;
        float* y = dst + i * dst_ld;
        const float f = scale[i];
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) y[j] = x[j] * f;
    }
}

// The oneDNN primitives of one query block of `m` rows, all on dense matrices (oneDNN 2.6's
// brgemm matmul takes no row padding: strided operands fell back to its slower gemm:jit, 0.68
// instead of 0.56 s per Primus-S patch; K as format ba made it transpose K per block), K^T and V
// in the weights layouts the matmuls chose. The matmuls' scratchpads are the caller's (user
// mode): threads running the same primitives at once each pass their own. `weights`: the first
// block's K^T and V layouts, for the tail block. bf16: Q and P bf16 rows, S and O f32.
struct Gemms {
    int64_t rows = 0;
    dnnl::memory::desc q_md, k_md, s_md, p_md, v_md, o_md;
    Products prod;
};

Gemms makeGemms(const dnnl::engine& engine, const AttentionShape& a, int64_t m, float scale,
                bool bf16, const Gemms* weights) {
    Gemms gm;
    gm.rows = m;
    const dt in = bf16 ? dt::bf16 : dt::f32;
    gm.q_md = plainDesc({m, a.D}, in);
    gm.s_md = plainDesc({m, a.Tk}, dt::f32);
    gm.p_md = plainDesc({m, a.Tk}, in);
    gm.o_md = plainDesc({m, a.Dv}, dt::f32);
    const auto any = [&](dnnl::memory::dims d) { return dnnl::memory::desc(d, in, tag::any); };
    gm.prod =
        makeProducts(engine, gm.q_md, weights ? weights->k_md : any({a.D, a.Tk}), gm.s_md, gm.p_md,
                     weights ? weights->v_md : any({a.Tk, a.Dv}), gm.o_md, scale, bf16, "rows");
    gm.k_md = gm.prod.s_weights;
    gm.v_md = gm.prod.o_weights;
    return gm;
}

// Plain K^T [D, Tk] and V [Tk, Dv] into the matmuls' weights layouts (reorders made once,
// run per work item by one thread); none where the matmul takes the plain layout itself.
struct WeightPacks {
    std::optional<dnnl::reorder> k, v;
    dnnl::memory::desc k_plain, v_plain;
};

WeightPacks makeWeightPacks(const dnnl::engine& engine, const AttentionShape& a, const Gemms& gm) {
    WeightPacks w;
    const dt type = gm.q_md.data_type();
    w.k_plain = plainDesc({a.D, a.Tk}, type);
    w.v_plain = plainDesc({a.Tk, a.Dv}, type);
    if (gm.k_md != w.k_plain)
        w.k = dnnl::reorder(dnnl::reorder::primitive_desc(engine, w.k_plain, engine, gm.k_md));
    if (gm.v_md != w.v_plain)
        w.v = dnnl::reorder(dnnl::reorder::primitive_desc(engine, w.v_plain, engine, gm.v_md));
    return w;
}

// Everything the rows kernel needs, fixed at plan time.
struct RowsRun : Blocking {
    std::vector<Gemms> gemms;  // full blocks, then the tail block if any
    WeightPacks packs;
};

// Per thread: the matmuls' scratchpad, S, P (bf16), the rows' 1/sum, the dense Q block and
// output block, dense K^T and V, and K^T and V in the weights layouts.
enum Part { kPad, kS, kP, kInv, kQ, kO, kK, kV, kKw, kVw };

Scratch rowsScratch(const RowsRun& r) {
    const AttentionShape& a = r.a;
    size_t pad = 0;
    for (const Gemms& gm : r.gemms) pad = std::max(pad, gm.prod.pad_bytes);
    const size_t e = r.bf16 ? 2 : 4;
    const auto n = [](int64_t v) { return static_cast<size_t>(v); };
    return Scratch({pad, n(r.block * a.Tk) * 4, r.bf16 ? n(r.block * a.Tk) * 2 : 0, n(r.block) * 4,
                    n(r.block * a.D) * e, n(r.block * a.Dv) * 4, n(a.Tk * a.D) * e,
                    n(a.Tk * a.Dv) * e, r.packs.k ? r.gemms[0].k_md.get_size() : 0,
                    r.packs.v ? r.gemms[0].v_md.get_size() : 0});
}

// (work item, row block) pairs. Strided heads (MultiHeadAttention) are packed into dense
// matrices by each thread: K and V when its item changes, the query block and its output per
// block; bf16 plans convert while packing and always pack.
Kernel rowsKernel(const dnnl::engine& engine, RowsRun r) {
    const Scratch L = rowsScratch(r);
    return [=](const std::vector<dnnl::memory>& m) {
        const AttentionShape& a = r.a;
        const Operands o = operands(m, r.biases.size(), r.out_ref);
        const int64_t Tk = a.Tk;
        const bool spread = r.threads.spread;
        const bool pack_q = a.q.ld != a.D, pack_k = !a.k_transposed, pack_v = a.v.ld != a.Dv,
                   pack_o = a.out.ld != a.Dv;
        float* base = L.base(spread ? r.threads.nthr : 1);
#pragma omp parallel num_threads(r.threads.nthr) if (spread)
        {
            dnnl::stream stream(engine);
            float* t0 = base + (spread ? omp_get_thread_num() : 0) * L.stride();
            float *pad = t0 + L.offset(kPad), *s = t0 + L.offset(kS), *inv = t0 + L.offset(kInv),
                  *qd = t0 + L.offset(kQ), *od = t0 + L.offset(kO);
            float *kd = t0 + L.offset(kK), *vd = t0 + L.offset(kV);
            auto* p16 = reinterpret_cast<uint16_t*>(t0 + L.offset(kP));
            int64_t packed_item = -1;
            void* kw = kd;  // K^T and V as the matmuls read them
            void* vw = vd;
#pragma omp for schedule(dynamic, r.threads.chunk)
            for (int64_t it = 0; it < a.items * r.blocks; ++it) {
                const int64_t b = it / r.blocks, i0 = (it % r.blocks) * r.block;
                const Gemms& gm = a.Tq - i0 >= r.block ? r.gemms[0] : r.gemms[1];
                const int64_t mrows = gm.rows;
                const float* qb = o.q + a.q.offset(b) + i0 * a.q.ld;
                const float* kb = o.k + a.k.offset(b);
                const float* vb = o.v + a.v.offset(b);
                float* ob = o.out + a.out.offset(b) + i0 * a.out.ld;
                if (b != packed_item) {
                    // plain K^T [D, Tk] and V [Tk, Dv], then (packs) the weights layouts
                    void* k_plain = const_cast<float*>(kb);
                    void* v_plain = const_cast<float*>(vb);
                    if (r.bf16) {
                        if (a.k_transposed)
                            copyRowsBf16(kb, a.k.ld, reinterpret_cast<uint16_t*>(kd), a.D, Tk);
                        else
                            transposeTo(kb, a.k.ld, Tk, a.D, kd, true);
                        copyRowsBf16(vb, a.v.ld, reinterpret_cast<uint16_t*>(vd), Tk, a.Dv);
                        k_plain = kd, v_plain = vd;
                    } else {
                        if (pack_k) transposeTo(kb, a.k.ld, Tk, a.D, kd, false), k_plain = kd;
                        if (pack_v) copyRows(vb, a.v.ld, vd, a.Dv, Tk, a.Dv), v_plain = vd;
                    }
                    kw = r.packs.k ? static_cast<void*>(t0 + L.offset(kKw)) : k_plain;
                    vw = r.packs.v ? static_cast<void*>(t0 + L.offset(kVw)) : v_plain;
                    if (r.packs.k) {
                        dnnl::memory from(r.packs.k_plain, engine, k_plain),
                            to(gm.k_md, engine, kw);
                        r.packs.k->execute(stream, from, to);
                    }
                    if (r.packs.v) {
                        dnnl::memory from(r.packs.v_plain, engine, v_plain),
                            to(gm.v_md, engine, vw);
                        r.packs.v->execute(stream, from, to);
                    }
                    packed_item = b;
                }
                void* qsrc = const_cast<float*>(qb);
                if (r.bf16) {
                    copyRowsBf16(qb, a.q.ld, reinterpret_cast<uint16_t*>(qd), mrows, a.D);
                    qsrc = qd;
                } else if (pack_q) {
                    copyRows(qb, a.q.ld, qd, a.D, mrows, a.D);
                    qsrc = qd;
                }
                runMatmul(gm.prod.qk, stream, engine, gm.q_md, qsrc, gm.k_md, kw, gm.s_md, s,
                          gm.prod.qk_pad, pad);
                for (size_t t = 0; t < r.biases.size(); ++t) {
                    const BiasView& bv = r.biases[t];
#pragma omp parallel for schedule(static) if (!spread)
                    for (int64_t i = 0; i < mrows; ++i) {
                        float* row = s + i * Tk;
                        const float* br = o.bias[t] + bv.base[b] + (i0 + i) * bv.row;
                        for (int64_t j = 0; j < Tk; ++j) row[j] += br[j * bv.col];
                    }
                }
                void* p = r.bf16 ? static_cast<void*>(p16) : s;  // f32: P over S
#pragma omp parallel for schedule(static) if (!spread)
                for (int64_t i = 0; i < mrows; ++i)
                    softmaxRows(s + i * Tk, 1, Tk,
                                static_cast<char*>(p) + i * Tk * (r.bf16 ? 2 : 4), r.bf16, inv + i);
                runMatmul(gm.prod.pv, stream, engine, r.bf16 ? gm.p_md : gm.s_md, p, gm.v_md, vw,
                          gm.o_md, pack_o ? od : ob, gm.prod.pv_pad, pad);
                scaleRows(pack_o ? od : ob, a.Dv, ob, a.out.ld, mrows, a.Dv, inv);
            }
        }
    };
}

}  // namespace

Status planRows(Plan& plan, Inputs in) {
    RowsRun r{blocking(in, std::clamp<int64_t>(scoresBlockBytes() / (4 * in.a.Tk), 1, in.a.Tq))};
    const AttentionShape& a = r.a;
    VOXSEG_RETURN_IF_ERROR(makePrimitives(plan, r.threads, [&] {
        r.gemms.push_back(makeGemms(plan.engine(), a, r.block, in.scale, r.bf16, nullptr));
        if (a.Tq % r.block)
            r.gemms.push_back(
                makeGemms(plan.engine(), a, a.Tq % r.block, in.scale, r.bf16, &r.gemms[0]));
        r.packs = makeWeightPacks(plan.engine(), a, r.gemms[0]);
    }));
    const std::string what = "blocked " + std::to_string(r.block) + "x" + std::to_string(a.Tk) +
                             " rows, oneDNN matmul " + r.gemms[0].prod.impl +
                             (r.threads.spread ? ", blocks per thread" : "");
    return addAttentionStep(plan, what, rowsKernel(plan.engine(), std::move(r)), in);
}

}  // namespace voxseg::engine::cpu::attention
