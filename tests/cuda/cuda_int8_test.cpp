// The cuda backend's int8 convolutions on a GPU (label gpu; skips without one): every case of
// int8_cases.h compiled with Precision::kInt8 and the case's record must equal the exact integer
// reference bit for bit after the float storage rounding of the GPU's int8 plans (bf16 on sm_80+,
// fp16 before: cudaAutoPrecision); an nnU-Net level in int8 stays as close to fp32 as the cpu
// backend's int8 must (tests/engine/int8_graph_test.cpp's bounds); and a compile without a record
// is refused with the reason. Precision fp8 (sm_89+; skips before): every case equals the host
// replay of its plan (host_steps.h, the product summed exactly) within the bf16 storage rounding
// and 1e-5 of the output's range for cuBLASLt's fp32 sums, and the nnU-Net level stays within the
// host replay test's fp8 bounds (cuda_fp8_plan_test.cpp).
#include "cuda/cuda_backend.h"
#include "cuda/cuda_errors.h"
#include "engine/passes/optimize.h"
#include "engine/quant/int8_policy.h"
#include "tests/cuda/host_steps.h"
#include "tests/cuda/int8_cases.h"
#include "tests/engine/int8_test_graphs.h"
#include "tests/engine/op_cases.h"

#include <gtest/gtest.h>

#include <memory>

namespace voxseg::cuda {
namespace {

using testing::Int8Case;

// The cuda backend, or a skip naming why (no GPU, no int8 or fp8 tensor cores).
template <typename Base, engine::Precision kPrecision = engine::Precision::kInt8>
class WithInt8Gpu : public Base {
  protected:
    void SetUp() override {
        auto backend = makeCudaBackend();
        if (!backend.isOk()) GTEST_SKIP() << "no usable GPU: " << backend.status().toString();
        backend_ = std::move(backend).value();
        if (!backend_->supportsPrecision(kPrecision))
            GTEST_SKIP() << "no " << engine::precisionName(kPrecision) << " tensor cores on "
                         << backend_->deviceDescription();
    }
    std::unique_ptr<engine::Backend> backend_;
};

class CudaInt8 : public WithInt8Gpu<::testing::TestWithParam<Int8Case>> {};
class CudaInt8Level : public WithInt8Gpu<::testing::Test> {};
class CudaFp8 : public WithInt8Gpu<::testing::TestWithParam<Int8Case>, engine::Precision::kFp8> {};
class CudaFp8Level : public WithInt8Gpu<::testing::Test, engine::Precision::kFp8> {};

float storageRounded(float f, engine::Precision storage) {
    if (storage == engine::Precision::kBFloat16)
        return engine::bfloat16ToFloat(engine::floatToBFloat16(f));
    if (storage == engine::Precision::kFloat16) return engine::halfToFloat(engine::floatToHalf(f));
    return f;
}

TEST_P(CudaInt8, EqualsTheIntegerReferenceAfterStorageRounding) {
    const Int8Case& c = GetParam();
    const testing::Int8Prepared p = testing::prepareInt8Case(c);
    ASSERT_FALSE(p.expected.empty());
    engine::CompileOptions options;
    options.precision = engine::Precision::kInt8;
    options.quantization = std::make_shared<engine::QuantizationRecord>(p.record);
    std::vector<engine::Shape> shapes;
    for (const auto& t : p.inputs) shapes.push_back(t.shape());
    auto exe = backend_->compile(p.graph, shapes, options);
    ASSERT_TRUE(exe.isOk()) << exe.status().toString();
    EXPECT_NE((*exe)->describe().find("1 int8 convs"), std::string::npos) << (*exe)->describe();
    std::vector<engine::Tensor> out;
    ASSERT_TRUE((*exe)->run(p.inputs, out).isOk());
    const auto capability = computeCapability(0);
    ASSERT_TRUE(capability.isOk());
    const engine::Precision storage = cudaAutoPrecision(*capability).precision;
    const auto got = out[0].toFloats();
    ASSERT_EQ(got.size(), p.expected.size());
    int64_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const float want = storageRounded(p.expected[i], storage);
        if (!(got[i] == want) && bad++ < 3)
            ADD_FAILURE() << c.name << " element " << i << ": " << got[i] << " vs " << want;
    }
    EXPECT_EQ(bad, 0) << "of " << got.size();
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaInt8, ::testing::ValuesIn(testing::int8Cases()),
                         [](const auto& info) { return info.param.name; });

TEST_F(CudaInt8Level, UnetLevelStaysCloseToFp32) {
    const engine::Graph g = engine::testing::int8UnetLevel();
    const engine::Tensor input = engine::testing::seededTensor({1, 2, 16, 14, 12}, 11);
    auto record = engine::testing::calibrateMinMax(g, input);
    record->float_layers = engine::quant::defaultInt8FloatLayers(g);
    record->weight_bits = 8;
    const std::vector<float> fp32 = testing::cpuFp32(g, {input});
    ASSERT_FALSE(fp32.empty());
    std::vector<engine::Tensor> int8;
    engine::CompileOptions options;
    options.precision = engine::Precision::kInt8;
    options.quantization = record;
    // As the product compiles it (imported, not optimised) and optimised: both must plan the
    // same 5 int8 convolutions.
    for (const engine::Graph& graph : {g, engine::optimize(g)}) {
        auto exe = backend_->compile(graph, {input.shape()}, options);
        ASSERT_TRUE(exe.isOk()) << exe.status().toString();
        EXPECT_NE((*exe)->describe().find("5 int8 convs"), std::string::npos) << (*exe)->describe();
        ASSERT_TRUE((*exe)->run({input}, int8).isOk());
        const engine::testing::Int8Error e =
            engine::testing::int8ErrorVsFp32(int8[0].toFloats(), fp32);
        std::printf("cuda int8 vs cpu fp32: max %.4f, mean %.5f, output range %.3f\n", e.max,
                    e.mean, e.range);
        EXPECT_LT(e.max, 0.03 * e.range);
        EXPECT_LT(e.mean, 0.005 * e.range);
        EXPECT_GT(e.max, 0.0);
    }
}

TEST_P(CudaFp8, EqualsTheHostReplayWithinStorageRoundingAndFp32Sums) {
    const Int8Case& c = GetParam();
    const testing::Int8Prepared p = testing::prepareInt8Case(c);
    engine::CompileOptions options;
    options.precision = engine::Precision::kFp8;
    options.quantization = std::make_shared<engine::QuantizationRecord>(p.record);
    std::vector<engine::Shape> shapes;
    for (const auto& t : p.inputs) shapes.push_back(t.shape());
    auto exe = backend_->compile(p.graph, shapes, options);
    ASSERT_TRUE(exe.isOk()) << exe.status().toString();
    EXPECT_NE((*exe)->describe().find("1 fp8 convs"), std::string::npos) << (*exe)->describe();
    std::vector<engine::Tensor> out;
    ASSERT_TRUE((*exe)->run(p.inputs, out).isOk());
    planning::PlanOptions plan;
    plan.quantization = &p.record;
    plan.fp8 = true;
    auto replay = testing::runPlanOnHost(p.graph, p.inputs, plan);
    ASSERT_TRUE(replay.isOk()) << replay.status().toString();
    const auto got = out[0].toFloats(), want = (*replay)[0].toFloats();
    ASSERT_EQ(got.size(), want.size());
    double range = 0;
    for (float w : want) range = std::max(range, std::abs(double(w)));
    int64_t bad = 0;
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double d = std::abs(double(got[i]) - want[i]);
        worst = std::max(worst, d);
        if (d > std::abs(want[i]) / 256.0 + 1e-5 * range && bad++ < 3)
            ADD_FAILURE() << c.name << " element " << i << ": " << got[i] << " vs " << want[i];
    }
    std::printf("%s: fp8 on the GPU vs host replay: max %.3g of range %.3g\n", c.name.c_str(),
                worst, range);
    EXPECT_EQ(bad, 0) << "of " << got.size();
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaFp8, ::testing::ValuesIn(testing::int8Cases()),
                         [](const auto& info) { return info.param.name; });

TEST_F(CudaFp8Level, UnetLevelStaysCloseToFp32) {
    const engine::Graph g = engine::testing::int8UnetLevel();
    const engine::Tensor input = engine::testing::seededTensor({1, 2, 16, 14, 12}, 11);
    auto record = engine::testing::calibrateMinMax(g, input);
    record->float_layers = engine::quant::defaultInt8FloatLayers(g);
    const std::vector<float> fp32 = testing::cpuFp32(g, {input});
    ASSERT_FALSE(fp32.empty());
    std::vector<engine::Tensor> fp8;
    engine::CompileOptions options;
    options.precision = engine::Precision::kFp8;
    options.quantization = record;
    auto exe = backend_->compile(g, {input.shape()}, options);
    ASSERT_TRUE(exe.isOk()) << exe.status().toString();
    EXPECT_NE((*exe)->describe().find("5 fp8 convs"), std::string::npos) << (*exe)->describe();
    ASSERT_TRUE((*exe)->run({input}, fp8).isOk());
    const engine::testing::Int8Error e = engine::testing::int8ErrorVsFp32(fp8[0].toFloats(), fp32);
    std::printf("cuda fp8 vs cpu fp32: max %.4f, mean %.5f, output range %.3f\n", e.max, e.mean,
                e.range);
    EXPECT_LT(e.max, 0.06 * e.range);
    EXPECT_LT(e.mean, 0.01 * e.range);
}

TEST(CudaInt8Refusal, WithoutARecordTheCompileSaysWhy) {
    auto backend = makeCudaBackend();
    if (!backend.isOk()) GTEST_SKIP() << "no usable GPU: " << backend.status().toString();
    if (!(*backend)->supportsPrecision(engine::Precision::kInt8)) GTEST_SKIP() << "no int8";
    const testing::Int8Prepared p = testing::prepareInt8Case(testing::int8Cases()[0]);
    engine::CompileOptions options;
    options.precision = engine::Precision::kInt8;
    auto exe = (*backend)->compile(p.graph, {p.inputs[0].shape()}, options);
    ASSERT_FALSE(exe.isOk());
    EXPECT_NE(exe.status().message().find("calibration"), std::string::npos)
        << exe.status().toString();
}

}  // namespace
}  // namespace voxseg::cuda
