// Linked crosshairs across series (core/linked_position.h): a patient point found in grids of
// other spacing, origin and orientation, checked against voxel indices worked out by hand from
// each grid's own axes; clamping and "outside" at the edges; a slice scroll keeps the in-plane
// sub-voxel position.
#include "core/linked_position.h"

#include <gtest/gtest.h>

#include <cmath>

namespace voxseg {
namespace {

// An axial LPS series: 0.9 x 0.9 x 1.5 mm, origin (-18, -14.4, 0).
Geometry current() {
    Geometry g;
    g.size = {40, 32, 24};
    g.spacing = {0.9, 0.9, 1.5};
    g.origin = {-18, -14.4, 0};
    return g;
}

// A prior stored RAS-wise (i to the patient's right, j anterior, k superior), 0.7 x 0.7 x 3 mm,
// shifted by (5, -3, 6) mm: the index of an LPS point (x, y, z) is
// ((ox - x) / 0.7, (oy - y) / 0.7, (z - oz) / 3).
Geometry prior() {
    Geometry g;
    g.size = {60, 50, 10};
    g.spacing = {0.7, 0.7, 3.0};
    g.origin = {25, 20, 6};
    g.direction = {-1, 0, 0, 0, -1, 0, 0, 0, 1};
    return g;
}

TEST(LinkedPosition, APointOfOneSeriesFindsTheNearestVoxelOfAnother) {
    const Geometry a = current(), b = prior();
    const VoxelIndex va{10, 20, 7};
    const Vec3 p = voxelCentre(a, va);
    EXPECT_DOUBLE_EQ(p[0], -18 + 10 * 0.9);    // -9
    EXPECT_DOUBLE_EQ(p[1], -14.4 + 20 * 0.9);  // 3.6
    EXPECT_DOUBLE_EQ(p[2], 7 * 1.5);           // 10.5
    const GridLocation in_b = locatePatientPoint(b, p);
    EXPECT_TRUE(in_b.inside);
    // (25 + 9) / 0.7 = 48.57 -> 49; (20 - 3.6) / 0.7 = 23.43 -> 23; (10.5 - 6) / 3 = 1.5 -> 2.
    EXPECT_NEAR(in_b.index[0], 34 / 0.7, 1e-9);
    EXPECT_NEAR(in_b.index[1], 16.4 / 0.7, 1e-9);
    EXPECT_NEAR(in_b.index[2], 1.5, 1e-9);
    EXPECT_EQ(in_b.voxel, (VoxelIndex{49, 23, 2}));
    // And back: b's voxel centre (25 - 49 * 0.7, 20 - 23 * 0.7, 6 + 2 * 3) = (-9.3, 3.9, 12)
    // is a's voxel (8.7 / 0.9 = 9.67, 18.3 / 0.9 = 20.33, 12 / 1.5 = 8).
    const Vec3 q = voxelCentre(b, in_b.voxel);
    EXPECT_NEAR(q[0], -9.3, 1e-9);
    EXPECT_NEAR(q[1], 3.9, 1e-9);
    EXPECT_NEAR(q[2], 12, 1e-9);
    EXPECT_EQ(locatePatientPoint(a, q).voxel, (VoxelIndex{10, 20, 8}));
}

TEST(LinkedPosition, AnObliqueGrid) {
    // Rotated 30 degrees about the z axis: i = (cos, sin, 0), j = (-sin, cos, 0).
    Geometry g;
    g.size = {20, 20, 20};
    g.spacing = {2, 2, 2};
    const double c = std::cos(M_PI / 6), s = std::sin(M_PI / 6);
    g.direction = {c, -s, 0, s, c, 0, 0, 0, 1};
    // The centre of voxel (5, 3, 4): 2 * (5 c - 3 s, 5 s + 3 c, 4).
    const Vec3 p{2 * (5 * c - 3 * s) + 0.3, 2 * (5 * s + 3 * c) - 0.2, 8.4};
    const GridLocation l = locatePatientPoint(g, p);
    EXPECT_TRUE(l.inside);
    EXPECT_EQ(l.voxel, (VoxelIndex{5, 3, 4}));
}

TEST(LinkedPosition, OutsideIsClampedAndSaidSo) {
    const Geometry b = prior();
    // z 6 + 3 * 9.5 = 34.5 is the top of the last slice: inside; a little above: outside.
    const Vec3 edge{0, 0, 34.5};
    EXPECT_TRUE(locatePatientPoint(b, edge).inside);
    EXPECT_EQ(locatePatientPoint(b, edge).voxel[2], 9);  // 9.5 rounds to 10, clamped to 9
    const GridLocation above = locatePatientPoint(b, {0, 0, 40});
    EXPECT_FALSE(above.inside);
    EXPECT_EQ(above.voxel[2], 9);
    EXPECT_NEAR(above.index[2], 34.0 / 3, 1e-9);
    EXPECT_EQ(above.voxel[0], 36);  // 25 / 0.7 = 35.7: in-plane still the nearest voxel
    const GridLocation left = locatePatientPoint(b, {-30, 0, 10});  // i = 55 / 0.7 = 78.6
    EXPECT_FALSE(left.inside);
    EXPECT_EQ(left.voxel[0], 59);
    EXPECT_FALSE(locatePatientPoint(Geometry{}, {0, 0, 0}).inside);
}

TEST(LinkedPosition, ScrollingKeepsTheOtherAxesSubVoxelPosition) {
    const Geometry b = prior();
    const Vec3 p{-9, 3.6, 10.5};  // between b's voxel centres in i and j
    const VoxelIndex before = locatePatientPoint(b, p).voxel;
    VoxelIndex after = before;
    after[2] += 3;  // three slices up in b
    const Vec3 moved = movePatientPoint(b, p, before, after);
    EXPECT_DOUBLE_EQ(moved[0], -9);
    EXPECT_NEAR(moved[1], 3.6, 1e-12);
    EXPECT_NEAR(moved[2], 6 + 3.0 * (before[2] + 3), 1e-12);  // the new slice's centre
    // A click moves every axis to the voxel's centre.
    const VoxelIndex clicked{12, 30, 4};
    const Vec3 c = movePatientPoint(b, p, before, clicked);
    const Vec3 centre = voxelCentre(b, clicked);
    for (int a = 0; a < 3; ++a) EXPECT_NEAR(c[a], centre[a], 1e-12);
}

}  // namespace
}  // namespace voxseg
