#include "pipeline/crop.h"
#include "pipeline/normalization.h"
#include "pipeline/tensor_layout.h"

#include "test_volumes.h"

#include <gtest/gtest.h>

#include <cstring>

namespace voxseg::pipeline {
namespace {

using voxseg::testing::makeGeometry;
using voxseg::testing::makeVolume;
using voxseg::testing::valueAt;

constexpr double kFloatTolerance = 1e-5;

TEST(Crop, NonzeroBoxCropAndPasteRoundTrip) {
    const Geometry g = makeGeometry({12, 10, 8}, {0.5, 0.6, 2.0}, {1, 2, 3});
    Volume v = Volume::allocate<int16_t>(g);
    // Nonzero block i 3..7, j 2..5, k 1..6, plus one voxel at (9, 8, 3) in a second channel.
    for (int64_t k = 1; k <= 6; ++k)
        for (int64_t j = 2; j <= 5; ++j)
            for (int64_t i = 3; i <= 7; ++i)
                v.data<int16_t>()[(k * 10 + j) * 12 + i] =
                    static_cast<int16_t>(i + 10 * j + 100 * k);
    auto box = nonzeroBox({v});
    ASSERT_TRUE(box.isOk());
    EXPECT_EQ(box->begin, (std::array<int64_t, 3>{3, 2, 1}));
    EXPECT_EQ(box->size, (std::array<int64_t, 3>{5, 4, 6}));

    Volume second = Volume::allocate<float>(g);
    second.data<float>()[(3 * 10 + 8) * 12 + 9] = 1.0f;
    auto both = nonzeroBox({v, second});
    ASSERT_TRUE(both.isOk());
    EXPECT_EQ(both->size, (std::array<int64_t, 3>{7, 7, 6}));

    auto cropped = crop(v, *box);
    ASSERT_TRUE(cropped.isOk());
    // Voxel (0,0,0) of the crop sits where input voxel (3,2,1) was.
    const Vec3 expected = g.indexToPhysical({3, 2, 1});
    EXPECT_LT(voxseg::testing::distance(cropped->geometry().origin, expected), 1e-12);
    EXPECT_EQ(valueAt<int16_t>(*cropped, 0, 0, 0), 3 + 20 + 100);
    auto pasted = paste(*cropped, g, *box);
    ASSERT_TRUE(pasted.isOk());
    EXPECT_EQ(std::memcmp(pasted->rawData(), v.rawData(), g.voxelCount() * sizeof(int16_t)), 0);
    EXPECT_FALSE(crop(v, CropBox{{10, 0, 0}, {5, 1, 1}}).isOk());
}

TEST(Crop, AllZeroKeepsTheWholeGridAndMaskFillsHoles) {
    const Geometry g = makeGeometry({7, 7, 7}, {1, 1, 1});
    Volume zero = Volume::allocate<float>(g);
    auto box = nonzeroBox({zero});
    ASSERT_TRUE(box.isOk());
    EXPECT_TRUE(box->covers(g));
    // A hollow cube: the mask fills its inside.
    Volume shell = makeVolume<uint8_t>(g, [](const Vec3& p) {
        const bool in_outer =
            p[0] >= 1 && p[0] <= 5 && p[1] >= 1 && p[1] <= 5 && p[2] >= 1 && p[2] <= 5;
        const bool in_inner =
            p[0] >= 2 && p[0] <= 4 && p[1] >= 2 && p[1] <= 4 && p[2] >= 2 && p[2] <= 4;
        return in_outer && !in_inner ? 1 : 0;
    });
    auto mask = nonzeroMask({shell});
    ASSERT_TRUE(mask.isOk());
    EXPECT_EQ(valueAt<uint8_t>(*mask, 3, 3, 3), 1);
    EXPECT_EQ(valueAt<uint8_t>(*mask, 0, 0, 0), 0);
}

TEST(Normalization, CtClipsThenStandardises) {
    const Geometry g = makeGeometry({4, 1, 1}, {1, 1, 1});
    Volume v = Volume::allocate<int16_t>(g);
    const int16_t values[4] = {-2000, -100, 50, 3000};
    std::memcpy(v.data<int16_t>(), values, sizeof(values));
    Normalization n;
    n.scheme = Normalization::Scheme::kCT;
    n.clip_low = -1000, n.clip_high = 1000, n.mean = 100, n.std = 200;
    auto r = normalize(v, n);
    ASSERT_TRUE(r.isOk());
    const float* p = r->data<float>();
    EXPECT_NEAR(p[0], (-1000 - 100) / 200.0, kFloatTolerance);
    EXPECT_NEAR(p[1], (-100 - 100) / 200.0, kFloatTolerance);
    EXPECT_NEAR(p[2], (50 - 100) / 200.0, kFloatTolerance);
    EXPECT_NEAR(p[3], (1000 - 100) / 200.0, kFloatTolerance);
    n.clip_low = 5, n.clip_high = 1;
    EXPECT_FALSE(normalize(v, n).isOk());
}

TEST(Normalization, ZScoreWholeImageAndInsideNonzeroMask) {
    const Geometry g = makeGeometry({6, 1, 1}, {1, 1, 1});
    Volume v = Volume::allocate<float>(g);
    const float values[6] = {0, 0, 2, 4, 4, 6};  // nonzero: mean 4, population std sqrt(2)
    std::memcpy(v.data<float>(), values, sizeof(values));
    Normalization n;
    n.scheme = Normalization::Scheme::kZScore;
    auto whole = normalize(v, n);
    ASSERT_TRUE(whole.isOk());
    double sum = 0, sq = 0;
    for (int i = 0; i < 6; ++i) sum += whole->data<float>()[i];
    for (int i = 0; i < 6; ++i) sq += whole->data<float>()[i] * whole->data<float>()[i];
    EXPECT_NEAR(sum / 6, 0.0, kFloatTolerance);
    EXPECT_NEAR(sq / 6, 1.0, kFloatTolerance);

    n.nonzero_mask = true;
    auto masked = normalize(v, n);
    ASSERT_TRUE(masked.isOk());
    const float* p = masked->data<float>();
    EXPECT_EQ(p[0], 0.0f);
    EXPECT_EQ(p[1], 0.0f);
    EXPECT_NEAR(p[2], (2 - 4) / std::sqrt(2.0), kFloatTolerance);
    EXPECT_NEAR(p[5], (6 - 4) / std::sqrt(2.0), kFloatTolerance);
}

TEST(TensorLayout, ZyxIsACopyAndXyzATranspose) {
    const Geometry g = makeGeometry({4, 3, 2}, {1, 2, 3});
    const Volume v = makeVolume<int16_t>(g, [](const Vec3& p) {
        return p[0] + 10 * p[1] / 2 + 100 * p[2] / 3;  // value = i + 10 j + 100 k
    });
    auto zyx = volumesToTensor({v}, AxisOrder::kZyx);
    ASSERT_TRUE(zyx.isOk());
    EXPECT_EQ(zyx->shape(), (engine::Shape{1, 2, 3, 4}));
    // [c][z][y][x]: element (k=1, j=2, i=3)
    EXPECT_EQ(zyx->data<float>()[(1 * 3 + 2) * 4 + 3], 3 + 20 + 100);
    auto xyz = volumesToTensor({v, v}, AxisOrder::kXyz);
    ASSERT_TRUE(xyz.isOk());
    EXPECT_EQ(xyz->shape(), (engine::Shape{2, 4, 3, 2}));
    EXPECT_EQ(xyz->data<float>()[24 + (3 * 3 + 2) * 2 + 1], 3 + 20 + 100);
    for (AxisOrder order : {AxisOrder::kZyx, AxisOrder::kXyz}) {
        auto t = volumesToTensor({v}, order);
        auto back = tensorChannelToVolume(*t, 0, g, order);
        ASSERT_TRUE(back.isOk());
        for (int64_t n = 0; n < g.voxelCount(); ++n)
            ASSERT_EQ(back->data<float>()[n], v.data<int16_t>()[n]);
    }
    EXPECT_EQ(toIndexOrder({3.0, 2.0, 1.0}, AxisOrder::kZyx), (Vec3{1.0, 2.0, 3.0}));
    EXPECT_EQ(toIndexOrder({3.0, 2.0, 1.0}, AxisOrder::kXyz), (Vec3{3.0, 2.0, 1.0}));
}

}  // namespace
}  // namespace voxseg::pipeline
