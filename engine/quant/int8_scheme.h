// The INT8 quantisation scheme of the engine (issue 40; docs/int8.md): how float tensors become
// integers, the exact rule a quantised convolution's result follows, and the parameters both the
// oneDNN backend (engine/cpu/conv_int8.h) and the integer reference (int8_conv_reference.h) take.
//
// Scheme (chosen from what oneDNN 2.6 computes exactly on every x86 CPU, VNNI or not):
// - Weights: s8, symmetric, one scale per output channel: w ~= q * scale, q in [-qmax, qmax].
//   qmax is 127 where the CPU multiplies u8 x s8 with VNNI (vpdpbusd: 4 products straight into
//   s32) and 63 ("7-bit weights") without: AVX2's vpmaddubsw adds two u8 x s8 products into a
//   saturating s16, and 2 x 255 x 63 = 32130 < 32767 never saturates (x 127 does).
// - Activations: u8 with one scale and zero point per tensor, from calibration:
//   x ~= (q - zero_point) * scale. Non-negative tensors (after ReLU) get zero point 0. Sources are
//   never s8: on CPUs without VNNI oneDNN halves s8-source weights (its scale_adjust 0.5), which
//   does not round like any rule we could state; u8 with a zero point covers signed tensors.
// - Accumulation in s32; padding counts as the source's zero point (a real 0).
// - Requantisation of a convolution's result, per output element, in float32 in this order
//   (measured bit for bit against oneDNN 2.6, docs/int8.md):
//       f = float(acc) + bias[oc]            bias in accumulator units (float)
//       f = f * output_scale[oc]             src.scale * w_scale[oc] / dst.scale
//       f = f + residual_scale * (float(r) - float(r_zero_point))   residual add (oneDNN sum)
//       f = activation(f)                    ReLU / LeakyReLU (commute with positive scales)
//       f = f + dst.zero_point
//       q = round-half-to-even(clamp(f, 0, 255))
// - Normalisation inputs (optional, calibrate --norm-inputs int8): a convolution whose only
//   reader is an InstanceNorm or GroupNorm may write s8 with one scale per output channel and no
//   zero point, x ~= q * scale[c] (`dst_s8`): the same rule without the residual, activation and
//   zero point, q = round-half-to-even(clamp(f, -128, 127)). A normalisation is invariant to a
//   positive scale of its input per channel (InstanceNorm) and, for InstanceNorm, to a constant
//   per channel, so such a convolution drops its bias and the norm reads one byte per value.
// Thread safety: plain values and pure functions.
#pragma once

#include "core/status.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace voxseg::engine::quant {

// Largest weight magnitude: with VNNI (avx512_vnni, avx_vnni, amx_int8), and without.
inline constexpr int kWeightQmaxVnni = 127;
inline constexpr int kWeightQmaxNoVnni = 63;
// The largest weight magnitude of `bits`-bit weights: 127 for 8, 63 for 7 (bits in [2, 8]).
constexpr int weightQmaxForBits(int bits) { return (1 << (bits - 1)) - 1; }

// A u8 tensor's parameters: x ~= (q - zero_point) * scale, q and zero_point in [0, 255].
struct ActivationQuant {
    float scale = 1.0f;
    int32_t zero_point = 0;
};

// Which activations get a zero point (calibrate --zero-points). kAlways: every tensor with
// negative values. kWhereNeeded: only those whose negative part is more than
// kSmallNegativeShare of the positive one; the others (LeakyReLU outputs, whose negatives are a
// hundredth of their positives) get zero point 0, their negatives clamp to 0, and the int8
// convolutions reading them need no zero-point compensation (oneDNN's brgconv AMX kernel).
enum class ZeroPoints { kAlways, kWhereNeeded };
inline constexpr float kSmallNegativeShare = 1.0f / 32.0f;
const char* zeroPointsName(ZeroPoints z);  // "always", "where-needed"
std::optional<ZeroPoints> parseZeroPoints(const std::string& name);

// Parameters covering [min, max] (the range calibration chose): zero point 0 when min >= 0 (or,
// with kWhereNeeded, when -min <= kSmallNegativeShare * max: [0, max]), else the zero point that
// puts 0.0 exactly on an integer. kInvalidArgument for non-finite values or max <= min (the
// message names `tensor`).
Result<ActivationQuant> activationQuantFromRange(float min, float max, const std::string& tensor,
                                                 ZeroPoints zero_points = ZeroPoints::kAlways);

// x as u8 the way oneDNN's quantising reorder computes it: rne(clamp(x * (1 / scale) + zp)).
uint8_t quantizeActivation(float x, const ActivationQuant& q);
// (q - zero_point) * scale.
float dequantizeActivation(uint8_t q, const ActivationQuant& p);

// Weights quantised per output channel: values in the layout they came in (O, I, kD, kH, kW),
// scales[o] * values[o, ...] ~= w[o, ...].
struct Int8Weights {
    std::vector<int8_t> values;
    std::vector<float> scales;
};

// Symmetric per-output-channel quantisation of `w` (out_channels rows of equal length):
// scale = max|w_row| / qmax (1 for an all-zero row), q = rne(w / scale) clamped to +-qmax.
Int8Weights quantizeWeightsPerChannel(const std::vector<float>& w, int64_t out_channels, int qmax);

enum class Int8Activation { kNone, kRelu, kLeakyRelu };

// One 3-D convolution on u8 activations and s8 weights (group 1, no dilation), N C D H W.
struct Int8ConvSpec {
    int64_t batch = 1, in_channels = 0, out_channels = 0;
    std::array<int64_t, 3> in_size{}, kernel{1, 1, 1}, strides{1, 1, 1};
    std::array<int64_t, 3> pads_begin{}, pads_end{};
    ActivationQuant src, dst;
    std::vector<float> output_scales;  // per output channel
    std::vector<float> bias;           // per output channel, accumulator units; empty: none
    Int8Activation activation = Int8Activation::kNone;
    float alpha = 0.0f;  // LeakyReLU's slope
    // Write float32 instead of u8: the rule stops before "+ dst.zero_point" and the rounding
    // (dst is {1, 0}, so output_scales are src.scale * w_scale: dequantised). A residual is then
    // float32 too (residual_quant {1, 0}, residual_scale 1).
    bool dst_f32 = false;
    // With dst_f32: that float stored as bf16 (rounded to nearest even), for bf16 readers.
    bool dst_bf16 = false;
    // Residual add: dst holds the residual's values (u8 with residual_quant) on entry.
    bool residual = false;
    ActivationQuant residual_quant;
    float residual_scale = 1.0f;  // residual_quant.scale / dst.scale
    // Write s8 with per-channel scales (header: normalisation inputs); output_scales then hold
    // src.scale * w_scale[oc] / dst_channel_scales[oc], dst stays {1, 0}. No residual, no
    // activation, not with dst_f32.
    bool dst_s8 = false;
    // The result channels-last (ndhwc) whatever its type (an s8 result always is): for a caller
    // that reads it itself (the int8 up-sampling's scatter).
    bool dst_channels_last = false;
};

// Output D, H, W of `spec` (caller checks validate() first).
std::array<int64_t, 3> outputSize(const Int8ConvSpec& spec);
// Dimensions, scales and zero points consistent; kInvalidArgument naming the problem.
Status validate(const Int8ConvSpec& spec);

// The scales and bias of a float convolution y = conv(x, w) + b quantised with `src` (x),
// `weight_scales` (w per output channel) and `dst` (y): fills spec.src, spec.dst,
// spec.output_scales and spec.bias (bias_f32 may be empty). `residual` (when given) sets the
// residual add's scale for a residual tensor quantised with it.
void setRequantisation(Int8ConvSpec& spec, const ActivationQuant& src,
                       const std::vector<float>& weight_scales, const ActivationQuant& dst,
                       const std::vector<float>& bias_f32,
                       const ActivationQuant* residual = nullptr);

// setRequantisation for a convolution writing s8 with `dst_channel_scales` (one per output
// channel): sets dst_s8, output_scales and bias (bias_f32 may be empty: dropped).
void setRequantisationS8(Int8ConvSpec& spec, const ActivationQuant& src,
                         const std::vector<float>& weight_scales,
                         const std::vector<float>& dst_channel_scales,
                         const std::vector<float>& bias_f32);

// Halo sources (int8_policy.h): `spec` rewritten for a source written inside a halo of its zero
// point as wide as the padding (D, H, W grown by pads_begin + pads_end): no padding, no source
// zero point, and - zero_point * sum(w[oc]) (an integer) added to each bias in accumulator units,
// since sum w * (q - zp) = sum w * q - zp * sum w once every tap reads a real value. The rule
// then differs from the padded one only in that bias's float rounding. False (spec unchanged)
// without a source zero point or without padding.
bool foldSourceZeroPointIntoHalo(Int8ConvSpec& spec, const Int8Weights& weights);
// The bias part of it alone, for a source whose every tap reads a real value (the tap channels
// of int8_policy.h): bias -= zero_point * sum(w[oc]), no source zero point. The geometry is the
// caller's.
void foldSourceZeroPointIntoBias(Int8ConvSpec& spec, const Int8Weights& weights);

// The float value the requantisation rule above rounds, for one accumulator (public so the
// reference and tests share one definition of the rule). `residual_q` is ignored without a
// residual.
float requantisedValue(const Int8ConvSpec& spec, int64_t oc, int32_t acc, uint8_t residual_q);
// round-half-to-even(clamp(f, 0, 255)).
uint8_t roundToU8(float f);
// round-half-to-even(clamp(f, -128, 127)).
int8_t roundToS8(float f);

}  // namespace voxseg::engine::quant
