// The exact integer reference of an INT8 convolution (int8_scheme.h): s32 accumulation of
// (u8 - zero point) x s8 products in plain loops, then the requantisation rule of
// requantisedValue(). The oneDNN int8 convolution (engine/cpu/conv_int8.h) must match it bit
// for bit (tests/engine/int8_conv_parity_test.cpp, docs/int8.md).
//
// Optionally models the s16 saturation of CPUs without VNNI (AVX2's vpmaddubsw adds the u8 x s8
// products of input channels 2k and 2k+1 at one kernel tap into a saturating s16), which is what
// oneDNN computes there when weights exceed the 7-bit range; modelled for zero-point-0 sources.
// Thread safety: pure functions. Tensors are plain N C D H W (weights O I kD kH kW).
#pragma once

#include "engine/quant/int8_scheme.h"

#include <cstdint>
#include <vector>

namespace voxseg::engine::quant {

struct Int8ReferenceOptions {
    bool pair_saturation = false;  // model non-VNNI vpmaddubsw (requires src.zero_point == 0)
};

struct Int8ReferenceResult {
    std::vector<uint8_t> dst;      // N OC D H W (u8 results)
    std::vector<int8_t> dst_s8;    // N OC D H W, for spec.dst_s8 (dst is then empty)
    std::vector<float> unrounded;  // requantisedValue() of each element, before rounding
    std::vector<int32_t> acc;      // the s32 accumulators
    int64_t saturated_pairs = 0;   // s16 saturations (pair_saturation only)
};

// `residual` (N OC D H W u8) is read when spec.residual; otherwise it may be empty.
Result<Int8ReferenceResult> int8ConvReference(const Int8ConvSpec& spec,
                                              const std::vector<uint8_t>& src,
                                              const std::vector<int8_t>& weights,
                                              const std::vector<uint8_t>& residual,
                                              const Int8ReferenceOptions& options = {});

}  // namespace voxseg::engine::quant
