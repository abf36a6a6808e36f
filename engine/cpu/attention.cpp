// Fused attention on the CPU backend: the node's shapes, biases and threads, the choice of form
// and what both forms share (attention.h); the Rotary embedding of the queries and keys.
#include "engine/cpu/attention.h"
#include "engine/cpu/attention_softmax.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace voxseg::engine::cpu {
namespace attention {
namespace {

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

// The bias's offsets over the scores [..., Tq, Tk] (MultiHeadAttention: [B, H, Tq, Tk]); a
// batch axis of the bias with fewer items than the scores' tiles (Swin's window mask: item b
// reads b % nW).
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

}  // namespace

Form attentionForm(bool bf16, bool amx, int64_t dv) {
    return dv % 16 == 0 || (bf16 && amx) ? Form::kRows : Form::kColumns;
}

std::optional<Form> attentionFormOverride() {
    const char* f = std::getenv("VOXSEG_CPU_ATTENTION");
    if (f && std::strcmp(f, "rows") == 0) return Form::kRows;
    if (f && std::strcmp(f, "columns") == 0) return Form::kColumns;
    return std::nullopt;
}

// Primus-S at 1 thread on a 2 MiB L2 (512 KiB: 75 of 1728 rows): its attention took a median
// 10 % less time than with 256 KiB, in 7 of 8 interleaved rounds (docs/perf-cpu.md).
int64_t scoresBlockBytes() {
    static const int64_t bytes = [] {
        const long l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
        return l2 >= (int64_t{1} << 20) ? std::min<int64_t>(l2 / 4, int64_t{2} << 20)
                                        : int64_t{256} << 10;
    }();
    return bytes;
}

Threads attentionThreads(int64_t items, int64_t blocks) {
    Threads t;
    t.nthr = omp_get_max_threads();
    t.spread = t.nthr > 1 && items * blocks >= 2 * t.nthr;
    // A whole item per chunk packs its K and V once instead of once per thread that meets it.
    t.chunk = items >= 2 * t.nthr ? blocks : 1;
    return t;
}

Blocking blocking(const Inputs& in, int64_t block) {
    Blocking b;
    b.a = in.a;
    b.biases = in.biases;
    b.block = block;
    b.blocks = (in.a.Tq + block - 1) / block;
    b.threads = attentionThreads(in.a.items, b.blocks);
    b.bf16 = in.bf16;
    b.out_ref = in.refs.size() - 1;
    return b;
}

Status makePrimitives(const Plan& plan, const Threads& t, const std::function<void()>& make) {
    try {
        if (t.spread) omp_set_num_threads(1);
        make();
        if (t.spread) omp_set_num_threads(t.nthr);
    } catch (const dnnl::error& e) {
        if (t.spread) omp_set_num_threads(t.nthr);
        return nodeError(plan, std::string("oneDNN matmul for attention: ") + e.what());
    }
    return Status::ok();
}

Scratch::Scratch(const std::vector<size_t>& part_bytes) {
    for (const size_t bytes : part_bytes) {
        offsets_.push_back(total_);
        total_ += (bytes + 63) / 64 * 16;
    }
}

float* Scratch::base(int threads) const {
    const size_t need = total_ * static_cast<size_t>(threads) + 16;
    if (storage_->size() < need) storage_->resize(need);
    float* b = storage_->data();
    return b + (16 - reinterpret_cast<uintptr_t>(b) / 4 % 16) % 16;
}

void copyRows(const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows,
              int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) std::copy_n(src + i * src_ld, cols, dst + i * dst_ld);
}

void copyRowsBf16(const float* src, int64_t src_ld, uint16_t* dst, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        const float* s = src + i * src_ld;
        uint16_t* d = dst + i * cols;
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) d[j] = floatToBFloat16(s[j]);
    }
}

void transposeTo(const float* src, int64_t ld, int64_t rows, int64_t cols, void* dst, bool bf16) {
    // Tiles of 16 rows x 64 columns: each source row segment read whole and in order into the
    // tile (the sources are cold head matrices of a projection's output, rows `ld` apart; read
    // column by column they took ~1.8 ns per element on the EPYC), then written out by columns.
    constexpr int64_t kR = 16, kC = 64;
    float tile[kR * kC];
    for (int64_t j0 = 0; j0 < rows; j0 += kR) {
        const int64_t nr = std::min(kR, rows - j0);
        for (int64_t c0 = 0; c0 < cols; c0 += kC) {
            const int64_t nc = std::min(kC, cols - c0);
            for (int64_t j = 0; j < nr; ++j)
                std::copy_n(src + (j0 + j) * ld + c0, nc, tile + j * kC);
            for (int64_t d = 0; d < nc; ++d) {
                if (bf16) {
                    uint16_t* o = static_cast<uint16_t*>(dst) + (c0 + d) * rows + j0;
                    for (int64_t j = 0; j < nr; ++j) o[j] = floatToBFloat16(tile[j * kC + d]);
                } else {
                    float* o = static_cast<float*>(dst) + (c0 + d) * rows + j0;
                    for (int64_t j = 0; j < nr; ++j) o[j] = tile[j * kC + d];
                }
            }
        }
    }
}

Operands operands(const std::vector<dnnl::memory>& m, size_t biases, size_t out_ref) {
    Operands o;
    o.q = static_cast<const float*>(m[0].get_data_handle());
    o.k = static_cast<const float*>(m[1].get_data_handle());
    o.v = static_cast<const float*>(m[2].get_data_handle());
    for (size_t t = 0; t < biases; ++t)
        o.bias[t] = static_cast<const float*>(m[3 + t].get_data_handle());
    o.out = static_cast<float*>(m[out_ref].get_data_handle());
    return o;
}

Products makeProducts(const dnnl::engine& engine, const dnnl::memory::desc& s_src,
                      const dnnl::memory::desc& s_weights, const dnnl::memory::desc& s_dst,
                      const dnnl::memory::desc& o_src, const dnnl::memory::desc& o_weights,
                      const dnnl::memory::desc& o_dst, float scale, bool bf16,
                      const char* softmax) {
    Products p;
    dnnl::primitive_attr user_pad;
    user_pad.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::primitive_attr scaled;  // (a copy of user_pad would share its handle)
    scaled.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    scaled.set_output_scales(0, {scale});
    const dnnl::matmul::primitive_desc qk(dnnl::matmul::desc(s_src, s_weights, s_dst), scaled,
                                          engine);
    const dnnl::matmul::primitive_desc pv(dnnl::matmul::desc(o_src, o_weights, o_dst), user_pad,
                                          engine);
    p.s_weights = qk.weights_desc();
    p.o_weights = pv.weights_desc();
    p.qk = dnnl::matmul(qk);
    p.pv = dnnl::matmul(pv);
    p.impl = std::string(qk.impl_info_str()) + (bf16 ? " bf16" : "") + ", softmax " + softmax +
             " " + softmaxIsa() + (bf16 ? " f32->bf16" : "");
    p.qk_pad = qk.scratchpad_desc();
    p.pv_pad = pv.scratchpad_desc();
    p.pad_bytes = std::max(p.qk_pad.get_size(), p.pv_pad.get_size());
    return p;
}

void runMatmul(const dnnl::matmul& mm, dnnl::stream& stream, const dnnl::engine& engine,
               const dnnl::memory::desc& src_md, const void* src, const dnnl::memory::desc& w_md,
               const void* w, const dnnl::memory::desc& dst_md, void* dst,
               const dnnl::memory::desc& pad_md, void* pad) {
    mm.execute(stream, {{DNNL_ARG_SRC, dnnl::memory(src_md, engine, const_cast<void*>(src))},
                        {DNNL_ARG_WEIGHTS, dnnl::memory(w_md, engine, const_cast<void*>(w))},
                        {DNNL_ARG_DST, dnnl::memory(dst_md, engine, dst)},
                        {DNNL_ARG_SCRATCHPAD, dnnl::memory(pad_md, engine, pad)}});
    stream.wait();
}

Status addAttentionStep(Plan& plan, const std::string& what, Kernel kernel, const Inputs& in) {
    const Node& n = plan.node();
    plan.addKernel(std::string(n.op == OpKind::kMultiHeadAttention ? "attention heads in place "
                                                                   : "attention ") +
                       what,
                   std::move(kernel), in.refs);
    plan.define(n.outputs[0], in.dst);
    return planUnfusedEpilogue(plan, in.dst);
}

}  // namespace attention

Status planAttention(Plan& plan) {
    using namespace attention;
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    Inputs in;
    in.a = attentionShape(g, n);
    in.bf16 = plan.actType() == dt::bf16;
    in.scale = n.attention_scale;
    // Q, K, V, the biases present (Swin: its relative-position bias and window mask), the output
    for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (n.inputs[i] < 0) continue;
        VOXSEG_ASSIGN_OR_RETURN(MemRef m, plan.ensurePlainF32(n.inputs[i]));
        in.refs.push_back(m);
        if (i >= 3) in.biases.push_back(biasView(g, n, i, in.a));
    }
    in.dst = plan.newBuffer(plainDesc(g.values[n.outputs[0]].shape, dt::f32));
    in.refs.push_back(in.dst);
    const Form form =
        attentionFormOverride().value_or(attentionForm(in.bf16, cpuHasAmx(), in.a.Dv));
    return form == Form::kRows ? planRows(plan, std::move(in)) : planColumns(plan, std::move(in));
}

namespace {

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

}  // namespace

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

}  // namespace voxseg::engine::cpu
