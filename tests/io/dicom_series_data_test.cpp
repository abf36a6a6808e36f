// scanDicom() on real scanner data from ../shared/data (label "data"): grouping, splitting and
// the geometry of every volume against dcm2niix's output (Ref/ folders, or Debian's dcm2niix
// run by the test when installed) or against values derived here from the headers.
#include "io/dicom_series.h"
#include "tests/io/dicom_grid_compare.h"
#include "tests/test_data.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dctk.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

namespace voxseg::io {
namespace {

namespace fs = std::filesystem;
using voxseg::testing::expectSameGrid;
using voxseg::testing::readGrid;
using voxseg::testing::sharedData;
using voxseg::testing::TempDir;

constexpr double kCornerTolMm = 0.02;  // dcm2niix computes and stores affines in float32
constexpr double kAxisCosTol = 1e-4;

DicomScanResult scan(const std::string& rel) {
    auto r = scanDicom({sharedData(rel).string()});
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    return r.isOk() ? *r : DicomScanResult{};
}

Geometry refGrid(const std::string& path) {
    Geometry g;
    int dims = 0;
    EXPECT_TRUE(readGrid(path, g, dims)) << path;
    return g;
}

TEST(DicomSeriesData, GeT1ObliqueMatchesHeadersAndDcm2niix) {
    const std::string rel = "dcm_qa_ge/05_3D_Ax_T1_MP_RAGE_R22";
    VOXSEG_REQUIRE_DATA(rel);
    DicomScanResult s = scan(rel);
    ASSERT_EQ(s.series.size(), 1u);
    const Geometry& g = s.series[0].geometry;
    EXPECT_EQ(g.size, (std::array<int64_t, 3>{256, 256, 130}));
    EXPECT_NEAR(g.spacing[0], 0.9375, 1e-6);
    EXPECT_NEAR(g.spacing[1], 0.9375, 1e-6);
    EXPECT_NEAR(g.spacing[2], 1.2, 1e-3);
    EXPECT_GT(g.obliquityDegrees(), 5.0);

    // Independently from the headers: the origin is the IPP with the smallest projection on
    // the normal, the first two axes are IOP.
    double best = 1e30;
    Vec3 origin{};
    Vec3 row{}, col{};
    for (const auto& e : fs::directory_iterator(sharedData(rel))) {
        DcmFileFormat f;
        ASSERT_TRUE(f.loadFile(e.path().c_str()).good());
        Float64 v[9];
        for (int i = 0; i < 3; ++i)
            f.getDataset()->findAndGetFloat64(DCM_ImagePositionPatient, v[i], i);
        for (int i = 0; i < 6; ++i)
            f.getDataset()->findAndGetFloat64(DCM_ImageOrientationPatient, v[3 + i], i);
        row = {v[3], v[4], v[5]};
        col = {v[6], v[7], v[8]};
        double p = dot({v[0], v[1], v[2]}, cross(row, col));
        if (p < best) {
            best = p;
            origin = {v[0], v[1], v[2]};
        }
    }
    for (int a = 0; a < 3; ++a) {
        EXPECT_NEAR(g.origin[a], origin[a], 1e-6);
        EXPECT_NEAR(g.axisDirection(0)[a], row[a], 1e-5);
        EXPECT_NEAR(g.axisDirection(1)[a], col[a], 1e-5);
    }

    TempDir out;
    std::vector<std::string> nii =
        voxseg::testing::runDcm2niix(sharedData(rel).string(), out.path().string());
    if (nii.empty()) GTEST_SKIP() << "dcm2niix not installed: compared with headers only";
    ASSERT_EQ(nii.size(), 1u);
    expectSameGrid(g, refGrid(nii[0]), kCornerTolMm, kAxisCosTol, "GE T1 vs dcm2niix");
}

TEST(DicomSeriesData, GeFmriIsThreeVolumesNotOneStack) {
    const std::string rel = "dcm_qa_ge/14_Ax_fMRI_HB3_48sl_int_asc";
    VOXSEG_REQUIRE_DATA(rel);
    DicomScanResult s = scan(rel);
    ASSERT_EQ(s.series.size(), 3u);
    for (const SeriesCandidate& c : s.series) {
        EXPECT_EQ(c.geometry.size, (std::array<int64_t, 3>{64, 64, 48}));
        EXPECT_NE(c.split_reason.find("4D"), std::string::npos) << c.split_reason;
        EXPECT_FALSE(c.has_gaps);
        EXPECT_TRUE(c.geometry.approxEqual(s.series[0].geometry));
    }
    // Time points in acquisition order: every slice of volume 0 precedes volume 1's.
    int max0 = 0, min1 = 1 << 30;
    for (const SliceRef& r : s.series[0].slices) max0 = std::max(max0, r.instance_number);
    for (const SliceRef& r : s.series[1].slices) min1 = std::min(min1, r.instance_number);
    EXPECT_LT(max0, min1);
}

TEST(DicomSeriesData, GeTiltedCtIsDetectedAsOneUnevenStack) {
    const std::string rel = "dcm_qa_ct/GE_HiSpeedDual_tilt_varspacing";
    VOXSEG_REQUIRE_DATA(rel);
    DicomScanResult s = scan(rel);
    ASSERT_EQ(s.series.size(), 1u);
    const SeriesCandidate& c = s.series[0];
    EXPECT_EQ(c.geometry.size, (std::array<int64_t, 3>{512, 512, 28}));
    EXPECT_TRUE(c.tilted);
    EXPECT_NEAR(c.tilt_degrees, 18.5, 0.05);  // GantryDetectorTilt 18.5; Ref/_2.json IOP
    EXPECT_TRUE(c.uneven_spacing);
    // Ref/_2.json: ImageOrientationPatientDICOM [1, 0, 0, 0, 0.948324, -0.317305]
    const Vec3 ref_col{0, 0.948324, -0.317305};
    for (int a = 0; a < 3; ++a) EXPECT_NEAR(c.geometry.axisDirection(1)[a], ref_col[a], 1e-5);
    bool tilt_warned = false;
    for (const std::string& w : c.warnings)
        tilt_warned |= w.find("gantry tilt of 18.5") != std::string::npos;
    EXPECT_TRUE(tilt_warned);
}

TEST(DicomSeriesData, TotalSegmentatorCtWithEmptyUidsMatchesLabelGrid) {
    const std::string rel = "totalsegmentator-tests/example_ct_dicom";
    VOXSEG_REQUIRE_DATA(rel);
    DicomScanResult s = scan(rel);
    ASSERT_EQ(s.series.size(), 1u);
    EXPECT_EQ(s.series[0].num_files, 20);
    expectSameGrid(s.series[0].geometry,
                   refGrid(sharedData("totalsegmentator-tests/example_seg_dicom.nii.gz").string()),
                   kCornerTolMm, kAxisCosTol, "example_ct_dicom vs example_seg_dicom.nii.gz");
}

TEST(DicomSeriesData, MonaiCtWithMissingSlicesReportsTheGap) {
    const std::string rel = "monai-testing-data/CT_DICOM";
    VOXSEG_REQUIRE_DATA(rel);
    DicomScanResult s = scan(rel);
    ASSERT_EQ(s.series.size(), 1u);
    EXPECT_TRUE(s.series[0].has_gaps);
    EXPECT_EQ(s.series[0].geometry.size[2], 4);
    EXPECT_NEAR(s.series[0].geometry.spacing[2], 1.25, 1e-6);
}

TEST(DicomSeriesData, FragmentedSagittalSeriesMatchRefGrids) {
    VOXSEG_REQUIRE_DATA("dcm_qa_frag/In");
    DicomScanResult s = scan("dcm_qa_frag/In");
    ASSERT_EQ(s.series.size(), 2u);
    // Series 5001 (JPEG lossless) sorts before 6001 (JPEG 2000).
    expectSameGrid(s.series[0].geometry,
                   refGrid(sharedData("dcm_qa_frag/Ref/anat-T1w_acq-tfl_5001.nii").string()),
                   kCornerTolMm, kAxisCosTol, "frag 5001");
    expectSameGrid(s.series[1].geometry,
                   refGrid(sharedData("dcm_qa_frag/Ref/anat-T1w_acq-tfl_6001.nii").string()),
                   kCornerTolMm, kAxisCosTol, "frag 6001");
}

TEST(DicomSeriesData, DecubitusSagittalUsesIopIppOnly) {
    const std::string rel = "dcm_qa_decubitus/HFS_3_t1_fl2d_sag";
    VOXSEG_REQUIRE_DATA(rel);
    DicomScanResult s = scan(rel);
    ASSERT_EQ(s.series.size(), 1u);
    const Geometry& g = s.series[0].geometry;
    EXPECT_EQ(g.size, (std::array<int64_t, 3>{256, 256, 35}));
    EXPECT_NEAR(g.spacing[2], 4.8, 1e-3);
    EXPECT_EQ(g.orientationCode().substr(2), "R");  // stacked towards the patient's right
    TempDir out;
    auto nii = voxseg::testing::runDcm2niix(sharedData(rel).string(), out.path().string());
    if (nii.empty()) GTEST_SKIP() << "dcm2niix not installed";
    ASSERT_EQ(nii.size(), 1u);
    expectSameGrid(g, refGrid(nii[0]), kCornerTolMm, kAxisCosTol, "decubitus vs dcm2niix");
}

TEST(DicomSeriesData, EnhancedSiemensXa30GeometryFromFunctionalGroups) {
    const std::string rel = "dcm_qa_xa30/5_anat-T1w_acq-tfl";
    VOXSEG_REQUIRE_DATA(rel);
    DicomScanResult s = scan(rel);
    ASSERT_EQ(s.series.size(), 1u);
    EXPECT_EQ(s.series[0].num_files, 1);
    EXPECT_EQ(s.series[0].geometry.size, (std::array<int64_t, 3>{128, 128, 96}));
    // Same acquisition as dcm_qa_frag (classic files): the grids agree.
    VOXSEG_REQUIRE_DATA("dcm_qa_frag/Ref/anat-T1w_acq-tfl_5001.nii");
    expectSameGrid(s.series[0].geometry,
                   refGrid(sharedData("dcm_qa_frag/Ref/anat-T1w_acq-tfl_5001.nii").string()),
                   kCornerTolMm, kAxisCosTol, "xa30 enhanced vs frag Ref");
}

TEST(DicomSeriesData, EnhancedPhilipsAndSiemensSplitAndMatchRef) {
    VOXSEG_REQUIRE_DATA("dcm_qa_enh/In");
    DicomScanResult philips = scan("dcm_qa_enh/In/Philips");
    ASSERT_EQ(philips.series.size(), 2u);  // magnitude and field map
    const Geometry ref_e1 =
        refGrid(sharedData("dcm_qa_enh/Ref/Philips_WIP_B0_NS_801_e1.nii").string());
    for (const SeriesCandidate& c : philips.series) {
        EXPECT_NE(c.split_reason.find("image type"), std::string::npos) << c.split_reason;
        expectSameGrid(c.geometry, ref_e1, kCornerTolMm, kAxisCosTol, "Philips B0");
    }
    DicomScanResult siemens = scan("dcm_qa_enh/In/Siemens");
    ASSERT_EQ(siemens.series.size(), 4u);  // 4 time points, one file each
    const Geometry ref_s =
        refGrid(sharedData("dcm_qa_enh/Ref/Siemens_REST1_w_SMS_PF7-8_6.nii").string());
    for (const SeriesCandidate& c : siemens.series)
        expectSameGrid(c.geometry, ref_s, kCornerTolMm, kAxisCosTol, "Siemens XA10 enhanced");
}

TEST(DicomSeriesData, SiemensMosaicUnpacksToTheRefGrid) {
    VOXSEG_REQUIRE_DATA("dcm_qa_ts/In/1.dcm");
    auto r = scanDicom({sharedData("dcm_qa_ts/In/1.dcm").string()});
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    ASSERT_EQ(r->series.size(), 1u);
    EXPECT_EQ(r->series[0].mosaic_tiles_across, 6);
    expectSameGrid(r->series[0].geometry, refGrid(sharedData("dcm_qa_ts/Ref/1.nii").string()),
                   kCornerTolMm, kAxisCosTol, "mosaic vs dcm_qa_ts Ref/1.nii");
    // The 12-bit mosaics: series 2, 3 and 4 against Ref/<series>.nii.
    DicomScanResult twelve = scan("dcm_qa_12bit/In");
    ASSERT_EQ(twelve.series.size(), 3u);
    for (const SeriesCandidate& c : twelve.series) {
        std::string ref = "dcm_qa_12bit/Ref/" + std::to_string(c.series_number) + ".nii";
        expectSameGrid(c.geometry, refGrid(sharedData(ref).string()), kCornerTolMm, 1e-3, ref);
    }
}

TEST(DicomSeriesData, DicomdirListsItsImagesAndFolderScanSkipsIt) {
    const std::string rel = "pydicom-test-files/dicomdirtests";
    VOXSEG_REQUIRE_DATA(rel);
    auto via_dicomdir = scanDicom({sharedData(rel + "/DICOMDIR").string()});
    ASSERT_TRUE(via_dicomdir.isOk()) << via_dicomdir.status().toString();
    DicomScanResult folder = scan(rel);
    size_t dicomdirs_skipped = 0;
    for (const SkippedFile& f : folder.skipped)
        dicomdirs_skipped += f.reason.find("DICOMDIR") != std::string::npos;
    EXPECT_GE(dicomdirs_skipped, 5u);
    int files_dicomdir = 0, files_folder = 0;
    for (const SeriesCandidate& c : via_dicomdir->series) files_dicomdir += c.num_files;
    for (const SeriesCandidate& c : folder.series) files_folder += c.num_files;
    EXPECT_GT(files_dicomdir, 0);
    EXPECT_LE(files_dicomdir, files_folder);
}

TEST(DicomSeriesData, PydicomFilesNeverCrashAndNonImagesAreSkippedWithReasons) {
    VOXSEG_REQUIRE_DATA("pydicom-test-files");
    DicomScanResult s = scan("pydicom-test-files");
    EXPECT_FALSE(s.series.empty());
    bool sr = false, rt = false;
    for (const SkippedFile& f : s.skipped) {
        EXPECT_FALSE(f.reason.empty()) << f.path;
        sr |= f.reason.find("(SR)") != std::string::npos;
        rt |= f.reason.find("(RT)") != std::string::npos;
    }
    EXPECT_TRUE(sr);
    EXPECT_TRUE(rt);
}

}  // namespace
}  // namespace voxseg::io
