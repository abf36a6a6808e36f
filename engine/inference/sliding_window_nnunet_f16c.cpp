// nnU-Net's float16 row arithmetic with F16C conversions, 8 values at a time. Built with -mf16c
// -mavx2 and -ffp-contract=off on x86-64 only: the product and the sum are two float32 roundings,
// as PyTorch stores `prediction *= gaussian` before adding it, so they must never become one FMA.
// Called after half::f16cAvailable(). tests/engine/sliding_window_nnunet_test.cpp checks every
// kernel against the scalar one bit for bit.
#include "engine/inference/sliding_window_nnunet_impl.h"

#include <immintrin.h>

namespace voxseg::engine::nnunet_fp16::f16c {
namespace {

constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

__m256 load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

void store8(uint16_t* p, __m256 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, kRound));
}

uint16_t store1(float v) { return static_cast<uint16_t>(_cvtss_sh(v, kRound)); }

// dst[x] = half(op(float(dst[x]), x)) for a vector op and its scalar twin.
template <typename Vec, typename One>
void rowOp(uint16_t* dst, int64_t count, Vec vec, One one) {
    int64_t x = 0;
    for (; x + 8 <= count; x += 8) store8(dst + x, vec(load8(dst + x), x));
    for (; x < count; ++x) dst[x] = store1(one(_cvtsh_ss(dst[x]), x));
}

}  // namespace

void addWeightsRow(uint16_t* n, const uint16_t* g, int64_t count) {
    rowOp(
        n, count, [g](__m256 a, int64_t x) { return _mm256_add_ps(a, load8(g + x)); },
        [g](float a, int64_t x) { return a + _cvtsh_ss(g[x]); });
}

void addPredictionRow(uint16_t* acc, const float* p, const uint16_t* g, int64_t count) {
    rowOp(
        acc, count,
        [p, g](__m256 a, int64_t x) {
            const __m256 weighted = _mm256_mul_ps(_mm256_loadu_ps(p + x), load8(g + x));
            return _mm256_add_ps(a, weighted);
        },
        [p, g](float a, int64_t x) {
            const float weighted = p[x] * _cvtsh_ss(g[x]);
            return a + weighted;
        });
}

bool divideRow(uint16_t* acc, const uint16_t* n, int64_t count) {
    rowOp(
        acc, count, [n](__m256 a, int64_t x) { return _mm256_div_ps(a, load8(n + x)); },
        [n](float a, int64_t x) { return a / _cvtsh_ss(n[x]); });
    bool finite = true;
    for (int64_t x = 0; x < count; ++x) finite = finite && (acc[x] & 0x7c00u) != 0x7c00u;
    return finite;
}

void addRow(uint16_t* a, const uint16_t* b, int64_t count) {
    rowOp(
        a, count, [b](__m256 v, int64_t x) { return _mm256_add_ps(v, load8(b + x)); },
        [b](float v, int64_t x) { return v + _cvtsh_ss(b[x]); });
}

void divideRowBy(uint16_t* a, int64_t count, int divisor) {
    const float d = static_cast<float>(divisor);
    const __m256 dv = _mm256_set1_ps(d);
    rowOp(
        a, count, [dv](__m256 v, int64_t) { return _mm256_div_ps(v, dv); },
        [d](float v, int64_t) { return v / d; });
}

}  // namespace voxseg::engine::nnunet_fp16::f16c
