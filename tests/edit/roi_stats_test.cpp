// edit/roi_stats.h against a brute-force count: every voxel of the grid tested in index space
// (offsets times spacing: the ROI's shape in mm without the direction matrix, which only rotates
// it), on an anisotropic axis-aligned grid, an oblique one and a sagittal stack; and images with
// known values (a constant, two halves of -100 and +100).
#include "edit/roi_stats.h"
#include "tests/edit/edit_test_grids.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace voxseg::edit {
namespace {

using testing::gridCases;
using testing::makeImage;

constexpr double kTol = 1e-9;  // relative, for means and SDs summed in another order

Vec3 scaled(const Vec3& v, double s) { return {v[0] * s, v[1] * s, v[2] * s}; }

// Mean, population SD, min, max and count of `value(i, j, k)` over the voxels `inside` accepts.
template <typename Inside>
RoiStatistics bruteForce(const Volume& image, Inside inside) {
    const Geometry g = image.geometry();
    const int16_t* d = image.data<int16_t>();
    double sum = 0, sum2 = 0;
    RoiStatistics s;
    s.min = std::numeric_limits<double>::infinity();
    s.max = -s.min;
    int64_t idx = 0;
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i, ++idx) {
                if (!inside(i, j, k)) continue;
                const double x = d[idx];
                ++s.voxels;
                sum += x;
                sum2 += x * x;
                s.min = std::min(s.min, x);
                s.max = std::max(s.max, x);
            }
    const double n = static_cast<double>(s.voxels);
    s.mean = sum / n;
    s.sd = std::sqrt(std::max(0.0, sum2 / n - s.mean * s.mean));
    return s;
}

void expectSame(const RoiStatistics& got, const RoiStatistics& want) {
    ASSERT_GT(want.voxels, 20);
    EXPECT_EQ(got.voxels, want.voxels);
    EXPECT_NEAR(got.mean, want.mean, kTol * (1 + std::abs(want.mean)));
    EXPECT_NEAR(got.sd, want.sd, 1e-6 * (1 + want.sd));
    EXPECT_EQ(got.min, want.min);
    EXPECT_EQ(got.max, want.max);
}

TEST(RoiStats, EllipseIsTheSliceVoxelsInsideItInMm) {
    for (const auto& gc : gridCases()) {
        const Geometry& g = gc.geometry;
        const Volume image = makeImage(g);
        for (int axis = 0; axis < 3; ++axis) {
            SCOPED_TRACE(gc.name + " slice axis " + std::to_string(axis));
            const int ax = (axis + 1) % 3, ay = (axis + 2) % 3;  // the in-plane index axes
            const int64_t slice = g.size[axis] / 2 - 1;
            std::array<double, 3> ci{};  // the centre in (continuous) index coordinates
            ci[axis] = static_cast<double>(slice);
            ci[ax] = (g.size[ax] - 1) / 2.0 + 0.31;
            ci[ay] = (g.size[ay] - 1) / 2.0 - 0.23;
            const double a = 9.3, b = 6.1;  // mm along ax, ay
            EllipseRoi roi;
            roi.slice_axis = axis;
            roi.slice = slice;
            roi.centre_mm = g.indexToPhysical(ci);
            roi.semi_axis_u_mm = scaled(g.axisDirection(ax), a);
            roi.semi_axis_v_mm = scaled(g.axisDirection(ay), b);
            auto got = ellipseStatistics(image, roi);
            ASSERT_TRUE(got.isOk()) << got.status().toString();
            const RoiStatistics want = bruteForce(image, [&](int64_t i, int64_t j, int64_t k) {
                const std::array<int64_t, 3> v{i, j, k};
                if (v[axis] != slice) return false;
                const double x = (static_cast<double>(v[ax]) - ci[ax]) * g.spacing[ax] / a;
                const double y = (static_cast<double>(v[ay]) - ci[ay]) * g.spacing[ay] / b;
                return x * x + y * y <= 1.0;
            });
            expectSame(*got, want);
            EXPECT_NEAR(got->area_mm2, M_PI * a * b, 1e-9);
            EXPECT_NEAR(got->voxel_area_mm2,
                        static_cast<double>(want.voxels) * g.spacing[ax] * g.spacing[ay], 1e-9);
            // The voxels cover about the ellipse's area.
            EXPECT_NEAR(got->voxel_area_mm2 / got->area_mm2, 1.0, 0.08);
        }
    }
}

TEST(RoiStats, SphereIsTheVoxelsWithinTheRadiusInMm) {
    for (const auto& gc : gridCases()) {
        SCOPED_TRACE(gc.name);
        const Geometry& g = gc.geometry;
        const Volume image = makeImage(g);
        const std::array<double, 3> ci{(g.size[0] - 1) / 2.0 + 0.31, (g.size[1] - 1) / 2.0 - 0.27,
                                       (g.size[2] - 1) / 2.0 + 0.13};
        const double r = 8.7;
        auto got = sphereStatistics(image, {g.indexToPhysical(ci), r});
        ASSERT_TRUE(got.isOk()) << got.status().toString();
        const RoiStatistics want = bruteForce(image, [&](int64_t i, int64_t j, int64_t k) {
            const double x = (i - ci[0]) * g.spacing[0], y = (j - ci[1]) * g.spacing[1],
                         z = (k - ci[2]) * g.spacing[2];
            return x * x + y * y + z * z <= r * r;
        });
        expectSame(*got, want);
        EXPECT_NEAR(got->volume_ml, 4.0 / 3.0 * M_PI * r * r * r / 1000.0, 1e-12);
        EXPECT_NEAR(got->voxel_volume_ml / got->volume_ml, 1.0, 0.05);
    }
}

TEST(RoiStats, KnownValues) {
    // Oblique grid: -100 left of a column boundary, +100 right of it; an ellipse centred on the
    // boundary has as many voxels on each side: mean 0, SD 100, min -100, max 100.
    const Geometry g = gridCases()[1].geometry;
    Volume image = Volume::allocate<int16_t>(g);
    const int64_t mid = g.size[0] / 2;
    int16_t* d = image.data<int16_t>();
    for (int64_t n = 0; n < g.voxelCount(); ++n) d[n] = n % g.size[0] < mid ? -100 : 100;
    EllipseRoi roi;
    roi.slice_axis = 2;
    roi.slice = 7;
    roi.centre_mm = g.indexToPhysical({mid - 0.5, 20.2, 7.0});
    roi.semi_axis_u_mm = scaled(g.axisDirection(0), 12.0);
    roi.semi_axis_v_mm = scaled(g.axisDirection(1), 8.0);
    auto s = ellipseStatistics(image, roi);
    ASSERT_TRUE(s.isOk()) << s.status().toString();
    EXPECT_GT(s->voxels, 300);
    EXPECT_EQ(s->voxels % 2, 0);
    EXPECT_NEAR(s->mean, 0.0, 1e-9);
    EXPECT_NEAR(s->sd, 100.0, 1e-9);
    EXPECT_EQ(s->min, -100.0);
    EXPECT_EQ(s->max, 100.0);

    // A constant image: mean = min = max, SD 0, in the image's units (float here).
    Volume flat = Volume::allocate<float>(g);
    std::fill(flat.data<float>(), flat.data<float>() + g.voxelCount(), 37.25f);
    auto f = sphereStatistics(flat, {g.indexToPhysical({20, 20, 20}), 5.0});
    ASSERT_TRUE(f.isOk());
    EXPECT_GT(f->voxels, 200);
    EXPECT_DOUBLE_EQ(f->mean, 37.25);
    EXPECT_DOUBLE_EQ(f->sd, 0.0);
    EXPECT_DOUBLE_EQ(f->min, 37.25);
    EXPECT_DOUBLE_EQ(f->max, 37.25);
}

TEST(RoiStats, OutsideTheImageAndBadInput) {
    const Geometry g = gridCases()[0].geometry;
    const Volume image = makeImage(g);
    // A sphere far outside: no voxels, all intensity figures 0, the shape's volume still given.
    auto out = sphereStatistics(image, {{500, 500, 500}, 4.0});
    ASSERT_TRUE(out.isOk());
    EXPECT_EQ(out->voxels, 0);
    EXPECT_EQ(out->mean, 0.0);
    EXPECT_GT(out->volume_ml, 0.0);

    EllipseRoi roi;
    roi.slice = g.size[2];
    roi.semi_axis_u_mm = {5, 0, 0};
    roi.semi_axis_v_mm = {0, 5, 0};
    auto s = ellipseStatistics(image, roi);
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.status().message().find("outside the image"), std::string::npos);
    roi.slice = 3;
    roi.semi_axis_v_mm = {3, 4, 0};
    EXPECT_FALSE(ellipseStatistics(image, roi).isOk());  // not perpendicular
    roi.slice_axis = 3;
    EXPECT_FALSE(ellipseStatistics(image, roi).isOk());
    EXPECT_FALSE(sphereStatistics(image, {{0, 0, 0}, -1.0}).isOk());
    EXPECT_FALSE(sphereStatistics(Volume(), {{0, 0, 0}, 1.0}).isOk());
}

}  // namespace
}  // namespace voxseg::edit
