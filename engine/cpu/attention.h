// Internal to the oneDNN CPU backend: fused scaled-dot-product attention, Attention on
// [..., T, D] operands (K given transposed) and MultiHeadAttention on packed [B, T, H*D] ones,
// whose heads are strided matrices (rows H*D floats apart) read and written in place: no
// head-split copies. planAttention (cpu_attention.cpp) reads the node's shapes and biases and
// hands them to one of two forms; each works per (work item = batch item x head, block of
// queries), each thread on its own scores block and scratch, never the full Tq x Tk matrix:
//  - columns (cpu_attention_columns.cpp): S^T = K Q^T, P^T = exp(S^T - column max), O^T = V^T P^T,
//    so the vectors span query columns and neither product has the head dimension as its
//    output width (Primus' 66 filled 66 of 80 lanes in P V: 91 against 111 GFLOP/s on the EPYC);
//  - rows (cpu_attention_rows.cpp): S = Q K^T, P = exp(S - row max), O = P V, K^T and V packed
//    once per work item into the weights layouts oneDNN chose (blocked, pair-interleaved on AMX).
// attentionForm() picks one. bf16 plans multiply in bf16 with f32 accumulation; the scores, the
// biases and the output stay f32.
#pragma once

#include "engine/cpu/plan.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace voxseg::engine::cpu::attention {

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

// A bias's offsets: per work item a base, then row (query) and column (key) strides, 0 where
// broadcast.
struct BiasView {
    std::vector<int64_t> base;
    int64_t row = 0, col = 0;
};

// What planAttention hands to a form: refs are Q, K, V, the biases present, then the output.
struct Inputs {
    AttentionShape a;
    std::vector<BiasView> biases;
    std::vector<MemRef> refs;
    MemRef dst;
    bool bf16 = false;
    float scale = 1.0f;
};

enum class Form { kRows, kColumns };

// The policy: columns where the value heads' width Dv is not a multiple of 16 (AVX-512's f32
// lanes; the rows form's P V then writes part-filled vectors: Primus-S, Dv 66, attention fp32
// 0.36 -> 0.31 s per patch), rows otherwise (SwinUNETR's heads of 16 and 32 have full vectors,
// and its K^T and V arrive dense: the columns form's transposes made its attention 0.24-0.32 ->
// 0.34-0.44 s), and rows for bf16 plans on CPUs with AMX (the columns form's bf16 weights, Q^T
// and P^T, are plain, and oneDNN would repack them for the tiles every block). Not measured:
// AMX, and CPUs without AVX-512 (8 lanes).
Form attentionForm(bool bf16, bool amx, int64_t dv);
// VOXSEG_CPU_ATTENTION=rows|columns where set: benchmarks and tests compare the two forms.
std::optional<Form> attentionFormOverride();

Status planRows(Plan& plan, Inputs in);
Status planColumns(Plan& plan, Inputs in);

// ---- shared by both forms ----

// The f32 scores block of one query block: a quarter of the core's L2 cache (sysconf), 256 KiB
// where it is not known.
int64_t scoresBlockBytes();

// (work item, block) pairs spread over the threads when there are enough of them (Swin: ~10^3
// windows x heads; Primus: 6 heads x dozens of blocks), each thread running its small matmuls
// and softmax on its own scores block; oneDNN splitting each small matmul over the threads spent
// more time synchronising than multiplying. Too few: one pair at a time with all threads.
struct Threads {
    int nthr = 1;
    bool spread = false;
    int64_t chunk = 1;  // pairs per scheduling chunk: a whole item where items are plenty
};
Threads attentionThreads(int64_t items, int64_t blocks);

// What both kernels fix at plan time besides their primitives: the node's shape and biases, its
// query blocks of `block` queries (rows or columns; the last block may be shorter) and the
// threads that run them.
struct Blocking {
    AttentionShape a;
    std::vector<BiasView> biases;
    int64_t block = 0, blocks = 0;
    Threads threads;
    bool bf16 = false;
    size_t out_ref = 0;  // the output's index in the kernel's memories
};
Blocking blocking(const Inputs& in, int64_t block);

// Runs make() with oneDNN's thread count set to what one primitive runs on: 1 when the pairs
// are spread (oneDNN's matmul fixes its work split at creation; one made for two threads, run
// inside the parallel region, did half of the rows), then restores it. A oneDNN error becomes
// the node's error.
Status makePrimitives(const Plan& plan, const Threads& t, const std::function<void()>& make);

// Per-thread scratch: `parts` byte sizes laid out 64-byte aligned; offsets() in floats.
class Scratch {
  public:
    explicit Scratch(const std::vector<size_t>& part_bytes);
    size_t offset(size_t part) const { return offsets_[part]; }
    // The scratch of `threads` threads (grown on first use), thread i's at base + i * stride().
    float* base(int threads) const;
    size_t stride() const { return total_; }

  private:
    std::vector<size_t> offsets_;
    size_t total_ = 0;
    std::shared_ptr<std::vector<float>> storage_ = std::make_shared<std::vector<float>>();
};

// `rows` rows of `cols` floats from rows `src_ld` apart into rows `dst_ld` apart (f32), or
// into dense bf16 rows.
void copyRows(const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows,
              int64_t cols);
void copyRowsBf16(const float* src, int64_t src_ld, uint16_t* dst, int64_t rows, int64_t cols);
// src [rows, cols] (rows `ld` floats apart) -> dst [cols, rows] dense, f32 or bf16.
void transposeTo(const float* src, int64_t ld, int64_t rows, int64_t cols, void* dst, bool bf16);

// The kernel's operands bound for a run (refs order: Q, K, V, the biases, then the output).
struct Operands {
    const float *q = nullptr, *k = nullptr, *v = nullptr;
    const float* bias[2] = {};
    float* out = nullptr;
};
Operands operands(const std::vector<dnnl::memory>& m, size_t biases, size_t out_ref);

// The two products of one query block, S = A_s B_s * scale and O = A_o B_o (either form's
// operands), made with user scratchpads: threads running the same primitives at once each pass
// their own. Weights given with format `any` come back in the layout oneDNN chose.
struct Products {
    dnnl::memory::desc s_weights, o_weights;
    dnnl::matmul qk, pv;
    dnnl::memory::desc qk_pad, pv_pad;
    size_t pad_bytes = 0;  // the larger of the two
    std::string impl;      // what oneDNN runs and the softmax, for describe()
};
Products makeProducts(const dnnl::engine& engine, const dnnl::memory::desc& s_src,
                      const dnnl::memory::desc& s_weights, const dnnl::memory::desc& s_dst,
                      const dnnl::memory::desc& o_src, const dnnl::memory::desc& o_weights,
                      const dnnl::memory::desc& o_dst, float scale, bool bf16, const char* softmax);

// One small matmul on the calling thread's stream, its scratchpad the caller's, and wait.
void runMatmul(const dnnl::matmul& mm, dnnl::stream& stream, const dnnl::engine& engine,
               const dnnl::memory::desc& src_md, const void* src, const dnnl::memory::desc& w_md,
               const void* w, const dnnl::memory::desc& dst_md, void* dst,
               const dnnl::memory::desc& pad_md, void* pad);

// Adds the planned step (the kernel on in.refs) and defines the node's output.
Status addAttentionStep(Plan& plan, const std::string& what, Kernel kernel, const Inputs& in);

}  // namespace voxseg::engine::cpu::attention
