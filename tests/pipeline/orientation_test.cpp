#include "pipeline/orientation.h"

#include "test_volumes.h"

#include <gtest/gtest.h>

#include <cstring>

namespace voxseg::pipeline {
namespace {

using voxseg::testing::makeGeometry;
using voxseg::testing::makeVolume;
using voxseg::testing::valueAt;

// Asymmetric content: every voxel gets a distinct value from its index.
Volume asymmetric(const Geometry& g) {
    Volume v = Volume::allocate<int16_t>(g);
    int16_t* p = v.data<int16_t>();
    for (int64_t n = 0; n < g.voxelCount(); ++n) p[n] = static_cast<int16_t>(n * 7 % 30011);
    return v;
}

// The value found at an LPS point is the same in both volumes, for every voxel centre.
void expectSameContent(const Volume& a, const Volume& b) {
    const Geometry ga = a.geometry(), gb = b.geometry();
    ASSERT_EQ(ga.voxelCount(), gb.voxelCount());
    for (int64_t k = 0; k < ga.size[2]; ++k)
        for (int64_t j = 0; j < ga.size[1]; ++j)
            for (int64_t i = 0; i < ga.size[0]; ++i) {
                const Vec3 p = ga.indexToPhysical(
                    {static_cast<double>(i), static_cast<double>(j), static_cast<double>(k)});
                const Vec3 q = gb.physicalToIndex(p);
                const auto bi = std::llround(q[0]), bj = std::llround(q[1]),
                           bk = std::llround(q[2]);
                ASSERT_NEAR(q[0], bi, 1e-6);
                ASSERT_NEAR(q[1], bj, 1e-6);
                ASSERT_NEAR(q[2], bk, 1e-6);
                ASSERT_EQ(valueAt<int16_t>(a, i, j, k), valueAt<int16_t>(b, bi, bj, bk))
                    << "voxel " << i << "," << j << "," << k;
            }
}

TEST(Orientation, LpsToRasFlipsRowsAndColumnsKeepingPositions) {
    const Geometry g = makeGeometry({5, 4, 3}, {0.7, 0.8, 2.5}, {10, -20, 30});
    const Volume v = asymmetric(g);
    AxisMapping mapping;
    auto ras = reorient(v, "RAS", &mapping);
    ASSERT_TRUE(ras.isOk()) << ras.status().toString();
    EXPECT_EQ(ras->geometry().orientationCode(), "RAS");
    EXPECT_TRUE(mapping.flip[0] && mapping.flip[1] && !mapping.flip[2]);
    expectSameContent(v, *ras);
    // A known point: the LPS corner voxel (0,0,0) of the input is voxel (4,3,0) after RAS.
    EXPECT_EQ(valueAt<int16_t>(*ras, 4, 3, 0), valueAt<int16_t>(v, 0, 0, 0));
}

TEST(Orientation, PermutedObliqueAxesToLpsAndBackIsExact) {
    // i points superior, j left, k anterior (a sagittal-like stack), slightly oblique.
    const double c = std::cos(0.1), s = std::sin(0.1);
    const Mat3 dir = {0, c, 0,   //
                      0, s, -1,  //
                      1, 0, 0};
    const Geometry g = makeGeometry({6, 5, 4}, {1.0, 0.5, 3.0}, {-5, 7, 2}, dir);
    const Volume v = asymmetric(g);
    EXPECT_EQ(g.orientationCode(), "SLA");
    AxisMapping mapping;
    auto lps = reorient(v, "LPS", &mapping);
    ASSERT_TRUE(lps.isOk()) << lps.status().toString();
    EXPECT_EQ(lps->geometry().orientationCode(), "LPS");
    expectSameContent(v, *lps);
    const Volume back = applyAxisMapping(*lps, mapping.inverse());
    EXPECT_TRUE(back.geometry().approxEqual(g, 1e-9, 1e-12, 1e-12));
    EXPECT_EQ(std::memcmp(back.rawData(), v.rawData(), g.voxelCount() * sizeof(int16_t)), 0);
}

TEST(Orientation, NativeIsIdentityAndBadCodeIsAnError) {
    const Geometry g = makeGeometry({3, 3, 3}, {1, 1, 1});
    const Volume v = asymmetric(g);
    AxisMapping mapping;
    auto same = reorient(v, "native", &mapping);
    ASSERT_TRUE(same.isOk());
    EXPECT_TRUE(mapping.isIdentity());
    for (const char* bad : {"RAX", "RRS", "RA", "LPSS"}) {
        auto r = reorient(v, bad);
        EXPECT_FALSE(r.isOk()) << bad;
        EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
    auto lower = reorient(v, "ras");
    ASSERT_TRUE(lower.isOk());
    EXPECT_EQ(lower->geometry().orientationCode(), "RAS");
}

}  // namespace
}  // namespace voxseg::pipeline
