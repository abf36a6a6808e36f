// Row kernels for fp16 (IEEE binary16) storage of the sliding-window accumulator, as nnU-Net v2
// keeps its predicted_logits: values are loaded as fp32, combined in fp32 and rounded once per
// store (round to nearest even; saturated to +-65504, so large logits never become infinite).
// x86-64 CPUs with F16C + AVX2 (2013 on) use 8-wide conversions (half_kernels_f16c.cpp, chosen at
// run time); other CPUs use the portable scalar conversion of engine/graph/tensor.h.
#pragma once

#include <cstdint>

namespace voxseg::engine::half {

// dst[x] = half(float(dst[x]) + w[x] * s[x']) for x in [0, n), x' = reversed ? n - 1 - x : x.
void accumulateRow(uint16_t* dst, const float* w, const float* s, int64_t n, bool reversed);
// dst[x] = float(src[x]).
void toFloatRow(const uint16_t* src, float* dst, int64_t n);
// float value of every fp16 bit pattern (65536 entries, exact), for scattered reads.
const float* toFloatTable();
// "f16c" or "generic": the kernels in use on this CPU.
const char* kernelIsa();

}  // namespace voxseg::engine::half
