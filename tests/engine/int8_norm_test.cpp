// Normalisations that write their int8 readers' u8 source in their own pass (docs/int8.md,
// "Normalisations write u8"):
// - the kernel's u8 equals quant::quantizeActivation of its own float result (before any bf16
//   rounding), except where the float lies within 1e-4 of a rounding tie (a fused multiply-add
//   may round once instead of twice there), and the float it keeps (f32 or bf16) equals
//   affineActivation's bit for bit;
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
    cpu::affineActivationU8(xp, yp, u8.data(), rpp, k.bf16, L, scale.data(), shift.data(), k.act,
                            0.01f, nullptr, 1.0f / q.scale, static_cast<float>(q.zero_point));
    if (k.keep_float && !k.bf16) EXPECT_EQ(y, want);
    if (k.keep_float && k.bf16) {  // the float kept equals affineActivation's bf16, bit for bit
        cpu::affineActivation(xb.data(), wantb.data(), k.residual ? rb.data() : nullptr, true, L,
                              scale.data(), shift.data(), k.act, 0.01f, nullptr);
        EXPECT_EQ(yb, wantb);
    }
    size_t ties = 0, differ = 0, clamped = 0;
    for (size_t i = 0; i < n; ++i) {
        const uint8_t ref = quant::quantizeActivation(want[i], q);
        clamped += ref == 0 || ref == 255;
        if (u8[i] == ref) continue;
        const double t = static_cast<double>(want[i]) / q.scale + q.zero_point;
        const bool near_tie = std::abs(t - std::floor(t) - 0.5) < 1e-4;
        ties += near_tie;
        differ += !near_tie || std::abs(int(u8[i]) - int(ref)) > 1;
    }
    EXPECT_EQ(differ, 0u) << "channels " << k.channels << " lanes " << k.lanes;
    EXPECT_LT(ties, n / 1000 + 1);
    EXPECT_GT(clamped, 0u);  // the range clamps at both ends somewhere: the clamp is exercised
}

TEST(Int8Norm, KernelQuantisesItsOwnResult) {
    checkKernel({32, 32, 1000, ActivationKind::kLeakyRelu, false, false});  // channels-last
    checkKernel({32, 32, 999, ActivationKind::kLeakyRelu, true, true});     // + residual
    checkKernel({32, 16, 777, ActivationKind::kRelu, false, true});         // nCdhw16c
    checkKernel({5, 1, 1234, ActivationKind::kNone, true, false});          // plain
    checkKernel({24, 24, 333, ActivationKind::kSilu, false, true});
}

}  // namespace
}  // namespace voxseg::engine
