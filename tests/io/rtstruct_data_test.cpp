// Reading the RTSTRUCTs other tools wrote (label `data`; skips without ../shared/data): rt-utils'
// mock structure sets on its two CT slices (a new frame of reference, references to absent
// images, no image references at all), dicompyler-core's structure set on the one CT slice it
// ships with, pydicom's RTSTRUCT whose series is absent.
#include "io/dicom_series.h"
#include "io/rtstruct_reader.h"

#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace voxseg::io {
namespace {

using voxseg::testing::sharedData;

std::string data(const std::string& rel) { return sharedData(rel).string(); }

Result<SeriesCandidate> seriesOf(const std::vector<std::string>& files) {
    auto scan = scanDicom(files, DicomScanOptions{2});
    if (!scan.isOk()) return scan.status();
    if (scan->series.size() != 1) return invalidArgument("expected one series");
    return scan->series.front();
}

const RtRoi* roiNamed(const RtStructReadResult& r, const std::string& name) {
    for (const RtRoi& roi : r.rois)
        if (roi.description.name == name) return &roi;
    return nullptr;
}

bool anyWarning(const std::vector<std::string>& warnings, const std::string& a,
                const std::string& b = {}) {
    for (const auto& w : warnings)
        if (w.find(a) != std::string::npos && w.find(b) != std::string::npos) return true;
    return false;
}

void print(const RtStructReadResult& r) {
    for (const RtRoi& roi : r.rois)
        std::printf("ROI %d '%s': %d contour(s), %d placed, %lld voxel(s)\n", roi.roi_number,
                    roi.description.name.c_str(), roi.contours, roi.contours_placed,
                    static_cast<long long>(roi.voxels));
    for (const auto& w : r.warnings) std::printf("warning: %s\n", w.c_str());
}

constexpr const char* kRtUtils = "rt-utils/mock_data";

TEST(RtStructData, RtUtilsMockOnItsTwoSlices) {
    VOXSEG_REQUIRE_DATA(kRtUtils);
    auto series =
        seriesOf({data("rt-utils/mock_data/ct_1.dcm"), data("rt-utils/mock_data/ct_2.dcm")});
    ASSERT_TRUE(series.isOk()) << series.status().toString();
    auto r = readRtStruct(data("rt-utils/mock_data/rt.dcm"), *series);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    print(*r);
    ASSERT_EQ(r->rois.size(), 1u);
    const RtRoi& roi = r->rois[0];
    EXPECT_EQ(roi.description.name, "ROI-1");
    EXPECT_EQ(roi.roi_number, 1);
    EXPECT_EQ(roi.contours, 2);
    EXPECT_EQ(roi.contours_placed, 2);
    EXPECT_EQ(roi.description.color, (std::array<uint8_t, 3>{162, 136, 95}));
    // rt-utils minted a new frame of reference but names the CT series: a warning, not an error.
    EXPECT_TRUE(anyWarning(r->warnings, "frame of reference", series->frame_of_reference_uid));
    // Both contours lie on ct_1 (z = 60): a 24 mm square (49 x 49 pixels of 0.488 mm) with a
    // 15 mm octagon inside it (31 x 31 pixels less its cut corners), a hole by the even-odd rule.
    EXPECT_GE(roi.voxels, 49 * 49 - 31 * 31);
    EXPECT_LE(roi.voxels, 49 * 49 - 31 * 31 + 16);
    ASSERT_EQ(r->acquired.planes.planeCount(), 2u);
    int64_t on_second = 0;
    const uint8_t* second = r->acquired.plane<uint8_t>(1);
    for (int64_t i = 0; i < r->acquired.planeSize(); ++i) on_second += second[i] != 0;
    EXPECT_EQ(on_second, 0);
}

TEST(RtStructData, RtUtilsReferencesToAbsentImagesWarn) {
    VOXSEG_REQUIRE_DATA(kRtUtils);
    auto series =
        seriesOf({data("rt-utils/mock_data/ct_1.dcm"), data("rt-utils/mock_data/ct_2.dcm")});
    ASSERT_TRUE(series.isOk()) << series.status().toString();
    auto r = readRtStruct(data("rt-utils/mock_data/invalid_reference_rt.dcm"), *series);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    print(*r);
    ASSERT_EQ(r->rois.size(), 4u);
    for (const RtRoi& roi : r->rois) {
        const std::string name = "'" + roi.description.name + "'";
        // One contour per ROI on the slice at z = 70, which is not among the two files.
        EXPECT_EQ(roi.contours, 3) << name;
        EXPECT_EQ(roi.contours_placed, 2) << name;
        EXPECT_GT(roi.voxels, 0) << name;
        EXPECT_TRUE(anyWarning(roi.warnings, name, "lie on no image")) << name;
        EXPECT_TRUE(anyWarning(roi.warnings, "1 of them reference images absent")) << name;
        EXPECT_EQ(roi.warnings.size(), 1u) << name;
    }

    auto bare = readRtStruct(data("rt-utils/mock_data/non_existent_reference_rt.dcm"), *series);
    ASSERT_TRUE(bare.isOk()) << bare.status().toString();
    print(*bare);
    EXPECT_TRUE(anyWarning(bare->warnings, "names no referenced series"));
    ASSERT_FALSE(bare->rois.empty());
    int64_t voxels = 0;
    for (const RtRoi& roi : bare->rois) voxels += roi.voxels;
    EXPECT_GT(voxels, 0);  // placed by position alone
}

TEST(RtStructData, DicompylerStructuresOnTheirOnlySlice) {
    VOXSEG_REQUIRE_DATA("dicompyler-core/rtss.dcm");
    auto series = seriesOf({data("dicompyler-core/ct.0.dcm")});
    ASSERT_TRUE(series.isOk()) << series.status().toString();
    auto r = readRtStruct(data("dicompyler-core/rtss.dcm"), *series);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    print(*r);
    EXPECT_EQ(r->rois.size(), 10u);
    int landed = 0;
    for (const RtRoi& roi : r->rois) {
        const std::string name = "'" + roi.description.name + "'";
        if (roi.contours_placed > 0) {
            ++landed;
            EXPECT_GT(roi.voxels, 0) << name;
        }
        // Every ROI with contours elsewhere says so, naming itself.
        if (roi.contours > roi.contours_placed)
            EXPECT_TRUE(anyWarning(roi.warnings, name, "lie on no image")) << name;
    }
    // The four contours at z = 168.56 (ct.0's position) are BODY's and reference ct.0.
    EXPECT_EQ(landed, 1);
    const RtRoi* body = roiNamed(*r, "BODY");
    ASSERT_NE(body, nullptr);
    EXPECT_EQ(body->contours, 141);
    EXPECT_EQ(body->contours_placed, 4);
    EXPECT_GT(body->voxels, 10000);
    const RtRoi* areola = roiNamed(*r, "Areola");
    ASSERT_NE(areola, nullptr);
    EXPECT_TRUE(anyWarning(areola->warnings, "'Areola'", "no contours"));
    const RtRoi* heart = roiNamed(*r, "Heart");
    ASSERT_NE(heart, nullptr);
    EXPECT_TRUE(anyWarning(heart->warnings, "'Heart'", "33 contour(s) lie on no image"));
}

TEST(RtStructData, PydicomRtstructWithoutItsSeriesIsAnError) {
    VOXSEG_REQUIRE_DATA("pydicom-test-files/rtstruct.dcm");
    VOXSEG_REQUIRE_DATA("dicompyler-core/ct.0.dcm");
    auto series = seriesOf({data("dicompyler-core/ct.0.dcm")});
    ASSERT_TRUE(series.isOk()) << series.status().toString();
    const std::string path = data("pydicom-test-files/rtstruct.dcm");
    auto r = readRtStruct(path, *series);
    ASSERT_FALSE(r.isOk());
    std::printf("%s\n", r.status().toString().c_str());
    EXPECT_EQ(r.status().subject(), path);
    EXPECT_NE(r.status().message().find("1.2.826.0.1.3680043.8.498.2010020400001.2.1.1"),
              std::string::npos);
    EXPECT_NE(r.status().message().find(series->series_uid), std::string::npos);
}

}  // namespace
}  // namespace voxseg::io
