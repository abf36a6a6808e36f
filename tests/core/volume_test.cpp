#include "core/volume.h"

#include <gtest/gtest.h>

namespace voxseg {
namespace {

TEST(Volume, AllocateKeepsGeometryAndTypedAccess) {
    Geometry g;
    g.size = {4, 3, 2};
    g.spacing = {0.5, 0.5, 3.0};
    g.origin = {1, 2, 3};
    g.direction = {0, 0, 1, 1, 0, 0, 0, -1, 0};
    Volume v = Volume::allocate<int16_t>(g, {.modality = "CT"});
    EXPECT_EQ(v.pixelType(), PixelType::kInt16);
    EXPECT_TRUE(v.geometry().approxEqual(g));
    EXPECT_EQ(v.data<float>(), nullptr);
    ASSERT_NE(v.data<int16_t>(), nullptr);
    v.data<int16_t>()[23] = -1024;
    Volume f = v.castTo(PixelType::kFloat32);
    EXPECT_FLOAT_EQ(f.data<float>()[23], -1024.f);
    EXPECT_TRUE(f.geometry().approxEqual(g));
    EXPECT_EQ(f.info().modality, "CT");
    Volume c = cloneVolume(v);
    c.data<int16_t>()[23] = 5;
    EXPECT_EQ(v.data<int16_t>()[23], -1024);
}

}  // namespace
}  // namespace voxseg
