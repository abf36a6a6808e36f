// loadSeries() on real scanner data (label "data"): voxel values against reference volumes
// (dcm_qa Ref/ folders written by dcm2niix, or Debian's dcm2niix run by the test), compared
// voxel by voxel through patient coordinates so axis flips do not matter.
#include "io/dicom_series.h"
#include "tests/io/dicom_grid_compare.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <itkImageFileReader.h>

#include <cmath>
#include <set>

namespace voxseg::io {
namespace {

using voxseg::testing::readGrid;
using voxseg::testing::sharedData;
using voxseg::testing::TempDir;

struct Comparison {
    int64_t compared = 0;
    int64_t outside = 0;    // voxels of ours that map outside the reference grid
    int64_t different = 0;  // |ours - reference| > tolerance
    double max_diff = 0;
    double sum_ours_theirs = 0, sum_ours_sq = 0;  // least-squares scale: theirs ~ scale * ours
};

double voxel(const Volume& v, int64_t index) {
    return visitPixels(v, [&](auto* p) { return static_cast<double>(p[index]); });
}

// Compares every voxel of `mine` with volume `t` of the reference file (tolerance relative to
// the reference value, absolute below 1). ITK applies the NIfTI
// scl_slope/scl_inter when reading as float).
Comparison compareWithReference(const Volume& mine, const std::string& ref_path, int t, double tol,
                                double scale = 1.0) {
    Comparison c;
    Geometry ref;
    int dims = 0;
    EXPECT_TRUE(readGrid(ref_path, ref, dims)) << ref_path;
    using Image4 = itk::Image<float, 4>;
    auto reader = itk::ImageFileReader<Image4>::New();
    reader->SetFileName(ref_path);
    reader->Update();
    const float* ref_data = reader->GetOutput()->GetBufferPointer();
    const Geometry g = mine.geometry();
    const int64_t ref_volume = ref.voxelCount();
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i) {
                const Vec3 q =
                    ref.physicalToIndex(g.indexToPhysical({double(i), double(j), double(k)}));
                int64_t r[3];
                bool inside = true;
                for (int a = 0; a < 3; ++a) {
                    r[a] = std::llround(q[a]);
                    inside =
                        inside && std::abs(q[a] - r[a]) < 0.01 && r[a] >= 0 && r[a] < ref.size[a];
                }
                if (!inside) {
                    ++c.outside;
                    continue;
                }
                const double theirs =
                    ref_data[t * ref_volume + (r[2] * ref.size[1] + r[1]) * ref.size[0] + r[0]];
                const double ours = scale * voxel(mine, (k * g.size[1] + j) * g.size[0] + i);
                c.sum_ours_theirs += ours * theirs;
                c.sum_ours_sq += ours * ours;
                const double d = std::abs(ours - theirs);
                c.max_diff = std::max(c.max_diff, d);
                c.different += d > tol * std::max(1.0, std::abs(theirs));  // relative
                ++c.compared;
            }
    return c;
}

Volume loadOnly(const std::string& rel, size_t index = 0, size_t expected_count = 1) {
    auto scan = scanDicom({sharedData(rel).string()});
    EXPECT_TRUE(scan.isOk()) << scan.status().toString();
    if (!scan.isOk()) return {};
    EXPECT_EQ(scan->series.size(), expected_count) << rel;
    if (index >= scan->series.size()) return {};
    auto v = loadSeries(scan->series[index]);
    EXPECT_TRUE(v.isOk()) << v.status().toString();
    return v.isOk() ? *v : Volume{};
}

void expectIdentical(const Volume& v, const std::string& ref, int t = 0) {
    ASSERT_FALSE(v.empty());
    Comparison c = compareWithReference(v, ref, t, 0.0);
    EXPECT_EQ(c.outside, 0) << ref;
    EXPECT_EQ(c.compared, v.geometry().voxelCount()) << ref;
    EXPECT_EQ(c.different, 0) << ref << ": max difference " << c.max_diff;
}

TEST(DicomLoadData, FragmentedJpegSeriesAreBitIdenticalToRef) {
    VOXSEG_REQUIRE_DATA("dcm_qa_frag/In");
    for (size_t s = 0; s < 2; ++s) {
        Volume v = loadOnly("dcm_qa_frag/In", s, 2);
        expectIdentical(v, sharedData(s == 0 ? "dcm_qa_frag/Ref/anat-T1w_acq-tfl_5001.nii"
                                             : "dcm_qa_frag/Ref/anat-T1w_acq-tfl_6001.nii")
                               .string());
    }
}

TEST(DicomLoadData, SiemensMosaicsMatchRef) {
    VOXSEG_REQUIRE_DATA("dcm_qa_ts/In/1.dcm");
    expectIdentical(loadOnly("dcm_qa_ts/In/1.dcm"), sharedData("dcm_qa_ts/Ref/1.nii").string());
    VOXSEG_REQUIRE_DATA("dcm_qa_12bit/In");
    auto scan = scanDicom({sharedData("dcm_qa_12bit/In").string()});
    ASSERT_TRUE(scan.isOk());
    for (const SeriesCandidate& c : scan->series) {
        auto v = loadSeries(c);
        ASSERT_TRUE(v.isOk()) << v.status().toString();
        expectIdentical(
            *v,
            sharedData("dcm_qa_12bit/Ref/" + std::to_string(c.series_number) + ".nii").string());
    }
}

TEST(DicomLoadData, EnhancedSiemensTimePointsMatchRef) {
    VOXSEG_REQUIRE_DATA("dcm_qa_enh/In/Siemens");
    auto scan = scanDicom({sharedData("dcm_qa_enh/In/Siemens").string()});
    ASSERT_TRUE(scan.isOk());
    ASSERT_EQ(scan->series.size(), 4u);
    for (size_t t = 0; t < 4; ++t) {
        auto v = loadSeries(scan->series[t]);
        ASSERT_TRUE(v.isOk()) << v.status().toString();
        expectIdentical(*v, sharedData("dcm_qa_enh/Ref/Siemens_REST1_w_SMS_PF7-8_6.nii").string(),
                        static_cast<int>(t));
    }
}

TEST(DicomLoadData, EnhancedPhilipsFieldMapMatchesRef) {
    VOXSEG_REQUIRE_DATA("dcm_qa_enh/In/Philips");
    auto scan = scanDicom({sharedData("dcm_qa_enh/In/Philips").string()});
    ASSERT_TRUE(scan.isOk());
    ASSERT_EQ(scan->series.size(), 2u);
    int fieldmaps = 0;
    for (const SeriesCandidate& c : scan->series) {
        if (c.image_type.find("FIELD_MAP") == std::string::npos) continue;
        ++fieldmaps;
        auto v = loadSeries(c);
        ASSERT_TRUE(v.isOk()) << v.status().toString();
        const std::string ref =
            sharedData("dcm_qa_enh/Ref/Philips_WIP_B0_NS_801_e2_fieldmaphz.nii").string();
        // Per-frame RescaleSlope/Intercept (Hz); dcm2niix stores float32: 1e-2 Hz.
        Comparison cmp = compareWithReference(*v, ref, 0, 1e-2);
        EXPECT_EQ(cmp.outside, 0);
        EXPECT_EQ(cmp.different, 0) << ref << " max difference " << cmp.max_diff;
    }
    EXPECT_EQ(fieldmaps, 1);
}

// The magnitude image of the same Philips series. voxseg gives the DICOM-standard values
// (stored * RescaleSlope + RescaleIntercept); dcm2niix defaults to Philips' private "precise"
// floating-point values (stored / MRScaleSlope (2005,100E)), which differ from those by one
// constant factor per series. Models normalise MR intensities (z-score), so the factor does not
// change a segmentation; the test pins that it is exactly one factor and nothing else.
TEST(DicomLoadData, EnhancedPhilipsMagnitudeIsRefUpToPhilipsPreciseScale) {
    VOXSEG_REQUIRE_DATA("dcm_qa_enh/In/Philips");
    auto scan = scanDicom({sharedData("dcm_qa_enh/In/Philips").string()});
    ASSERT_TRUE(scan.isOk());
    const std::string ref = sharedData("dcm_qa_enh/Ref/Philips_WIP_B0_NS_801_e1.nii").string();
    int magnitudes = 0;
    for (const SeriesCandidate& c : scan->series) {
        if (c.image_type.size() < 2 || c.image_type.substr(c.image_type.size() - 2) != "\\M")
            continue;
        ++magnitudes;
        auto v = loadSeries(c);
        ASSERT_TRUE(v.isOk()) << v.status().toString();
        const Comparison fit = compareWithReference(*v, ref, 0, 0.0);
        ASSERT_GT(fit.sum_ours_sq, 0.0);
        const double scale = fit.sum_ours_theirs / fit.sum_ours_sq;
        EXPECT_NE(scale, 1.0);  // the two conventions really differ for this series
        const Comparison cmp = compareWithReference(*v, ref, 0, 1e-5, scale);
        EXPECT_EQ(cmp.outside, 0);
        EXPECT_EQ(cmp.compared, v->geometry().voxelCount());
        EXPECT_EQ(cmp.different, 0)
            << ref << " scale " << scale << " max difference " << cmp.max_diff;
    }
    EXPECT_EQ(magnitudes, 1);
}

TEST(DicomLoadData, GeT1AndXa30EnhancedMatchDcm2niix) {
    for (const std::string rel :
         {"dcm_qa_ge/05_3D_Ax_T1_MP_RAGE_R22", "dcm_qa_xa30/5_anat-T1w_acq-tfl"}) {
        VOXSEG_REQUIRE_DATA(rel);
        TempDir out;
        auto nii = voxseg::testing::runDcm2niix(sharedData(rel).string(), out.path().string());
        if (nii.empty()) GTEST_SKIP() << "dcm2niix not installed";
        ASSERT_EQ(nii.size(), 1u) << rel;
        Volume v = loadOnly(rel);
        EXPECT_EQ(v.pixelType(), PixelType::kInt16);
        expectIdentical(v, nii[0]);
    }
}

TEST(DicomLoadData, GeTiltedCtIsDeShearedInItsAcquiredOrientation) {
    const std::string rel = "dcm_qa_ct/GE_HiSpeedDual_tilt_varspacing";
    VOXSEG_REQUIRE_DATA(rel);
    auto scan = scanDicom({sharedData(rel).string()});
    ASSERT_TRUE(scan.isOk());
    ASSERT_EQ(scan->series.size(), 1u);
    const SeriesCandidate& c = scan->series[0];
    EXPECT_FALSE(loadSeries(c, DicomLoadOptions{.tilt = IrregularPolicy::kRefuse}).isOk());
    auto v = loadSeries(c);
    ASSERT_TRUE(v.isOk()) << v.status().toString();
    const Geometry g = v->geometry();
    EXPECT_EQ(v->pixelType(), PixelType::kInt16);
    // The grid keeps the images' orientation (Ref/_2.json's IOP: rows along x, columns tilted
    // 18.5 degrees) with the slice normal as third axis.
    const double t = 18.5 * M_PI / 180;
    const Vec3 x{1, 0, 0}, y{0, std::cos(t), -std::sin(t)}, z{0, std::sin(t), std::cos(t)};
    for (int a = 0; a < 3; ++a) {
        EXPECT_NEAR(g.axisDirection(0)[a], x[a], 2e-3);
        EXPECT_NEAR(g.axisDirection(1)[a], y[a], 2e-3);
        EXPECT_NEAR(g.axisDirection(2)[a], z[a], 2e-3);
    }
    EXPECT_NEAR(g.spacing[0], 0.488281, 1e-5);
    // IPP z runs from 5.836 to 157.776 mm: 144.1 mm along the normal in 36 steps of the median
    // 4.0 mm, and 48.2 mm of drift along the columns (99 more rows: dcm2niix's tilt-corrected
    // output has the same 611).
    EXPECT_NEAR(g.spacing[2], (157.7760586 - 5.8360586) * std::cos(t) / 36, 2e-3);
    EXPECT_EQ(g.size[2], 37);
    EXPECT_EQ(g.size[0], 512);
    EXPECT_EQ(g.size[1], 611);
    // Values are CT numbers: air about -1000 inside the field of view, bone above 1000.
    const int16_t* p = v->data<int16_t>();
    const auto [lo, hi] = std::minmax_element(p, p + g.voxelCount());
    EXPECT_LT(*lo, -900);
    EXPECT_GT(*hi, 1000);
    bool warned = false;
    for (const std::string& w : v->info().warnings)
        warned |= w.find("resampled (gantry tilt 18.50") != std::string::npos;
    EXPECT_TRUE(warned);
}

TEST(DicomLoadData, GeFmriLoadsThreeDistinctVolumes) {
    const std::string rel = "dcm_qa_ge/14_Ax_fMRI_HB3_48sl_int_asc";
    VOXSEG_REQUIRE_DATA(rel);
    auto scan = scanDicom({sharedData(rel).string()});
    ASSERT_TRUE(scan.isOk());
    ASSERT_EQ(scan->series.size(), 3u);
    std::vector<Volume> vols;
    for (const SeriesCandidate& c : scan->series) {
        auto v = loadSeries(c);
        ASSERT_TRUE(v.isOk()) << v.status().toString();
        EXPECT_EQ(v->geometry().size, (std::array<int64_t, 3>{64, 64, 48}));
        vols.push_back(*v);
    }
    // The time points are built from disjoint files (this anonymised sample repeats the same
    // pixels at every time point, so values cannot tell them apart).
    std::set<std::string> seen;
    for (const SeriesCandidate& c : scan->series)
        for (const SliceRef& r : c.slices) EXPECT_TRUE(seen.insert(r.path).second) << r.path;
    EXPECT_EQ(seen.size(), 144u);
}

TEST(DicomLoadData, TotalSegmentatorCtLoadsInHounsfieldUnits) {
    const std::string rel = "totalsegmentator-tests/example_ct_dicom";
    VOXSEG_REQUIRE_DATA(rel);
    Volume v = loadOnly(rel);
    ASSERT_EQ(v.pixelType(), PixelType::kInt16);
    Geometry ref;
    int dims = 0;
    ASSERT_TRUE(readGrid(sharedData("totalsegmentator-tests/example_seg_dicom.nii.gz").string(),
                         ref, dims));
    voxseg::testing::expectSameGrid(v.geometry(), ref, 0.02, 1e-4, "example_ct_dicom");
    const int16_t* p = v.data<int16_t>();
    const auto [lo, hi] = std::minmax_element(p, p + v.geometry().voxelCount());
    EXPECT_GE(*lo, -1024);
    EXPECT_GT(*hi, 500);
}

}  // namespace
}  // namespace voxseg::io
