// The attention kernels' unnormalised softmax (engine/cpu/attention_softmax.h), generic and AVX-512
// loops, along rows and along columns (each run through the row tests on the transposed
// scores), against a softmax in double: odd row lengths (vector tails), wide score ranges,
// masked scores far below the row's max, in-place f32, bf16 P, NaN rows.
#include "engine/cpu/attention_softmax.h"
#include "engine/cpu/norm_kernels.h"
#include "engine/graph/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace voxseg::engine::cpu {
namespace {

using RowsFn = std::function<void(const float*, int64_t, int64_t, void*, bool, float*)>;

using ColumnsFn = std::function<void(const float*, int64_t, int64_t, int64_t, void*, bool, float*)>;

// A softmax over the columns as a RowsFn: the rows [rows, n] become S^T [n, rows] with rows
// `rows + 3` floats apart (the padding must stay untouched), the columns' P back into rows.
RowsFn overColumns(ColumnsFn fn) {
    return [fn](const float* s, int64_t rows, int64_t n, void* p, bool bf16, float* inv) {
        const int64_t ld = rows + 3;
        const float kPad = 12345.0f;
        std::vector<float> st(n * ld, kPad);
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < n; ++j) st[j * ld + i] = s[i * n + j];
        const bool in_place = !bf16 && p == s;
        std::vector<float> pf(in_place ? 0 : n * ld, kPad);
        std::vector<uint16_t> pb(bf16 ? n * ld : 0, 0xffff);
        void* out = in_place ? static_cast<void*>(st.data())
                    : bf16   ? static_cast<void*>(pb.data())
                             : pf.data();
        fn(st.data(), n, rows, ld, out, bf16, inv);
        const std::vector<float>& pfs = in_place ? st : pf;
        for (int64_t j = 0; j < n; ++j) {
            for (int64_t i = 0; i < rows; ++i) {
                if (bf16)
                    static_cast<uint16_t*>(p)[i * n + j] = pb[j * ld + i];
                else
                    static_cast<float*>(p)[i * n + j] = pfs[j * ld + i];
            }
            for (int64_t i = rows; i < ld; ++i)
                ASSERT_TRUE(bf16 ? pb[j * ld + i] == 0xffff : pfs[j * ld + i] == kPad)
                    << "padding written at row " << j << " column " << i;
        }
    };
}

std::vector<std::pair<std::string, RowsFn>> kernelSets() {
    std::vector<std::pair<std::string, RowsFn>> sets = {
        {"generic", generic::softmaxRows},
        {"dispatched", softmaxRows},
        {"generic columns", overColumns(generic::softmaxColumns)},
        {"dispatched columns", overColumns(softmaxColumns)}};
#if defined(__x86_64__)
    if (kernelIsa() != KernelIsa::kGeneric) {  // an AVX-512 CPU runs the AVX2 build too
        sets.emplace_back("avx2", avx2::softmaxRows);
        sets.emplace_back("avx2 columns", overColumns(avx2::softmaxColumns));
    }
    if (kernelIsa() == KernelIsa::kAvx512) {
        sets.emplace_back("avx512", avx512::softmaxRows);
        sets.emplace_back("avx512 columns", overColumns(avx512::softmaxColumns));
    }
#endif
    return sets;
}

std::vector<double> softmaxDouble(const float* row, int64_t n) {
    double m = row[0];
    for (int64_t j = 0; j < n; ++j) m = std::max(m, static_cast<double>(row[j]));
    std::vector<double> p(n);
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += p[j] = std::exp(row[j] - m);
    for (double& v : p) v /= sum;
    return p;
}

// Rows of `n` scores: N(0, spread) with, in every third row, a fifth of the entries masked
// (-1e4 below, as Swin's mask and additive padding masks are, or -inf).
std::vector<float> scores(int64_t rows, int64_t n, float spread, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.0f, spread);
    std::uniform_int_distribution<int> pick(0, 4);
    std::vector<float> s(rows * n);
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < n; ++j) {
            float v = nd(rng);
            if (i % 3 == 2 && j > 0 && pick(rng) == 0)
                v = (j % 2) ? -1e4f : -std::numeric_limits<float>::infinity();
            s[i * n + j] = v;
        }
    return s;
}

// Worst |P_ij / sum_i - softmax_ij| relative to max(softmax_ij, 1e-6) over the rows.
double worstError(const std::vector<float>& s, int64_t rows, int64_t n,
                  const std::function<float(int64_t)>& p, const std::vector<float>& inv) {
    double worst = 0;
    for (int64_t i = 0; i < rows; ++i) {
        const std::vector<double> want = softmaxDouble(s.data() + i * n, n);
        for (int64_t j = 0; j < n; ++j) {
            const double got = static_cast<double>(p(i * n + j)) * inv[i];
            worst = std::max(worst, std::abs(got - want[j]) / std::max(want[j], 1e-6));
        }
    }
    return worst;
}

TEST(CpuAttentionSoftmax, MatchesDoubleSoftmaxInF32AndBf16) {
    std::mt19937 rng(20261204);
    for (const auto& [name, fn] : kernelSets())
        for (int64_t n : {1, 7, 16, 17, 66, 343, 1728}) {
            for (float spread : {0.5f, 8.0f, 40.0f}) {
                // rows = the column form's columns: 1 to 4 vectors per group (6, 32, 37), and
                // two groups (70: 64 + 6)
                const int64_t rows = n == 17 ? 70 : n == 66 ? 32 : n == 1728 ? 37 : 6;
                const std::vector<float> s = scores(rows, n, spread, rng);
                const std::string where =
                    name + " n=" + std::to_string(n) + " spread=" + std::to_string(spread);
                std::vector<float> inv(rows, -1.0f);
                std::vector<float> pf(rows * n);
                fn(s.data(), rows, n, pf.data(), false, inv.data());
                // f32 sums of up to 1728 terms in 4 or 16 lanes: measured <= 2.6e-6
                EXPECT_LE(worstError(
                              s, rows, n, [&](int64_t k) { return pf[k]; }, inv),
                          1e-5)
                    << where << " f32";
                std::vector<uint16_t> pb(rows * n);
                fn(s.data(), rows, n, pb.data(), true, inv.data());
                EXPECT_LE(worstError(
                              s, rows, n, [&](int64_t k) { return bfloat16ToFloat(pb[k]); }, inv),
                          0x1p-8)
                    << where << " bf16";
                // in place over the scores, as the f32 attention runs it
                std::vector<float> inplace = s;
                fn(inplace.data(), rows, n, inplace.data(), false, inv.data());
                for (int64_t k = 0; k < rows * n; ++k)
                    ASSERT_EQ(inplace[k], pf[k]) << where << " in place, element " << k;
            }
        }
}

TEST(CpuAttentionSoftmax, MaxOfRowIsOneAndEqualScoresAreUniform) {
    for (const auto& [name, fn] : kernelSets()) {
        const int64_t n = 37;
        std::vector<float> s(2 * n, 3.25f), p(2 * n), inv(2);
        for (int64_t j = 0; j < n; ++j) s[n + j] = -0.5f * static_cast<float>(j);
        fn(s.data(), 2, n, p.data(), false, inv.data());
        for (int64_t j = 0; j < n; ++j) EXPECT_EQ(p[j], 1.0f) << name;
        EXPECT_FLOAT_EQ(inv[0], 1.0f / n) << name;
        EXPECT_EQ(p[n], 1.0f) << name;  // exp(0), the row's max
        EXPECT_GT(p[n + 1], p[n + 2]) << name;
    }
}

TEST(CpuAttentionSoftmax, NanOrInfiniteScoreMakesItsRowNan) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    for (const auto& [name, fn] : kernelSets())
        for (bool bf16 : {false, true}) {
            const int64_t n = 19;
            std::vector<float> s(3 * n, 0.25f), inv(3);
            s[5] = nan;           // row 0: NaN inside
            s[n] = nan;           // row 1: NaN first
            s[2 * n + 18] = inf;  // row 2: +inf in the tail
            std::vector<float> pf(3 * n);
            std::vector<uint16_t> pb(3 * n);
            fn(s.data(), 3, n, bf16 ? static_cast<void*>(pb.data()) : pf.data(), bf16, inv.data());
            for (int64_t i = 0; i < 3; ++i) {
                // the caller's P V times 1/sum: any NaN in the row or its sum poisons the row
                bool row_nan = std::isnan(inv[i]);
                for (int64_t j = 0; j < n; ++j)
                    row_nan = row_nan ||
                              std::isnan(bf16 ? bfloat16ToFloat(pb[i * n + j]) : pf[i * n + j]);
                EXPECT_TRUE(row_nan) << name << (bf16 ? " bf16" : " f32") << " row " << i;
            }
        }
}

}  // namespace
}  // namespace voxseg::engine::cpu
