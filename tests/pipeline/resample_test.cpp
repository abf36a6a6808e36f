#include "pipeline/resample.h"

#include "test_volumes.h"

#include <gtest/gtest.h>

#include <set>

namespace voxseg::pipeline {
namespace {

using voxseg::testing::makeGeometry;
using voxseg::testing::makeVolume;
using voxseg::testing::valueAt;

// A cubic B-spline reproduces linear functions exactly away from the mirrored borders.
constexpr double kRampTolerance = 1e-3;
constexpr int kBorder = 6;  // mirror boundary effects decay as 0.268^distance

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

TEST(Resample, BadSpacingIsAnError) {
    const Volume v = Volume::allocate<float>(makeGeometry({4, 4, 4}, {1, 1, 1}));
    EXPECT_FALSE(resampleToSpacing(v, {0, 1, 1}, ResampleKind::kImage).isOk());
    EXPECT_FALSE(resampleToSpacing(Volume(), {1, 1, 1}, ResampleKind::kImage).isOk());
}

}  // namespace
}  // namespace voxseg::pipeline
