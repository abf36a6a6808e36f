// Normalisations that write their int8 readers' u8 source in their own pass (docs/int8.md,
// "Normalisations write u8"):
// - the kernel's u8 equals quant::quantizeActivation of its own float result (before any bf16
//   rounding), except where the float lies within 1e-4 of a rounding tie (a fused multiply-add
//   may round once instead of twice there), and the float it keeps (f32 or bf16) equals
//   affineActivation's bit for bit;
// - with 8-bit inputs (s8 per channel), the moments and results (u8 and float) equal those of
//   the inputs' float values;
// (The plans they make: tests/engine/int8_graph_test.cpp.)
#include "engine/cpu/norm_kernels.h"
#include "engine/quant/int8_policy.h"
#include "tests/engine/op_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

namespace voxseg::engine {
namespace {

struct KernelCase {
    int64_t channels, lanes, spatial;
    ActivationKind act;
    bool residual, keep_float, bf16;
};

uint16_t toBf16(float f) {  // round to nearest even, as the kernels store
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

float fromBf16(uint16_t h) {
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// A layout of `spatial` positions and `channels` channels in groups of `lanes`.
cpu::LaneLayout layoutOf(const KernelCase& k) {
    cpu::LaneLayout L;
    L.batch = 2;
    L.channels = k.channels;
    L.spatial = k.spatial;
    L.lanes = k.lanes;
    L.groups = k.channels / k.lanes;
    L.spatial_stride = k.lanes;
    L.group_stride = k.spatial * k.lanes;
    L.n_stride = L.groups * L.group_stride;
    return L;
}

// u8[i] is quant::quantizeActivation(want[i], q) but within 1e-4 of a rounding tie (there by
// at most 1), and the range clamps somewhere (the clamp is exercised).
void expectQuantisedFrom(const std::vector<float>& want, const std::vector<uint8_t>& u8,
                         const quant::ActivationQuant& q, const std::string& what) {
    size_t ties = 0, differ = 0, clamped = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        const uint8_t ref = quant::quantizeActivation(want[i], q);
        clamped += ref == 0 || ref == 255;
        if (u8[i] == ref) continue;
        const double t = static_cast<double>(want[i]) / q.scale + q.zero_point;
        const bool near_tie = std::abs(t - std::floor(t) - 0.5) < 1e-4;
        ties += near_tie;
        differ += !near_tie || std::abs(int(u8[i]) - int(ref)) > 1;
    }
    EXPECT_EQ(differ, 0u) << what;
    EXPECT_LT(ties, want.size() / 1000 + 1) << what;
    EXPECT_GT(clamped, 0u) << what;
}

// The second u8 written into a wider channels-last tensor (U8Target::stride: its channels of a
// concat, from channel 8 of rows of channels + 16): the same bytes as the dense second u8, and
// nothing else of the wide tensor touched. Channels-last layouts only (lanes == channels).
template <typename Run>
void expectStridedSecondEqual(const cpu::LaneLayout& L, const std::vector<uint8_t>& dense,
                              const quant::ActivationQuant& q2, Run run, const std::string& what) {
    if (L.lanes != L.channels) return;
    const int64_t positions = L.batch * L.spatial, stride = L.channels + 16;
    std::vector<uint8_t> wide(static_cast<size_t>(positions * stride), 0xab);
    run(cpu::U8Target{wide.data() + 8, 1.0f / q2.scale, static_cast<float>(q2.zero_point), stride});
    size_t differ = 0, touched = 0;
    for (int64_t p = 0; p < positions; ++p)
        for (int64_t c = 0; c < stride; ++c) {
            const uint8_t got = wide[static_cast<size_t>(p * stride + c)];
            if (c >= 8 && c < 8 + L.channels)
                differ += got != dense[static_cast<size_t>(p * L.channels + c - 8)];
            else
                touched += got != 0xab;
        }
    EXPECT_EQ(differ, 0u) << what << " (strided second u8)";
    EXPECT_EQ(touched, 0u) << what << " (strided second u8: bytes outside its channels)";
}

// Halo sources (int8_policy.h): the u8 written as the second target into the interior of a
// padded channels-last tensor (10 x 10 x 10 positions at (1, 0, 2) inside 12 x 11 x 13): the same
// bytes as the dense u8, the halo untouched (the plan fills it). Channels-last layouts of 1000
// positions per batch item only; `run` writes with the primary u8 null.
template <typename Run>
void expectHaloEqual(const cpu::LaneLayout& L, const std::vector<uint8_t>& dense,
                     const quant::ActivationQuant& q, Run run, const std::string& what) {
    if (L.lanes != L.channels || L.spatial != 1000) return;
    cpu::U8Target t{nullptr, 1.0f / q.scale, static_cast<float>(q.zero_point), 0};
    t.size = {10, 10, 10};
    t.padded = {12, 11, 13};
    t.lo = {1, 0, 2};
    std::vector<uint8_t> padded(static_cast<size_t>(L.batch * 12 * 11 * 13 * L.channels), 0xab);
    t.q = padded.data();
    run(t);
    size_t differ = 0, touched = 0;
    for (int64_t n = 0; n < L.batch; ++n)
        for (int64_t z = 0; z < 12; ++z)
            for (int64_t y = 0; y < 11; ++y)
                for (int64_t x = 0; x < 13; ++x)
                    for (int64_t c = 0; c < L.channels; ++c) {
                        const uint8_t got = padded[static_cast<size_t>(
                            (((n * 12 + z) * 11 + y) * 13 + x) * L.channels + c)];
                        const bool inside = z >= 1 && z < 11 && y < 10 && x >= 2 && x < 12;
                        if (inside)
                            differ +=
                                got !=
                                dense[static_cast<size_t>(
                                    (((n * 10 + z - 1) * 10 + y) * 10 + x - 2) * L.channels + c)];
                        else
                            touched += got != 0xab;
                    }
    EXPECT_EQ(differ, 0u) << what << " (u8 inside a halo)";
    EXPECT_EQ(touched, 0u) << what << " (u8 inside a halo: halo bytes written)";
}

void checkKernel(const KernelCase& k) {
    const cpu::LaneLayout L = layoutOf(k);
    const size_t n = static_cast<size_t>(L.batch * L.n_stride);
    std::mt19937 rng(7);
    std::normal_distribution<float> d(0.3f, 2.0f);
    std::vector<float> x(n), r(n), scale(L.batch * L.channels), shift(scale.size());
    for (float& v : x) v = d(rng);
    for (float& v : r) v = d(rng);
    for (float& v : scale) v = 0.5f + 0.1f * d(rng);
    for (float& v : shift) v = 0.2f * d(rng);
    const quant::ActivationQuant q{0.021f, 37};
    // bf16 inputs: the float reference runs on their exact float values.
    std::vector<uint16_t> xb(n), rb(n), yb(k.keep_float ? n : 0), wantb(n);
    if (k.bf16) {
        for (size_t i = 0; i < n; ++i) {
            xb[i] = toBf16(x[i]), x[i] = fromBf16(xb[i]);
            rb[i] = toBf16(r[i]), r[i] = fromBf16(rb[i]);
        }
    }
    const float* rp = k.residual ? r.data() : nullptr;
    // The float result before any bf16 rounding: what the u8 is quantised from.
    std::vector<float> want(n);
    cpu::affineActivation(x.data(), want.data(), rp, false, L, scale.data(), shift.data(), k.act,
                          0.01f, nullptr);
    std::vector<float> y(k.keep_float && !k.bf16 ? n : 0);
    std::vector<uint8_t> u8(n);
    void* yp = !k.keep_float ? nullptr : k.bf16 ? static_cast<void*>(yb.data()) : y.data();
    const void* xp = k.bf16 ? static_cast<const void*>(xb.data()) : x.data();
    const void* rpp = !k.residual ? nullptr : k.bf16 ? static_cast<const void*>(rb.data()) : rp;
    // A second u8 in other parameters (a skip connection's concat) from the same pass.
    const quant::ActivationQuant q2{0.034f, 90};
    std::vector<uint8_t> u8b(n);
    cpu::affineActivationU8(xp, yp, u8.data(), rpp, k.bf16, L, scale.data(), shift.data(), k.act,
                            0.01f, nullptr, 1.0f / q.scale, static_cast<float>(q.zero_point),
                            {u8b.data(), 1.0f / q2.scale, static_cast<float>(q2.zero_point)});
    if (k.keep_float && !k.bf16) EXPECT_EQ(y, want);
    if (k.keep_float && k.bf16) {  // the float kept equals affineActivation's bf16, bit for bit
        cpu::affineActivation(xb.data(), wantb.data(), k.residual ? rb.data() : nullptr, true, L,
                              scale.data(), shift.data(), k.act, 0.01f, nullptr);
        EXPECT_EQ(yb, wantb);
    }
    expectQuantisedFrom(want, u8, q, "channels " + std::to_string(k.channels));
    expectQuantisedFrom(want, u8b, q2, "channels " + std::to_string(k.channels) + " (second)");
    expectStridedSecondEqual(
        L, u8b, q2,
        [&](cpu::U8Target t) {
            std::vector<uint8_t> u8c(n);
            cpu::affineActivationU8(xp, nullptr, u8c.data(), rpp, k.bf16, L, scale.data(),
                                    shift.data(), k.act, 0.01f, nullptr, 1.0f / q.scale,
                                    static_cast<float>(q.zero_point), t);
        },
        "channels " + std::to_string(k.channels));
    expectHaloEqual(
        L, u8, q,
        [&](cpu::U8Target t) {
            cpu::affineActivationU8(xp, nullptr, nullptr, rpp, k.bf16, L, scale.data(),
                                    shift.data(), k.act, 0.01f, nullptr, 1.0f, 0.0f, t);
        },
        "channels " + std::to_string(k.channels));
}

TEST(Int8Norm, KernelQuantisesItsOwnResult) {
    checkKernel({32, 32, 1000, ActivationKind::kLeakyRelu, false, false});  // channels-last
    checkKernel({32, 32, 999, ActivationKind::kLeakyRelu, true, true});     // + residual
    checkKernel({32, 16, 777, ActivationKind::kRelu, false, true});         // nCdhw16c
    checkKernel({5, 1, 1234, ActivationKind::kNone, true, false});          // plain
    checkKernel({24, 24, 333, ActivationKind::kSilu, false, true});
    checkKernel({8, 8, 4096, ActivationKind::kLeakyRelu, false, true, true});  // 8 ch.-last bf16
}

// 8-bit normalisation inputs (docs/int8.md): the moments of an s8 tensor equal those of its
// values as floats, and the pass from s8 writes what the float pass writes from those values
// (its u8 under the tie rule above; its kept float bit for bit), on the AVX-512 path (lanes a
// multiple of 16, no float kept, no residual) and the general one.
void checkFromS8(const KernelCase& k) {
    const cpu::LaneLayout L = layoutOf(k);
    const size_t n = static_cast<size_t>(L.batch * L.n_stride);
    std::mt19937 rng(11);
    std::uniform_int_distribution<int> byte(-128, 127);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<int8_t> xs(n);
    std::vector<float> xf(n), r(n), scale(L.batch * L.channels), shift(scale.size());
    for (size_t i = 0; i < n; ++i) xf[i] = xs[i] = static_cast<int8_t>(byte(rng) / (1 + i % 3));
    for (float& v : r) v = d(rng);
    for (float& v : scale) v = 0.03f + 0.01f * d(rng);
    for (float& v : shift) v = 0.3f * d(rng);
    const std::string what = "channels " + std::to_string(k.channels) + " lanes " +
                             std::to_string(k.lanes) + " act " +
                             std::to_string(static_cast<int>(k.act));

    std::vector<double> mean, m2, mean_s8, m2_s8;
    cpu::channelMoments(xf.data(), false, L, mean, m2);
    cpu::channelMomentsS8(xs.data(), L, mean_s8, m2_s8);
    ASSERT_EQ(mean_s8.size(), mean.size());
    for (size_t c = 0; c < mean.size(); ++c) {
        EXPECT_NEAR(mean_s8[c], mean[c], 1e-4) << what << " channel " << c;
        EXPECT_NEAR(m2_s8[c], m2[c], 1e-5 * m2[c]) << what << " channel " << c;
    }

    const float* rp = k.residual ? r.data() : nullptr;
    std::vector<float> want(n), y(k.keep_float ? n : 0);
    cpu::affineActivation(xf.data(), want.data(), rp, false, L, scale.data(), shift.data(), k.act,
                          0.01f, nullptr);
    const quant::ActivationQuant q{0.013f, 41};
    std::vector<uint8_t> u8(n), u8b(n);
    const quant::ActivationQuant q2{0.021f, 60};
    cpu::affineActivationU8FromS8(xs.data(), k.keep_float ? y.data() : nullptr, u8.data(), rp,
                                  false, L, scale.data(), shift.data(), k.act, 0.01f, nullptr,
                                  1.0f / q.scale, static_cast<float>(q.zero_point),
                                  {u8b.data(), 1.0f / q2.scale, static_cast<float>(q2.zero_point)});
    if (k.keep_float) EXPECT_EQ(y, want) << what;
    expectQuantisedFrom(want, u8, q, what);
    expectQuantisedFrom(want, u8b, q2, what + " (second u8)");
    expectStridedSecondEqual(
        L, u8b, q2,
        [&](cpu::U8Target t) {
            std::vector<uint8_t> u8c(n);
            cpu::affineActivationU8FromS8(xs.data(), nullptr, u8c.data(), rp, false, L,
                                          scale.data(), shift.data(), k.act, 0.01f, nullptr,
                                          1.0f / q.scale, static_cast<float>(q.zero_point), t);
        },
        what);
    expectHaloEqual(
        L, u8, q,
        [&](cpu::U8Target t) {
            cpu::affineActivationU8FromS8(xs.data(), nullptr, nullptr, rp, false, L, scale.data(),
                                          shift.data(), k.act, 0.01f, nullptr, 1.0f, 0.0f, t);
        },
        what);
    // A norm whose readers are not int8 Convs: the float result alone.
    std::vector<float> y_only(n);
    cpu::affineActivationFromS8(xs.data(), y_only.data(), rp, false, L, scale.data(), shift.data(),
                                k.act, 0.01f, nullptr);
    EXPECT_EQ(y_only, want) << what;
    // bf16 results (the int8 plan's float parts on AMX): the float result rounded to nearest even.
    if (k.residual) return;
    std::vector<uint16_t> yb(n), want_b(n);
    for (size_t i = 0; i < n; ++i) want_b[i] = toBf16(want[i]);
    cpu::affineActivationFromS8(xs.data(), yb.data(), nullptr, true, L, scale.data(), shift.data(),
                                k.act, 0.01f, nullptr);
    EXPECT_EQ(yb, want_b) << what << " (bf16)";
    std::fill(yb.begin(), yb.end(), uint16_t{0});
    cpu::affineActivationU8FromS8(xs.data(), yb.data(), u8.data(), nullptr, true, L, scale.data(),
                                  shift.data(), k.act, 0.01f, nullptr, 1.0f / q.scale,
                                  static_cast<float>(q.zero_point));
    EXPECT_EQ(yb, want_b) << what << " (bf16 with u8)";
    expectQuantisedFrom(want, u8, q, what + " (bf16 with u8)");
}

TEST(Int8Norm, EightBitInputsGiveWhatTheirFloatValuesGive) {
    checkFromS8({32, 32, 1000, ActivationKind::kLeakyRelu, false, false});  // AVX-512 path
    checkFromS8({64, 64, 513, ActivationKind::kRelu, false, false});
    checkFromS8({16, 16, 700, ActivationKind::kNone, false, false});
    checkFromS8({32, 32, 999, ActivationKind::kLeakyRelu, true, true});    // float kept, residual
    checkFromS8({24, 24, 333, ActivationKind::kLeakyRelu, false, false});  // lanes not 16k
    // 8 channels-last lanes as pairs of positions (odd counts: the last position on its own).
    checkFromS8({8, 8, 1000, ActivationKind::kLeakyRelu, false, false});
    checkFromS8({8, 8, 333, ActivationKind::kRelu, false, false});
    checkFromS8({8, 8, 2049, ActivationKind::kNone, true, true});  // float kept, residual
}

// The float passes on 8 channels-last channels, which run 16 lanes at a time on pairs of
// positions (an odd last position on its own): the moments equal a double-precision reference
// and the results the per-element formula (float, within 1e-6 of the output; bf16 within one
// rounding), for an even, an odd and a one-position spatial size and both batch items.
TEST(NormKernels, EightChannelsLastMatchAReference) {
    for (int64_t spatial : {4096, 1001, 1}) {
        const cpu::LaneLayout L =
            layoutOf({8, 8, spatial, ActivationKind::kLeakyRelu, true, false});
        const size_t n = static_cast<size_t>(L.batch * L.n_stride);
        std::mt19937 rng(static_cast<uint32_t>(spatial));
        std::normal_distribution<float> d(0.5f, 2.0f);
        std::vector<float> x(n), r(n), scale(L.batch * 8), shift(scale.size());
        for (float& v : x) v = d(rng);
        for (float& v : r) v = d(rng);
        for (float& v : scale) v = 0.5f + 0.1f * d(rng);
        for (float& v : shift) v = 0.2f * d(rng);
        std::vector<double> mean, m2;
        cpu::channelMoments(x.data(), false, L, mean, m2);
        ASSERT_EQ(mean.size(), size_t(L.batch * 8));
        for (int64_t b = 0; b < L.batch; ++b)
            for (int64_t c = 0; c < 8; ++c) {
                double mu = 0, q = 0;
                for (int64_t p = 0; p < spatial; ++p) mu += x[size_t(b * L.n_stride + p * 8 + c)];
                mu /= double(spatial);
                for (int64_t p = 0; p < spatial; ++p) {
                    const double dv = x[size_t(b * L.n_stride + p * 8 + c)] - mu;
                    q += dv * dv;
                }
                const size_t i = size_t(b * 8 + c);
                EXPECT_NEAR(mean[i], mu, 1e-5 * (1 + std::abs(mu))) << spatial << " " << i;
                EXPECT_NEAR(m2[i], q, 1e-5 * (1 + q)) << spatial << " " << i;
            }
        std::vector<float> y(n);
        cpu::affineActivation(x.data(), y.data(), r.data(), false, L, scale.data(), shift.data(),
                              ActivationKind::kLeakyRelu, 0.01f, nullptr);
        std::vector<uint16_t> xb(n), rb(n), yb(n);
        for (size_t i = 0; i < n; ++i) xb[i] = toBf16(x[i]), rb[i] = toBf16(r[i]);
        cpu::affineActivation(xb.data(), yb.data(), rb.data(), true, L, scale.data(), shift.data(),
                              ActivationKind::kLeakyRelu, 0.01f, nullptr);
        int64_t bad = 0, bad_b = 0;
        for (size_t i = 0; i < n; ++i) {
            const size_t c = (i % size_t(L.n_stride)) % 8, b = i / size_t(L.n_stride);
            const float a = scale[b * 8 + c], sh = shift[b * 8 + c];
            auto formula = [&](float xv, float rv) {
                const double v = double(xv) * a + sh + rv;
                return v > 0 ? v : v * 0.01;
            };
            const double want = formula(x[i], r[i]);
            bad += std::abs(y[i] - want) > 1e-6 * (1 + std::abs(want));
            const double want_b = formula(fromBf16(xb[i]), fromBf16(rb[i]));
            bad_b += std::abs(fromBf16(yb[i]) - want_b) > std::abs(want_b) / 128 + 1e-6;
        }
        EXPECT_EQ(bad, 0) << spatial;
        EXPECT_EQ(bad_b, 0) << spatial << " (bf16)";
    }
}

}  // namespace
}  // namespace voxseg::engine
