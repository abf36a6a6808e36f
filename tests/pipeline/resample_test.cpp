#include "pipeline/resample.h"

#include "pipeline/spline_resample.h"
#include "test_volumes.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

namespace voxseg::pipeline {
namespace {

using voxseg::testing::makeGeometry;
using voxseg::testing::makeVolume;
using voxseg::testing::valueAt;

// A cubic B-spline reproduces linear functions exactly away from the borders.
constexpr double kRampTolerance = 1e-3;
constexpr int kBorder = 6;  // boundary effects decay as 0.268^distance

double ramp(const Vec3& p) { return 2.0 * p[0] - 0.5 * p[1] + 0.25 * p[2] + 10.0; }

TEST(Resample, NnunetSizeAndSeparateAxisRules) {
    const Geometry g = makeGeometry({100, 80, 30}, {0.8, 0.8, 5.0});
    EXPECT_EQ(resampledSize(g, {1.0, 1.0, 2.5}), (std::array<int64_t, 3>{80, 64, 60}));
    EXPECT_EQ(separateAxis({1, 1, 3.5}, {1, 1, 1}), 2);
    EXPECT_EQ(separateAxis({1, 1, 3.0}, {1, 1, 1}), -1);    // not MORE than 3x
    EXPECT_EQ(separateAxis({3.5, 1, 3.5}, {1, 1, 1}), -1);  // two coarse axes: no separation
    EXPECT_EQ(separateAxis({1, 1, 1}, {4, 1, 1}), 0);  // from the target when the source is iso
}

TEST(Resample, LinearRampIsReproducedAndFieldOfViewKept) {
    const Mat3 oblique = {0.8, -0.6, 0, 0.6, 0.8, 0, 0, 0, 1};
    const Geometry g = makeGeometry({32, 28, 24}, {1.0, 1.2, 1.5}, {3, -4, 5}, oblique);
    const Volume v = makeVolume<float>(g, ramp);
    auto r = resampleToSpacing(v, {0.7, 0.9, 1.1}, ResampleKind::kImage);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    const Geometry out = r->geometry();
    EXPECT_EQ(out.size, (std::array<int64_t, 3>{46, 37, 33}));
    for (int a = 0; a < 3; ++a) {
        // Edge to edge: size * spacing unchanged.
        EXPECT_NEAR(out.size[a] * out.spacing[a], g.size[a] * g.spacing[a], 1e-9);
    }
    // The first voxel's outer corner is the input's outer corner.
    const Vec3 corner_in = g.indexToPhysical({-0.5, -0.5, -0.5});
    const Vec3 corner_out = out.indexToPhysical({-0.5, -0.5, -0.5});
    EXPECT_LT(voxseg::testing::distance(corner_in, corner_out), 1e-9);
    int checked = 0;
    for (int64_t k = 0; k < out.size[2]; ++k)
        for (int64_t j = 0; j < out.size[1]; ++j)
            for (int64_t i = 0; i < out.size[0]; ++i) {
                const Vec3 p = out.indexToPhysical(
                    {static_cast<double>(i), static_cast<double>(j), static_cast<double>(k)});
                const Vec3 q = g.physicalToIndex(p);
                bool interior = true;
                for (int a = 0; a < 3; ++a)
                    interior &= q[a] >= kBorder && q[a] <= g.size[a] - 1 - kBorder;
                if (!interior) continue;
                ASSERT_NEAR(valueAt<float>(*r, i, j, k), ramp(p), kRampTolerance)
                    << "at " << i << "," << j << "," << k;
                ++checked;
            }
    EXPECT_GT(checked, 1000);
}

TEST(Resample, CoarseAxisIsResampledWithNearestNeighbour) {
    // 0.5 x 0.5 x 5 mm: z is 10x coarser, so z is resampled separately with order 0: every output
    // slice must be a copy of an input slice's value, never a blend.
    const Geometry g = makeGeometry({20, 20, 8}, {0.5, 0.5, 5.0});
    Volume v = makeVolume<int16_t>(g, [&](const Vec3& p) { return std::round(p[2] / 5.0) * 10; });
    auto r = resampleToSpacing(v, {1.0, 1.0, 2.0}, ResampleKind::kImage);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r->pixelType(), PixelType::kFloat32);
    EXPECT_EQ(r->geometry().size, (std::array<int64_t, 3>{10, 10, 20}));
    std::set<long> seen;
    const float* p = r->data<float>();
    for (int64_t n = 0; n < r->geometry().voxelCount(); ++n) {
        const long rounded = std::lround(p[n]);
        ASSERT_NEAR(p[n], rounded, 1e-3) << "blended value " << p[n];
        ASSERT_EQ(rounded % 10, 0) << "value " << p[n] << " is not an input slice value";
        seen.insert(rounded);
    }
    EXPECT_EQ(seen.size(), 8u);

    // The same content with isotropic-ish spacing is interpolated with order 3 (values blend).
    const Geometry iso = makeGeometry({20, 20, 8}, {1.0, 1.0, 2.0});
    Volume w = makeVolume<int16_t>(iso, [&](const Vec3& q) { return std::round(q[2] / 2.0) * 10; });
    auto s = resampleToSpacing(w, {1.0, 1.0, 0.7}, ResampleKind::kImage);
    ASSERT_TRUE(s.isOk());
    bool blended = false;
    for (int64_t n = 0; n < s->geometry().voxelCount(); ++n)
        blended |= std::abs(s->data<float>()[n] - std::round(s->data<float>()[n] / 10) * 10) > 0.5;
    EXPECT_TRUE(blended);
}

TEST(Resample, SeparateAxisTiesRoundAsScipy) {
    // 24 slices of 5 mm -> 25 of 4.8 mm: output slice 12 reads input index 11.5 exactly, which
    // scipy's order 0 (nnU-Net's separate z) rounds up; a position computed from the geometry
    // lands just below it. Expected: scipy.ndimage.map_coordinates(arange(24), [24 / 25 *
    // (arange(25) + 0.5) - 0.5], order=0, mode="nearest").
    const Geometry g = makeGeometry({6, 5, 24}, {0.8, 0.8, 5.0}, {12.3, -7.1, -301.7});
    const Volume v = makeVolume<float>(
        g, [&](const Vec3& p) { return static_cast<float>(std::lround(g.physicalToIndex(p)[2])); });
    auto r = resampleToSpacing(v, {0.8, 0.8, 4.8}, ResampleKind::kImage);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    ASSERT_EQ(r->geometry().size[2], 25);
    const std::vector<int> want{0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12,
                                12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23};
    for (int64_t k = 0; k < 25; ++k)
        EXPECT_EQ(valueAt<float>(*r, 2, 2, k), static_cast<float>(want[static_cast<size_t>(k)]))
            << "output slice " << k;
}

TEST(Resample, LabelsUseNearestAndKeepType) {
    const Geometry g = makeGeometry({16, 16, 16}, {1, 1, 1});
    Volume labels =
        makeVolume<uint8_t>(g, [](const Vec3& p) { return p[0] < 5 ? 1 : (p[1] < 8 ? 2 : 7); });
    auto r = resampleToSpacing(labels, {0.6, 1.3, 2.0}, ResampleKind::kLabel);
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r->pixelType(), PixelType::kUInt8);
    for (int64_t n = 0; n < r->geometry().voxelCount(); ++n) {
        const uint8_t x = r->data<uint8_t>()[n];
        ASSERT_TRUE(x == 1 || x == 2 || x == 7) << int(x);
    }
}

std::vector<float> readFloats(const std::filesystem::path& path) {
    std::ifstream f(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::vector<float> out(bytes.size() / sizeof(float));
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
    return out;
}

// nnU-Net 2.5.1's own resample_data_or_seg_to_shape (order 3, separate z with order 0; scikit-image
// resize with mode "edge" and clip), committed by tests/pipeline/data/gen_resample_golden.py: an
// anisotropic case (z resampled separately, in-plane slice by slice) and an isotropic one.
TEST(ResampleGolden, ImagesAreResampledAsNnUNetDoes) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(VOXSEG_SOURCE_DIR) / "tests/pipeline/data/resample";
    std::ifstream f(dir / "index.json");
    ASSERT_TRUE(f) << dir;
    const auto index = nlohmann::json::parse(f);
    ASSERT_EQ(index["cases"].size(), 2u);
    for (const auto& c : index["cases"]) {
        const std::string name = c["name"].get<std::string>();
        SCOPED_TRACE(name);
        auto ijk = [](const nlohmann::json& zyx) {  // numpy (z, y, x) -> index axes (i, j, k)
            return Vec3{zyx[2].get<double>(), zyx[1].get<double>(), zyx[0].get<double>()};
        };
        const Vec3 shape = ijk(c["shape_zyx"]), new_shape = ijk(c["new_shape_zyx"]);
        const std::array<int64_t, 3> size{static_cast<int64_t>(shape[0]),
                                          static_cast<int64_t>(shape[1]),
                                          static_cast<int64_t>(shape[2])};
        Volume in = Volume::allocate<float>(makeGeometry(size, ijk(c["spacing_zyx"])));
        const auto values = readFloats(dir / (name + "_in.f32"));
        ASSERT_EQ(static_cast<int64_t>(values.size()), in.geometry().voxelCount());
        std::copy(values.begin(), values.end(), in.data<float>());
        const auto want = readFloats(dir / (name + "_out.f32"));

        auto out = resampleToSpacing(in, ijk(c["target_spacing_zyx"]), ResampleKind::kImage);
        ASSERT_TRUE(out.isOk()) << out.status().toString();
        for (int a = 0; a < 3; ++a)
            ASSERT_EQ(out->geometry().size[a], static_cast<int64_t>(new_shape[a]));
        ASSERT_EQ(static_cast<int64_t>(want.size()), out->geometry().voxelCount());
        double max_diff = 0;
        for (size_t n = 0; n < want.size(); ++n)
            max_diff = std::max(max_diff, std::abs(double(out->data<float>()[n]) - want[n]));
        std::printf("%s: max |voxseg - nnU-Net| %.2e over %zu voxels\n", name.c_str(), max_diff,
                    want.size());
        EXPECT_LT(max_diff, 1e-4);

        // The golden tells the boundaries apart: ITK's mirror boundary without the clip, as
        // voxseg resampled before, is far from nnU-Net at the borders and block edges.
        const int axis = separateAxis(in.geometry().spacing, out->geometry().spacing);
        EXPECT_EQ(axis, name == "aniso" ? 2 : -1);
        std::array<AxisInterpolation, 3> per_axis;
        per_axis.fill(AxisInterpolation::kSpline);
        if (axis >= 0) per_axis[static_cast<size_t>(axis)] = AxisInterpolation::kNearest;
        auto mirrored = splineResample(in, out->geometry(), per_axis, 0, SplineBoundary::kMirror);
        ASSERT_TRUE(mirrored.isOk());
        double mirror_diff = 0;
        for (size_t n = 0; n < want.size(); ++n)
            mirror_diff =
                std::max(mirror_diff, std::abs(double(mirrored->data<float>()[n]) - want[n]));
        EXPECT_GT(mirror_diff, 0.05) << "the golden does not tell mirror from edge padding";
    }
}

TEST(Resample, BadSpacingIsAnError) {
    const Volume v = Volume::allocate<float>(makeGeometry({4, 4, 4}, {1, 1, 1}));
    EXPECT_FALSE(resampleToSpacing(v, {0, 1, 1}, ResampleKind::kImage).isOk());
    EXPECT_FALSE(resampleToSpacing(Volume(), {1, 1, 1}, ResampleKind::kImage).isOk());
}

}  // namespace
}  // namespace voxseg::pipeline
