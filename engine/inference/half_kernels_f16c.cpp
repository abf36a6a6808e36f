// Built with -mf16c -mavx2 -mfma on x86-64 only; called after a run-time CPU check.
#include "engine/inference/half_kernels_impl.h"

#include <immintrin.h>

namespace voxseg::engine::half::f16c {
namespace {

constexpr float kHalfMax = 65504.0f;
constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

__m128i store8(__m256 v) {
    // max/min return their second operand when one is NaN: NaN stays NaN, as in the scalar code.
    v = _mm256_min_ps(_mm256_set1_ps(kHalfMax), _mm256_max_ps(_mm256_set1_ps(-kHalfMax), v));
    return _mm256_cvtps_ph(v, kRound);
}

uint16_t store1(float v) {
    v = v < -kHalfMax ? -kHalfMax : (v > kHalfMax ? kHalfMax : v);  // NaN stays NaN
    return static_cast<uint16_t>(_cvtss_sh(v, kRound));
}

__m256 load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

}  // namespace

void accumulateRow(uint16_t* dst, const float* w, const float* s, int64_t n, bool reversed) {
    int64_t x = 0;
    if (!reversed) {
        for (; x + 8 <= n; x += 8) {
            const __m256 v =
                _mm256_fmadd_ps(_mm256_loadu_ps(w + x), _mm256_loadu_ps(s + x), load8(dst + x));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + x), store8(v));
        }
    } else {
        const __m256i rev = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
        for (; x + 8 <= n; x += 8) {
            const __m256 sr = _mm256_permutevar8x32_ps(_mm256_loadu_ps(s + n - x - 8), rev);
            const __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(w + x), sr, load8(dst + x));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + x), store8(v));
        }
    }
    for (; x < n; ++x) dst[x] = store1(_cvtsh_ss(dst[x]) + w[x] * s[reversed ? n - 1 - x : x]);
}

void toFloatRow(const uint16_t* src, float* dst, int64_t n) {
    int64_t x = 0;
    for (; x + 8 <= n; x += 8) _mm256_storeu_ps(dst + x, load8(src + x));
    for (; x < n; ++x) dst[x] = _cvtsh_ss(src[x]);
}

}  // namespace voxseg::engine::half::f16c
