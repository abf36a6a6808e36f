// Golden tests: networks of the kinds users bring (nnU-Net PlainConvUNet, MONAI UNet, BasicUNet,
// SegResNet), exported to ONNX and run in PyTorch by tools/gen_golden.py. Each is imported with
// voxseg's importer and run on every available backend, as imported and after optimize(), and
// compared with PyTorch's output.
#include "backends/registry.h"
#include "engine/onnx/import.h"
#include "engine/passes/optimize.h"
#include "tests/engine/golden_files.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>

namespace voxseg::engine {
namespace {

const std::filesystem::path kGoldenDir =
    std::filesystem::path(VOXSEG_SOURCE_DIR) / "tests" / "engine" / "golden";

// fp32: the bound. Reduced precision: relative to the largest |output| of the net
// (a bound per net can be added here when a backend measures it).
constexpr double kFp32MaxAbsError = 1e-4;
constexpr double kFp16RelError = 2e-2;
constexpr double kBf16RelError = 3e-2;  // oneDNN bf16 measured 0.6-1.4 % of max |y|

using testing::GoldenNet;
using testing::readRaw;

const std::vector<GoldenNet>& nets() {
    static const std::vector<GoldenNet> all = testing::goldenEntries(kGoldenDir);
    return all;
}

const std::vector<GoldenNet>& ops() {
    static const std::vector<GoldenNet> all = testing::goldenEntries(kGoldenDir, "ops", "ops/");
    return all;
}

TEST(Golden, IndexListsTheNetworks) {
    ASSERT_GE(nets().size(), 4u) << "tests/engine/golden/index.json missing or incomplete";
}

class GoldenParity : public ::testing::TestWithParam<std::tuple<std::string, size_t>> {};

TEST_P(GoldenParity, MatchesPyTorch) {
    const auto& [backend_name, index] = GetParam();
    const GoldenNet& net = nets()[index];
    const auto names = availableBackends();
    if (std::find(names.begin(), names.end(), backend_name) == names.end())
        GTEST_SKIP() << "backend '" << backend_name << "' is not compiled into this build";
    auto backend = createBackend(backend_name);
    if (!backend)
        GTEST_SKIP() << "backend '" << backend_name
                     << "' unusable: " << backend.status().toString();

    auto graph = importOnnx(kGoldenDir / (net.name + ".onnx"));
    ASSERT_TRUE(graph.isOk()) << graph.status().toString();
    const Tensor input = readRaw(kGoldenDir / (net.name + ".input.f32"), net.input_shape);
    const Tensor want = readRaw(kGoldenDir / (net.name + ".output.f32"), net.output_shape);
    const std::vector<float> w = want.toFloats();
    double max_ref = 0;
    for (float v : w) max_ref = std::max(max_ref, double(std::abs(v)));

    for (bool optimized : {false, true}) {
        const Graph g = optimized ? optimize(*graph) : *graph;
        for (Precision p : {Precision::kFloat32, Precision::kFloat16, Precision::kBFloat16}) {
            if (!(*backend)->supportsPrecision(p)) continue;
            SCOPED_TRACE(net.name + " on " + backend_name + " " + precisionName(p) +
                         (optimized ? " optimized" : " as imported"));
            CompileOptions options;
            options.precision = p;
            auto exe = (*backend)->compile(g, {net.input_shape}, options);
            ASSERT_TRUE(exe.isOk()) << exe.status().toString();
            std::vector<Tensor> out;
            const Status s = (*exe)->run({input}, out);
            ASSERT_TRUE(s.isOk()) << s.toString();
            ASSERT_EQ(out.size(), 1u);
            ASSERT_EQ(out[0].shape(), net.output_shape);
            const std::vector<float> got = out[0].toFloats();
            double max_err = 0;
            for (size_t i = 0; i < got.size(); ++i)
                max_err = std::max(max_err,
                                   std::isnan(got[i]) ? INFINITY : std::abs(double(got[i]) - w[i]));
            const double bound = p == Precision::kFloat32   ? kFp32MaxAbsError
                                 : p == Precision::kFloat16 ? kFp16RelError * max_ref
                                                            : kBf16RelError * max_ref;
            std::cout << "[golden] " << net.name << " " << backend_name << " " << precisionName(p)
                      << (optimized ? " optimized" : " imported") << ": max abs error " << max_err
                      << " (bound " << bound << ", max |y| " << max_ref << ", " << g.nodes.size()
                      << " nodes)\n";
            EXPECT_LE(max_err, bound);
        }
    }
}

std::string goldenName(const ::testing::TestParamInfo<GoldenParity::ParamType>& info) {
    return std::get<0>(info.param) + "_" + nets()[std::get<1>(info.param)].name;
}

INSTANTIATE_TEST_SUITE_P(Nets, GoldenParity,
                         ::testing::Combine(::testing::Values("reference", "cpu", "cuda"),
                                            ::testing::Range<size_t>(0, nets().size())),
                         goldenName);

// Single ops against ONNX Runtime: pins the ONNX semantics (coordinate modes, ceil mode,
// padding rules, opset-dependent axes) of the importer and of every backend.
constexpr double kOpFp32Tol = 1e-5;  // atol and rtol

class GoldenOp : public ::testing::TestWithParam<std::tuple<std::string, size_t>> {};

TEST_P(GoldenOp, MatchesOnnxRuntime) {
    const auto& [backend_name, index] = GetParam();
    const GoldenNet& op = ops()[index];
    const auto names = availableBackends();
    if (std::find(names.begin(), names.end(), backend_name) == names.end())
        GTEST_SKIP() << "backend '" << backend_name << "' is not compiled into this build";
    auto backend = createBackend(backend_name);
    if (!backend)
        GTEST_SKIP() << "backend '" << backend_name
                     << "' unusable: " << backend.status().toString();
    auto graph = importOnnx(kGoldenDir / (op.name + ".onnx"));
    ASSERT_TRUE(graph.isOk()) << graph.status().toString();
    const Tensor input = readRaw(kGoldenDir / (op.name + ".input.f32"), op.input_shape);
    const std::vector<float> w =
        readRaw(kGoldenDir / (op.name + ".output.f32"), op.output_shape).toFloats();
    double max_ref = 0;
    for (float v : w) max_ref = std::max(max_ref, double(std::abs(v)));
    for (Precision p : {Precision::kFloat32, Precision::kFloat16, Precision::kBFloat16}) {
        if (!(*backend)->supportsPrecision(p)) continue;
        SCOPED_TRACE(op.name + " on " + backend_name + " " + precisionName(p));
        CompileOptions options;
        options.precision = p;
        auto exe = (*backend)->compile(*graph, {op.input_shape}, options);
        ASSERT_TRUE(exe.isOk()) << exe.status().toString();
        std::vector<Tensor> out;
        const Status s = (*exe)->run({input}, out);
        ASSERT_TRUE(s.isOk()) << s.toString();
        ASSERT_EQ(out[0].shape(), op.output_shape);
        const std::vector<float> got = out[0].toFloats();
        const double rel = p == Precision::kFloat32   ? kOpFp32Tol
                           : p == Precision::kFloat16 ? kFp16RelError
                                                      : kBf16RelError;
        for (size_t i = 0; i < got.size(); ++i) {
            const double bound =
                p == Precision::kFloat32 ? kOpFp32Tol + rel * std::abs(w[i]) : rel * max_ref;
            ASSERT_LE(std::abs(double(got[i]) - w[i]), bound)
                << "element " << i << " of " << shapeToString(op.output_shape) << ": got " << got[i]
                << ", ONNX Runtime " << w[i];
        }
    }
}

std::string opName(const ::testing::TestParamInfo<GoldenOp::ParamType>& info) {
    return std::get<0>(info.param) + "_" + ops()[std::get<1>(info.param)].name.substr(4);
}

INSTANTIATE_TEST_SUITE_P(Ops, GoldenOp,
                         ::testing::Combine(::testing::Values("reference", "cpu", "cuda"),
                                            ::testing::Range<size_t>(0, ops().size())),
                         opName);

// Compiling for a batch of 2 gives each item the batch-1 result on every backend (Reshapes keep
// the batch dim; backends must not mix batch items).
TEST(Golden, BatchOfTwoMatchesSingleItems) {
    for (const std::string& backend_name : availableBackends()) {
        auto backend = createBackend(backend_name);
        if (!backend) continue;  // no device: covered by the skip lines of GoldenParity
        for (const GoldenNet& net : nets()) {
            if (net.name != "monai_segresnet" && net.name != "monai_basicunet_softmax") continue;
            SCOPED_TRACE(net.name + " on " + backend_name);
            auto graph = importOnnx(kGoldenDir / (net.name + ".onnx"));
            ASSERT_TRUE(graph.isOk()) << graph.status().toString();
            const Tensor input = readRaw(kGoldenDir / (net.name + ".input.f32"), net.input_shape);
            const Tensor want = readRaw(kGoldenDir / (net.name + ".output.f32"), net.output_shape);
            Shape batch_shape = net.input_shape;
            batch_shape[0] = 2;
            Tensor batch(DType::kFloat32, batch_shape);
            for (int k = 0; k < 2; ++k)
                std::memcpy(batch.data<float>() + k * input.numel(), input.data<float>(),
                            input.bytes());
            auto exe = (*backend)->compile(optimize(*graph), {batch_shape}, {});
            ASSERT_TRUE(exe.isOk()) << exe.status().toString();
            std::vector<Tensor> out;
            ASSERT_TRUE((*exe)->run({batch}, out).isOk());
            ASSERT_EQ(out[0].dim(0), 2);
            const std::vector<float> got = out[0].toFloats(), w = want.toFloats();
            double max_err = 0;
            for (size_t i = 0; i < got.size(); ++i)
                max_err = std::max(max_err, std::abs(double(got[i]) - w[i % w.size()]));
            EXPECT_LE(max_err, kFp32MaxAbsError);
        }
    }
}

}  // namespace
}  // namespace voxseg::engine
