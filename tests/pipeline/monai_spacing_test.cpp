// pipeline/monai_spacing.h against MONAI 1.4.0 itself:
// tests/pipeline/data/monai/spacing_golden.json (written by
// tests/pipeline/data/gen_monai_spacing_golden.py) holds Spacing's output grid and values and the
// labels MONAI's Activationsd(softmax) + Invertd + AsDiscreted(argmax) give for logits on that
// grid. voxseg's field-of-view grid (resample.h) on the same case differs, which the last test
// shows (the difference this file's functions remove).
#include "pipeline/monai_spacing.h"

#include "pipeline/resample.h"
#include "tests/pipeline/test_volumes.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

namespace voxseg::pipeline {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

json golden() {
    std::ifstream f(fs::path(VOXSEG_SOURCE_DIR) / "tests/pipeline/data/monai/spacing_golden.json");
    EXPECT_TRUE(f) << "tests/pipeline/data/monai/spacing_golden.json";
    return f ? json::parse(f) : json();
}

std::array<int64_t, 3> size3(const json& j) {
    return {j[0].get<int64_t>(), j[1].get<int64_t>(), j[2].get<int64_t>()};
}
Vec3 vec3(const json& j) { return {j[0].get<double>(), j[1].get<double>(), j[2].get<double>()}; }

// The case's input on a RAS grid (LPS direction diag(-1, -1, 1)), as MONAI's affine says.
Volume input(const json& c) {
    Geometry g;
    g.size = size3(c["shape"]);
    g.spacing = vec3(c["spacing"]);
    const Vec3 ras = vec3(c["origin"]);
    g.origin = {-ras[0], -ras[1], ras[2]};
    g.direction = {-1, 0, 0, 0, -1, 0, 0, 0, 1};
    Volume v = Volume::allocate<float>(g);
    const auto values = c["image"].get<std::vector<float>>();
    EXPECT_EQ(static_cast<int64_t>(values.size()), g.voxelCount());
    std::copy(values.begin(), values.end(), v.data<float>());
    return v;
}

TEST(MonaiSpacing, GridAndValuesAreMonais) {
    const json gold = golden();
    ASSERT_EQ(gold["cases"].size(), 2u);
    for (const json& c : gold["cases"]) {
        SCOPED_TRACE(c["name"].get<std::string>());
        const Volume in = input(c);
        const Vec3 pixdim = vec3(c["pixdim"]);
        const Geometry grid = monaiSpacingGeometry(in.geometry(), pixdim);
        EXPECT_EQ(grid.size, size3(c["resampled_shape"]));
        // Voxel (0,0,0) stays where it was; the spacing is exactly pixdim (MONAI's new affine).
        for (int a = 0; a < 3; ++a) {
            EXPECT_NEAR(grid.origin[a], in.geometry().origin[a], 1e-9);
            EXPECT_NEAR(grid.spacing[a], c["resampled_affine"][a][a].get<double>(), 1e-9);
        }
        auto out = monaiResampleLinear(in, grid);
        ASSERT_TRUE(out.isOk()) << out.status().toString();
        const auto want = c["resampled"].get<std::vector<double>>();
        ASSERT_EQ(static_cast<int64_t>(want.size()), out->geometry().voxelCount());
        double worst = 0.0;
        for (size_t i = 0; i < want.size(); ++i)
            worst = std::max(worst, std::abs(out->data<float>()[i] - want[i]));
        EXPECT_LT(worst, 1e-4) << "max |voxseg - MONAI Spacing|";
    }
}

TEST(MonaiSpacing, InvertedSoftmaxLabelsAreMonais) {
    const json gold = golden();
    for (const json& c : gold["cases"]) {
        SCOPED_TRACE(c["name"].get<std::string>());
        const Volume in = input(c);
        const Geometry grid = monaiSpacingGeometry(in.geometry(), vec3(c["pixdim"]));
        const auto logits = c["logits"].get<std::vector<float>>();
        engine::Tensor scores(engine::DType::kFloat32,
                              {3, grid.size[0], grid.size[1], grid.size[2]});  // [K, x, y, z]
        ASSERT_EQ(static_cast<int64_t>(logits.size()), scores.numel());
        std::copy(logits.begin(), logits.end(), scores.data<float>());
        auto labels =
            monaiSoftmaxToLabels(scores, grid, AxisOrder::kXyz, in.geometry(), {0, 5, 7}, 7);
        ASSERT_TRUE(labels.isOk()) << labels.status().toString();
        ASSERT_EQ(labels->pixelType(), PixelType::kUInt8);
        const auto want = c["labels"].get<std::vector<int>>();
        const int value[3] = {0, 5, 7};
        int64_t differ = 0;
        for (size_t i = 0; i < want.size(); ++i)
            differ += labels->data<uint8_t>()[i] != value[want[i]];
        EXPECT_EQ(differ, 0) << "of " << want.size() << " voxels";
    }
}

TEST(MonaiSpacing, RefusesAnotherFrame) {
    const json gold = golden();
    const Volume in = input(gold["cases"][0]);
    Geometry shifted = monaiSpacingGeometry(in.geometry(), {1.0, 1.0, 1.0});
    shifted.origin[0] += 0.5;
    EXPECT_FALSE(monaiResampleLinear(in, shifted).isOk());
}

// The field-of-view grid of resample.h (nnU-Net's) is another grid: MONAI's is not reproduced
// by it (sizes and voxel positions differ), which is why "grid": "monai" exists.
TEST(MonaiSpacing, FieldOfViewGridDiffers) {
    const json gold = golden();
    const json& c = gold["cases"][0];
    const Volume in = input(c);
    const Vec3 pixdim = vec3(c["pixdim"]);
    const Geometry fov = resampledGeometry(in.geometry(), resampledSize(in.geometry(), pixdim));
    const Geometry monai = monaiSpacingGeometry(in.geometry(), pixdim);
    bool differs = fov.size != monai.size;
    for (int a = 0; a < 3; ++a) differs |= std::abs(fov.origin[a] - monai.origin[a]) > 1e-6;
    EXPECT_TRUE(differs);
}

}  // namespace
}  // namespace voxseg::pipeline
