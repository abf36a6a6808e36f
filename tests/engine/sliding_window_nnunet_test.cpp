// nnU-Net's float16 row arithmetic (engine/inference/sliding_window_nnunet.h): the F16C kernels
// against the scalar ones, bit for bit, on rows of every tail length, values that overflow to inf,
// subnormal results, exact ties, and products whose float32 rounding decides the float16 result
// (a kernel that fused the multiply and the add into one FMA would fail those).
#include "engine/inference/sliding_window_nnunet.h"
#include "engine/graph/tensor.h"
#include "engine/inference/half_kernels_impl.h"
#include "engine/inference/sliding_window_nnunet_impl.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace voxseg::engine::nnunet_fp16 {
namespace {

std::vector<uint16_t> halves(std::mt19937& rng, size_t n, float scale) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<uint16_t> v(n);
    for (auto& h : v) h = floatToHalf(d(rng));
    return v;
}

// Positive weights as nnU-Net's Gaussian and n_predictions are (a division by them).
std::vector<uint16_t> weights(std::mt19937& rng, size_t n) {
    std::uniform_real_distribution<float> d(0.001f, 10.0f);
    std::vector<uint16_t> v(n);
    for (auto& h : v) h = floatToHalf(d(rng));
    return v;
}

// Triples (a, p, g) where half(a + float(p * g)) != half(fma(p, g, a)): cancellation at small
// magnitudes, found by search.
struct Triples {
    std::vector<uint16_t> a, g;
    std::vector<float> p;
};
Triples fusedDiffers(std::mt19937& rng, size_t want) {
    Triples t;
    std::uniform_real_distribution<float> u(0.5f, 2.0f);
    std::uniform_int_distribution<int> e(-14, -4);
    for (int tries = 0; tries < 2000000 && t.p.size() < want; ++tries) {
        const uint16_t g = floatToHalf(u(rng));
        const float p = std::ldexp(u(rng), e(rng));
        const float prod = p * halfToFloat(g);
        const uint16_t a = floatToHalf(-prod);  // near -p*g: the sum is the product's residue
        const float unfused = halfToFloat(a) + prod;
        const float fused = std::fma(p, halfToFloat(g), halfToFloat(a));
        if (floatToHalf(unfused) == floatToHalf(fused)) continue;
        t.a.push_back(a);
        t.g.push_back(g);
        t.p.push_back(p);
    }
    return t;
}

class NnUNetFp16Rows : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!half::f16cAvailable())
            GTEST_SKIP() << "this CPU has no F16C/AVX2: only the scalar rows run";
    }
    std::mt19937 rng{38};
};

TEST_F(NnUNetFp16Rows, AddPredictionEqualsScalarOnEveryTail) {
    for (int64_t n = 0; n <= 41; ++n) {
        for (float scale : {0.01f, 3.0f, 30000.0f}) {  // the last overflows to inf
            auto acc = halves(rng, static_cast<size_t>(n), scale);
            const auto g = weights(rng, static_cast<size_t>(n));
            std::normal_distribution<float> d(0.0f, scale);
            std::vector<float> p(static_cast<size_t>(n));
            for (auto& v : p) v = d(rng);
            auto want = acc;
            generic::addPredictionRow(want.data(), p.data(), g.data(), n);
            f16c::addPredictionRow(acc.data(), p.data(), g.data(), n);
            EXPECT_EQ(acc, want) << "n " << n << " scale " << scale;
        }
    }
}

TEST_F(NnUNetFp16Rows, ProductIsRoundedBeforeTheSumAsPyTorchDoes) {
    Triples t = fusedDiffers(rng, 64);
    ASSERT_GE(t.p.size(), 16u) << "the search found too few cases where an FMA rounds differently";
    const auto n = static_cast<int64_t>(t.p.size());
    auto want = t.a;
    generic::addPredictionRow(want.data(), t.p.data(), t.g.data(), n);
    for (int64_t x = 0; x < n; ++x)  // the scalar rows are PyTorch's two roundings
        ASSERT_EQ(
            want[static_cast<size_t>(x)],
            floatToHalf(halfToFloat(t.a[static_cast<size_t>(x)]) +
                        t.p[static_cast<size_t>(x)] * halfToFloat(t.g[static_cast<size_t>(x)])));
    auto got = t.a;
    f16c::addPredictionRow(got.data(), t.p.data(), t.g.data(), n);
    EXPECT_EQ(got, want);
    got = t.a;
    addPredictionRow(got.data(), t.p.data(), t.g.data(), n);  // the dispatched one
    EXPECT_EQ(got, want);
}

TEST_F(NnUNetFp16Rows, TiesRoundToEven) {
    // 1 + 2^-11 lies halfway between 1 and the next float16: it rounds to 1 (even); 1 + 3 * 2^-11
    // rounds up to 1 + 2^-9.
    std::vector<uint16_t> acc(19, floatToHalf(1.0f)), g(19, floatToHalf(1.0f));
    std::vector<float> p(19);
    for (size_t x = 0; x < p.size(); ++x) p[x] = (x % 2 ? 3.0f : 1.0f) * 0x1p-11f;
    f16c::addPredictionRow(acc.data(), p.data(), g.data(), 19);
    for (size_t x = 0; x < acc.size(); ++x)
        EXPECT_EQ(halfToFloat(acc[x]), x % 2 ? 1.0f + 0x1p-9f : 1.0f) << x;
}

TEST_F(NnUNetFp16Rows, WeightsDivisionAndFoldRowsEqualScalar) {
    for (int64_t n = 0; n <= 41; ++n) {
        const auto sz = static_cast<size_t>(n);
        const auto g = weights(rng, sz);
        auto w1 = weights(rng, sz), w2 = w1;
        generic::addWeightsRow(w1.data(), g.data(), n);
        f16c::addWeightsRow(w2.data(), g.data(), n);
        EXPECT_EQ(w2, w1) << n;

        // subnormal quotients (tiny / large), overflow to inf (large / tiny)
        for (float scale : {1e-6f, 5.0f, 60000.0f}) {
            auto a1 = halves(rng, sz, scale), a2 = a1;
            auto d =
                scale > 1000.0f ? std::vector<uint16_t>(sz, floatToHalf(0.01f)) : weights(rng, sz);
            const bool f1 = generic::divideRow(a1.data(), d.data(), n);
            const bool f2 = f16c::divideRow(a2.data(), d.data(), n);
            EXPECT_EQ(a2, a1) << n << " " << scale;
            EXPECT_EQ(f2, f1) << n << " " << scale;
        }

        auto b = halves(rng, sz, 40000.0f);
        auto s1 = halves(rng, sz, 40000.0f), s2 = s1;
        generic::addRow(s1.data(), b.data(), n);
        f16c::addRow(s2.data(), b.data(), n);
        EXPECT_EQ(s2, s1) << n;

        for (int folds : {3, 5}) {
            auto q1 = halves(rng, sz, 7.0f), q2 = q1;
            generic::divideRowBy(q1.data(), n, folds);
            f16c::divideRowBy(q2.data(), n, folds);
            EXPECT_EQ(q2, q1) << n << " / " << folds;
        }
    }
}

TEST_F(NnUNetFp16Rows, DivisionReportsInfinity) {
    std::vector<uint16_t> acc(12, floatToHalf(60000.0f)), n(12, floatToHalf(1.0f));
    n[9] = floatToHalf(0.5f);  // 120000: inf in float16
    EXPECT_FALSE(f16c::divideRow(acc.data(), n.data(), 12));
    EXPECT_EQ(acc[9], 0x7c00u);
    std::vector<uint16_t> ok(12, floatToHalf(6.0f));
    EXPECT_TRUE(
        f16c::divideRow(ok.data(), std::vector<uint16_t>(12, floatToHalf(2.0f)).data(), 12));
}

}  // namespace
}  // namespace voxseg::engine::nnunet_fp16
