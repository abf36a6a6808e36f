#include "cuda/int8_conv.h"

#include <fmt/format.h>

#include <algorithm>
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

Result<Int8ConvPack> packInt8Conv(Int8ConvPlan& plan, const std::vector<float>& weights,
                                  const std::vector<float>& bias,
                                  const engine::quant::ActivationQuant& src, int weight_qmax) {
    namespace quant = engine::quant;
    const math::Int8Geometry& g = plan.geometry;
    const int64_t taps = g.taps(), cout = plan.cout;
    if (cout <= 0 || g.cin <= 0 || int64_t(weights.size()) != cout * g.cin * taps)
        return invalidArgument(fmt::format("int8 convolution: {} weights for {} x {} x {} taps",
                                           weights.size(), cout, g.cin, taps));
    if (!bias.empty() && int64_t(bias.size()) != cout)
        return invalidArgument(
            fmt::format("int8 convolution: {} bias values for {} channels", bias.size(), cout));
    const quant::Int8Weights w = quant::quantizeWeightsPerChannel(weights, cout, weight_qmax);
    quant::Int8ConvSpec spec;  // only the scales and bias of the rule are used
    spec.out_channels = cout;
    spec.dst_f32 = true;
    quant::setRequantisation(spec, src, w.scales, quant::ActivationQuant{1.0f, 0}, bias);

    plan.cout_padded = roundUp(cout, 16);
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
                pack.weights[size_t(o * g.kp + t * g.cin + c)] = q;
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

}  // namespace voxseg::cuda
