// Fused scaled-dot-product attention on the CPU backend: Attention on [..., T, D] operands
// (K given transposed) and MultiHeadAttention on packed [B, T, H*D] ones, whose heads are
// strided matrices (rows H*D floats apart) read and written in place: no head-split copies.
// Per work item (batch item x head) blocks of query rows whose scores (rows x Tk floats) fit in
// a quarter of the L2 cache: S = Q_blk K^T * scale (oneDNN matmul, output scale), + biases, row
// softmax in place (oneDNN softmax), O_blk = S V (oneDNN matmul). The full Tq x Tk matrix is never
// stored.
#include "engine/cpu_plan.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>

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

// K^T [cols, rows] (dense) from the `rows` rows of K, `ld` floats apart.
void transposeRows(const float* src, int64_t ld, float* dst, int64_t rows, int64_t cols) {
    for (int64_t j0 = 0; j0 < rows; j0 += 16)
        for (int64_t d = 0; d < cols; ++d)
            for (int64_t j = j0; j < std::min(rows, j0 + 16); ++j)
                dst[d * rows + j] = src[j * ld + d];
}

// The oneDNN primitives of one query block of `m` rows, all on dense matrices (oneDNN 2.6's
// brgemm matmul takes no row padding: strided operands fell back to its slower gemm:jit, 0.68
// instead of 0.56 s per Primus-S patch; K as format ba made it transpose K per block), K^T as
// dense [D, Tk]. The matmuls' scratchpads are the caller's (user mode): threads running the same
// primitives at once each pass their own. oneDNN 2.6's softmax takes no attributes (it was run
// from several threads at once before, too: its f32 kernel uses no scratchpad).
struct Gemms {
    int64_t rows = 0;
    dnnl::memory::desc q_md, k_md, s_md, v_md, o_md;
    dnnl::matmul qk, pv;
    dnnl::softmax_forward softmax;
    dnnl::memory::desc qk_pad, pv_pad;
    size_t pad_bytes = 0;  // the larger of the two
};

Gemms makeGemms(const dnnl::engine& engine, const AttentionShape& a, int64_t m, float scale) {
    Gemms gm;
    gm.rows = m;
    gm.q_md = plainDesc({m, a.D}, dt::f32);
    gm.k_md = plainDesc({a.D, a.Tk}, dt::f32);
    gm.s_md = plainDesc({m, a.Tk}, dt::f32);
    gm.v_md = plainDesc({a.Tk, a.Dv}, dt::f32);
    gm.o_md = plainDesc({m, a.Dv}, dt::f32);
    dnnl::primitive_attr user_pad;
    user_pad.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::primitive_attr scaled;  // (a copy of user_pad would share its handle)
    scaled.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    scaled.set_output_scales(0, {scale});
    const dnnl::matmul::primitive_desc qk(dnnl::matmul::desc(gm.q_md, gm.k_md, gm.s_md), scaled,
                                          engine);
    const dnnl::matmul::primitive_desc pv(dnnl::matmul::desc(gm.s_md, gm.v_md, gm.o_md), user_pad,
                                          engine);
    const dnnl::softmax_forward::primitive_desc sm(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, gm.s_md, 1), engine);
    gm.qk = dnnl::matmul(qk);
    gm.pv = dnnl::matmul(pv);
    gm.softmax = dnnl::softmax_forward(sm);
    gm.qk_pad = qk.scratchpad_desc();
    gm.pv_pad = pv.scratchpad_desc();
    gm.pad_bytes = std::max(gm.qk_pad.get_size(), gm.pv_pad.get_size());
    return gm;
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

}  // namespace

Status planAttention(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const AttentionShape a = attentionShape(g, n);
    // refs: Q, K, V, the biases present (Swin: its relative-position bias and window mask),
    // the output
    std::vector<BiasView> biases;
    std::vector<MemRef> refs;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (n.inputs[i] < 0) continue;
        VOXSEG_ASSIGN_OR_RETURN(MemRef m, plan.ensurePlainF32(n.inputs[i]));
        refs.push_back(m);
        if (i >= 3) biases.push_back(biasView(g, n, i, a));
    }
    const size_t out_ref = refs.size();
    MemRef dst = plan.newBuffer(plainDesc(g.values[n.outputs[0]].shape, dt::f32));
    refs.push_back(dst);
    const int64_t rows = std::clamp<int64_t>(scoresBlockBytes() / (4 * a.Tk), 1, a.Tq);
    // (work item, row block) pairs spread over the threads when there are enough of them
    // (Swin: ~10^3 windows x heads of 343 tokens; Primus: 6 heads x 24 blocks), each thread
    // running its small matmuls and softmax on its own scores block and scratchpads; oneDNN
    // splitting each 75x1728 matmul over the threads spent more time synchronising than
    // multiplying. The primitives are then created for one thread: oneDNN's matmul fixes its
    // work split at creation, and one made for two threads, run inside the parallel region, did
    // half of the rows (the parity test caught it). Too few items: the primitives with their
    // threads, one item at a time.
    const int64_t blocks = (a.Tq + rows - 1) / rows;
    const int nthr = omp_get_max_threads();
    const bool spread = nthr > 1 && a.items * blocks >= 2 * nthr;
    const int workers = spread ? nthr : 1;
    std::vector<Gemms> gemms;
    try {
        if (spread) omp_set_num_threads(1);
        gemms.push_back(makeGemms(plan.engine(), a, rows, n.attention_scale));
        if (a.Tq % rows)
            gemms.push_back(makeGemms(plan.engine(), a, a.Tq % rows, n.attention_scale));
        if (spread) omp_set_num_threads(nthr);
    } catch (const dnnl::error& e) {
        if (spread) omp_set_num_threads(nthr);
        return nodeError(plan, std::string("oneDNN matmul for attention: ") + e.what());
    }
    const dnnl::engine engine = plan.engine();
    // Strided heads (MultiHeadAttention) are copied into dense matrices for the primitives, by
    // each thread into its own scratch: K and V when its item's head changes, the query block
    // and its output per block.
    const bool pack_q = a.q.ld != a.D, pack_k = !a.k_transposed, pack_v = a.v.ld != a.Dv,
               pack_o = a.out.ld != a.Dv;
    size_t pad_floats = 0;
    for (const Gemms& gm : gemms) pad_floats = std::max(pad_floats, (gm.pad_bytes + 63) / 4);
    pad_floats = (pad_floats + 15) / 16 * 16;
    // each thread's part starts 64 bytes aligned, as oneDNN's own scratchpads do
    const size_t per_thread =
        (static_cast<size_t>(rows * (a.Tk + a.D + a.Dv) + a.Tk * (a.D + a.Dv)) + pad_floats + 15) /
        16 * 16;
    auto scratch = std::make_shared<std::vector<float>>();
    Kernel k = [=](const std::vector<dnnl::memory>& m) mutable {
        const float* q = static_cast<const float*>(m[0].get_data_handle());
        const float* kk = static_cast<const float*>(m[1].get_data_handle());
        const float* v = static_cast<const float*>(m[2].get_data_handle());
        const float* bias[2] = {};
        for (size_t t = 0; t < biases.size(); ++t)
            bias[t] = static_cast<const float*>(m[3 + t].get_data_handle());
        float* out = static_cast<float*>(m[out_ref].get_data_handle());
        const int64_t Tk = a.Tk;
        if (scratch->size() < per_thread * workers + 16) scratch->resize(per_thread * workers + 16);
        float* base = scratch->data();
        base += (16 - reinterpret_cast<uintptr_t>(base) / 4 % 16) % 16;
#pragma omp parallel num_threads(nthr) if (spread)
        {
            dnnl::stream stream(engine);
            float* pad = base + (spread ? omp_get_thread_num() : 0) * per_thread;
            float* s = pad + pad_floats;
            float* qd = s + rows * Tk;
            float* od = qd + rows * a.D;
            float* kd = od + rows * a.Dv;
            float* vd = kd + Tk * a.D;
            int64_t packed_item = -1;
#pragma omp for schedule(dynamic)
            for (int64_t it = 0; it < a.items * blocks; ++it) {
                const int64_t b = it / blocks, i0 = (it % blocks) * rows;
                const Gemms& gm = a.Tq - i0 >= rows ? gemms[0] : gemms[1];
                const int64_t mrows = gm.rows;
                const float* qb = q + a.q.offset(b) + i0 * a.q.ld;
                const float* kb = kk + a.k.offset(b);
                const float* vb = v + a.v.offset(b);
                float* ob = out + a.out.offset(b) + i0 * a.out.ld;
                if (b != packed_item) {
                    if (pack_k) transposeRows(kb, a.k.ld, kd, Tk, a.D);
                    if (pack_v) copyRows(vb, a.v.ld, vd, a.Dv, Tk, a.Dv);
                    packed_item = b;
                }
                if (pack_q) copyRows(qb, a.q.ld, qd, a.D, mrows, a.D);
                const dnnl::memory sm(gm.s_md, engine, s);
                gm.qk.execute(
                    stream, {{DNNL_ARG_SRC,
                              dnnl::memory(gm.q_md, engine, pack_q ? qd : const_cast<float*>(qb))},
                             {DNNL_ARG_WEIGHTS,
                              dnnl::memory(gm.k_md, engine, pack_k ? kd : const_cast<float*>(kb))},
                             {DNNL_ARG_DST, sm},
                             {DNNL_ARG_SCRATCHPAD, dnnl::memory(gm.qk_pad, engine, pad)}});
                stream.wait();
                for (size_t t = 0; t < biases.size(); ++t) {
                    const BiasView& bv = biases[t];
#pragma omp parallel for schedule(static) if (!spread)
                    for (int64_t i = 0; i < mrows; ++i) {
                        float* row = s + i * Tk;
                        const float* br = bias[t] + bv.base[b] + (i0 + i) * bv.row;
                        for (int64_t j = 0; j < Tk; ++j) row[j] += br[j * bv.col];
                    }
                }
                gm.softmax.execute(stream, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_DST, sm}});
                gm.pv.execute(
                    stream, {{DNNL_ARG_SRC, sm},
                             {DNNL_ARG_WEIGHTS,
                              dnnl::memory(gm.v_md, engine, pack_v ? vd : const_cast<float*>(vb))},
                             {DNNL_ARG_DST, dnnl::memory(gm.o_md, engine, pack_o ? od : ob)},
                             {DNNL_ARG_SCRATCHPAD, dnnl::memory(gm.pv_pad, engine, pad)}});
                stream.wait();
                if (pack_o) copyRows(od, a.Dv, ob, a.out.ld, mrows, a.Dv);
            }
        }
    };
    plan.addKernel(std::string(n.op == OpKind::kMultiHeadAttention ? "attention heads in place "
                                                                   : "attention ") +
                       "blocked " + std::to_string(rows) + "x" + std::to_string(a.Tk) +
                       " rows, oneDNN matmul" + (spread ? ", blocks per thread" : ""),
                   std::move(k), refs);
    plan.define(n.outputs[0], dst);
    return planUnfusedEpilogue(plan, dst);
}

}  // namespace voxseg::engine::cpu
