// The attention's portable softmax loops (cpu_attention_softmax.h), included once per
// instruction set with VOXSEG_SOFTMAX_ISA naming the namespace: generic (what compilers vectorise
// for the x86-64 baseline, SSE2) in cpu_attention_softmax.cpp, avx2 (AVX2 + FMA, 8 lanes) in
// cpu_attention_softmax_avx2.cpp. The AVX-512 loops are intrinsics of their own
// (cpu_attention_softmax_avx512.cpp).
#ifndef VOXSEG_SOFTMAX_ISA
#error "define VOXSEG_SOFTMAX_ISA before including cpu_attention_softmax_impl.h"
#endif

#include "engine/cpu/attention_softmax.h"

#include <cstdint>
#include <cstring>

namespace voxseg::engine::cpu::VOXSEG_SOFTMAX_ISA {

// exp(x) for x <= 0 (cpu_attention_softmax.h; x below -87 gives 0's neighbourhood: 2^-126 times the
// polynomial; NaN gives NaN). k = round(x log2(e)) by adding 1.5 * 2^23, which leaves k in the
// low mantissa bits (rounds without SSE4.1, and no float-to-int conversion, which a NaN would
// make undefined); 2^k from the exponent bits.
template <int DEGREE>
inline float expNonPositive(float x) {
    constexpr float kShift = 12582912.0f;  // 1.5 * 2^23, bits 0x4b400000
    x = x < -87.0f ? -87.0f : x;
    const float t = x * 1.44269504088896341f;
    const float shifted = t + kShift;
    const float k = shifted - kShift;
    const float f = t - k;
    float poly = kExp2Taylor[DEGREE];
    for (int i = DEGREE - 1; i >= 0; --i) poly = poly * f + kExp2Taylor[i];
    uint32_t kbits;
    std::memcpy(&kbits, &shifted, 4);
    const uint32_t bits = (kbits - 0x4b400000u + 127u) << 23;  // k + 127 in [1, 127]
    float scale;
    std::memcpy(&scale, &bits, 4);
    return poly * scale;
}

inline uint16_t toBf16(float v) {  // round to nearest even; a quiet NaN stays NaN
    uint32_t u;
    std::memcpy(&u, &v, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

inline float rowMax(const float* s, int64_t n) {
    float m = s[0];
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < n; ++j) m = s[j] > m ? s[j] : m;
    return m;
}

void softmaxRows(const float* s, int64_t rows, int64_t n, void* p, bool bf16, float* inv_sum) {
    for (int64_t i = 0; i < rows; ++i) {
        const float* row = s + i * n;
        const float m = rowMax(row, n);
        float sum = 0.0f;
        if (bf16) {
            uint16_t* out = static_cast<uint16_t*>(p) + i * n;
#pragma omp simd reduction(+ : sum)
            for (int64_t j = 0; j < n; ++j) {
                const float e = expNonPositive<kExpDegreeBf16>(row[j] - m);
                sum += e;
                out[j] = toBf16(e);
            }
        } else {
            float* out = static_cast<float*>(p) + i * n;
#pragma omp simd reduction(+ : sum)
            for (int64_t j = 0; j < n; ++j) {
                const float e = expNonPositive<kExpDegreeF32>(row[j] - m);
                sum += e;
                out[j] = e;
            }
        }
        inv_sum[i] = 1.0f / sum;
    }
}

// One chunk of w <= 16 columns of softmaxColumns (inlined into both calls: the full chunk's
// width is a constant there, so its loops are one vector per row).
template <bool BF16>
__attribute__((always_inline)) inline void softmaxColumnChunk(const float* s, int64_t n, int64_t ld,
                                                              int64_t w, void* p, float* inv_sum) {
    float mx[16], sum[16];
    for (int64_t c = 0; c < w; ++c) mx[c] = s[c], sum[c] = 0.0f;
    for (int64_t j = 1; j < n; ++j) {
        const float* row = s + j * ld;
#pragma omp simd
        for (int64_t c = 0; c < w; ++c) mx[c] = row[c] > mx[c] ? row[c] : mx[c];
    }
    for (int64_t j = 0; j < n; ++j) {
        const float* row = s + j * ld;
        if constexpr (BF16) {
            uint16_t* out = static_cast<uint16_t*>(p) + j * ld;
#pragma omp simd
            for (int64_t c = 0; c < w; ++c) {
                const float e = expNonPositive<kExpDegreeBf16>(row[c] - mx[c]);
                sum[c] += e;
                out[c] = toBf16(e);
            }
        } else {
            float* out = static_cast<float*>(p) + j * ld;
#pragma omp simd
            for (int64_t c = 0; c < w; ++c) {
                const float e = expNonPositive<kExpDegreeF32>(row[c] - mx[c]);
                sum[c] += e;
                out[c] = e;
            }
        }
    }
    for (int64_t c = 0; c < w; ++c) inv_sum[c] = 1.0f / sum[c];
}

void softmaxColumns(const float* s, int64_t n, int64_t cols, int64_t ld, void* p, bool bf16,
                    float* inv_sum) {
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
        const int64_t w = cols - c0 < 16 ? cols - c0 : 16;
        void* pc = static_cast<char*>(p) + c0 * (bf16 ? 2 : 4);
        if (bf16)
            w == 16 ? softmaxColumnChunk<true>(s + c0, n, ld, 16, pc, inv_sum + c0)
                    : softmaxColumnChunk<true>(s + c0, n, ld, w, pc, inv_sum + c0);
        else
            w == 16 ? softmaxColumnChunk<false>(s + c0, n, ld, 16, pc, inv_sum + c0)
                    : softmaxColumnChunk<false>(s + c0, n, ld, w, pc, inv_sum + c0);
    }
}

}  // namespace voxseg::engine::cpu::VOXSEG_SOFTMAX_ISA
