// Fused scaled-dot-product attention on the CPU backend: Attention on [..., T, D] operands
// (K given transposed) and MultiHeadAttention on packed [B, T, H*D] ones, whose heads are
// strided matrices (rows H*D floats apart) read and written in place: no head-split copies.
// Per work item (batch item x head) blocks of query rows whose scores (rows x Tk floats) fit in
// a quarter of the L2 cache: S = Q_blk K^T * scale (oneDNN matmul, output scale), + biases,
// P = exp(S - row max) with the rows' 1/sum (cpu_softmax_rows.h), O_blk = P V (oneDNN matmul),
// each row of O_blk times its 1/sum. The full Tq x Tk matrix is never stored. bf16 plans multiply
// in bf16 with f32 accumulation (AMX where the CPU has it): Q, K and V are converted while they are
// packed, K^T and V once per work item straight into the matmuls' own weights layouts, the softmax
// writes the bf16 P from the f32 scores, and the scores, biases and output stay f32.
#include "engine/cpu_plan.h"
#include "engine/cpu_softmax_rows.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace voxseg::engine::cpu {
namespace {

// Where an operand's matrix for work item b (batch item b / heads, head b % heads) starts, and
// the distance between its rows, in floats.
struct HeadMatrix {
    int64_t heads = 1, batch_stride = 0, head_stride = 0, ld = 0;
    int64_t offset(int64_t b) const {
        return (b / heads) * batch_stride + (b % heads) * head_stride;
    }
};

struct AttentionShape {
    int64_t items = 0, Tq = 0, Tk = 0, D = 0, Dv = 0;
    HeadMatrix q, k, v, out;
    bool k_transposed = true;  // Attention: K^T [D, Tk] rows; MultiHeadAttention: K [Tk, D]
};

AttentionShape attentionShape(const Graph& g, const Node& n) {
    AttentionShape a;
    const Shape& qs = g.values[n.inputs[0]].shape;
    const Shape& ks = g.values[n.inputs[1]].shape;
    const Shape& vs = g.values[n.inputs[2]].shape;
    const size_t r = qs.size();
    if (n.op == OpKind::kMultiHeadAttention) {
        const int64_t h = n.attention_heads;
        a.Tq = qs[1], a.Tk = ks[1], a.D = qs[2] / h, a.Dv = vs[2] / h, a.items = qs[0] * h;
        a.q = {h, a.Tq * h * a.D, a.D, h * a.D};
        a.k = {h, a.Tk * h * a.D, a.D, h * a.D};
        a.v = {h, a.Tk * h * a.Dv, a.Dv, h * a.Dv};
        a.out = {h, a.Tq * h * a.Dv, a.Dv, h * a.Dv};
        a.k_transposed = false;
        return a;
    }
    a.Tq = qs[r - 2], a.D = qs[r - 1], a.Tk = ks[r - 1], a.Dv = vs[r - 1];
    a.items = numel(qs) / (a.Tq * a.D);
    a.q = {1, a.Tq * a.D, 0, a.D};
    a.k = {1, a.D * a.Tk, 0, a.Tk};
    a.v = {1, a.Tk * a.Dv, 0, a.Dv};
    a.out = {1, a.Tq * a.Dv, 0, a.Dv};
    return a;
}

// A bias's offsets: per work item a base, then row and column strides (0 where broadcast), over
// the scores [..., Tq, Tk] (MultiHeadAttention: [B, H, Tq, Tk]); a batch axis of the bias with
// fewer items than the scores' tiles (Swin's window mask: item b reads b % nW).
struct BiasView {
    std::vector<int64_t> base;
    int64_t row = 0, col = 0;
};

BiasView biasView(const Graph& g, const Node& n, size_t input, const AttentionShape& a) {
    BiasView bv;
    Shape scores = g.values[n.inputs[0]].shape;
    if (n.op == OpKind::kMultiHeadAttention)
        scores = {scores[0], n.attention_heads, a.Tq, a.Tk};
    else
        scores.back() = a.Tk;
    const size_t r = scores.size();
    const Shape& bs = g.values[n.inputs[input]].shape;
    const std::vector<int64_t> st = broadcastStrides(bs, scores);
    bv.row = st[r - 2];
    bv.col = st[r - 1];
    bv.base.assign(static_cast<size_t>(a.items), 0);
    for (int64_t b = 0; b < a.items; ++b) {
        int64_t rem = b, off = 0;
        for (size_t d = r - 2; d-- > 0;) {
            const size_t back = r - 1 - d;
            const int64_t items = back < bs.size() ? bs[bs.size() - 1 - back] : 1;
            off += (rem % scores[d] % items) * st[d];
            rem /= scores[d];
        }
        bv.base[b] = off;
    }
    return bv;
}

// `rows` rows of `cols` floats from rows `ld` apart into dense ones (or back: dense -> strided).
void copyRows(const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows,
              int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) std::copy_n(src + i * src_ld, cols, dst + i * dst_ld);
}

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

// K^T [cols, rows] (dense) from the `rows` rows of K, `ld` floats apart.
void transposeRows(const float* src, int64_t ld, float* dst, int64_t rows, int64_t cols) {
    for (int64_t j0 = 0; j0 < rows; j0 += 16)
        for (int64_t d = 0; d < cols; ++d)
            for (int64_t j = j0; j < std::min(rows, j0 + 16); ++j)
                dst[d * rows + j] = src[j * ld + d];
}

// copyRows and transposeRows converting to bf16.
void copyRowsBf16(const float* src, int64_t src_ld, uint16_t* dst, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        const float* s = src + i * src_ld;
        uint16_t* d = dst + i * cols;
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) d[j] = floatToBFloat16(s[j]);
    }
}

// K^T [cols, rows] bf16 from K's rows `ld` floats apart (k_rows) or from K^T [cols, rows] itself.
void packKtBf16(const float* src, int64_t ld, bool k_rows, uint16_t* dst, int64_t rows,
                int64_t cols) {
    if (!k_rows) return copyRowsBf16(src, ld, dst, cols, rows);
    for (int64_t j0 = 0; j0 < rows; j0 += 16)
        for (int64_t d = 0; d < cols; ++d)
            for (int64_t j = j0; j < std::min(rows, j0 + 16); ++j)
                dst[d * rows + j] = floatToBFloat16(src[j * ld + d]);
}

// The oneDNN primitives of one query block of `m` rows, all on dense matrices (oneDNN 2.6's
// brgemm matmul takes no row padding: strided operands fell back to its slower gemm:jit, 0.68
// instead of 0.56 s per Primus-S patch; K as format ba made it transpose K per block), K^T and V
// in the weights layouts the matmuls chose (packed once per work item, not per block: bf16 on AMX
// needs a blocked, pair-interleaved one). The matmuls' scratchpads are the caller's (user mode):
// threads running the same primitives at once each pass their own. `weights`: the first block's
// K^T and V layouts, for the tail block. bf16: Q and P bf16 rows, S and O f32.
struct Gemms {
    int64_t rows = 0;
    dnnl::memory::desc q_md, k_md, s_md, p_md, v_md, o_md;
    dnnl::matmul qk, pv;
    dnnl::memory::desc qk_pad, pv_pad;
    size_t pad_bytes = 0;  // the larger of the two
    std::string impl;      // what oneDNN runs, for describe()
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
    gm.k_md = weights ? weights->k_md : any({a.D, a.Tk});
    gm.v_md = weights ? weights->v_md : any({a.Tk, a.Dv});
    dnnl::primitive_attr user_pad;
    user_pad.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::primitive_attr scaled;  // (a copy of user_pad would share its handle)
    scaled.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    scaled.set_output_scales(0, {scale});
    const dnnl::matmul::primitive_desc qk(dnnl::matmul::desc(gm.q_md, gm.k_md, gm.s_md), scaled,
                                          engine);
    const dnnl::matmul::primitive_desc pv(dnnl::matmul::desc(gm.p_md, gm.v_md, gm.o_md), user_pad,
                                          engine);
    gm.k_md = qk.weights_desc();
    gm.v_md = pv.weights_desc();
    gm.qk = dnnl::matmul(qk);
    gm.pv = dnnl::matmul(pv);
    gm.impl = std::string(qk.impl_info_str()) + (bf16 ? " bf16" : "") + ", softmax rows " +
              softmaxRowsIsa() + (bf16 ? " f32->bf16" : "");
    gm.qk_pad = qk.scratchpad_desc();
    gm.pv_pad = pv.scratchpad_desc();
    gm.pad_bytes = std::max(gm.qk_pad.get_size(), gm.pv_pad.get_size());
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

// The scores block of one query block: a quarter of the core's L2 cache (sysconf), 256 KiB
// where it is not known. Primus-S at 1 thread on a 2 MiB L2 (512 KiB: 75 of 1728 rows): its
// attention took a median 10 % less time than with 256 KiB, in 7 of 8 interleaved rounds
// (docs/perf-cpu.md).
int64_t scoresBlockBytes() {
    static const int64_t bytes = [] {
        const long l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
        return l2 >= (int64_t{1} << 20) ? std::min<int64_t>(l2 / 4, int64_t{2} << 20)
                                        : int64_t{256} << 10;
    }();
    return bytes;
}

// Everything one attention kernel needs, fixed at plan time.
struct AttentionRun {
    AttentionShape a;
    std::vector<BiasView> biases;
    std::vector<Gemms> gemms;  // full blocks of `rows`, then the tail block if any
    WeightPacks packs;
    int64_t rows = 0, blocks = 0;
    int nthr = 1;
    bool spread = false, bf16 = false;
    size_t out_ref = 0;
};

// Per thread, in floats (64-byte aligned parts): the matmuls' scratchpad, S, P (bf16), the rows'
// 1/sum, the dense Q block and output block, dense K^T and V, and K^T and V in the weights
// layouts.
struct ScratchLayout {
    size_t pad = 0, s = 0, p = 0, inv = 0, q = 0, o = 0, k = 0, v = 0, kw = 0, vw = 0, total = 0;
};

ScratchLayout scratchLayout(const AttentionRun& r) {
    const AttentionShape& a = r.a;
    auto floats = [](size_t bytes) { return (bytes + 63) / 64 * 16; };
    size_t pad = 0;
    for (const Gemms& gm : r.gemms) pad = std::max(pad, gm.pad_bytes);
    const size_t e = r.bf16 ? 2 : 4;
    const auto n = [](int64_t v) { return static_cast<size_t>(v); };
    ScratchLayout l;
    size_t at = 0;
    for (auto [field, bytes] : {std::pair<size_t*, size_t>{&l.pad, pad},
                                {&l.s, n(r.rows * a.Tk) * 4},
                                {&l.p, r.bf16 ? n(r.rows * a.Tk) * 2 : 0},
                                {&l.inv, n(r.rows) * 4},
                                {&l.q, n(r.rows * a.D) * e},
                                {&l.o, n(r.rows * a.Dv) * 4},
                                {&l.k, n(a.Tk * a.D) * e},
                                {&l.v, n(a.Tk * a.Dv) * e},
                                {&l.kw, r.packs.k ? r.gemms[0].k_md.get_size() : 0},
                                {&l.vw, r.packs.v ? r.gemms[0].v_md.get_size() : 0}}) {
        *field = at;
        at += floats(bytes);
    }
    l.total = at;
    return l;
}

// (work item, row block) pairs, each thread on its own scores block and scratch (see
// planAttention). Strided heads (MultiHeadAttention) are packed into dense matrices by each
// thread: K and V when its item's head changes, the query block and its output per block; bf16
// plans convert while packing and always pack.
Kernel attentionKernel(const dnnl::engine& engine, AttentionRun r) {
    const ScratchLayout L = scratchLayout(r);
    auto scratch = std::make_shared<std::vector<float>>();
    return [=](const std::vector<dnnl::memory>& m) {
        const AttentionShape& a = r.a;
        const float* q = static_cast<const float*>(m[0].get_data_handle());
        const float* kk = static_cast<const float*>(m[1].get_data_handle());
        const float* v = static_cast<const float*>(m[2].get_data_handle());
        const float* bias[2] = {};
        for (size_t t = 0; t < r.biases.size(); ++t)
            bias[t] = static_cast<const float*>(m[3 + t].get_data_handle());
        float* out = static_cast<float*>(m[r.out_ref].get_data_handle());
        const int64_t Tk = a.Tk;
        const int workers = r.spread ? r.nthr : 1;
        const bool pack_q = a.q.ld != a.D, pack_k = !a.k_transposed, pack_v = a.v.ld != a.Dv,
                   pack_o = a.out.ld != a.Dv;
        if (scratch->size() < L.total * workers + 16) scratch->resize(L.total * workers + 16);
        float* base = scratch->data();
        base += (16 - reinterpret_cast<uintptr_t>(base) / 4 % 16) % 16;
#pragma omp parallel num_threads(r.nthr) if (r.spread)
        {
            dnnl::stream stream(engine);
            float* t0 = base + (r.spread ? omp_get_thread_num() : 0) * L.total;
            float *pad = t0 + L.pad, *s = t0 + L.s, *inv = t0 + L.inv, *qd = t0 + L.q,
                  *od = t0 + L.o;
            float *kd = t0 + L.k, *vd = t0 + L.v;
            auto* p16 = reinterpret_cast<uint16_t*>(t0 + L.p);
            int64_t packed_item = -1;
            void* kw = kd;  // K^T and V as the matmuls read them
            void* vw = vd;
#pragma omp for schedule(dynamic)
            for (int64_t it = 0; it < a.items * r.blocks; ++it) {
                const int64_t b = it / r.blocks, i0 = (it % r.blocks) * r.rows;
                const Gemms& gm = a.Tq - i0 >= r.rows ? r.gemms[0] : r.gemms[1];
                const int64_t mrows = gm.rows;
                const float* qb = q + a.q.offset(b) + i0 * a.q.ld;
                const float* kb = kk + a.k.offset(b);
                const float* vb = v + a.v.offset(b);
                float* ob = out + a.out.offset(b) + i0 * a.out.ld;
                if (b != packed_item) {
                    // plain K^T [D, Tk] and V [Tk, Dv], then (packs) the weights layouts
                    void* k_plain = const_cast<float*>(kb);
                    void* v_plain = const_cast<float*>(vb);
                    if (r.bf16) {
                        packKtBf16(kb, a.k.ld, !a.k_transposed, reinterpret_cast<uint16_t*>(kd), Tk,
                                   a.D);
                        copyRowsBf16(vb, a.v.ld, reinterpret_cast<uint16_t*>(vd), Tk, a.Dv);
                        k_plain = kd, v_plain = vd;
                    } else {
                        if (pack_k) transposeRows(kb, a.k.ld, kd, Tk, a.D), k_plain = kd;
                        if (pack_v) copyRows(vb, a.v.ld, vd, a.Dv, Tk, a.Dv), v_plain = vd;
                    }
                    kw = r.packs.k ? static_cast<void*>(t0 + L.kw) : k_plain;
                    vw = r.packs.v ? static_cast<void*>(t0 + L.vw) : v_plain;
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
                const dnnl::memory sm(gm.s_md, engine, s);
                gm.qk.execute(stream,
                              {{DNNL_ARG_SRC, dnnl::memory(gm.q_md, engine, qsrc)},
                               {DNNL_ARG_WEIGHTS, dnnl::memory(gm.k_md, engine, kw)},
                               {DNNL_ARG_DST, sm},
                               {DNNL_ARG_SCRATCHPAD, dnnl::memory(gm.qk_pad, engine, pad)}});
                stream.wait();
                for (size_t t = 0; t < r.biases.size(); ++t) {
                    const BiasView& bv = r.biases[t];
#pragma omp parallel for schedule(static) if (!r.spread)
                    for (int64_t i = 0; i < mrows; ++i) {
                        float* row = s + i * Tk;
                        const float* br = bias[t] + bv.base[b] + (i0 + i) * bv.row;
                        for (int64_t j = 0; j < Tk; ++j) row[j] += br[j * bv.col];
                    }
                }
                void* p = r.bf16 ? static_cast<void*>(p16) : s;  // f32: P over S
#pragma omp parallel for schedule(static) if (!r.spread)
                for (int64_t i = 0; i < mrows; ++i)
                    softmaxRows(s + i * Tk, 1, Tk,
                                static_cast<char*>(p) + i * Tk * (r.bf16 ? 2 : 4), r.bf16, inv + i);
                const dnnl::memory pm = r.bf16 ? dnnl::memory(gm.p_md, engine, p16) : sm;
                gm.pv.execute(stream,
                              {{DNNL_ARG_SRC, pm},
                               {DNNL_ARG_WEIGHTS, dnnl::memory(gm.v_md, engine, vw)},
                               {DNNL_ARG_DST, dnnl::memory(gm.o_md, engine, pack_o ? od : ob)},
                               {DNNL_ARG_SCRATCHPAD, dnnl::memory(gm.pv_pad, engine, pad)}});
                stream.wait();
                scaleRows(pack_o ? od : ob, a.Dv, ob, a.out.ld, mrows, a.Dv, inv);
            }
        }
    };
}

}  // namespace

Status planAttention(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    AttentionRun r;
    r.a = attentionShape(g, n);
    const AttentionShape& a = r.a;
    r.bf16 = plan.actType() == dt::bf16;
    // refs: Q, K, V, the biases present (Swin: its relative-position bias and window mask),
    // the output
    std::vector<MemRef> refs;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (n.inputs[i] < 0) continue;
        VOXSEG_ASSIGN_OR_RETURN(MemRef m, plan.ensurePlainF32(n.inputs[i]));
        refs.push_back(m);
        if (i >= 3) r.biases.push_back(biasView(g, n, i, a));
    }
    r.out_ref = refs.size();
    MemRef dst = plan.newBuffer(plainDesc(g.values[n.outputs[0]].shape, dt::f32));
    refs.push_back(dst);
    r.rows = std::clamp<int64_t>(scoresBlockBytes() / (4 * a.Tk), 1, a.Tq);
    // (work item, row block) pairs spread over the threads when there are enough of them
    // (Swin: ~10^3 windows x heads of 343 tokens; Primus: 6 heads x 24 blocks), each thread
    // running its small matmuls and softmax on its own scores block and scratchpads; oneDNN
    // splitting each 75x1728 matmul over the threads spent more time synchronising than
    // multiplying. The primitives are then created for one thread: oneDNN's matmul fixes its
    // work split at creation, and one made for two threads, run inside the parallel region, did
    // half of the rows (the parity test caught it). Too few items: the primitives with their
    // threads, one item at a time.
    r.blocks = (a.Tq + r.rows - 1) / r.rows;
    r.nthr = omp_get_max_threads();
    r.spread = r.nthr > 1 && a.items * r.blocks >= 2 * r.nthr;
    try {
        if (r.spread) omp_set_num_threads(1);
        r.gemms.push_back(makeGemms(plan.engine(), a, r.rows, n.attention_scale, r.bf16, nullptr));
        if (a.Tq % r.rows)
            r.gemms.push_back(
                makeGemms(plan.engine(), a, a.Tq % r.rows, n.attention_scale, r.bf16, &r.gemms[0]));
        r.packs = makeWeightPacks(plan.engine(), a, r.gemms[0]);
        if (r.spread) omp_set_num_threads(r.nthr);
    } catch (const dnnl::error& e) {
        if (r.spread) omp_set_num_threads(r.nthr);
        return nodeError(plan, std::string("oneDNN matmul for attention: ") + e.what());
    }
    const std::string what =
        std::string(n.op == OpKind::kMultiHeadAttention ? "attention heads in place "
                                                        : "attention ") +
        "blocked " + std::to_string(r.rows) + "x" + std::to_string(a.Tk) + " rows, oneDNN matmul " +
        r.gemms[0].impl + (r.spread ? ", blocks per thread" : "");
    plan.addKernel(what, attentionKernel(plan.engine(), std::move(r)), refs);
    plan.define(n.outputs[0], dst);
    return planUnfusedEpilogue(plan, dst);
}

}  // namespace voxseg::engine::cpu
