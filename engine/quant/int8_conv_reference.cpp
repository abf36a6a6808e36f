// Plain loops: the readable definition that the oneDNN int8 convolution is tested against.
#include "engine/quant/int8_conv_reference.h"

#include <algorithm>

namespace voxseg::engine::quant {
namespace {

int64_t product(const std::array<int64_t, 3>& a) { return a[0] * a[1] * a[2]; }

// The s32 accumulator of one output element: sum over taps and input channels of
// (q - zero point) * w, padding reading the zero point. With `pairs`, channel pairs are summed
// as raw u8 x s8 into a saturating s16 first (zero point 0 only).
int32_t accumulate(const Int8ConvSpec& s, const uint8_t* src_n, const int8_t* w_o,
                   const std::array<int64_t, 3>& out_pos, bool pairs, int64_t& saturations) {
    const int64_t in_vol = product(s.in_size), k_vol = product(s.kernel);
    int64_t acc = 0;
    for (int64_t kd = 0; kd < s.kernel[0]; ++kd)
        for (int64_t kh = 0; kh < s.kernel[1]; ++kh)
            for (int64_t kw = 0; kw < s.kernel[2]; ++kw) {
                const int64_t z = out_pos[0] * s.strides[0] - s.pads_begin[0] + kd;
                const int64_t y = out_pos[1] * s.strides[1] - s.pads_begin[1] + kh;
                const int64_t x = out_pos[2] * s.strides[2] - s.pads_begin[2] + kw;
                const bool inside = z >= 0 && y >= 0 && x >= 0 && z < s.in_size[0] &&
                                    y < s.in_size[1] && x < s.in_size[2];
                const int64_t at = (z * s.in_size[1] + y) * s.in_size[2] + x;
                const int64_t tap = (kd * s.kernel[1] + kh) * s.kernel[2] + kw;
                int32_t pair = 0;
                for (int64_t i = 0; i < s.in_channels; ++i) {
                    const int32_t q = inside ? src_n[i * in_vol + at] : s.src.zero_point;
                    const int32_t w = w_o[i * k_vol + tap];
                    if (!pairs) {
                        acc += static_cast<int64_t>(q - s.src.zero_point) * w;
                        continue;
                    }
                    pair += q * w;
                    if (i % 2 == 1 || i == s.in_channels - 1) {
                        const int32_t sat = std::clamp(pair, -32768, 32767);
                        saturations += sat != pair;
                        acc += sat;
                        pair = 0;
                    }
                }
            }
    return static_cast<int32_t>(acc);
}

}  // namespace

Result<Int8ReferenceResult> int8ConvReference(const Int8ConvSpec& s,
                                              const std::vector<uint8_t>& src,
                                              const std::vector<int8_t>& weights,
                                              const std::vector<uint8_t>& residual,
                                              const Int8ReferenceOptions& options) {
    VOXSEG_RETURN_IF_ERROR(validate(s));
    if (options.pair_saturation && s.src.zero_point != 0)
        return invalidArgument("int8 reference: s16 pair saturation is modelled for zero point 0");
    const std::array<int64_t, 3> out = outputSize(s);
    const int64_t in_vol = product(s.in_size), out_vol = product(out);
    const int64_t k_vol = product(s.kernel);
    const size_t dst_n = static_cast<size_t>(s.batch * s.out_channels * out_vol);
    if (src.size() != static_cast<size_t>(s.batch * s.in_channels * in_vol) ||
        weights.size() != static_cast<size_t>(s.out_channels * s.in_channels * k_vol) ||
        (s.residual && residual.size() != dst_n))
        return invalidArgument("int8 reference: tensor sizes do not match the spec");
    Int8ReferenceResult r;
    if (s.dst_s8)
        r.dst_s8.resize(dst_n);
    else
        r.dst.resize(dst_n);
    r.unrounded.resize(dst_n);
    r.acc.resize(dst_n);
    for (int64_t n = 0; n < s.batch; ++n)
        for (int64_t o = 0; o < s.out_channels; ++o)
            for (int64_t z = 0; z < out[0]; ++z)
                for (int64_t y = 0; y < out[1]; ++y)
                    for (int64_t x = 0; x < out[2]; ++x) {
                        const size_t at = static_cast<size_t>(
                            ((n * s.out_channels + o) * out[0] + z) * out[1] * out[2] + y * out[2] +
                            x);
                        const int32_t acc =
                            accumulate(s, src.data() + n * s.in_channels * in_vol,
                                       weights.data() + o * s.in_channels * k_vol, {z, y, x},
                                       options.pair_saturation, r.saturated_pairs);
                        const float f = requantisedValue(s, o, acc, s.residual ? residual[at] : 0);
                        r.acc[at] = acc;
                        r.unrounded[at] = f;
                        if (s.dst_s8)
                            r.dst_s8[at] = roundToS8(f);
                        else
                            r.dst[at] = roundToU8(f);
                    }
    return r;
}

}  // namespace voxseg::engine::quant
