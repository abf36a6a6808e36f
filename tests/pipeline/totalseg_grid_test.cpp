// pipeline/totalseg_grid.h: TotalSegmentator's steps around an nnU-Net network. The zoom itself is
// checked against scipy in scipy_zoom_test; here: the zoom factors from float32 spacings, the
// nonzero crop and normalisation of the network input, the way back to the region, --roi_subset's
// box (cropping.py get_bbox_from_mask with the addon in mm truncated to voxels), and that a
// roi_subset link only pulls its crop stage in when labels are asked for.
#include "pipeline/totalseg_grid.h"

#include "pipeline/stages.h"

#include <gtest/gtest.h>

namespace voxseg::pipeline {
namespace {

Geometry grid(std::array<int64_t, 3> size, Vec3 spacing) {
    Geometry g;
    g.size = size;
    g.spacing = spacing;
    return g;
}

TEST(TotalSegmentatorGrid, ZoomUsesFloat32Spacing) {
    // 0.7 is not a float32: nibabel's zooms are, so TotalSegmentator divides float(0.7).
    const auto zoom = totalSegmentatorZoom(grid({10, 10, 10}, {0.7, 1.5, 2.5}), {1.5, 1.5, 1.5});
    EXPECT_EQ(zoom[0], static_cast<double>(0.7f) / 1.5);
    EXPECT_NE(zoom[0], 0.7 / 1.5);
    EXPECT_EQ(zoom[1], 1.0);
    EXPECT_EQ(zoom[2], 2.5 / 1.5);
}

TEST(TotalSegmentatorGrid, InputIsZoomedTruncatedCroppedToNonzeroAndNormalised) {
    // 9 x 9 x 5 at 1 mm -> 3 mm: 3 x 3 x 2 voxels (round half to even: 5 / 3 = 1.67 -> 2).
    Volume v = Volume::allocate<int16_t>(grid({9, 9, 5}, {1.0, 1.0, 1.0}));
    int16_t* p = v.data<int16_t>();
    for (int64_t i = 0; i < v.geometry().voxelCount(); ++i) p[i] = 0;
    p[4 + 9 * 4 + 81 * 2] = 300;  // one voxel in the middle: only it survives the crop
    engine::Normalization norm;
    norm.scheme = engine::Normalization::Scheme::kCT;
    norm.clip_low = -1000.0;
    norm.clip_high = 1000.0;
    norm.mean = 100.0;
    norm.std = 50.0;
    auto input = [&] {
        auto zoomed = totalSegmentatorZoomed(v, {3.0, 3.0, 3.0}, 1);
        EXPECT_TRUE(zoomed.isOk()) << zoomed.status().toString();
        return nnUNetInput(*zoomed, norm, engine::AxisOrder::kZyx);
    };
    auto in = input();
    ASSERT_TRUE(in.isOk()) << in.status().toString();
    EXPECT_EQ(in->zoomed.size, (std::array<int64_t, 3>{3, 3, 2}));
    EXPECT_EQ(in->zoomed.spacing[0], 3.0);
    // Corner-aligned order 1: output (1,1,k) reads input (4,4,4k): only k=... the peak at z=2
    // lies between outputs 0 (z=0) and 1 (z=4): both read 0 there, so the zoomed image is all
    // zero and nnU-Net's crop keeps the whole grid.
    EXPECT_TRUE(in->nonzero.covers(in->zoomed));
    ASSERT_EQ(in->tensor.numel(), 18);
    EXPECT_FLOAT_EQ(in->tensor.data<float>()[0], (0.0f - 100.0f) / 50.0f);

    // A peak on a sampled position survives, truncated toward zero, and the crop keeps it only.
    p[4 + 9 * 4 + 81 * 2] = 0;
    p[4 + 9 * 4 + 81 * 4] = -7;
    in = input();
    ASSERT_TRUE(in.isOk()) << in.status().toString();
    EXPECT_EQ(in->nonzero.begin, (std::array<int64_t, 3>{1, 1, 1}));
    EXPECT_EQ(in->nonzero.size, (std::array<int64_t, 3>{1, 1, 1}));
    ASSERT_EQ(in->tensor.numel(), 1);
    EXPECT_FLOAT_EQ(in->tensor.data<float>()[0], (-7.0f - 100.0f) / 50.0f);
}

TEST(TotalSegmentatorGrid, LabelsComeBackPastedAndZoomed) {
    const Geometry region = grid({5, 5, 3}, {1.0, 1.0, 1.0});
    ZoomedInput in;
    in.zoomed = grid({3, 3, 2}, {2.0, 2.0, 1.5});
    in.nonzero.begin = {1, 1, 0};
    in.nonzero.size = {2, 2, 2};
    Volume net = Volume::allocate<uint8_t>(croppedGeometry(in.zoomed, in.nonzero));
    net.data<uint8_t>()[0] = 4;  // zoomed (1,1,0)
    auto back = totalSegmentatorLabelsBack(net, in, region);
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    EXPECT_EQ(back->geometry().size, region.size);
    // Order-0, corner-aligned: output i reads round-half-up(i * 2 / 4): 0,1,1,2,2 -> zoomed 1
    // at i = 1, 2; z reads round(k * 1 / 2): 0, 1, 1 -> zoomed z 0 at k = 0.
    const uint8_t* b = back->data<uint8_t>();
    auto at = [&](int i, int j, int k) { return b[i + 5 * j + 25 * k]; };
    EXPECT_EQ(at(1, 1, 0), 4);
    EXPECT_EQ(at(2, 2, 0), 4);
    EXPECT_EQ(at(0, 1, 0), 0);
    EXPECT_EQ(at(3, 1, 0), 0);
    EXPECT_EQ(at(1, 1, 1), 0);
}

TEST(TotalSegmentatorGrid, RoiSubsetBoxIsTheRequestedLabelsPlusTruncatedMargin) {
    Volume labels = Volume::allocate<uint8_t>(grid({40, 30, 20}, {1.5, 2.0, 3.0}));
    uint8_t* p = labels.data<uint8_t>();
    auto set = [&](int i, int j, int k, uint8_t v) { p[i + 40 * j + 1200 * k] = v; };
    set(10, 10, 10, 5);  // liver
    set(20, 12, 11, 7);  // spleen
    set(39, 29, 19, 9);  // not asked for: ignored
    auto box = roiSubsetBox(labels, {5, 7}, 20.0);
    ASSERT_TRUE(box.has_value());
    // addon = int(20 / spacing) = 13, 10, 6 voxels; min - addon .. max + 1 + addon, clipped.
    EXPECT_EQ(box->begin, (std::array<int64_t, 3>{0, 0, 4}));
    EXPECT_EQ(box->size, (std::array<int64_t, 3>{34, 23, 14}));
    EXPECT_FALSE(roiSubsetBox(labels, {6}, 20.0).has_value());
    box = roiSubsetBox(labels, {9}, 0.0);
    ASSERT_TRUE(box.has_value());
    EXPECT_EQ(box->begin, (std::array<int64_t, 3>{39, 29, 19}));
    EXPECT_EQ(box->size, (std::array<int64_t, 3>{1, 1, 1}));
}

TEST(TotalSegmentatorGrid, SlabsFollowItsTripleSplit) {
    // nnunet.py: more than 512 x 512 x 900 voxels and more than 200 slices, multi-model only.
    EXPECT_EQ(totalSegmentatorSlabs({512, 512, 900}, true).size(), 1u);
    EXPECT_EQ(totalSegmentatorSlabs({512, 512, 1000}, false).size(), 1u);
    EXPECT_EQ(totalSegmentatorSlabs({2000, 2000, 150}, true).size(), 1u);
    const auto s = totalSegmentatorSlabs({512, 512, 1000}, true);
    ASSERT_EQ(s.size(), 3u);
    // third = 333: [:353], [314:686], [647:]; kept [:333], [333:666], [666:].
    EXPECT_EQ(s[0].begin, 0);
    EXPECT_EQ(s[0].end, 353);
    EXPECT_EQ(s[1].begin, 314);
    EXPECT_EQ(s[1].end, 686);
    EXPECT_EQ(s[2].begin, 647);
    EXPECT_EQ(s[2].end, 1000);
    EXPECT_EQ(s[0].keep_end, 333);
    EXPECT_EQ(s[1].keep_begin, 333);
    EXPECT_EQ(s[1].keep_end, 666);
    EXPECT_EQ(s[2].keep_begin, 666);
    // What nnunet.py keeps of each slab's prediction: s01[:-20], s02[19:-20], s03[19:].
    EXPECT_EQ(s[0].keep_end - s[0].begin, (s[0].end - s[0].begin) - 20);
    EXPECT_EQ(s[1].keep_begin - s[1].begin, 19);
    EXPECT_EQ(s[1].keep_end - s[1].begin, (s[1].end - s[1].begin) - 20);
    EXPECT_EQ(s[2].keep_begin - s[2].begin, 19);
}

TEST(TotalSegmentatorGrid, SlabPredictionsArePutTogether) {
    // A 3 mm region that is already on the target spacing: no zoom. The fake network labels each
    // voxel with 1 + the index of the slab it ran in; the result must show slab 1 on [0, 10),
    // slab 2 on [10, 20) and slab 3 on [20, 31) (third = 10), each slab seen whole by "nnU-Net".
    Volume v = Volume::allocate<int16_t>(grid({4, 3, 31}, {3.0, 3.0, 3.0}));
    for (int64_t i = 0; i < v.geometry().voxelCount(); ++i) v.data<int16_t>()[i] = 100;
    engine::Normalization norm;
    int call = 0;
    std::vector<int64_t> depths;
    auto predict = [&](ZoomedInput& in) -> Result<Volume> {
        ++call;
        depths.push_back(in.network.size[2]);
        Volume out = Volume::allocate<uint8_t>(in.network);
        for (int64_t i = 0; i < in.network.voxelCount(); ++i)
            out.data<uint8_t>()[i] = static_cast<uint8_t>(call);
        return out;
    };
    SlabRule rule;
    rule.max_voxels = 100;
    rule.min_slices = 20;
    rule.margin = 3;
    TotalSegmentatorTrace trace;
    auto labels = totalSegmentatorLabels(v, {3.0, 3.0, 3.0}, norm, engine::AxisOrder::kZyx, true, 1,
                                         predict, &trace, rule);
    ASSERT_TRUE(labels.isOk()) << labels.status().toString();
    EXPECT_EQ(trace.slabs, 3u);
    EXPECT_EQ(depths, (std::vector<int64_t>{13, 15, 13}));
    const uint8_t* p = labels->data<uint8_t>();
    for (int64_t k = 0; k < 31; ++k)
        EXPECT_EQ(p[12 * k + 5], k < 10 ? 1 : (k < 20 ? 2 : 3)) << "slice " << k;
    // Without the split: one call, one label.
    call = 0;
    labels = totalSegmentatorLabels(v, {3.0, 3.0, 3.0}, norm, engine::AxisOrder::kZyx, false, 1,
                                    predict, &trace, rule);
    ASSERT_TRUE(labels.isOk());
    EXPECT_EQ(call, 1);
    EXPECT_EQ(labels->data<uint8_t>()[12 * 30], 1);
}

TEST(TotalSegmentatorGrid, RoiSubsetLinkNeedsItsStageOnlyWithLabels) {
    engine::ModelPackage p;
    engine::StageSpec crop_stage;
    crop_stage.name = "roi_crop";
    crop_stage.output.labels = {1, 2, 3};
    engine::StageSpec part;
    part.name = "organs";
    part.result = true;
    part.output.labels = {1, 2};
    engine::CropLink link;
    link.stage = "roi_crop";
    link.stage_index = 0;
    link.rule = engine::CropRule::kRoiSubset;
    link.margin_mm = 20.0;
    part.crop_to = link;
    engine::StageSpec other = part;
    other.name = "vertebrae";
    other.output.labels = {3};
    p.stages = {crop_stage, part, other};
    EXPECT_EQ(stagesNeeded(p, {}), (std::vector<bool>{false, true, true}));
    EXPECT_EQ(stagesNeeded(p, {2}), (std::vector<bool>{true, true, false}));
    EXPECT_FALSE(cropLinkActive(link, {}));
    EXPECT_TRUE(cropLinkActive(link, {3}));
    link.rule = engine::CropRule::kLabelBox;
    EXPECT_TRUE(cropLinkActive(link, {}));
    // A crop task's link (rule "labels") is always on: its crop stage runs without --labels.
    link.rule = engine::CropRule::kLabelSet;
    link.labels = {1};
    EXPECT_TRUE(cropLinkActive(link, {}));
    p.stages[1].crop_to = link;
    EXPECT_EQ(stagesNeeded(p, {}), (std::vector<bool>{true, true, true}));
}

}  // namespace
}  // namespace voxseg::pipeline
