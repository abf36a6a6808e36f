// fp16 accumulator rows: the portable and the F16C kernels against a scalar reference built
// from the exact conversions of engine/graph/tensor.h (round to nearest even, saturation, NaN,
// tails, mirrored reads).
#include "engine/inference/half_kernels.h"
#include "engine/graph/tensor.h"
#include "engine/inference/half_kernels_impl.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace voxseg::engine::half {
namespace {

struct Kernels {
    std::string name;
    std::function<void(uint16_t*, const float*, const float*, int64_t, bool)> accumulate;
    std::function<void(const uint16_t*, float*, int64_t)> to_float;
};

std::vector<Kernels> kernelSets() {
    std::vector<Kernels> sets = {{"generic", generic::accumulateRow, generic::toFloatRow},
                                 {"dispatched", accumulateRow, toFloatRow}};
    if (f16cAvailable()) sets.push_back({"f16c", f16c::accumulateRow, f16c::toFloatRow});
    return sets;
}

uint16_t reference(float v) {
    if (v > 65504.0f) v = 65504.0f;
    if (v < -65504.0f) v = -65504.0f;
    return floatToHalf(v);
}

// FMA (f16c) and multiply-then-add (generic) can round the fp32 sum differently by one fp32 ulp,
// which moves the fp16 result by at most one fp16 step.
void expectWithinOneStep(uint16_t got, uint16_t want, const std::string& where) {
    const float g = halfToFloat(got), w = halfToFloat(want);
    const float step = std::max(std::abs(w) * 0x1p-10f, 0x1p-24f);
    EXPECT_LE(std::abs(g - w), step) << where << ": got " << g << ", want " << w;
}

TEST(HalfKernels, TableIsExactForEveryBitPattern) {
    const float* table = toFloatTable();
    for (uint32_t h = 0; h < 65536; ++h) {
        const float want = halfToFloat(static_cast<uint16_t>(h));
        if (std::isnan(want))
            ASSERT_TRUE(std::isnan(table[h])) << h;
        else
            ASSERT_EQ(table[h], want) << h;
    }
}

TEST(HalfKernels, AccumulateMatchesScalarReference) {
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> uni(-20.0f, 20.0f), pos(0.0f, 1.0f);
    for (const auto& k : kernelSets()) {
        for (int64_t n : {1, 7, 8, 9, 16, 23, 40, 81}) {
            for (bool reversed : {false, true}) {
                std::vector<uint16_t> acc(static_cast<size_t>(n)), want(acc.size());
                std::vector<float> w(acc.size()), s(acc.size());
                for (size_t x = 0; x < acc.size(); ++x) {
                    acc[x] = want[x] = floatToHalf(uni(rng));
                    w[x] = pos(rng);
                    s[x] = uni(rng);
                }
                k.accumulate(acc.data(), w.data(), s.data(), n, reversed);
                for (int64_t x = 0; x < n; ++x) {
                    const float sx = s[static_cast<size_t>(reversed ? n - 1 - x : x)];
                    const uint16_t r = reference(halfToFloat(want[x]) + w[x] * sx);
                    expectWithinOneStep(acc[x], r,
                                        k.name + " n=" + std::to_string(n) +
                                            (reversed ? " reversed" : "") +
                                            " x=" + std::to_string(x));
                }
            }
        }
    }
}

TEST(HalfKernels, SaturatesInsteadOfOverflowingAndKeepsNaN) {
    for (const auto& k : kernelSets()) {
        SCOPED_TRACE(k.name);
        const int64_t n = 11;  // one vector of 8 and a scalar tail
        std::vector<uint16_t> acc(n, floatToHalf(60000.0f));
        std::vector<float> w(n, 1.0f), s(n, 1e6f);
        s[2] = s[9] = -1e7f;
        s[4] = s[10] = NAN;
        k.accumulate(acc.data(), w.data(), s.data(), n, false);
        for (int64_t x = 0; x < n; ++x) {
            const float v = halfToFloat(acc[x]);
            if (x == 4 || x == 10)
                EXPECT_TRUE(std::isnan(v)) << x;
            else if (x == 2 || x == 9)
                EXPECT_EQ(v, -65504.0f) << x;
            else
                EXPECT_EQ(v, 65504.0f) << x;
        }
    }
}

TEST(HalfKernels, ConvertMatchesScalarReference) {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> uni(-100.0f, 100.0f);
    for (const auto& k : kernelSets()) {
        SCOPED_TRACE(k.name);
        const int64_t n = 37;
        std::vector<uint16_t> a(n);
        std::vector<float> back(n);
        for (int64_t x = 0; x < n; ++x) a[x] = floatToHalf(uni(rng));
        a[3] = 0x0001;  // the smallest subnormal
        a[5] = 0x7c00;  // +inf
        k.to_float(a.data(), back.data(), n);
        for (int64_t x = 0; x < n; ++x) EXPECT_EQ(back[x], halfToFloat(a[x])) << x;
    }
}

TEST(HalfKernels, ReportsTheKernelsInUse) {
    const std::string isa = kernelIsa();
    EXPECT_EQ(isa, f16cAvailable() ? "f16c" : "generic");
}

}  // namespace
}  // namespace voxseg::engine::half
