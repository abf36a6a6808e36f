#include "pipeline/postprocess.h"

#include "test_volumes.h"

#include <gtest/gtest.h>

namespace voxseg::pipeline {
namespace {

using voxseg::testing::makeGeometry;
using voxseg::testing::makeVolume;
using voxseg::testing::valueAt;

bool inBox(const Vec3& p, int lo, int hi) {
    return p[0] >= lo && p[0] <= hi && p[1] >= lo && p[1] <= hi && p[2] >= lo && p[2] <= hi;
}

int64_t count(const Volume& v, uint8_t label) {
    int64_t n = 0;
    for (int64_t e = 0; e < v.geometry().voxelCount(); ++e) n += v.data<uint8_t>()[e] == label;
    return n;
}

// Label 1: a 3x3x3 block (27 voxels) and a 2x2x2 block (8 voxels); label 2: a 1-voxel speck.
Volume blocks() {
    const Geometry g = makeGeometry({12, 12, 12}, {2, 2, 2});  // 8 mm^3 per voxel
    return makeVolume<uint8_t>(g, [](const Vec3& mm) {
        const Vec3 p{mm[0] / 2, mm[1] / 2, mm[2] / 2};
        if (inBox(p, 1, 3)) return 1;
        if (inBox(p, 7, 8)) return 1;
        if (p[0] == 10 && p[1] == 1 && p[2] == 1) return 2;
        return 0;
    });
}

TEST(Postprocess, KeepLargestComponentPerLabel) {
    Volume v = blocks();
    auto r = keepLargestComponent(v, 1);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r->components_before, 2);
    EXPECT_EQ(r->voxels_removed, 8);
    EXPECT_EQ(count(v, 1), 27);
    EXPECT_EQ(count(v, 2), 1);  // other labels untouched
}

TEST(Postprocess, DiagonalNeighboursAreConnectedOnlyWithFullConnectivity) {
    const Geometry g = makeGeometry({4, 4, 4}, {1, 1, 1});
    Volume v = makeVolume<uint8_t>(g, [](const Vec3& p) {
        return (p[0] == 1 && p[1] == 1 && p[2] == 1) || (p[0] == 2 && p[1] == 2 && p[2] == 2);
    });
    Volume face = cloneVolume(v);
    auto full = keepLargestComponent(v, 1, true);
    ASSERT_TRUE(full.isOk());
    EXPECT_EQ(full->components_before, 1);
    auto six = keepLargestComponent(face, 1, false);
    ASSERT_TRUE(six.isOk());
    EXPECT_EQ(six->components_before, 2);
    EXPECT_EQ(count(face, 1), 1);
}

TEST(Postprocess, MinimumSizeInMillilitres) {
    Volume v = blocks();
    // 8 voxels = 0.064 mL, 27 voxels = 0.216 mL.
    auto r = removeSmallComponents(v, 1, 0.1);
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(count(v, 1), 27);
    Volume w = blocks();
    ASSERT_TRUE(removeSmallComponents(w, 1, 0.064).isOk());  // exactly the size: kept
    EXPECT_EQ(count(w, 1), 35);
    EXPECT_FALSE(removeSmallComponents(w, 1, -1).isOk());
}

TEST(Postprocess, FillHoles3DAndPerSlice) {
    const Geometry g = makeGeometry({9, 9, 9}, {1, 1, 1});
    // A closed hollow cube: filled in 3D.
    Volume closed = makeVolume<uint8_t>(
        g, [](const Vec3& p) { return inBox(p, 1, 7) && !inBox(p, 2, 6) ? 1 : 0; });
    auto r = fillHoles(closed, 1, HoleFilling::k3D);
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r->voxels_filled, 125);
    EXPECT_EQ(valueAt<uint8_t>(closed, 4, 4, 4), 1);
    // A tube along k, open at both ends: no 3D hole, but every slice has one.
    auto tube_fn = [](const Vec3& p) {
        const bool ring = p[0] >= 2 && p[0] <= 6 && p[1] >= 2 && p[1] <= 6 &&
                          !(p[0] >= 3 && p[0] <= 5 && p[1] >= 3 && p[1] <= 5);
        return ring ? 1 : 0;
    };
    Volume tube = makeVolume<uint8_t>(g, tube_fn);
    auto r3 = fillHoles(tube, 1, HoleFilling::k3D);
    ASSERT_TRUE(r3.isOk());
    EXPECT_EQ(r3->voxels_filled, 0);
    auto r2 = fillHoles(tube, 1, HoleFilling::kPerSlice);
    ASSERT_TRUE(r2.isOk());
    EXPECT_EQ(r2->voxels_filled, 9 * 9);
    // Another label inside a hole is not overwritten.
    Volume nested = makeVolume<uint8_t>(g, [](const Vec3& p) {
        if (p[0] == 4 && p[1] == 4 && p[2] == 4) return 2;
        return inBox(p, 1, 7) && !inBox(p, 2, 6) ? 1 : 0;
    });
    ASSERT_TRUE(fillHoles(nested, 1, HoleFilling::k3D).isOk());
    EXPECT_EQ(valueAt<uint8_t>(nested, 4, 4, 4), 2);
    EXPECT_EQ(count(nested, 1), 7 * 7 * 7 - 1);
}

TEST(Postprocess, RejectsNonLabelVolumes) {
    Volume f = Volume::allocate<float>(makeGeometry({2, 2, 2}, {1, 1, 1}));
    EXPECT_FALSE(keepLargestComponent(f, 1).isOk());
}

}  // namespace
}  // namespace voxseg::pipeline
