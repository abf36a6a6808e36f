// The INT8 quantisation scheme (int8_scheme.h). Float operations are written one per statement,
// in the order oneDNN applies them, so that the compiler cannot fuse or reorder them.
#include "engine/quant/int8_scheme.h"

#include <algorithm>
#include <cmath>

namespace voxseg::engine::quant {

const char* zeroPointsName(ZeroPoints z) {
    return z == ZeroPoints::kWhereNeeded ? "where-needed" : "always";
}

std::optional<ZeroPoints> parseZeroPoints(const std::string& name) {
    if (name == "always") return ZeroPoints::kAlways;
    if (name == "where-needed") return ZeroPoints::kWhereNeeded;
    return std::nullopt;
}

Result<ActivationQuant> activationQuantFromRange(float min, float max, const std::string& tensor,
                                                 ZeroPoints zero_points) {
    if (!std::isfinite(min) || !std::isfinite(max) || !(max > min))
        return invalidArgument("int8: tensor '" + tensor + "' has no usable range [" +
                                   std::to_string(min) + ", " + std::to_string(max) +
                                   "]: calibrate again with cases that reach it",
                               tensor);
    ActivationQuant q;
    if (min >= 0.0f || (zero_points == ZeroPoints::kWhereNeeded && max > 0.0f &&
                        -min <= kSmallNegativeShare * max)) {
        q.scale = max / 255.0f;
        q.zero_point = 0;
        return q;
    }
    const float lo = std::min(min, 0.0f), hi = std::max(max, 0.0f);
    q.scale = (hi - lo) / 255.0f;
    q.zero_point = static_cast<int32_t>(std::clamp(std::nearbyint(-lo / q.scale), 0.0f, 255.0f));
    return q;
}

uint8_t roundToU8(float f) {
    const float c = std::clamp(f, 0.0f, 255.0f);
    return static_cast<uint8_t>(std::nearbyint(c));  // default FP environment: half to even
}

int8_t roundToS8(float f) {
    const float c = std::clamp(f, -128.0f, 127.0f);
    return static_cast<int8_t>(std::nearbyint(c));
}

uint8_t quantizeActivation(float x, const ActivationQuant& q) {
    const float inv = 1.0f / q.scale;
    float f = x * inv;
    f = f + static_cast<float>(q.zero_point);
    return roundToU8(f);
}

float dequantizeActivation(uint8_t q, const ActivationQuant& p) {
    return static_cast<float>(static_cast<int32_t>(q) - p.zero_point) * p.scale;
}

Int8Weights quantizeWeightsPerChannel(const std::vector<float>& w, int64_t out_channels, int qmax) {
    Int8Weights out;
    out.values.resize(w.size());
    out.scales.resize(static_cast<size_t>(out_channels));
    const size_t row = out_channels > 0 ? w.size() / static_cast<size_t>(out_channels) : 0;
    for (int64_t o = 0; o < out_channels; ++o) {
        const float* src = w.data() + static_cast<size_t>(o) * row;
        float amax = 0.0f;
        for (size_t i = 0; i < row; ++i) amax = std::max(amax, std::fabs(src[i]));
        const float scale = amax > 0.0f ? amax / static_cast<float>(qmax) : 1.0f;
        out.scales[o] = scale;
        for (size_t i = 0; i < row; ++i) {
            const float q = std::nearbyint(src[i] / scale);
            out.values[static_cast<size_t>(o) * row + i] = static_cast<int8_t>(
                std::clamp(q, -static_cast<float>(qmax), static_cast<float>(qmax)));
        }
    }
    return out;
}

std::array<int64_t, 3> outputSize(const Int8ConvSpec& s) {
    std::array<int64_t, 3> out{};
    for (int i = 0; i < 3; ++i)
        out[i] = (s.in_size[i] + s.pads_begin[i] + s.pads_end[i] - s.kernel[i]) / s.strides[i] + 1;
    return out;
}

Status validate(const Int8ConvSpec& s) {
    if (s.batch < 1 || s.in_channels < 1 || s.out_channels < 1)
        return invalidArgument("int8 conv: batch and channel counts must be positive");
    for (int i = 0; i < 3; ++i) {
        if (s.kernel[i] < 1 || s.strides[i] < 1 || s.pads_begin[i] < 0 || s.pads_end[i] < 0 ||
            s.in_size[i] < 1)
            return invalidArgument(
                "int8 conv: kernel, strides and sizes must be positive, pads >= 0");
        if (s.in_size[i] + s.pads_begin[i] + s.pads_end[i] < s.kernel[i])
            return invalidArgument("int8 conv: kernel larger than the padded input");
    }
    if (s.dst_s8 && (s.dst_f32 || s.residual || s.activation != Int8Activation::kNone ||
                     s.dst.scale != 1.0f || s.dst.zero_point != 0))
        return invalidArgument(
            "int8 conv: an s8 result takes no residual, activation or float output, and dst "
            "{1, 0} (its scales are per channel, in output_scales)");
    if (s.output_scales.size() != static_cast<size_t>(s.out_channels))
        return invalidArgument("int8 conv: one output scale per output channel expected");
    if (!s.bias.empty() && s.bias.size() != static_cast<size_t>(s.out_channels))
        return invalidArgument("int8 conv: one bias per output channel expected");
    if (s.dst_f32 &&
        (s.dst.scale != 1.0f || s.dst.zero_point != 0 ||
         (s.residual && (s.residual_quant.zero_point != 0 || s.residual_scale != 1.0f))))
        return invalidArgument(
            "int8 conv: a float32 result takes dst {1, 0} and a float32 residual with scale 1");
    for (const ActivationQuant* q : {&s.src, &s.dst, &s.residual_quant})
        if (!(q->scale > 0.0f) || !std::isfinite(q->scale) || q->zero_point < 0 ||
            q->zero_point > 255)
            return invalidArgument(
                "int8 conv: activation scales must be positive and finite, "
                "zero points in [0, 255]");
    return Status::ok();
}

void setRequantisation(Int8ConvSpec& spec, const ActivationQuant& src,
                       const std::vector<float>& weight_scales, const ActivationQuant& dst,
                       const std::vector<float>& bias_f32, const ActivationQuant* residual) {
    spec.src = src;
    spec.dst = dst;
    spec.output_scales.resize(weight_scales.size());
    spec.bias.clear();
    for (size_t o = 0; o < weight_scales.size(); ++o) {
        const float acc_scale = src.scale * weight_scales[o];  // one accumulator unit
        spec.output_scales[o] = acc_scale / dst.scale;
        if (!bias_f32.empty()) spec.bias.push_back(bias_f32[o] / acc_scale);
    }
    spec.residual = residual != nullptr;
    if (residual) {
        spec.residual_quant = *residual;
        spec.residual_scale = residual->scale / dst.scale;
    }
}

bool foldSourceZeroPointIntoHalo(Int8ConvSpec& spec, const Int8Weights& weights) {
    if (spec.src.zero_point == 0 || spec.out_channels <= 0 ||
        (spec.pads_begin == std::array<int64_t, 3>{} && spec.pads_end == std::array<int64_t, 3>{}))
        return false;
    foldSourceZeroPointIntoBias(spec, weights);
    for (int i = 0; i < 3; ++i) {
        spec.in_size[i] += spec.pads_begin[i] + spec.pads_end[i];
        spec.pads_begin[i] = spec.pads_end[i] = 0;
    }
    return true;
}

void foldSourceZeroPointIntoBias(Int8ConvSpec& spec, const Int8Weights& weights) {
    if (spec.src.zero_point == 0 || spec.out_channels <= 0) return;
    const int64_t per_oc = static_cast<int64_t>(weights.values.size()) / spec.out_channels;
    if (spec.bias.empty()) spec.bias.assign(static_cast<size_t>(spec.out_channels), 0.0f);
    for (int64_t oc = 0; oc < spec.out_channels; ++oc) {
        int64_t sum = 0;
        for (int64_t k = 0; k < per_oc; ++k)
            sum += weights.values[static_cast<size_t>(oc * per_oc + k)];
        spec.bias[static_cast<size_t>(oc)] =
            static_cast<float>(static_cast<double>(spec.bias[static_cast<size_t>(oc)]) -
                               static_cast<double>(spec.src.zero_point) * static_cast<double>(sum));
    }
    spec.src.zero_point = 0;
}

void setRequantisationS8(Int8ConvSpec& spec, const ActivationQuant& src,
                         const std::vector<float>& weight_scales,
                         const std::vector<float>& dst_channel_scales,
                         const std::vector<float>& bias_f32) {
    setRequantisation(spec, src, weight_scales, ActivationQuant{}, bias_f32);
    for (size_t o = 0; o < spec.output_scales.size(); ++o)
        spec.output_scales[o] = src.scale * weight_scales[o] / dst_channel_scales[o];
    spec.dst_s8 = true;
}

float requantisedValue(const Int8ConvSpec& spec, int64_t oc, int32_t acc, uint8_t residual_q) {
    float f = static_cast<float>(acc);
    if (!spec.bias.empty()) f = f + spec.bias[oc];
    f = f * spec.output_scales[oc];
    if (spec.residual) {
        const float r =
            static_cast<float>(residual_q) - static_cast<float>(spec.residual_quant.zero_point);
        const float scaled = spec.residual_scale * r;
        f = f + scaled;
    }
    if (spec.activation == Int8Activation::kRelu) {
        f = f > 0.0f ? f : 0.0f;
    } else if (spec.activation == Int8Activation::kLeakyRelu) {
        const float neg = f * spec.alpha;
        f = f > 0.0f ? f : neg;
    }
    f = f + static_cast<float>(spec.dst.zero_point);
    return f;
}

}  // namespace voxseg::engine::quant
