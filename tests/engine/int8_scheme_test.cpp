// The INT8 scheme's rules (engine/quant/int8_scheme.h): activation ranges to scale and zero
// point, per-channel symmetric weights, the requantisation order and its rounding.
#include "engine/quant/int8_scheme.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace voxseg::engine::quant {
namespace {

TEST(Int8Scheme, NonNegativeRangeHasZeroPointZero) {
    auto q = activationQuantFromRange(0.0f, 6.0f, "relu_out");
    ASSERT_TRUE(q.isOk()) << q.status().message();
    EXPECT_EQ(q->zero_point, 0);
    EXPECT_FLOAT_EQ(q->scale, 6.0f / 255.0f);
    EXPECT_EQ(quantizeActivation(6.0f, *q), 255);
    EXPECT_EQ(quantizeActivation(-1.0f, *q), 0);  // saturates
}

TEST(Int8Scheme, SignedRangePutsZeroOnAnIntegerAndRoundTripsWithinHalfAStep) {
    auto q = activationQuantFromRange(-1.3f, 4.1f, "leaky_out");
    ASSERT_TRUE(q.isOk());
    EXPECT_GT(q->zero_point, 0);
    EXPECT_LT(q->zero_point, 255);
    EXPECT_EQ(quantizeActivation(0.0f, *q), q->zero_point);
    EXPECT_EQ(dequantizeActivation(static_cast<uint8_t>(q->zero_point), *q), 0.0f);
    for (float x = -1.3f; x <= 4.1f; x += 0.01f)
        EXPECT_LE(std::fabs(dequantizeActivation(quantizeActivation(x, *q), *q) - x),
                  0.5f * q->scale * 1.0001f)
            << x;
}

// calibrate --zero-points where-needed: a LeakyReLU-like range (negatives a hundredth of the
// positives) gets no zero point and its negatives clamp to 0; a range with real negatives keeps
// the zero point it always gets; the threshold is kSmallNegativeShare of the positive part.
TEST(Int8Scheme, ZeroPointsWhereNeededDropOnlySmallNegativeParts) {
    const auto leaky = activationQuantFromRange(-0.05f, 4.1f, "leaky", ZeroPoints::kWhereNeeded);
    ASSERT_TRUE(leaky.isOk());
    EXPECT_EQ(leaky->zero_point, 0);
    EXPECT_FLOAT_EQ(leaky->scale, 4.1f / 255.0f);
    EXPECT_EQ(quantizeActivation(-0.05f, *leaky), 0);
    const auto always = activationQuantFromRange(-0.05f, 4.1f, "leaky");
    ASSERT_TRUE(always.isOk());
    EXPECT_GT(always->zero_point, 0);
    for (float lo : {-0.5f, -4.1f * kSmallNegativeShare * 1.01f}) {
        const auto signed_range = activationQuantFromRange(lo, 4.1f, "t", ZeroPoints::kWhereNeeded);
        const auto reference = activationQuantFromRange(lo, 4.1f, "t");
        ASSERT_TRUE(signed_range.isOk() && reference.isOk());
        EXPECT_GT(signed_range->zero_point, 0) << lo;
        EXPECT_EQ(signed_range->zero_point, reference->zero_point) << lo;
        EXPECT_EQ(signed_range->scale, reference->scale) << lo;
    }
    const auto edge =
        activationQuantFromRange(-4.1f * kSmallNegativeShare, 4.1f, "t", ZeroPoints::kWhereNeeded);
    ASSERT_TRUE(edge.isOk());
    EXPECT_EQ(edge->zero_point, 0);
    EXPECT_EQ(parseZeroPoints("where-needed"), ZeroPoints::kWhereNeeded);
    EXPECT_EQ(parseZeroPoints("always"), ZeroPoints::kAlways);
    EXPECT_FALSE(parseZeroPoints("symmetric").has_value());
    EXPECT_STREQ(zeroPointsName(ZeroPoints::kWhereNeeded), "where-needed");
}

TEST(Int8Scheme, UnusableRangeIsRefusedNamingTheTensor) {
    for (auto [lo, hi] : {std::pair{1.0f, 1.0f}, std::pair{2.0f, 1.0f}, std::pair{0.0f, NAN},
                          std::pair{-INFINITY, 1.0f}}) {
        auto q = activationQuantFromRange(lo, hi, "encoder.3.out");
        ASSERT_FALSE(q.isOk());
        EXPECT_NE(q.status().message().find("encoder.3.out"), std::string::npos);
        EXPECT_NE(q.status().message().find("calibrate"), std::string::npos);
    }
}

TEST(Int8Scheme, WeightsAreSymmetricPerOutputChannelWithinQmax) {
    std::mt19937 rng(7);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const int64_t oc = 5, row = 3 * 27;
    std::vector<float> w(oc * row);
    for (size_t i = 0; i < w.size(); ++i) w[i] = dist(rng) * static_cast<float>(1 + i / row);
    std::fill(w.begin() + 2 * row, w.begin() + 3 * row, 0.0f);  // a dead channel
    for (int qmax : {kWeightQmaxVnni, kWeightQmaxNoVnni}) {
        const Int8Weights q = quantizeWeightsPerChannel(w, oc, qmax);
        ASSERT_EQ(q.scales.size(), 5u);
        EXPECT_EQ(q.scales[2], 1.0f);
        for (int64_t o = 0; o < oc; ++o) {
            int amax = 0;
            for (int64_t i = 0; i < row; ++i) {
                const int v = q.values[o * row + i];
                amax = std::max(amax, std::abs(v));
                EXPECT_LE(std::fabs(static_cast<float>(v) * q.scales[o] - w[o * row + i]),
                          0.5f * q.scales[o] * 1.0001f);
            }
            EXPECT_EQ(amax, o == 2 ? 0 : qmax) << "channel " << o;  // the largest maps to qmax
        }
    }
}

TEST(Int8Scheme, RoundingIsHalfToEvenAfterClamping) {
    EXPECT_EQ(roundToU8(2.5f), 2);
    EXPECT_EQ(roundToU8(3.5f), 4);
    EXPECT_EQ(roundToU8(2.5001f), 3);
    EXPECT_EQ(roundToU8(-7.0f), 0);
    EXPECT_EQ(roundToU8(254.5f), 254);
    EXPECT_EQ(roundToU8(255.5f), 255);
    EXPECT_EQ(roundToU8(1e9f), 255);
}

// bias before the output scale, the residual after it, the activation, then the zero point.
TEST(Int8Scheme, RequantisationAppliesBiasScaleResidualActivationZeroPointInThatOrder) {
    Int8ConvSpec s;
    s.out_channels = 1;
    s.output_scales = {0.5f};
    s.bias = {4.0f};
    s.dst.zero_point = 10;
    EXPECT_EQ(requantisedValue(s, 0, 16, 0), (16.0f + 4.0f) * 0.5f + 10.0f);
    s.residual = true;
    s.residual_quant.zero_point = 3;
    s.residual_scale = 2.0f;
    EXPECT_EQ(requantisedValue(s, 0, 16, 7), 10.0f + 2.0f * 4.0f + 10.0f);
    s.activation = Int8Activation::kLeakyRelu;
    s.alpha = 0.25f;
    EXPECT_EQ(requantisedValue(s, 0, -100, 3), (-96.0f * 0.5f) * 0.25f + 10.0f);
    s.activation = Int8Activation::kRelu;
    EXPECT_EQ(requantisedValue(s, 0, -100, 3), 10.0f);
}

// setRequantisation: one accumulator unit is src.scale * w_scale; the output scale maps it to
// dst's units; the bias is stored in accumulator units.
TEST(Int8Scheme, RequantisationScalesFollowFromTheTensorScales) {
    Int8ConvSpec s;
    s.out_channels = 2;
    const ActivationQuant src{0.02f, 0}, dst{0.1f, 5}, res{0.05f, 7};
    setRequantisation(s, src, {0.5f, 0.25f}, dst, {1.0f, -2.0f}, &res);
    EXPECT_FLOAT_EQ(s.output_scales[0], 0.02f * 0.5f / 0.1f);
    EXPECT_FLOAT_EQ(s.output_scales[1], 0.02f * 0.25f / 0.1f);
    EXPECT_FLOAT_EQ(s.bias[0], 1.0f / (0.02f * 0.5f));
    EXPECT_FLOAT_EQ(s.bias[1], -2.0f / (0.02f * 0.25f));
    EXPECT_TRUE(s.residual);
    EXPECT_FLOAT_EQ(s.residual_scale, 0.5f);
    EXPECT_EQ(s.residual_quant.zero_point, 7);
}

}  // namespace
}  // namespace voxseg::engine::quant
