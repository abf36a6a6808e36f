// The decoder's up-sampling folded into the convolution after its concat
// (engine/passes/fold_upsampling.h): the folded graph computes what the graph computed, on the
// reference backend (the algebra) and on the cpu backend in fp32, bf16 and int8 (the lowering,
// engine/cpu/subpixel_add.cpp), for both concat orders, a stride-1 axis and the ConvTranspose's
// bias at the borders; stages too small to gain stay as they are.
#include "engine/passes/fold_upsampling.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/passes/optimize.h"
#include "engine/quant/int8_policy.h"
#include "tests/engine/int8_test_graphs.h"
#include "tests/engine/op_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace voxseg::engine {
namespace {

using testing::GraphBuilder;

using testing::countOf;

struct StageCase {
    Shape coarse;  // x: N, Cx, spatial
    int64_t up = 16, skip = 16, out = 16;
    std::vector<int64_t> factor{2, 2, 2};
    bool up_first = true, transpose_bias = true;
};

// Conv3(Concat(ConvT(x), s)) -> InstanceNorm -> LeakyReLU -> 1x1 head, two inputs x and s.
Graph stageGraph(const StageCase& c) {
    GraphBuilder b;
    const ValueId x = b.input("x", c.coarse);
    Shape fine{c.coarse[0], c.skip};
    for (int a = 0; a < 3; ++a) fine.push_back(c.coarse[2 + a] * c.factor[a]);
    const ValueId s = b.input("s", fine);
    const ValueId u =
        b.convTranspose(x, c.coarse[1], c.up, c.factor, c.factor, {}, {}, 1, c.transpose_bias);
    const ValueId cat = b.node(OpKind::kConcat, {c.up_first ? u : s, c.up_first ? s : u},
                               [](Node& n) { n.axis = 1; });
    ValueId y = b.conv(cat, c.up + c.skip, c.out, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1});
    y = b.norm(OpKind::kInstanceNorm, y, c.out);
    y = b.node(OpKind::kLeakyRelu, {y}, [](Node& n) { n.alpha = 0.01f; });
    b.output(b.conv(y, c.out, 3, {1, 1, 1}));
    return b.graph();
}

std::vector<Tensor> inputsOf(const Graph& g) {
    std::vector<Tensor> in;
    for (size_t i = 0; i < g.inputs.size(); ++i)
        in.push_back(
            testing::seededTensor(g.values[g.inputs[i]].shape, 40u + static_cast<uint32_t>(i)));
    return in;
}

std::vector<Shape> shapesOf(const std::vector<Tensor>& in) {
    std::vector<Shape> s;
    for (const Tensor& t : in) s.push_back(t.shape());
    return s;
}

struct Outcome {
    std::vector<float> out;
    std::string describe;
};

Outcome runOn(Backend& backend, const Graph& g, const std::vector<Tensor>& in, CompileOptions opt) {
    auto exe = backend.compile(g, shapesOf(in), opt);
    EXPECT_TRUE(exe.isOk()) << exe.status().toString();
    if (!exe.isOk()) return {};
    std::vector<Tensor> out;
    EXPECT_TRUE((*exe)->run(in, out).isOk());
    return {out[0].toFloats(), (*exe)->describe()};
}

// optimize(g) with shapes, folded (every stage with max_ratio 1); how many stages were folded.
int foldedCopy(const Graph& g, const std::vector<Tensor>& in, Graph& folded,
               double max_ratio = 0.75) {
    folded = optimize(g);
    EXPECT_TRUE(folded.inferShapes(shapesOf(in)).isOk());
    const int n = passes::foldUpsampling(folded, max_ratio);
    EXPECT_TRUE(folded.inferShapes(shapesOf(in)).isOk());
    return n;
}

double maxDiff(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    double d = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
        d = std::max(d, std::abs(static_cast<double>(a[i]) - b[i]));
    return d;
}

double rangeOf(const std::vector<float>& v) {
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return static_cast<double>(*hi) - *lo;
}

const std::vector<StageCase>& cases() {
    static const std::vector<StageCase> c = {
        {{1, 32, 16, 14, 12}},
        {{1, 32, 16, 14, 12}, 16, 16, 16, {2, 2, 2}, /*up_first=*/false},
        {{1, 32, 5, 14, 12}, 16, 16, 16, {1, 2, 2}},  // anisotropic: folded only on request
        {{1, 32, 16, 14, 12}, 16, 16, 16, {2, 2, 2}, true, /*transpose_bias=*/false},
        {{2, 32, 16, 14, 12}, 16, 24, 32},  // a batch of 2, skip and output widths apart
    };
    return c;
}

// The algebra: the reference backend runs the folded graph to the unfolded one's values (float
// rounding apart), and the border correction is what makes the border voxels right.
TEST(FoldUpsampling, ReferenceComputesTheSameValues) {
    auto reference = makeReferenceBackend();
    for (const StageCase& c : cases()) {
        const Graph g = stageGraph(c);
        const std::vector<Tensor> in = inputsOf(g);
        Graph folded;
        ASSERT_EQ(foldedCopy(g, in, folded, 1.0), 1);
        EXPECT_EQ(std::count_if(folded.nodes.begin(), folded.nodes.end(),
                                [](const Node& n) { return n.op == OpKind::kConcat; }),
                  0);
        const Outcome want = runOn(*reference, g, in, {});
        const Outcome got = runOn(*reference, folded, in, {});
        const double d = maxDiff(got.out, want.out), range = rangeOf(want.out);
        std::printf("factors %lld,%lld,%lld up_first %d bias %d: max diff %.3g of range %.3g\n",
                    static_cast<long long>(c.factor[0]), static_cast<long long>(c.factor[1]),
                    static_cast<long long>(c.factor[2]), c.up_first, c.transpose_bias, d, range);
        EXPECT_LT(d, 1e-5 * range);
        if (!c.transpose_bias) continue;
        // Without the correction the ConvTranspose's bias would count in the padding.
        Graph uncorrected = folded;
        for (Node& n : uncorrected.nodes)
            if (n.op == OpKind::kSubpixelAdd) n.inputs.resize(2);
        const Outcome wrong = runOn(*reference, uncorrected, in, {});
        EXPECT_GT(maxDiff(wrong.out, want.out), 1e-3 * range);
    }
}

// The cpu backend's lowering (the stages its compile folds): fp32 to the unfolded plan's
// values, bf16 no further from fp32 than twice the unfolded bf16 plan (P and Y are rounded to
// bf16 before their sum), and the plan shows the SubpixelAdd step and no ConvTranspose.
TEST(FoldUpsampling, CpuPlansMatchTheUnfoldedGraph) {
    auto cpu = makeCpuBackend();
    for (const StageCase& c : cases()) {
        const Graph g = stageGraph(c);
        const std::vector<Tensor> in = inputsOf(g);
        Graph copy;
        if (foldedCopy(g, in, copy) == 0) continue;  // the anisotropic case
        CompileOptions opt, off;
        off.fold_upsampling = false;
        const Outcome want = runOn(*cpu, g, in, off);
        const Outcome got = runOn(*cpu, g, in, opt);
        EXPECT_EQ(got.describe.find("deconv"), std::string::npos) << got.describe;
        EXPECT_NE(got.describe.find("subpixel add"), std::string::npos) << got.describe;
        EXPECT_NE(want.describe.find("deconv"), std::string::npos) << want.describe;
        const double range = rangeOf(want.out);
        EXPECT_LT(maxDiff(got.out, want.out), 1e-4 * range) << got.describe;
        if (!cpu->supportsPrecision(Precision::kBFloat16)) continue;
        opt.precision = off.precision = Precision::kBFloat16;
        const double folded = maxDiff(runOn(*cpu, g, in, opt).out, want.out);
        const double unfolded = maxDiff(runOn(*cpu, g, in, off).out, want.out);
        std::printf("bf16 vs fp32: folded %.4f, unfolded %.4f (range %.3f)\n", folded, unfolded,
                    range);
        EXPECT_LT(folded, 2 * unfolded + 1e-3 * range);
    }
}

// The cpu backend's SubpixelAdd kernel alone, in bf16, on bf16-exact inputs: every output equals
// the reference's float sum (s + p, + the correction) rounded once to bf16, for runs of 8, 16, 24
// (16 + 8) and 5 channels (the intrinsics on AVX-512 CPUs, the plain loop for 5 and elsewhere),
// a (1,2,2) stage, a batch of 2, with and without the border correction.
TEST(FoldUpsampling, SubpixelAddKernelEqualsTheReferenceInBf16) {
    auto cpu = makeCpuBackend();
    if (!cpu->supportsPrecision(Precision::kBFloat16)) GTEST_SKIP() << "no bf16 on this CPU";
    auto reference = makeReferenceBackend();
    struct Case {
        int64_t n, oc;
        std::vector<int64_t> factor;
        bool corr;
    };
    for (const Case& c :
         {Case{1, 8, {2, 2, 2}, true}, Case{1, 16, {2, 2, 2}, true}, Case{2, 24, {1, 2, 2}, true},
          Case{1, 5, {2, 2, 2}, true}, Case{1, 8, {2, 2, 2}, false}}) {
        const Shape ys{c.n, c.oc, 6, 10, 12};
        Shape ps{c.n, c.oc};
        for (int a = 0; a < 3; ++a)
            ps.push_back(ys[size_t(2 + a)] / c.factor[size_t(a)] + (c.factor[size_t(a)] == 2));
        ps[1] = c.oc * c.factor[0] * c.factor[1] * c.factor[2];
        GraphBuilder b;
        const ValueId p = b.input("p", ps), sk = b.input("s", ys);
        std::vector<ValueId> inputs{p, sk};
        if (c.corr) {  // class 0 (no border) has no correction, as the pass writes it
            std::vector<float> corr = testing::seededFloats(64 * c.oc, 9);
            std::fill(corr.begin(), corr.begin() + c.oc, 0.0f);
            inputs.push_back(b.constant("corr", Tensor::fromFloats({64, c.oc}, corr)));
        }
        b.output(b.node(OpKind::kSubpixelAdd, inputs, [&](Node& n) { n.subpixel = c.factor; }));
        const Graph g = b.graph();
        std::vector<Tensor> in;
        for (const Shape& shape : {ps, ys}) {  // bf16-exact values
            std::vector<float> v = testing::seededTensor(shape, uint32_t(shape[1])).toFloats();
            for (float& f : v) f = bfloat16ToFloat(floatToBFloat16(f));
            in.push_back(Tensor::fromFloats(shape, v));
        }
        CompileOptions bf16;
        bf16.precision = Precision::kBFloat16;
        const Outcome got = runOn(*cpu, g, in, bf16);
        EXPECT_NE(got.describe.find("subpixel add"), std::string::npos) << got.describe;
        const Outcome want = runOn(*reference, g, in, {});
        ASSERT_EQ(got.out.size(), want.out.size());
        int64_t differ = 0;
        for (size_t i = 0; i < want.out.size(); ++i)
            differ += got.out[i] != bfloat16ToFloat(floatToBFloat16(want.out[i]));
        EXPECT_EQ(differ, 0) << c.oc << " channels, of " << want.out.size();
    }
}

// A stage whose coarse side is small gains too little (the parity convolution's extra
// positions) and stays as it is.
TEST(FoldUpsampling, SmallStagesStay) {
    StageCase c{{1, 16, 8, 7, 6}, 8, 8, 8};
    const Graph g = stageGraph(c);
    Graph folded;
    EXPECT_EQ(foldedCopy(g, inputsOf(g), folded), 0);
}

// int8 (an int8 up-sampling calibrated): the parity and skip convolutions run in int8, the
// folded graph stays as close to fp32 as the unfolded int8 plan (the int8 tests' bound: 3 % of
// the output's range at most, 0.5 % on average).
// 16 output channels, and 24 (the SubpixelAdd's runs of 16 and of 8, bf16 in and s8 out).
class FoldUpsamplingInt8 : public ::testing::TestWithParam<int64_t> {};

TEST_P(FoldUpsamplingInt8, PlanRunsBothHalvesInInt8) {
    StageCase c{{1, 32, 16, 14, 12}, 16, 16, GetParam()};
    const Graph g = stageGraph(c);
    const std::vector<Tensor> in = inputsOf(g);
    // Both inputs, and s as a U-Net's next encoder conv would have it observed.
    auto record = testing::calibrateMinMax(g, in, {"s"});
    ASSERT_FALSE(record->activations.empty());
    record->int8_upsampling = true;
    // 8-bit normalisation inputs (calibrate --norm-inputs int8): the folded Conv's output, as
    // the norm reads it, written by SubpixelAdd as s8 less the Conv's bias.
    auto with_s8 = std::make_shared<QuantizationRecord>(*record);
    ASSERT_EQ(testing::addNormInputScales(g, in, *with_s8), 1u);
    CompileOptions fp32, int8, int8_off;
    int8.precision = int8_off.precision = Precision::kInt8;
    int8.quantization = int8_off.quantization = record;
    int8_off.fold_upsampling = false;
    auto cpu = makeCpuBackend();
    const Outcome want = runOn(*cpu, g, in, fp32);
    const Outcome got = runOn(*cpu, g, in, int8);
    const Outcome unfolded = runOn(*cpu, g, in, int8_off);
    EXPECT_NE(got.describe.find("subpixel add"), std::string::npos) << got.describe;
    EXPECT_EQ(countOf(got.describe, "conv int8 "), 3) << got.describe;  // parity, skip, head
    const testing::Int8Error e = testing::int8ErrorVsFp32(got.out, want.out);
    const testing::Int8Error u = testing::int8ErrorVsFp32(unfolded.out, want.out);
    std::printf(
        "int8 vs fp32: folded max %.4f mean %.5f, unfolded max %.4f mean %.5f, range %.3f\n", e.max,
        e.mean, u.max, u.mean, e.range);
    EXPECT_GT(e.max, 0.0);
    EXPECT_LT(e.max, 0.03 * e.range);
    EXPECT_LT(e.mean, 0.005 * e.range);

    int8.quantization = int8_off.quantization = with_s8;
    const Outcome s8 = runOn(*cpu, g, in, int8);
    const Outcome s8_off = runOn(*cpu, g, in, int8_off);
    const size_t at = s8.describe.find("subpixel add");
    ASSERT_NE(at, std::string::npos) << s8.describe;
    EXPECT_NE(s8.describe.substr(at, s8.describe.find(']', at) - at).find("->ndhwc:s8"),
              std::string::npos)
        << s8.describe;
    const testing::Int8Error e8 = testing::int8ErrorVsFp32(s8.out, want.out);
    const testing::Int8Error u8 = testing::int8ErrorVsFp32(s8_off.out, want.out);
    std::printf("8-bit norm input: folded max %.4f mean %.5f, unfolded max %.4f mean %.5f\n",
                e8.max, e8.mean, u8.max, u8.mean);
    EXPECT_LT(e8.max, 0.03 * e8.range);
    EXPECT_LT(e8.mean, 0.005 * e8.range);
}

INSTANTIATE_TEST_SUITE_P(Outputs, FoldUpsamplingInt8, ::testing::Values(16, 24));

}  // namespace
}  // namespace voxseg::engine
