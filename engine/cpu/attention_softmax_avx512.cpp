// The attention's softmax loops (cpu_attention_softmax.h) in AVX-512 intrinsics; used only where
// the CPU has it (dispatch in cpu_attention_softmax.cpp), built with the flags set in
// engine/CMakeLists.txt. The same polynomials as the portable loops, with the steps compilers
// did not find themselves: the rounding and the 2^k scaling as one instruction each
// (vrndscaleps, vscalefps), no masked blends, several rows or columns in flight, and bf16 P
// written by vcvtneps2bf16 where the CPU has avx512_bf16 (bf16 plans run only there). 16
// columns of 1728 scores took 19 cycles per vector in the compiler's loop on the EPYC.
#include "engine/cpu/attention_softmax.h"

#include <immintrin.h>

#include <cstdint>

namespace voxseg::engine::cpu::avx512 {
namespace {

// exp(x) for x <= 0 (cpu_attention_softmax.h): k = round(x log2(e)) by vrndscaleps, 2^f by Horner,
// times 2^k by vscalefps. x below -87 is taken as -87 (as the portable loop does); NaN stays NaN
// (vmaxps returns its second operand then).
template <int DEGREE>
__attribute__((always_inline)) inline __m512 exp16(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-87.0f), x);
    const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
    const __m512 k = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(t, k);
    __m512 p = _mm512_set1_ps(kExp2Taylor[DEGREE]);
    for (int i = DEGREE - 1; i >= 0; --i) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kExp2Taylor[i]));
    return _mm512_scalef_ps(p, k);
}

// 16 floats stored as f32, or as bf16 rounded to nearest even by vcvtneps2bf16 (inline
// assembly: the unit is built without avx512_bf16's flag; bf16 P is written here only where
// nativeBf16() found the instruction, which every CPU running bf16 plans has).
enum class Store { kF32, kBf16 };

template <Store S>
__attribute__((always_inline)) inline void store16(void* dst, int64_t at, __m512 e, __mmask16 m) {
    if constexpr (S == Store::kF32) {
        _mm512_mask_storeu_ps(static_cast<float*>(dst) + at, m, e);
    } else {
        __m256i h;
        asm("vcvtneps2bf16 %1, %0" : "=v"(h) : "v"(e));
        _mm256_mask_storeu_epi16(static_cast<uint16_t*>(dst) + at, m, h);
    }
}

template <Store S>
__attribute__((always_inline)) inline void rows(const float* s, int64_t nrows, int64_t n, void* p,
                                                float* inv_sum) {
    constexpr int kDeg = S == Store::kF32 ? kExpDegreeF32 : kExpDegreeBf16;
    const int64_t full = n / 16 * 16;
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - full)) - 1u);
    const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
    for (int64_t i = 0; i < nrows; ++i) {
        const float* row = s + i * n;
        __m512 m0 = neg_inf, m1 = neg_inf;
        int64_t j = 0;
        for (; j + 32 <= full; j += 32) {
            m0 = _mm512_max_ps(m0, _mm512_loadu_ps(row + j));
            m1 = _mm512_max_ps(m1, _mm512_loadu_ps(row + j + 16));
        }
        if (j < full) m0 = _mm512_max_ps(m0, _mm512_loadu_ps(row + j));
        if (tail) m1 = _mm512_max_ps(m1, _mm512_mask_loadu_ps(neg_inf, tail, row + full));
        const float mx = _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
        // (vmaxps may drop a NaN score; its exp below, NaN, makes the sum NaN all the same)
        const __m512 vmx = _mm512_set1_ps(mx);
        __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
        const int64_t at = i * n;
        for (j = 0; j + 32 <= full; j += 32) {
            const __m512 e0 = exp16<kDeg>(_mm512_sub_ps(_mm512_loadu_ps(row + j), vmx));
            const __m512 e1 = exp16<kDeg>(_mm512_sub_ps(_mm512_loadu_ps(row + j + 16), vmx));
            s0 = _mm512_add_ps(s0, e0);
            s1 = _mm512_add_ps(s1, e1);
            store16<S>(p, at + j, e0, 0xffff);
            store16<S>(p, at + j + 16, e1, 0xffff);
        }
        if (j < full) {
            const __m512 e = exp16<kDeg>(_mm512_sub_ps(_mm512_loadu_ps(row + j), vmx));
            s0 = _mm512_add_ps(s0, e);
            store16<S>(p, at + j, e, 0xffff);
        }
        if (tail) {
            const __m512 e =
                exp16<kDeg>(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, row + full), vmx));
            s1 = _mm512_mask_add_ps(s1, tail, s1, e);
            store16<S>(p, at + full, e, tail);
        }
        inv_sum[i] = 1.0f / _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    }
}

// Up to 16 V columns of S^T [n, ld] at once (the last vector's columns in mask `last`), so each
// pass streams the block's rows once: one pass for the maxima, one for exp and the sums. Lanes
// outside `last` compute garbage that is never stored.
template <Store S, int V>
__attribute__((always_inline)) inline void columnGroup(const float* s, int64_t n, int64_t ld,
                                                       void* p, float* inv_sum, __mmask16 last) {
    constexpr int kDeg = S == Store::kF32 ? kExpDegreeF32 : kExpDegreeBf16;
    const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
    const auto mask = [&](int v) { return v == V - 1 ? last : static_cast<__mmask16>(0xffff); };
    __m512 mx[V], sum[V];
    for (int v = 0; v < V; ++v) mx[v] = neg_inf, sum[v] = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; ++j)
        for (int v = 0; v < V; ++v)
            mx[v] =
                _mm512_max_ps(mx[v], _mm512_mask_loadu_ps(neg_inf, mask(v), s + j * ld + 16 * v));
    for (int64_t j = 0; j < n; ++j)
        for (int v = 0; v < V; ++v) {
            const __m512 x = _mm512_maskz_loadu_ps(mask(v), s + j * ld + 16 * v);
            const __m512 e = exp16<kDeg>(_mm512_sub_ps(x, mx[v]));
            sum[v] = _mm512_add_ps(sum[v], e);
            store16<S>(p, j * ld + 16 * v, e, mask(v));
        }
    for (int v = 0; v < V; ++v)
        _mm512_mask_storeu_ps(inv_sum + 16 * v, mask(v),
                              _mm512_div_ps(_mm512_set1_ps(1.0f), sum[v]));
}

template <Store S>
__attribute__((always_inline)) inline void columns(const float* s, int64_t n, int64_t cols,
                                                   int64_t ld, void* p, float* inv_sum) {
    const size_t e = S == Store::kF32 ? 4 : 2;
    for (int64_t c0 = 0; c0 < cols; c0 += 64) {
        const int64_t w = cols - c0 < 64 ? cols - c0 : 64;
        const int vectors = static_cast<int>((w + 15) / 16);
        const __mmask16 last = static_cast<__mmask16>((1u << (w - 16 * (vectors - 1))) - 1u);
        const float* sc = s + c0;
        void* pc = static_cast<char*>(p) + c0 * e;
        float* ic = inv_sum + c0;
        switch (vectors) {
            case 1:
                columnGroup<S, 1>(sc, n, ld, pc, ic, last);
                break;
            case 2:
                columnGroup<S, 2>(sc, n, ld, pc, ic, last);
                break;
            case 3:
                columnGroup<S, 3>(sc, n, ld, pc, ic, last);
                break;
            default:
                columnGroup<S, 4>(sc, n, ld, pc, ic, last);
                break;
        }
    }
}

bool nativeBf16() {
    static const bool has = __builtin_cpu_supports("avx512bf16");
    return has;
}

}  // namespace

// bf16 P on an AVX-512 CPU without avx512_bf16 (only tests ask for it there): the portable loop.
void softmaxRows(const float* s, int64_t nrows, int64_t n, void* p, bool bf16, float* inv_sum) {
    if (!bf16) return rows<Store::kF32>(s, nrows, n, p, inv_sum);
    if (!nativeBf16()) return generic::softmaxRows(s, nrows, n, p, bf16, inv_sum);
    rows<Store::kBf16>(s, nrows, n, p, inv_sum);
}

void softmaxColumns(const float* s, int64_t n, int64_t cols, int64_t ld, void* p, bool bf16,
                    float* inv_sum) {
    if (!bf16) return columns<Store::kF32>(s, n, cols, ld, p, inv_sum);
    if (!nativeBf16()) return generic::softmaxColumns(s, n, cols, ld, p, bf16, inv_sum);
    columns<Store::kBf16>(s, n, cols, ld, p, inv_sum);
}

}  // namespace voxseg::engine::cpu::avx512
