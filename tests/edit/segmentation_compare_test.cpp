// edit/segmentation_compare.h on label maps with known overlaps: a 10x10x10 box against itself
// shifted by 2 voxels (Dice 0.8), a label in one map only (Dice 0), a label in both with no
// overlap, volumes in mL from an anisotropic spacing, uint8 against uint16, and the refusal of
// maps on different grids.
#include "edit/segmentation_compare.h"

#include <gtest/gtest.h>

namespace voxseg::edit {
namespace {

Geometry grid() {
    Geometry g;
    g.size = {30, 24, 20};
    g.spacing = {0.8, 1.2, 2.5};  // 2.4 mm^3 = 0.0024 mL a voxel
    return g;
}

template <typename T>
void box(Volume& v, int value, std::array<int64_t, 3> lo, std::array<int64_t, 3> hi) {
    const Geometry g = v.geometry();
    T* p = v.data<T>();
    for (int64_t k = lo[2]; k < hi[2]; ++k)
        for (int64_t j = lo[1]; j < hi[1]; ++j)
            for (int64_t i = lo[0]; i < hi[0]; ++i)
                p[(k * g.size[1] + j) * g.size[0] + i] = static_cast<T>(value);
}

TEST(SegmentationCompare, DiceAndVolumesOfKnownOverlaps) {
    Volume a = Volume::allocate<uint8_t>(grid());
    Volume b = Volume::allocate<uint16_t>(grid());
    box<uint8_t>(a, 1, {2, 2, 2}, {12, 12, 12});        // 1000 voxels
    box<uint16_t>(b, 1, {4, 2, 2}, {14, 12, 12});       // shifted by 2: 800 shared
    box<uint8_t>(a, 2, {20, 2, 2}, {25, 6, 4});         // 40 voxels, only in a
    box<uint16_t>(b, 300, {20, 10, 10}, {22, 12, 12});  // 8 voxels, only in b
    box<uint8_t>(a, 4, {0, 20, 0}, {2, 22, 1});         // 4 voxels in a ...
    box<uint16_t>(b, 4, {5, 20, 0}, {7, 23, 1});        // ... and 6 elsewhere in b
    auto r = compareSegmentations(a, b);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    ASSERT_EQ(r->size(), 4u);
    const LabelAgreement& one = (*r)[0];
    EXPECT_EQ(one.label, 1);
    EXPECT_EQ(one.voxels_a, 1000);
    EXPECT_EQ(one.voxels_b, 1000);
    EXPECT_EQ(one.voxels_both, 800);
    EXPECT_DOUBLE_EQ(one.dice, 0.8);
    EXPECT_NEAR(one.volume_a_ml, 2.4, 1e-12);
    EXPECT_NEAR(one.volume_difference_ml, 0.0, 1e-12);
    ASSERT_TRUE(one.volume_difference_percent);
    EXPECT_NEAR(*one.volume_difference_percent, 0.0, 1e-12);

    const LabelAgreement& two = (*r)[1];
    EXPECT_EQ(two.label, 2);
    EXPECT_EQ(two.voxels_b, 0);
    EXPECT_EQ(two.dice, 0.0);
    EXPECT_NEAR(two.volume_difference_ml, -40 * 0.0024, 1e-12);
    EXPECT_NEAR(*two.volume_difference_percent, -100.0, 1e-12);

    const LabelAgreement& four = (*r)[2];
    EXPECT_EQ(four.label, 4);
    EXPECT_EQ(four.voxels_both, 0);
    EXPECT_EQ(four.dice, 0.0);
    EXPECT_NEAR(*four.volume_difference_percent, 50.0, 1e-12);

    const LabelAgreement& other = (*r)[3];
    EXPECT_EQ(other.label, 300);
    EXPECT_EQ(other.voxels_a, 0);
    EXPECT_EQ(other.voxels_b, 8);
    EXPECT_FALSE(other.volume_difference_percent);

    // A map against itself: Dice 1 for every label.
    auto self = compareSegmentations(a, a);
    ASSERT_TRUE(self.isOk());
    for (const LabelAgreement& l : *self) EXPECT_DOUBLE_EQ(l.dice, 1.0) << l.label;
}

TEST(SegmentationCompare, RefusesMapsOfAnotherGridOrFloat) {
    Volume a = Volume::allocate<uint8_t>(grid());
    Geometry g = grid();
    g.size[2] = 21;
    auto r = compareSegmentations(a, Volume::allocate<uint8_t>(g));
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("same image"), std::string::npos);
    g = grid();
    g.spacing[0] = 0.9;
    EXPECT_FALSE(compareSegmentations(a, Volume::allocate<uint8_t>(g)).isOk());
    EXPECT_FALSE(compareSegmentations(a, Volume::allocate<float>(grid())).isOk());
    EXPECT_FALSE(compareSegmentations(a, Volume()).isOk());
}

}  // namespace
}  // namespace voxseg::edit
