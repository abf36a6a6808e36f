// Internal: both implementations of sliding_window_nnunet.h's row kernels, for the dispatcher and
// for tests. The f16c ones exist on x86-64 only (VOXSEG_HAVE_F16C_KERNELS) and need a CPU that
// half::f16cAvailable() accepts. Both round every result once to float16, to nearest even, with
// overflow to inf (PyTorch's float16 arithmetic); they differ at most in a NaN's payload.
#pragma once

#include <cstdint>

namespace voxseg::engine::nnunet_fp16 {

namespace generic {
void addWeightsRow(uint16_t* n, const uint16_t* g, int64_t count);
void addPredictionRow(uint16_t* acc, const float* p, const uint16_t* g, int64_t count);
bool divideRow(uint16_t* acc, const uint16_t* n, int64_t count);
void addRow(uint16_t* a, const uint16_t* b, int64_t count);
void divideRowBy(uint16_t* a, int64_t count, int divisor);
}  // namespace generic

namespace f16c {
void addWeightsRow(uint16_t* n, const uint16_t* g, int64_t count);
void addPredictionRow(uint16_t* acc, const float* p, const uint16_t* g, int64_t count);
bool divideRow(uint16_t* acc, const uint16_t* n, int64_t count);
void addRow(uint16_t* a, const uint16_t* b, int64_t count);
void divideRowBy(uint16_t* a, int64_t count, int divisor);
}  // namespace f16c

}  // namespace voxseg::engine::nnunet_fp16
