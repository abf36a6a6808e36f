// A Conv with 8 output channels planned as 16 on voxel pairs along W (engine/cpu/conv_pairs.cpp):
// the same values as the plain plan (fp32 to float rounding; bf16 no further from fp32 than the
// plain bf16 plan allows), for kernels 3x3x3, 1x1x1, 3x3x1 and 1x3x5, with and without bias,
// fused ReLU / LeakyReLU and an unfused PReLU, 5 to 16 input channels, a batch of 2 at W 2; not
// planned where it does not apply (16 output channels, odd W, stride 2, a fused residual). The
// step names "(voxel pairs)" only on AVX-512 CPUs, where it is planned.
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/norm_kernels.h"
#include "engine/passes/optimize.h"
#include "tests/engine/op_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace voxseg::engine {
namespace {

using testing::GraphBuilder;

struct PairCase {
    std::string name;
    int64_t in = 8, out = 8;
    std::vector<int64_t> kernel{3, 3, 3};
    Shape spatial{6, 10, 12};
    std::vector<int64_t> strides{1, 1, 1};
    bool bias = true;
    OpKind act = OpKind::kIdentity;  // kIdentity: none
    bool residual = false;
    bool applies = true;
    int64_t batch = 1;
};

void PrintTo(const PairCase& c, std::ostream* os) { *os << c.name; }

Graph caseGraph(const PairCase& c) {
    GraphBuilder b;
    Shape xs{c.batch, c.in};
    xs.insert(xs.end(), c.spatial.begin(), c.spatial.end());
    const ValueId x = b.input("x", xs);
    std::vector<int64_t> pads;
    for (int64_t k : c.kernel) pads.push_back(k / 2);
    for (int64_t k : c.kernel) pads.push_back(k / 2);
    ValueId y = b.conv(x, c.in, c.out, c.kernel, c.strides, pads, {}, 1, c.bias);
    if (c.residual) y = b.node(OpKind::kAdd, {y, x});
    if (c.act == OpKind::kRelu) y = b.node(OpKind::kRelu, {y});
    if (c.act == OpKind::kLeakyRelu)
        y = b.node(OpKind::kLeakyRelu, {y}, [](Node& n) { n.alpha = 0.1f; });
    if (c.act == OpKind::kPRelu) {
        const ValueId slope = b.constant("slope", testing::seededTensor({c.out, 1, 1, 1}, 4));
        y = b.node(OpKind::kPRelu, {y, slope});
    }
    b.output(y);
    return optimize(b.graph());
}

std::vector<PairCase> cases() {
    std::vector<PairCase> c;
    c.push_back({"k333"});
    c.push_back(
        {"k333_nobias_relu", 8, 8, {3, 3, 3}, {6, 10, 12}, {1, 1, 1}, false, OpKind::kRelu});
    c.push_back(
        {"k111_leaky_c16", 16, 8, {1, 1, 1}, {4, 6, 8}, {1, 1, 1}, true, OpKind::kLeakyRelu});
    c.push_back({"k331_prelu_c5", 5, 8, {3, 3, 1}, {5, 7, 16}, {1, 1, 1}, true, OpKind::kPRelu});
    c.push_back({"k135", 8, 8, {1, 3, 5}, {3, 8, 20}});
    PairCase batch2{"batch2_w2", 8, 8, {3, 3, 3}, {4, 4, 2}};  // W 2: one pair per row
    batch2.batch = 2;
    c.push_back(batch2);
    c.push_back(
        {"oc16", 8, 16, {3, 3, 3}, {6, 10, 12}, {1, 1, 1}, true, OpKind::kIdentity, false, false});
    c.push_back(
        {"odd_w", 8, 8, {3, 3, 3}, {6, 10, 11}, {1, 1, 1}, true, OpKind::kIdentity, false, false});
    c.push_back({"stride2",
                 8,
                 8,
                 {3, 3, 3},
                 {6, 10, 12},
                 {2, 2, 2},
                 true,
                 OpKind::kIdentity,
                 false,
                 false});
    c.push_back(
        {"residual", 8, 8, {3, 3, 3}, {6, 10, 12}, {1, 1, 1}, true, OpKind::kRelu, true, false});
    return c;
}

struct Outcome {
    std::vector<float> out;
    std::string describe;
};

Outcome run(const Graph& g, const Tensor& x, Precision p, bool pairs) {
    CompileOptions opt;
    opt.precision = p;
    opt.pair_narrow_convs = pairs;
    auto exe = makeCpuBackend()->compile(g, {x.shape()}, opt);
    EXPECT_TRUE(exe.isOk()) << exe.status().toString();
    if (!exe.isOk()) return {};
    std::vector<Tensor> out;
    EXPECT_TRUE((*exe)->run({x}, out).isOk());
    return {out[0].toFloats(), (*exe)->describe()};
}

double maxDiff(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    double d = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
        d = std::max(d, std::abs(double(a[i]) - b[i]));
    return d;
}

class ConvPairs : public ::testing::TestWithParam<PairCase> {};

TEST_P(ConvPairs, SameValuesAsThePlainPlan) {
    const PairCase& c = GetParam();
    const Graph g = caseGraph(c);
    const Tensor x = testing::seededTensor(g.values[g.inputs[0]].shape, 17);
    const Outcome plain = run(g, x, Precision::kFloat32, false);
    const Outcome paired = run(g, x, Precision::kFloat32, true);
    const bool planned = paired.describe.find("(voxel pairs)") != std::string::npos;
    EXPECT_EQ(planned, c.applies && cpu::kernelIsa() == cpu::KernelIsa::kAvx512) << paired.describe;
    EXPECT_EQ(plain.describe.find("(voxel pairs)"), std::string::npos);
    const auto [lo, hi] = std::minmax_element(plain.out.begin(), plain.out.end());
    const double range = double(*hi) - *lo;
    EXPECT_LE(maxDiff(paired.out, plain.out), 1e-5 * range) << c.name;
    if (!makeCpuBackend()->supportsPrecision(Precision::kBFloat16)) return;
    const double bf16_paired = maxDiff(run(g, x, Precision::kBFloat16, true).out, plain.out);
    const double bf16_plain = maxDiff(run(g, x, Precision::kBFloat16, false).out, plain.out);
    std::printf("%s: fp32 paired vs plain %.3g, bf16 vs fp32 paired %.4f plain %.4f, range %.3f\n",
                c.name.c_str(), maxDiff(paired.out, plain.out), bf16_paired, bf16_plain, range);
    EXPECT_LE(bf16_paired, 1.5 * bf16_plain + 1e-3 * range) << c.name;
}

INSTANTIATE_TEST_SUITE_P(Cases, ConvPairs, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace voxseg::engine
