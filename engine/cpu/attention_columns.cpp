// Fused attention, columns form (cpu_attention.h): per block of m query columns (a multiple of
// 16 where Tq allows) S^T = K Q_blk^T * scale [Tk, m] (oneDNN matmul, output scale), + biases,
// P^T = exp(S^T - column max) with the columns' 1/sum (cpu_attention_softmax.h softmaxColumns),
// O^T = V^T P^T [Dv, m], whose column i times its 1/sum is output row i. All four operands are
// plain: K [Tk, D] and V^T [Dv, Tk] packed once per work item (dense, bf16 in bf16 plans), Q^T
// per block. Measured against the rows form on Primus-S (66-wide heads) on the 2-core EPYC,
// attention per 96^3 patch: fp32 0.363-0.435 -> 0.311-0.356 s, bf16 0.219-0.320 -> 0.212-0.257 s
// (docs/perf-cpu.md, session 20).
#include "engine/cpu/attention.h"
#include "engine/cpu/attention_softmax.h"

#include <omp.h>

#include <algorithm>

namespace voxseg::engine::cpu::attention {
namespace {

// The primitives of one block of m query columns.
struct Gemms {
    int64_t cols = 0;
    dnnl::memory::desc k_md, qt_md, st_md, vt_md, pt_md, ot_md;
    Products prod;
};

Gemms makeGemms(const dnnl::engine& engine, const AttentionShape& a, int64_t m, float scale,
                bool bf16) {
    Gemms gm;
    gm.cols = m;
    const dt in = bf16 ? dt::bf16 : dt::f32;
    gm.k_md = plainDesc({a.Tk, a.D}, in);
    gm.qt_md = plainDesc({a.D, m}, in);
    gm.st_md = plainDesc({a.Tk, m}, dt::f32);
    gm.vt_md = plainDesc({a.Dv, a.Tk}, in);
    gm.pt_md = plainDesc({a.Tk, m}, in);
    gm.ot_md = plainDesc({a.Dv, m}, dt::f32);
    gm.prod = makeProducts(engine, gm.k_md, gm.qt_md, gm.st_md, gm.vt_md, gm.pt_md, gm.ot_md, scale,
                           bf16, "columns");
    return gm;
}

struct ColumnsRun : Blocking {
    std::vector<Gemms> gemms;  // full blocks, then the tail block if any
};

// Per thread: the matmuls' scratchpad, S^T, P^T (bf16), the columns' 1/sum, Q^T, O^T, K, V^T.
enum Part { kPad, kS, kP, kInv, kQt, kOt, kK, kVt };

Scratch columnsScratch(const ColumnsRun& r) {
    const AttentionShape& a = r.a;
    size_t pad = 0;
    for (const Gemms& gm : r.gemms) pad = std::max(pad, gm.prod.pad_bytes);
    const size_t e = r.bf16 ? 2 : 4;
    const auto n = [](int64_t v) { return static_cast<size_t>(v); };
    return Scratch({pad, n(a.Tk * r.block) * 4, r.bf16 ? n(a.Tk * r.block) * 2 : 0, n(r.block) * 4,
                    n(a.D * r.block) * e, n(a.Dv * r.block) * 4, n(a.Tk * a.D) * e,
                    n(a.Dv * a.Tk) * e});
}

// S^T[j, i] += bias[query i0 + i, key j], over the columns [c0, c1) of the block.
void addBias(float* st, int64_t Tk, int64_t m, const float* bias, const BiasView& bv, int64_t b,
             int64_t i0, int64_t c0, int64_t c1) {
    const float* bb = bias + bv.base[b] + i0 * bv.row;
    for (int64_t j = 0; j < Tk; ++j) {
        float* row = st + j * m;
        const float* br = bb + j * bv.col;
        for (int64_t i = c0; i < c1; ++i) row[i] += br[i * bv.row];
    }
}

// Output row i of the block = column i of O^T [Dv, m] times its 1/sum.
void storeColumns(const float* ot, int64_t Dv, int64_t m, const float* inv, float* out,
                  int64_t ld) {
    for (int64_t i = 0; i < m; ++i) {
        float* row = out + i * ld;
        const float f = inv[i];
        for (int64_t d = 0; d < Dv; ++d) row[d] = ot[d * m + i] * f;
    }
}

Kernel columnsKernel(const dnnl::engine& engine, ColumnsRun r) {
    const Scratch L = columnsScratch(r);
    return [=](const std::vector<dnnl::memory>& mem) {
        const AttentionShape& a = r.a;
        const Operands o = operands(mem, r.biases.size(), r.out_ref);
        const int64_t Tk = a.Tk;
        const bool spread = r.threads.spread;
        const int inner = spread ? 1 : r.threads.nthr;  // threads per block's own loops
        float* base = L.base(spread ? r.threads.nthr : 1);
#pragma omp parallel num_threads(r.threads.nthr) if (spread)
        {
            dnnl::stream stream(engine);
            float* t0 = base + (spread ? omp_get_thread_num() : 0) * L.stride();
            float *pad = t0 + L.offset(kPad), *st = t0 + L.offset(kS), *inv = t0 + L.offset(kInv),
                  *ot = t0 + L.offset(kOt);
            void *qt = t0 + L.offset(kQt), *kd = t0 + L.offset(kK), *vt = t0 + L.offset(kVt);
            void* pt = r.bf16 ? static_cast<void*>(t0 + L.offset(kP)) : st;  // f32: P^T over S^T
            const size_t e = r.bf16 ? 2 : 4;
            int64_t packed_item = -1;
#pragma omp for schedule(dynamic, r.threads.chunk)
            for (int64_t it = 0; it < a.items * r.blocks; ++it) {
                const int64_t b = it / r.blocks, i0 = (it % r.blocks) * r.block;
                const Gemms& gm = a.Tq - i0 >= r.block ? r.gemms[0] : r.gemms[1];
                const int64_t m = gm.cols;
                if (b != packed_item) {
                    const float* kb = o.k + a.k.offset(b);
                    if (a.k_transposed)
                        transposeTo(kb, a.k.ld, a.D, Tk, kd, r.bf16);
                    else if (r.bf16)
                        copyRowsBf16(kb, a.k.ld, static_cast<uint16_t*>(kd), Tk, a.D);
                    else
                        copyRows(kb, a.k.ld, static_cast<float*>(kd), a.D, Tk, a.D);
                    transposeTo(o.v + a.v.offset(b), a.v.ld, Tk, a.Dv, vt, r.bf16);
                    packed_item = b;
                }
                transposeTo(o.q + a.q.offset(b) + i0 * a.q.ld, a.q.ld, m, a.D, qt, r.bf16);
                runMatmul(gm.prod.qk, stream, engine, gm.k_md, kd, gm.qt_md, qt, gm.st_md, st,
                          gm.prod.qk_pad, pad);
                // the block's own loops: all columns at once (the softmax streams S^T once per
                // pass for up to 64 of them), or 16-column chunks over the threads when the
                // blocks are not spread
                const int64_t width = inner > 1 ? 16 : m, chunks = (m + width - 1) / width;
#pragma omp parallel for schedule(static) num_threads(inner) if (inner > 1)
                for (int64_t c = 0; c < chunks; ++c) {
                    const int64_t c0 = c * width, c1 = std::min(m, c0 + width);
                    for (size_t t = 0; t < r.biases.size(); ++t)
                        addBias(st, Tk, m, o.bias[t], r.biases[t], b, i0, c0, c1);
                    softmaxColumns(st + c0, Tk, c1 - c0, m, static_cast<char*>(pt) + c0 * e, r.bf16,
                                   inv + c0);
                }
                runMatmul(gm.prod.pv, stream, engine, gm.vt_md, vt, gm.pt_md, pt, gm.ot_md, ot,
                          gm.prod.pv_pad, pad);
                storeColumns(ot, a.Dv, m, inv, o.out + a.out.offset(b) + i0 * a.out.ld, a.out.ld);
            }
        }
    };
}

}  // namespace

Status planColumns(Plan& plan, Inputs in) {
    // S^T [Tk, m] within the scores block, m a multiple of 16 (whole vectors of the softmax and
    // of the products' outputs), at least 16
    const int64_t fit = scoresBlockBytes() / (4 * in.a.Tk) / 16 * 16;
    ColumnsRun r{blocking(in, std::min(in.a.Tq, std::max<int64_t>(fit, 16)))};
    const AttentionShape& a = r.a;
    VOXSEG_RETURN_IF_ERROR(makePrimitives(plan, r.threads, [&] {
        r.gemms.push_back(makeGemms(plan.engine(), a, r.block, in.scale, r.bf16));
        if (a.Tq % r.block)
            r.gemms.push_back(makeGemms(plan.engine(), a, a.Tq % r.block, in.scale, r.bf16));
    }));
    const std::string what = "blocked " + std::to_string(a.Tk) + "x" + std::to_string(r.block) +
                             " columns, oneDNN matmul " + r.gemms[0].prod.impl +
                             (r.threads.spread ? ", blocks per thread" : "");
    return addAttentionStep(plan, what, columnsKernel(plan.engine(), std::move(r)), in);
}

}  // namespace voxseg::engine::cpu::attention
