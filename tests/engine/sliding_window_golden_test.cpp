// Sliding-window inference vs MONAI's sliding_window_inference (mode "gaussian", sigma_scale
// 0.125) on the same MONAI UNet exported to ONNX, for volumes that are not a multiple of the
// patch (one smaller than the patch along z), on every compiled-in backend.
// Goldens: tools/gen_sliding_window_golden.py (torch 2.15.0, MONAI 1.6.1, fixed seeds).
#include "backends/registry.h"
#include "engine/inference/sliding_window.h"
#include "engine/onnx/import.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>

namespace voxseg::engine {
namespace {

// fp32 network (reference loops or oneDNN) vs PyTorch, then the same weighted average: the
// network's own rounding differences dominate (outputs are O(1)).
constexpr float kMonaiTolerance = 1e-4f;

std::string goldenDir() {
    return std::string(VOXSEG_SOURCE_DIR) + "/tests/engine/data/sliding_window/";
}

Tensor readFloats(const std::string& file, Shape shape) {
    Tensor t(DType::kFloat32, std::move(shape));
    std::ifstream in(goldenDir() + file, std::ios::binary);
    in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.bytes()));
    EXPECT_EQ(static_cast<size_t>(in.gcount()), t.bytes()) << file;
    return t;
}

class MonaiGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(MonaiGolden, MatchesMonaiSlidingWindowInference) {
    std::string warning;
    auto backend = createBackend(GetParam(), &warning);
    if (!backend.isOk()) GTEST_SKIP() << GetParam() << ": " << backend.status().toString();
    std::ifstream meta_in(goldenDir() + "monai_case.json");
    ASSERT_TRUE(meta_in.good()) << "run tools/gen_sliding_window_golden.py";
    const auto meta = nlohmann::json::parse(meta_in);
    const auto patch = meta["patch"].get<std::vector<int64_t>>();
    OnnxImportOptions import_options;
    import_options.input_shapes = {{1, 1, patch[0], patch[1], patch[2]}};
    auto graph = importOnnx(goldenDir() + meta["model"].get<std::string>(), import_options);
    ASSERT_TRUE(graph.isOk()) << graph.status().toString();
    ASSERT_GE(meta["cases"].size(), 4u);
    for (const auto& c : meta["cases"]) {
        const auto volume = c["volume"].get<std::vector<int64_t>>();
        const double overlap = c["overlap"].get<double>();
        SCOPED_TRACE(GetParam() + " volume " + shapeToString(volume) + " overlap " +
                     std::to_string(overlap));
        const Tensor image =
            readFloats(c["input"].get<std::string>(), {1, volume[0], volume[1], volume[2]});
        const Tensor expected =
            readFloats(c["output"].get<std::string>(), c["output_shape"].get<Shape>());
        SlidingWindowOptions o;
        o.patch_size = patch;
        o.overlap = overlap;
        o.sigma_scale = meta["sigma_scale"].get<double>();
        o.convention = WindowConvention::kMonai;
        o.batch = 2;
        auto result = slidingWindowInference(**backend, *graph, image, o);
        ASSERT_TRUE(result.isOk()) << result.status().toString();
        ASSERT_EQ(result->shape(), expected.shape());
        float worst = 0.0f;
        for (int64_t i = 0; i < expected.numel(); ++i)
            worst = std::max(worst, std::abs(result->data<float>()[i] - expected.data<float>()[i]));
        EXPECT_LE(worst, kMonaiTolerance);
        std::printf("%s volume %s overlap %.2f: max |voxseg - MONAI| = %.3g\n", GetParam().c_str(),
                    shapeToString(volume).c_str(), overlap, worst);
        // The nnU-Net convention places windows and weights differently: the same network gives a
        // visibly different average, so the comparison above can tell the conventions apart.
        o.convention = WindowConvention::kNnUNet;
        auto nnunet = slidingWindowInference(**backend, *graph, image, o);
        ASSERT_TRUE(nnunet.isOk());
        float diff = 0.0f;
        for (int64_t i = 0; i < expected.numel(); ++i)
            diff = std::max(diff, std::abs(nnunet->data<float>()[i] - expected.data<float>()[i]));
        EXPECT_GT(diff, 10 * kMonaiTolerance);
    }
}

INSTANTIATE_TEST_SUITE_P(Backends, MonaiGolden, ::testing::ValuesIn(availableBackends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace voxseg::engine
