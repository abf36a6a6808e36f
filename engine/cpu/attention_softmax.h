// Internal to the oneDNN CPU backend: the attention kernels' softmax, along rows or columns,
// unnormalised.
//
// Per row of the scores S (f32), m = max S, P = exp(S - m) (f32, in place allowed, or bf16) and
// 1 / sum(P); the caller scales each row of P V by it (Dv values per row instead of Tk: one pass
// fewer over the scores than oneDNN 2.6's softmax, which normalises P itself and was 29 % of a
// bf16 Primus-S attention's primitive time). exp is 2^k times a polynomial in f, where
// x log2(e) = k + f, |f| <= 0.5: the Taylor series of 2^f = e^(f ln 2), degree 6 for f32 P
// (remainder (0.347)^7 / 7! = 1.2e-7, at f32 rounding), degree 4 for bf16 P (4e-5, below bf16's
// 2^-9). Scores below the row's max by more than 87 give ~1e-38 instead of 0; a NaN or +inf
// score makes its row NaN. Portable loops (cpu_attention_softmax.cpp) and AVX-512 intrinsics
// (cpu_attention_softmax_avx512.cpp), picked at run time.
#pragma once

#include <cstdint>

namespace voxseg::engine::cpu {

// 2^f's Taylor coefficients (ln 2)^i / i! and the degrees used, shared by both implementations.
inline constexpr float kExp2Taylor[] = {1.0f,
                                        6.931471806e-01f,
                                        2.402265070e-01f,
                                        5.550410866e-02f,
                                        9.618129108e-03f,
                                        1.333355815e-03f,
                                        1.540353039e-04f};
inline constexpr int kExpDegreeF32 = 6, kExpDegreeBf16 = 4;

// "avx512", "avx2" or "generic": the loops softmaxRows and softmaxColumns run on this CPU.
const char* softmaxIsa();

// Rows `rows` of `n` floats from `s` (rows `n` apart): p (rows `n` apart; f32 when !bf16, may
// be s, else bf16 bits) = exp(s - max of the row); inv_sum[i] = 1 / the row's sum. Single
// threaded (the attention kernel calls it per block, per thread).
void softmaxRows(const float* s, int64_t rows, int64_t n, void* p, bool bf16, float* inv_sum);

// The same along the columns: S^T [n, cols] (rows `ld` floats apart), per column c,
// p[j, c] = exp(s[j, c] - max over j) (p: rows `ld` elements apart, f32 and in place allowed, or
// bf16) and inv_sum[c] = 1 / the column's sum. The attention's transposed form (S^T = K Q^T,
// O^T = V^T P^T) runs it: its vectors span query columns, not the Tk keys.
void softmaxColumns(const float* s, int64_t n, int64_t cols, int64_t ld, void* p, bool bf16,
                    float* inv_sum);

// The three builds, for the dispatcher and for tests. avx2:: and avx512:: exist in x86-64 builds
// only and need a CPU that runs them (kernelIsa(), cpu_norm_kernels.h).
namespace generic {
void softmaxRows(const float* s, int64_t rows, int64_t n, void* p, bool bf16, float* inv_sum);
void softmaxColumns(const float* s, int64_t n, int64_t cols, int64_t ld, void* p, bool bf16,
                    float* inv_sum);
}  // namespace generic
namespace avx2 {
void softmaxRows(const float* s, int64_t rows, int64_t n, void* p, bool bf16, float* inv_sum);
void softmaxColumns(const float* s, int64_t n, int64_t cols, int64_t ld, void* p, bool bf16,
                    float* inv_sum);
}  // namespace avx2
namespace avx512 {
void softmaxRows(const float* s, int64_t rows, int64_t n, void* p, bool bf16, float* inv_sum);
void softmaxColumns(const float* s, int64_t n, int64_t cols, int64_t ld, void* p, bool bf16,
                    float* inv_sum);
}  // namespace avx512

}  // namespace voxseg::engine::cpu
