#include "engine/inference/half_kernels.h"

#include "engine/graph/tensor.h"
#include "engine/inference/half_kernels_impl.h"

#include <vector>

#if defined(VOXSEG_HAVE_F16C_KERNELS)
#include <cpuid.h>
#endif

namespace voxseg::engine::half {
namespace {

constexpr float kHalfMax = 65504.0f;

// Saturates at +-65504; NaN stays NaN (both comparisons are false).
uint16_t store(float v) {
    return floatToHalf(v < -kHalfMax ? -kHalfMax : (v > kHalfMax ? kHalfMax : v));
}

}  // namespace

bool f16cAvailable() {
#if defined(VOXSEG_HAVE_F16C_KERNELS)
    // F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports has no "f16c".
    static const bool ok = [] {
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0 &&
               __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }();
    return ok;
#else
    return false;
#endif
}

const float* toFloatTable() {
    static const std::vector<float> table = [] {
        std::vector<float> t(65536);
        for (uint32_t h = 0; h < 65536; ++h) t[h] = halfToFloat(static_cast<uint16_t>(h));
        return t;
    }();
    return table.data();
}

namespace generic {

void accumulateRow(uint16_t* dst, const float* w, const float* s, int64_t n, bool reversed) {
    const float* table = toFloatTable();
    for (int64_t x = 0; x < n; ++x)
        dst[x] = store(table[dst[x]] + w[x] * s[reversed ? n - 1 - x : x]);
}

void toFloatRow(const uint16_t* src, float* dst, int64_t n) {
    const float* table = toFloatTable();
    for (int64_t x = 0; x < n; ++x) dst[x] = table[src[x]];
}

}  // namespace generic

void accumulateRow(uint16_t* dst, const float* w, const float* s, int64_t n, bool reversed) {
    VOXSEG_F16C_DISPATCH(accumulateRow(dst, w, s, n, reversed));
}
void toFloatRow(const uint16_t* src, float* dst, int64_t n) {
    VOXSEG_F16C_DISPATCH(toFloatRow(src, dst, n));
}

const char* kernelIsa() { return f16cAvailable() ? "f16c" : "generic"; }

}  // namespace voxseg::engine::half
