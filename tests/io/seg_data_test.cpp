// Reading reference DICOM SEGs from other tools (label `data`): dcmqi's liver SEG against its
// NRRD label map (107098 voxels in both), highdicom's test SEGs against counts measured with
// pydicom 3.0 (tools/check_seg.py prints the same figures).
#include "io/image_io.h"
#include "io/seg_reader.h"

#include "pipeline/pixel_dispatch.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

namespace voxseg::io {
namespace {

using voxseg::testing::sharedData;

int64_t foreground(const Volume& v) {
    int64_t n = 0;
    const int64_t count = v.geometry().voxelCount();
    if (v.pixelType() == PixelType::kUInt8)
        for (int64_t e = 0; e < count; ++e) n += v.data<uint8_t>()[e] != 0;
    else
        for (int64_t e = 0; e < count; ++e) n += v.data<uint16_t>()[e] != 0;
    return n;
}

TEST(DicomSegData, DcmqiLiverMatchesItsNrrdVoxelForVoxel) {
    VOXSEG_REQUIRE_DATA("dcmqi-data/segmentations/liver.dcm");
    auto nrrd = readImage(sharedData("dcmqi-data/segmentations/liver_seg.nrrd").string());
    ASSERT_TRUE(nrrd.isOk()) << nrrd.status().toString();
    SegReadOptions options;
    options.grid = nrrd->geometry();
    auto seg = readDicomSeg(sharedData("dcmqi-data/segmentations/liver.dcm").string(), options);
    ASSERT_TRUE(seg.isOk()) << seg.status().toString();
    EXPECT_EQ(foreground(seg->label_map), 107098);
    int64_t differences = 0;
    voxseg::pipeline::withPixelType(nrrd->pixelType(), [&](auto tag) {
        using T = decltype(tag);
        const T* ref = nrrd->data<T>();
        for (int64_t e = 0; e < nrrd->geometry().voxelCount(); ++e)
            differences += (ref[e] != T(0)) != (seg->label_map.data<uint8_t>()[e] != 0);
    });
    EXPECT_EQ(differences, 0);
    ASSERT_EQ(seg->segments.size(), 1u);
    EXPECT_EQ(seg->segments[0].type.code, "T-62000");  // SNOMED RT (SRT) Liver, as dcmqi wrote it

    // Without a grid the frames define one; same voxel count.
    auto derived = readDicomSeg(sharedData("dcmqi-data/segmentations/liver.dcm").string());
    ASSERT_TRUE(derived.isOk()) << derived.status().toString();
    EXPECT_EQ(foreground(derived->label_map), 107098);
    EXPECT_TRUE(derived->label_map.geometry().approxEqual(nrrd->geometry(), 1e-3, 1e-4, 1e-4));
}

TEST(DicomSegData, HighdicomBinaryFractionalAndOverlapping) {
    VOXSEG_REQUIRE_DATA("highdicom-test-files/seg_image_ct_binary.dcm");
    const auto file = [](const char* name) {
        return sharedData(std::string("highdicom-test-files/") + name).string();
    };
    auto binary = readDicomSeg(file("seg_image_ct_binary.dcm"));
    ASSERT_TRUE(binary.isOk()) << binary.status().toString();
    EXPECT_EQ(foreground(binary->label_map), 638);
    EXPECT_FALSE(binary->fractional);

    auto fractional = readDicomSeg(file("seg_image_ct_binary_fractional.dcm"));
    ASSERT_TRUE(fractional.isOk()) << fractional.status().toString();
    EXPECT_TRUE(fractional->fractional);
    EXPECT_EQ(foreground(fractional->label_map), 638);
    // Values of 128 out of 255: at least half, so inside.
    auto true_fractional = readDicomSeg(file("seg_image_ct_true_fractional.dcm"));
    ASSERT_TRUE(true_fractional.isOk()) << true_fractional.status().toString();
    EXPECT_EQ(foreground(true_fractional->label_map), 638);

    // 2 segments on 4 planes, 80 set pixels, 64 distinct voxels.
    auto overlap = readDicomSeg(file("seg_image_ct_binary_overlap.dcm"));
    ASSERT_TRUE(overlap.isOk()) << overlap.status().toString();
    EXPECT_EQ(foreground(overlap->label_map), 64);
    EXPECT_EQ(overlap->overlapping_voxels, 80 - 64);

    auto single = readDicomSeg(file("seg_image_ct_binary_single_frame.dcm"));
    ASSERT_TRUE(single.isOk()) << single.status().toString();
    EXPECT_EQ(foreground(single->label_map), 1832);

    auto labelmap = readDicomSeg(file("seg_image_sm_control_labelmap.dcm"));
    ASSERT_FALSE(labelmap.isOk());
    EXPECT_EQ(labelmap.status().code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace voxseg::io
