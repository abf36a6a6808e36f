// The cuda backend's int8 convolution (cuda/int8_conv.h) without a GPU: its plan replayed on the
// host (tests/cuda/host_steps.h) with the kernels' own per-element math and an integer product,
// chunk by chunk as the device runs it, must equal the exact integer reference
// (engine/quant/int8_conv_reference.h) bit for bit on every case of int8_cases.h. What this leaves
// to the device test (cuda_int8_test.cpp, label gpu): the kernels' indexing on the GPU and
// cuBLASLt's int8 product.
#include "cuda/cuda_planner.h"
#include "engine/passes/optimize.h"
#include "engine/quant/int8_policy.h"
#include "tests/cuda/host_steps.h"
#include "tests/cuda/int8_cases.h"
#include "tests/engine/int8_test_graphs.h"
#include "tests/engine/op_cases.h"

#include <gtest/gtest.h>

namespace voxseg::cuda {
namespace {

using testing::Int8Case;

int64_t mismatches(const std::vector<float>& got, const std::vector<float>& want,
                   const std::string& name) {
    EXPECT_EQ(got.size(), want.size()) << name;
    int64_t bad = 0;
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
        if (!(got[i] == want[i])) {
            if (bad++ < 3)
                ADD_FAILURE() << name << " element " << i << ": " << got[i] << " vs " << want[i];
        }
    return bad;
}

class CudaInt8Plan : public ::testing::TestWithParam<Int8Case> {};

TEST_P(CudaInt8Plan, HostReplayEqualsTheIntegerReferenceBitForBit) {
    const Int8Case& c = GetParam();
    const testing::Int8Prepared p = testing::prepareInt8Case(c);
    ASSERT_FALSE(p.expected.empty());
    planning::PlanOptions options;
    options.quantization = &p.record;
    options.int8_chunk_budget = 1;  // the smallest chunk (128 rows): several chunks per conv
    std::vector<engine::Shape> shapes;
    for (const auto& t : p.inputs) shapes.push_back(t.shape());
    auto pg = planning::planGraph(p.graph, shapes, StorageType::kFloat32, options);
    ASSERT_TRUE(pg.isOk()) << pg.status().toString();
    int int8_steps = 0;
    for (const auto& s : pg->planner->steps_)
        int8_steps += s.kind == planning::Step::Kind::kInt8Conv;
    EXPECT_EQ(int8_steps, 1);
    ASSERT_EQ(pg->planner->int8_convs_.size(), 1u);
    EXPECT_GT(pg->planner->int8_convs_[0].geometry.rows(), pg->planner->int8_convs_[0].chunk_rows)
        << "the case should span several chunks";

    auto out = testing::runPlanOnHost(p.graph, p.inputs, options);
    ASSERT_TRUE(out.isOk()) << out.status().toString();
    EXPECT_EQ(mismatches((*out)[0].toFloats(), p.expected, c.name), 0);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaInt8Plan, ::testing::ValuesIn(testing::int8Cases()),
                         [](const auto& info) { return info.param.name; });

// The comparison can fail: the same plan with the source's scale 1 % off. (A zero point off by
// one would not do: the quantised bytes and the compensation move together, and only the bytes
// clamped at 255 change.)
TEST(CudaInt8PlanCheck, AScaleOnePercentOffChangesTheResult) {
    const Int8Case c = testing::int8Cases()[0];  // no activation: every output moves
    testing::Int8Prepared p = testing::prepareInt8Case(c);
    p.record.activations["x"].scale *= 1.01f;
    planning::PlanOptions options;
    options.quantization = &p.record;
    auto out = testing::runPlanOnHost(p.graph, p.inputs, options);
    ASSERT_TRUE(out.isOk()) << out.status().toString();
    const auto got = (*out)[0].toFloats();
    int64_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != p.expected[i];
    EXPECT_GT(differ, int64_t(got.size()) * 9 / 10);
}

// A Conv in float_layers, or whose input has no parameters, stays a cuDNN convolution.
TEST(CudaInt8PlanCheck, FloatLayersAndUncalibratedInputsStayFloat) {
    const Int8Case c = testing::int8Cases()[0];
    testing::Int8Prepared p = testing::prepareInt8Case(c);
    const std::vector<engine::Shape> shapes{p.inputs[0].shape()};
    for (int variant = 0; variant < 2; ++variant) {
        engine::QuantizationRecord record = p.record;
        if (variant == 0) record.float_layers = {p.graph.nodes.front().name};
        if (variant == 1) record.activations.clear();
        planning::PlanOptions options;
        options.quantization = &record;
        auto pg = planning::planGraph(p.graph, shapes, StorageType::kFloat32, options);
        ASSERT_TRUE(pg.isOk()) << pg.status().toString();
        EXPECT_TRUE(pg->planner->int8_convs_.empty()) << variant;
        bool cudnn = false;
        for (const auto& s : pg->planner->steps_) cudnn |= s.kind == planning::Step::Kind::kConv;
        EXPECT_TRUE(cudnn) << variant;
    }
}

// A whole nnU-Net level (norms, residual adds, a strided conv, ConvTranspose, concat, the first
// and last conv float) planned in int8 and replayed on the host stays as close to fp32 as the cpu
// backend's int8 must (tests/engine/int8_graph_test.cpp's bounds), as imported and optimised.
TEST(CudaInt8PlanCheck, UnetLevelReplayStaysCloseToFp32) {
    const engine::Graph g = engine::testing::int8UnetLevel();
    const engine::Tensor input = engine::testing::seededTensor({1, 2, 16, 14, 12}, 11);
    auto record = engine::testing::calibrateMinMax(g, input);
    record->float_layers = engine::quant::defaultInt8FloatLayers(g);
    const std::vector<float> want = testing::cpuFp32(g, {input});
    ASSERT_FALSE(want.empty());
    planning::PlanOptions options;
    options.quantization = record.get();
    for (const engine::Graph& graph : {g, engine::optimize(g)}) {
        auto pg = planning::planGraph(graph, {input.shape()}, StorageType::kFloat32, options);
        ASSERT_TRUE(pg.isOk()) << pg.status().toString();
        EXPECT_EQ(pg->planner->int8_convs_.size(), 5u);  // 7 convs, the first and last float
        auto out = testing::runPlanOnHost(graph, {input}, options);
        ASSERT_TRUE(out.isOk()) << out.status().toString();
        const engine::testing::Int8Error e =
            engine::testing::int8ErrorVsFp32((*out)[0].toFloats(), want);
        std::printf("cuda int8 plan (host replay) vs fp32: max %.4f, mean %.5f, range %.3f\n",
                    e.max, e.mean, e.range);
        EXPECT_LT(e.max, 0.03 * e.range);
        EXPECT_LT(e.mean, 0.005 * e.range);
        EXPECT_GT(e.max, 0.0);
        // Without the record the same plan replays fp32 (no int8 step): equal to the cpu's to
        // float rounding, which shows the bound above measures int8, not the replay.
        auto plain = testing::runPlanOnHost(graph, {input});
        ASSERT_TRUE(plain.isOk()) << plain.status().toString();
        double plain_err = 0;
        const auto p = (*plain)[0].toFloats();
        for (size_t i = 0; i < want.size(); ++i)
            plain_err = std::max(plain_err, std::abs(double(p[i]) - want[i]));
        EXPECT_LT(plain_err, 1e-4 * e.range);
        EXPECT_LT(plain_err, e.max / 10);
    }
}

// A record made with --keep-float none --norm-inputs int8: every conv runs int8 (the image
// quantised like any tensor), and the norm inputs, which this backend does not use, change
// nothing: the convolutions before norms write float and the replay stays within the bounds.
TEST(CudaInt8PlanCheck, EveryConvAndUnusedNormInputsReplayCloseToFp32) {
    const engine::Graph g = engine::testing::int8UnetLevel();
    const engine::Tensor input = engine::testing::seededTensor({1, 2, 16, 14, 12}, 11);
    auto record = engine::testing::calibrateMinMax(g, input);  // no float_layers
    ASSERT_GT(engine::testing::addNormInputScales(g, input, *record), 0u);
    const std::vector<float> want = testing::cpuFp32(g, {input});
    ASSERT_FALSE(want.empty());
    planning::PlanOptions options;
    options.quantization = record.get();
    auto pg = planning::planGraph(g, {input.shape()}, StorageType::kFloat32, options);
    ASSERT_TRUE(pg.isOk()) << pg.status().toString();
    EXPECT_EQ(pg->planner->int8_convs_.size(), 7u);
    auto out = testing::runPlanOnHost(g, {input}, options);
    ASSERT_TRUE(out.isOk()) << out.status().toString();
    const engine::testing::Int8Error e =
        engine::testing::int8ErrorVsFp32((*out)[0].toFloats(), want);
    std::printf("cuda int8 plan, every conv (host replay) vs fp32: max %.4f, mean %.5f\n", e.max,
                e.mean);
    EXPECT_LT(e.max, 0.03 * e.range);
    EXPECT_LT(e.mean, 0.005 * e.range);
}

// The parameters' packing: weights tap-major and channel-minor, k padded with zeros, the
// zero-point compensation exactly (128 - zp) times each row's sum.
TEST(CudaInt8PlanCheck, PackingLaysOutWeightsAndCompensation) {
    Int8ConvPlan plan = testing::packingPlan();
    std::vector<float> w(3 * 2 * 3);
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i % 7) - 3);  // O I kW
    auto pack = packInt8Conv(plan, w, {}, {0.5f, 100}, 127);
    ASSERT_TRUE(pack.isOk()) << pack.status().toString();
    EXPECT_EQ(plan.cout_padded, 16);
    EXPECT_EQ(pack->weights.size(), size_t(16 * 16));
    const auto q = engine::quant::quantizeWeightsPerChannel(w, 3, 127);
    for (int o = 0; o < 3; ++o) {
        int sum = 0;
        for (int c = 0; c < 2; ++c)
            for (int t = 0; t < 3; ++t) {
                EXPECT_EQ(pack->weights[size_t(o * 16 + t * 2 + c)],
                          q.values[size_t((o * 2 + c) * 3 + t)]);
                sum += q.values[size_t((o * 2 + c) * 3 + t)];
            }
        for (int k = 6; k < 16; ++k) EXPECT_EQ(pack->weights[size_t(o * 16 + k)], 0);
        EXPECT_EQ(pack->channels[size_t(o)].compensation, (128 - 100) * sum);
        EXPECT_FLOAT_EQ(pack->channels[size_t(o)].scale, 0.5f * q.scales[size_t(o)]);
    }
    for (int o = 3; o < 16; ++o)
        for (int k = 0; k < 16; ++k) EXPECT_EQ(pack->weights[size_t(o * 16 + k)], 0);
    EXPECT_FLOAT_EQ(plan.inv_scale, 2.0f);
    EXPECT_FALSE(plan.has_bias);
}

}  // namespace
}  // namespace voxseg::cuda
