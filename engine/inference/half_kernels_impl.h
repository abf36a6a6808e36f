// Internal: both implementations of half_kernels.h, for the dispatcher and for tests. The f16c
// ones exist on x86-64 only (VOXSEG_HAVE_F16C_KERNELS) and need a CPU with F16C, AVX2 and FMA.
#pragma once

#include <cstdint>

namespace voxseg::engine::half {

namespace generic {
void accumulateRow(uint16_t* dst, const float* w, const float* s, int64_t n, bool reversed);
void toFloatRow(const uint16_t* src, float* dst, int64_t n);
}  // namespace generic

namespace f16c {
void accumulateRow(uint16_t* dst, const float* w, const float* s, int64_t n, bool reversed);
void toFloatRow(const uint16_t* src, float* dst, int64_t n);
}  // namespace f16c

// True when the f16c kernels are built and this CPU runs them.
bool f16cAvailable();

}  // namespace voxseg::engine::half

// The dispatch of a kernel that has both implementations, in a namespace holding `f16c` and
// `generic` (half::, nnunet_fp16::): `return f16c::call;` where this CPU runs it, else
// `return generic::call;`. The including file is built with VOXSEG_HAVE_F16C_KERNELS on x86-64.
#if defined(VOXSEG_HAVE_F16C_KERNELS)
#define VOXSEG_F16C_DISPATCH(call)                                  \
    if (::voxseg::engine::half::f16cAvailable()) return f16c::call; \
    return generic::call
#else
#define VOXSEG_F16C_DISPATCH(call) return generic::call
#endif
