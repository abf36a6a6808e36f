// Internal to the oneDNN CPU backend: one run of float32 or bf16 values quantised to u8 with a
// tensor's scale and zero point, as oneDNN's quantising reorder (makeQuantizeReorder) and
// quant::quantizeActivation compute it: rne(clamp(x * inv + zp, 0, 255)), the product and the sum
// rounded separately. The float up-sampling's scatter into its concat's u8 (conv.cpp) quantises
// 32-channel runs with it: oneDNN 2.6's 8-D strided reorder (jit:uni) took 37 ms of a 1.3 s
// int8 patch of the plain nnU-Net network (its 64^3 -> 128^3 up-sampling; AVX-512 EPYC, 2
// threads), this 21.5 ms, bound by memory. The tap channels of an int8 first convolution
// (conv_int8_plan.cpp) quantise the image's rows with it, as the reorder before the padded
// convolution did.
//
// SSE2 (the x86-64 baseline, which has no FMA to contract the two roundings into one), 16 values
// per step, then 4; plain C++ elsewhere and for the last 1-3.
#pragma once

#include "engine/graph/tensor.h"
#include "engine/quant/int8_scheme.h"

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace voxseg::engine::cpu {

inline float quantizeRunLoad(const float* p) { return *p; }
inline float quantizeRunLoad(const uint16_t* p) { return bfloat16ToFloat(*p); }  // bf16

#if defined(__SSE2__)
inline __m128 quantizeRunLoad4(const float* p) { return _mm_loadu_ps(p); }
inline __m128 quantizeRunLoad4(const uint16_t* p) {
    const __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), h));
}
#endif

template <typename T>
void quantizeRun(const T* src, uint8_t* dst, int64_t n, float inv, float zp) {
    int64_t i = 0;
#if defined(__SSE2__)
    const __m128 vi = _mm_set1_ps(inv), vz = _mm_set1_ps(zp);
    const __m128 lo = _mm_setzero_ps(), hi = _mm_set1_ps(255.0f);
    auto four = [&](const T* p) {
        const __m128 v = _mm_add_ps(_mm_mul_ps(quantizeRunLoad4(p), vi), vz);
        return _mm_cvtps_epi32(_mm_min_ps(_mm_max_ps(v, lo), hi));  // MXCSR: nearest even
    };
    for (; i + 16 <= n; i += 16) {
        const __m128i a = _mm_packs_epi32(four(src + i), four(src + i + 4));
        const __m128i b = _mm_packs_epi32(four(src + i + 8), four(src + i + 12));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_packus_epi16(a, b));
    }
    // Runs of 8 or 4 values (a decoder's 8-channel up-sampling) stay off the scalar loop.
    for (; i + 4 <= n; i += 4) {
        const __m128i a = _mm_packs_epi32(four(src + i), _mm_setzero_si128());
        const int32_t v = _mm_cvtsi128_si32(_mm_packus_epi16(a, a));
        std::memcpy(dst + i, &v, 4);
    }
#endif
    for (; i < n; ++i) {
        const float f = quantizeRunLoad(src + i) * inv;
        dst[i] = quant::roundToU8(f + zp);
    }
}

}  // namespace voxseg::engine::cpu
