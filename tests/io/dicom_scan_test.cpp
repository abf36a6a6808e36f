// scanDicom() on synthetic series written by dicom_synth: recognition by content, grouping,
// splitting, sorting, geometry and the stack checks (gaps, uneven spacing, tilt, duplicates).
#include "io/dicom_series.h"
#include "io/dicom_stack.h"
#include "io/dicom_synth.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace voxseg::io {
namespace {

namespace fs = std::filesystem;
using voxseg::testing::TempDir;

constexpr double kMmTol = 1e-4;  // DS values are written with 10 significant digits

Vec3 unitVec(Vec3 v) {
    double n = norm(v);
    return {v[0] / n, v[1] / n, v[2] / n};
}

// An oblique orthonormal pair (rotation about x by 20 deg, then about z by 10 deg).
SynthSeriesSpec obliqueSpec() {
    SynthSeriesSpec s;
    const double a = 20 * M_PI / 180, b = 10 * M_PI / 180;
    s.row_dir = unitVec({std::cos(b), std::sin(b), 0});
    s.col_dir = unitVec({-std::sin(b) * std::cos(a), std::cos(b) * std::cos(a), std::sin(a)});
    s.origin = {-12.5, 30.25, -100};
    s.slices = 9;
    s.slice_spacing = 2.5;
    return s;
}

DicomScanResult scanOk(const std::string& folder) {
    auto r = scanDicom({folder}, DicomScanOptions{2});
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    return r.isOk() ? *r : DicomScanResult{};
}

void expectVecNear(const Vec3& a, const Vec3& b, double tol, const std::string& what) {
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(a[i], b[i], tol) << what << " component " << i;
}

TEST(DicomScan, ShuffledNamesAreSortedByPositionWithExactGeometry) {
    TempDir dir;
    SynthSeriesSpec spec = obliqueSpec();
    spec.shuffle_names = true;
    spec.seed = 42;
    ASSERT_TRUE(writeSynthSeries(spec, dir / "s").isOk());
    DicomScanResult scan = scanOk(dir / "s");
    ASSERT_EQ(scan.series.size(), 1u);
    const SeriesCandidate& c = scan.series[0];
    EXPECT_EQ(c.geometry.size, (std::array<int64_t, 3>{16, 12, 9}));
    EXPECT_NEAR(c.geometry.spacing[0], spec.column_spacing, kMmTol);
    EXPECT_NEAR(c.geometry.spacing[1], spec.row_spacing, kMmTol);
    EXPECT_NEAR(c.geometry.spacing[2], spec.slice_spacing, kMmTol);
    expectVecNear(c.geometry.origin, spec.origin, kMmTol, "origin");
    expectVecNear(c.geometry.axisDirection(0), spec.row_dir, 1e-6, "row direction");
    expectVecNear(c.geometry.axisDirection(1), spec.col_dir, 1e-6, "column direction");
    expectVecNear(c.geometry.axisDirection(2), cross(spec.row_dir, spec.col_dir), 1e-6, "normal");
    ASSERT_EQ(c.slices.size(), 9u);
    for (size_t k = 0; k < c.slices.size(); ++k)
        EXPECT_EQ(c.slices[k].instance_number, static_cast<int>(k) + 1) << "slice " << k;
    EXPECT_FALSE(c.tilted);
    EXPECT_FALSE(c.uneven_spacing);
    EXPECT_FALSE(c.has_gaps);
    EXPECT_TRUE(c.warnings.empty()) << c.warnings.front();
    EXPECT_EQ(c.num_files, 9);
    EXPECT_EQ(c.modality, "CT");
    EXPECT_EQ(c.patient.name, spec.patient_name);
}

TEST(DicomScan, DescendingSliceOffsetsStillStackAlongTheNormal) {
    TempDir dir;
    SynthSeriesSpec spec;
    spec.slice_spacing = -3.0;  // instance numbers run against the normal
    ASSERT_TRUE(writeSynthSeries(spec, dir / "s").isOk());
    DicomScanResult scan = scanOk(dir / "s");
    ASSERT_EQ(scan.series.size(), 1u);
    const SeriesCandidate& c = scan.series[0];
    EXPECT_NEAR(c.geometry.spacing[2], 3.0, kMmTol);
    expectVecNear(c.geometry.origin, {0, 0, -21.0}, kMmTol, "origin is the lowest slice");
    EXPECT_EQ(c.slices.front().instance_number, 8);
    expectVecNear(c.geometry.axisDirection(2), {0, 0, 1}, 1e-9, "normal");
}

TEST(DicomScan, RemovedSliceIsReportedAsGap) {
    TempDir dir;
    SynthSeriesSpec spec;
    spec.slices = 10;
    auto paths = writeSynthSeries(spec, dir / "s");
    ASSERT_TRUE(paths.isOk());
    fs::remove((*paths)[4]);
    DicomScanResult scan = scanOk(dir / "s");
    ASSERT_EQ(scan.series.size(), 1u);
    const SeriesCandidate& c = scan.series[0];
    EXPECT_EQ(c.geometry.size[2], 9);
    EXPECT_TRUE(c.has_gaps);
    EXPECT_FALSE(c.uneven_spacing);
    EXPECT_NEAR(c.geometry.spacing[2], spec.slice_spacing, kMmTol);
    ASSERT_FALSE(c.warnings.empty());
    EXPECT_NE(c.warnings[0].find("gap"), std::string::npos) << c.warnings[0];
    EXPECT_NE(c.warnings[0].find("about 1 missing"), std::string::npos) << c.warnings[0];
}

TEST(DicomScan, UnevenSpacingIsFlaggedButNotAGap) {
    TempDir dir;
    SynthSeriesSpec spec;
    spec.slices = 6;
    spec.slice_offsets = {0, 2, 4, 6.5, 8.5, 10.5};
    ASSERT_TRUE(writeSynthSeries(spec, dir / "s").isOk());
    DicomScanResult scan = scanOk(dir / "s");
    ASSERT_EQ(scan.series.size(), 1u);
    EXPECT_TRUE(scan.series[0].uneven_spacing);
    EXPECT_FALSE(scan.series[0].has_gaps);
    EXPECT_NEAR(scan.series[0].geometry.spacing[2], 2.0, kMmTol);  // the median step
}

TEST(DicomScan, GantryTiltIsDetectedWithItsAngle) {
    TempDir dir;
    SynthSeriesSpec spec;
    spec.slice_spacing = 2.0;
    spec.tilt_shift = {0, 2.0 * std::tan(15 * M_PI / 180), 0};  // 15 degrees about x
    ASSERT_TRUE(writeSynthSeries(spec, dir / "s").isOk());
    DicomScanResult scan = scanOk(dir / "s");
    ASSERT_EQ(scan.series.size(), 1u);
    EXPECT_TRUE(scan.series[0].tilted);
    EXPECT_NEAR(scan.series[0].tilt_degrees, 15.0, 1e-3);
    EXPECT_FALSE(scan.series[0].uneven_spacing);
}

TEST(DicomScan, TwoMixedSeriesAreSeparatedAndSelectable) {
    TempDir dir;
    SynthSeriesSpec a;
    a.series_number = 3;
    a.name_prefix = "A";
    a.shuffle_names = true;
    SynthSeriesSpec b = obliqueSpec();
    b.series_number = 2;
    b.modality = "MR";
    b.shuffle_names = true;
    b.seed = 7;
    ASSERT_TRUE(writeSynthSeries(a, dir / "mixed").isOk());
    ASSERT_TRUE(writeSynthSeries(b, dir / "mixed").isOk());
    DicomScanResult scan = scanOk(dir.path().string());
    ASSERT_EQ(scan.series.size(), 2u);
    EXPECT_EQ(scan.series[0].series_number, 2);  // ordered by series number
    EXPECT_EQ(scan.series[0].modality, "MR");
    EXPECT_EQ(scan.series[0].geometry.size[2], 9);
    EXPECT_EQ(scan.series[1].geometry.size[2], 8);
    EXPECT_TRUE(scan.series[0].split_reason.empty());

    auto none = selectSeries(scan, "");
    ASSERT_FALSE(none.isOk());
    EXPECT_EQ(none.status().code(), StatusCode::kAmbiguous);
    EXPECT_NE(none.status().message().find("[1]"), std::string::npos);
    auto by_index = selectSeries(scan, "1");
    ASSERT_TRUE(by_index.isOk());
    EXPECT_EQ((*by_index)->series_number, 3);
    auto by_uid = selectSeries(scan, scan.series[0].series_uid);
    ASSERT_TRUE(by_uid.isOk());
    EXPECT_EQ((*by_uid)->index, 0);
    EXPECT_EQ(selectSeries(scan, "5").status().code(), StatusCode::kNotFound);
    EXPECT_EQ(selectSeries(scan, "1.2.3.4").status().code(), StatusCode::kNotFound);
}

TEST(DicomScan, EchoTimesAndRepeatedPositionsSplitWithReasons) {
    TempDir dir;
    SynthSeriesSpec e1;
    e1.modality = "MR";
    e1.series_uid = makeDicomUid();
    e1.echo_time = 12;
    e1.name_prefix = "E1_";
    SynthSeriesSpec e2 = e1;
    e2.echo_time = 80;
    e2.name_prefix = "E2_";
    e2.first_instance_number = 100;
    ASSERT_TRUE(writeSynthSeries(e1, dir / "s").isOk());
    ASSERT_TRUE(writeSynthSeries(e2, dir / "s").isOk());
    DicomScanResult scan = scanOk(dir / "s");
    ASSERT_EQ(scan.series.size(), 2u);
    EXPECT_NE(scan.series[0].split_reason.find("echo time 12 ms"), std::string::npos)
        << scan.series[0].split_reason;
    EXPECT_NE(scan.series[1].split_reason.find("echo time 80 ms"), std::string::npos);

    // Same series, same positions, nothing telling time points apart: 4D by occurrence.
    SynthSeriesSpec t2 = e1;
    t2.echo_time = 12;
    t2.name_prefix = "T2_";
    t2.first_instance_number = 200;
    TempDir dir4;
    ASSERT_TRUE(writeSynthSeries(e1, dir4 / "s").isOk());
    ASSERT_TRUE(writeSynthSeries(t2, dir4 / "s").isOk());
    DicomScanResult scan4 = scanOk(dir4 / "s");
    ASSERT_EQ(scan4.series.size(), 2u);
    for (const SeriesCandidate& c : scan4.series) {
        EXPECT_EQ(c.geometry.size[2], 8);
        EXPECT_NE(c.split_reason.find("4D"), std::string::npos) << c.split_reason;
    }
    EXPECT_EQ(scan4.series[0].slices[0].instance_number, 1);
    EXPECT_EQ(scan4.series[1].slices[0].instance_number, 200);
}

TEST(DicomScan, OrientationSplitAndDuplicateCopies) {
    TempDir dir;
    SynthSeriesSpec axial;
    axial.series_uid = makeDicomUid();
    SynthSeriesSpec oblique = obliqueSpec();
    oblique.series_uid = axial.series_uid;
    oblique.name_prefix = "OB";
    auto axial_paths = writeSynthSeries(axial, dir / "s");
    ASSERT_TRUE(axial_paths.isOk());
    ASSERT_TRUE(writeSynthSeries(oblique, dir / "s").isOk());
    fs::copy_file((*axial_paths)[2], dir / "s/copy_of_third");
    DicomScanResult scan = scanOk(dir / "s");
    ASSERT_EQ(scan.series.size(), 2u);
    int axial_index = scan.series[0].geometry.size[2] == 8 ? 0 : 1;
    const SeriesCandidate& a = scan.series[axial_index];
    EXPECT_NE(a.split_reason.find("orientation"), std::string::npos) << a.split_reason;
    EXPECT_EQ(a.geometry.size[2], 8);
    ASSERT_FALSE(a.warnings.empty());
    EXPECT_NE(a.warnings[0].find("same SOPInstanceUID"), std::string::npos) << a.warnings[0];
}

TEST(DicomScan, RecognisesByContentAndSkipsOthersWithReasons) {
    TempDir dir;
    SynthSeriesSpec bare;
    bare.write_meta_header = false;
    bare.slices = 3;
    ASSERT_TRUE(writeSynthSeries(bare, dir / "d").isOk());
    std::ofstream(dir / "d/readme.txt") << "not an image\n";
    std::ofstream(dir / "d/zeros.bin", std::ios::binary) << std::string(400, '\0');
    DicomScanResult scan = scanOk(dir / "d");
    ASSERT_EQ(scan.series.size(), 1u);
    EXPECT_EQ(scan.series[0].geometry.size[2], 3);
    ASSERT_EQ(scan.skipped.size(), 2u);
    for (const SkippedFile& s : scan.skipped)
        EXPECT_NE(s.reason.find("not DICOM"), std::string::npos) << s.path << ": " << s.reason;
}

TEST(DicomScan, EmptyAndMissingInputsAreClearErrors) {
    TempDir dir;
    fs::create_directories(dir / "empty");
    auto empty = scanDicom({dir / "empty"});
    ASSERT_FALSE(empty.isOk());
    EXPECT_EQ(empty.status().code(), StatusCode::kNotFound);
    EXPECT_NE(empty.status().toString().find("empty"), std::string::npos);
    auto missing = scanDicom({dir / "nope"});
    ASSERT_FALSE(missing.isOk());
    EXPECT_NE(missing.status().toString().find("nope"), std::string::npos);
    EXPECT_FALSE(scanDicom({}).isOk());
}

}  // namespace
}  // namespace voxseg::io
