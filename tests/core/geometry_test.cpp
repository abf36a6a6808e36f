#include "core/geometry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

namespace voxseg {
namespace {

constexpr double kTol = 1e-9;

TEST(Geometry, IndexToPhysicalAndBackRoundTrip) {
    Geometry g;
    g.size = {10, 20, 30};
    g.spacing = {0.5, 0.75, 2.0};
    g.origin = {-10, 20, 5};
    // Sagittal: i -> posterior (+y), j -> inferior (-z), k -> left (+x).
    g.direction = {0, 0, 1, 1, 0, 0, 0, -1, 0};
    const Vec3 p = g.indexToPhysical({2, 3, 4});
    EXPECT_NEAR(p[0], -10 + 4 * 2.0, kTol);
    EXPECT_NEAR(p[1], 20 + 2 * 0.5, kTol);
    EXPECT_NEAR(p[2], 5 - 3 * 0.75, kTol);
    const Vec3 idx = g.physicalToIndex(p);
    EXPECT_NEAR(idx[0], 2, kTol);
    EXPECT_NEAR(idx[1], 3, kTol);
    EXPECT_NEAR(idx[2], 4, kTol);
    EXPECT_EQ(g.orientationCode(), "PIL");
    EXPECT_NEAR(g.obliquityDegrees(), 0.0, 1e-9);
}

TEST(Geometry, ObliquityAndOrientationOfTiltedAxes) {
    Geometry g;
    const double a = 18.5 * M_PI / 180.0;
    g.direction = {1, 0, 0, 0, std::cos(a), -std::sin(a), 0, std::sin(a), std::cos(a)};
    EXPECT_EQ(g.orientationCode(), "LPS");
    EXPECT_NEAR(g.obliquityDegrees(), 18.5, 1e-9);
    Geometry h = g;
    EXPECT_TRUE(g.approxEqual(h));
    h.origin[2] += 0.01;
    EXPECT_FALSE(g.approxEqual(h));
}

// What ITK cannot invert (it aborts): loaders refuse such a geometry before allocating.
TEST(Geometry, IsFiniteOnlyWithPositiveFiniteSpacingAndFiniteOriginAndDirection) {
    Geometry g;
    EXPECT_TRUE(g.isFinite());
    const double inf = std::numeric_limits<double>::infinity();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (double bad : {inf, nan, 0.0, -1.0}) {
        Geometry s = g;
        s.spacing[1] = bad;
        EXPECT_FALSE(s.isFinite()) << bad;
    }
    for (double bad : {inf, -inf, nan}) {
        Geometry o = g, d = g;
        o.origin[2] = bad;
        d.direction[4] = bad;
        EXPECT_FALSE(o.isFinite()) << bad;
        EXPECT_FALSE(d.isFinite()) << bad;
    }
}

TEST(Geometry, VoxelSpanClipsAnySpanToTheAxis) {
    const auto check = [](double lo, double hi, int64_t first, int64_t last) {
        const VoxelSpan s = voxelSpan(lo, hi, 10);
        EXPECT_EQ(s.first, first) << lo << ".." << hi;
        EXPECT_EQ(s.last, last) << lo << ".." << hi;
    };
    check(2.2, 5.1, 2, 6);       // floor and ceil
    check(-3.5, 2.0, 0, 2);      // clipped below
    check(7.5, 1e25, 7, 9);      // clipped above: no int64 overflow
    check(-1e300, 1e300, 0, 9);  // the whole axis
    check(9.0, 9.0, 9, 9);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (const auto& [lo, hi] : std::vector<std::pair<double, double>>{
             {-5, -0.1}, {9.1, 20}, {4e25, 5e25}, {nan, 3}, {3, nan}, {5, 4}})
        EXPECT_TRUE(voxelSpan(lo, hi, 10).empty()) << lo << ".." << hi;
    EXPECT_TRUE(voxelSpan(0, 5, 0).empty());
}

}  // namespace
}  // namespace voxseg
