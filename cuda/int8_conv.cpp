#include "cuda/int8_conv.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace voxseg::cuda {
namespace {

constexpr size_t kAlign = 256;
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }
int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

}  // namespace

int64_t int8ChunkRows(int64_t rows, int64_t kp, int64_t cout_padded, size_t budget_bytes) {
    const int64_t per_row = kp + 4 * cout_padded;
    const int64_t fit =
        std::max<int64_t>(128, int64_t(budget_bytes) / std::max<int64_t>(per_row, 1));
    return std::min(roundUp(rows, 128), fit / 128 * 128);
}

double Int8ConvPlan::flops() const {
    return 2.0 * double(geometry.rows()) * double(geometry.k) * double(cout);
}

size_t Int8ConvPlan::im2colBytes() const { return aligned(size_t(chunk_rows * geometry.kp)); }
size_t Int8ConvPlan::resultBytes() const { return aligned(size_t(chunk_rows * cout_padded) * 4); }

namespace {

Status checkSizes(const Int8ConvPlan& plan, const std::vector<float>& weights,
                  const std::vector<float>& bias, const char* what) {
    const math::Int8Geometry& g = plan.geometry;
    const int64_t taps = g.taps(), cout = plan.cout;
    if (cout <= 0 || g.cin <= 0 || int64_t(weights.size()) != cout * g.cin * taps)
        return invalidArgument(fmt::format("{} convolution: {} weights for {} x {} x {} taps", what,
                                           weights.size(), cout, g.cin, taps));
    if (!bias.empty() && int64_t(bias.size()) != cout)
        return invalidArgument(
            fmt::format("{} convolution: {} bias values for {} channels", what, bias.size(), cout));
    return Status::ok();
}

// Element (o, c, t) of the O I taps weights at its GEMM place: tap-major, channel-minor rows.
int64_t packedIndex(const math::Int8Geometry& g, int64_t o, int64_t c, int64_t t) {
    return o * g.kp + t * g.cin + c;
}

}  // namespace

Result<Int8ConvPack> packInt8Conv(Int8ConvPlan& plan, const std::vector<float>& weights,
                                  const std::vector<float>& bias,
                                  const engine::quant::ActivationQuant& src, int weight_qmax) {
    namespace quant = engine::quant;
    VOXSEG_RETURN_IF_ERROR(checkSizes(plan, weights, bias, "int8"));
    const math::Int8Geometry& g = plan.geometry;
    const int64_t taps = g.taps(), cout = plan.cout;
    const quant::Int8Weights w = quant::quantizeWeightsPerChannel(weights, cout, weight_qmax);
    quant::Int8ConvSpec spec;  // only the scales and bias of the rule are used
    spec.out_channels = cout;
    spec.dst_f32 = true;
    quant::setRequantisation(spec, src, w.scales, quant::ActivationQuant{1.0f, 0}, bias);

    plan.cout_padded = roundUp(cout, 16);
    plan.format = math::Format8::kInt8;
    plan.inv_scale = 1.0f / src.scale;
    plan.zero_point = static_cast<float>(src.zero_point);
    plan.has_bias = !spec.bias.empty();
    Int8ConvPack pack;
    pack.weights.assign(size_t(plan.cout_padded * g.kp), 0);
    pack.channels.resize(size_t(cout));
    for (int64_t o = 0; o < cout; ++o) {
        int64_t sum = 0;
        for (int64_t c = 0; c < g.cin; ++c)
            for (int64_t t = 0; t < taps; ++t) {
                const int8_t q = w.values[size_t((o * g.cin + c) * taps + t)];
                pack.weights[size_t(packedIndex(g, o, c, t))] = q;
                sum += q;
            }
        const int64_t comp = int64_t(128 - src.zero_point) * sum;
        // The accumulator's worst case: every shifted byte at -128 against the largest weights.
        const int64_t worst = 128 * int64_t(weight_qmax) * g.k + std::abs(comp);
        if (worst > std::numeric_limits<int32_t>::max())
            return invalidArgument(
                fmt::format("int8 convolution: {} source values per output could overflow the s32 "
                            "accumulator; run this layer in float (float_layers)",
                            g.k));
        pack.channels[size_t(o)] = {static_cast<int32_t>(comp),
                                    plan.has_bias ? spec.bias[size_t(o)] : 0.0f,
                                    spec.output_scales[size_t(o)]};
    }
    return pack;
}

Result<Int8ConvPack> packFp8Conv(Int8ConvPlan& plan, const std::vector<float>& weights,
                                 const std::vector<float>& bias,
                                 const engine::quant::ActivationQuant& src) {
    VOXSEG_RETURN_IF_ERROR(checkSizes(plan, weights, bias, "fp8"));
    const float amax = float(std::max(src.zero_point, 255 - src.zero_point)) * src.scale;
    if (!(amax > 0.0f) || !std::isfinite(amax))
        return invalidArgument(fmt::format(
            "fp8 convolution: the source's calibrated range is empty (scale {}, zero point {}); "
            "calibrate the package again",
            src.scale, src.zero_point));
    const math::Int8Geometry& g = plan.geometry;
    const int64_t taps = g.taps(), cout = plan.cout;
    const float src_scale = amax / math::kE4m3Max;
    plan.cout_padded = roundUp(cout, 16);
    plan.format = math::Format8::kE4M3;
    plan.inv_scale = 1.0f / src_scale;
    plan.zero_point = 0.0f;
    plan.has_bias = !bias.empty();
    Int8ConvPack pack;
    pack.weights.assign(size_t(plan.cout_padded * g.kp), 0);
    pack.channels.resize(size_t(cout));
    const int64_t per_channel = g.cin * taps;
    for (int64_t o = 0; o < cout; ++o) {
        const float* w = weights.data() + o * per_channel;
        float wmax = 0.0f;
        for (int64_t i = 0; i < per_channel; ++i) wmax = std::max(wmax, std::abs(w[i]));
        const float w_scale = wmax > 0.0f ? wmax / math::kE4m3Max : 1.0f;
        const float w_inv = 1.0f / w_scale;
        for (int64_t c = 0; c < g.cin; ++c)
            for (int64_t t = 0; t < taps; ++t)
                pack.weights[size_t(packedIndex(g, o, c, t))] =
                    static_cast<int8_t>(math::quantizeE4m3(w[c * taps + t], w_inv));
        pack.channels[size_t(o)] = {0, plan.has_bias ? bias[size_t(o)] : 0.0f, src_scale * w_scale};
    }
    return pack;
}

}  // namespace voxseg::cuda
