// `voxseg convert rtss.dcm --referenced <series> -o labels.nii.gz` as a child process: the label
// map equals what was written as RTSTRUCT, the sidecar names each label's ROI, and an RTSTRUCT
// without --referenced or against another series fails with exit code 2 and no output.
#include "app/exit_codes.h"
#include "io/acquired_labels.h"
#include "io/dicom_series.h"
#include "io/dicom_synth.h"
#include "io/image_io.h"
#include "io/rtstruct_writer.h"
#include "tests/app/run_voxseg.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>

namespace voxseg::app {
namespace {
namespace fs = std::filesystem;
using clitest::runVoxseg;
using clitest::slurp;
using voxseg::testing::TempDir;

struct Fixture {
    io::SeriesCandidate series;
    Volume labels;  // on the series' grid (not resampled: the acquired planes)
};

Fixture writeSeriesAndRtStruct(const TempDir& dir, const std::string& folder,
                               const std::string& rtss) {
    Fixture f;
    io::SynthSeriesSpec spec;
    spec.columns = 40;
    spec.rows = 32;
    spec.slices = 6;
    spec.origin = {-20, -15, 30};
    EXPECT_TRUE(io::writeSynthSeries(spec, dir / folder).isOk());
    auto scan = io::scanDicom({dir / folder});
    EXPECT_TRUE(scan.isOk() && scan->series.size() == 1);
    if (!scan.isOk() || scan->series.size() != 1) return f;
    f.series = scan->series.front();
    io::AcquiredLabels acquired;
    acquired.planes = io::AcquiredPlanes::of(f.series);
    f.labels = Volume::allocate<uint8_t>(f.series.geometry);
    uint8_t* d = f.labels.data<uint8_t>();
    for (int k = 0; k < 6; ++k)
        for (int j = 0; j < 32; ++j)
            for (int i = 0; i < 40; ++i) {
                const double r = std::hypot(i - 14.0, j - 16.0);
                uint8_t v = 0;
                if (r < 9 && r >= 3 + k % 2) v = 1;                  // ring with a hole
                if (std::abs(i - 31) + std::abs(j - 10) < 5) v = 3;  // diamond
                if (k == 2 && i == 39 && j == 31) v = 3;             // pixel in the corner
                d[(k * 32 + j) * 40 + i] = v;
            }
    acquired.labels = f.labels;
    std::vector<io::SegmentDescription> rois(2);
    rois[0].value = 1, rois[0].name = "Ring", rois[0].color = {10, 200, 30};
    rois[1].value = 3, rois[1].name = "Diamond", rois[1].color = {250, 5, 90};
    auto report = io::writeRtStruct(acquired, f.series, rois, {}, dir / rtss);
    EXPECT_TRUE(report.isOk()) << report.status().toString();
    return f;
}

TEST(CliRtStruct, ConvertGivesTheLabelMapAndNamesTheRois) {
    TempDir dir;
    const Fixture f = writeSeriesAndRtStruct(dir, "ct", "rtss.dcm");
    ASSERT_FALSE(f.labels.empty());
    auto r = runVoxseg(
        {"convert", dir / "rtss.dcm", "--referenced", dir / "ct", "-o", dir / "labels.nii.gz"},
        dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("2 ROI(s)"), std::string::npos) << r.out;
    auto back = io::readImage(dir / "labels.nii.gz");
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    EXPECT_TRUE(back->geometry().approxEqual(f.series.geometry, 1e-3, 1e-5, 1e-5));
    Volume b = back->castTo(PixelType::kUInt8);
    int64_t differences = 0;
    for (int64_t i = 0; i < f.series.geometry.voxelCount(); ++i)
        differences += b.data<uint8_t>()[i] != f.labels.data<uint8_t>()[i];
    EXPECT_EQ(differences, 0);

    const auto j = nlohmann::json::parse(slurp(dir.path() / "labels.rois.json"));
    ASSERT_EQ(j["rois"].size(), 2u);
    EXPECT_EQ(j["rois"][0]["label_value"], 1);
    EXPECT_EQ(j["rois"][0]["name"], "Ring");
    EXPECT_EQ(j["rois"][1]["label_value"], 3);
    EXPECT_EQ(j["rois"][1]["name"], "Diamond");
    EXPECT_EQ(j["rois"][1]["color"], nlohmann::json::array({250, 5, 90}));
    int64_t ring = 0;
    for (int64_t i = 0; i < f.series.geometry.voxelCount(); ++i)
        ring += f.labels.data<uint8_t>()[i] == 1;
    EXPECT_EQ(j["rois"][0]["voxels"], ring);
    EXPECT_EQ(j["referenced_series_uid"], f.series.series_uid);
}

TEST(CliRtStruct, WithoutOrWithTheWrongSeriesExits2AndWritesNothing) {
    TempDir dir;
    const Fixture f = writeSeriesAndRtStruct(dir, "ct", "rtss.dcm");
    const Fixture other = writeSeriesAndRtStruct(dir, "other", "other.dcm");
    ASSERT_FALSE(f.labels.empty());
    ASSERT_FALSE(other.labels.empty());
    auto r = runVoxseg({"convert", dir / "rtss.dcm", "-o", dir / "a.nii.gz"}, dir);
    EXPECT_EQ(r.exit_code, toInt(ExitCode::kUsage)) << r.err;
    EXPECT_NE(r.err.find("--referenced"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "a.nii.gz"));

    r = runVoxseg(
        {"convert", dir / "rtss.dcm", "--referenced", dir / "other", "-o", dir / "b.nii.gz"}, dir);
    EXPECT_EQ(r.exit_code, toInt(ExitCode::kUsage)) << r.err;
    EXPECT_NE(r.err.find(f.series.series_uid), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(other.series.series_uid), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "b.nii.gz"));
    EXPECT_FALSE(fs::exists(dir / "b.rois.json"));

    // --referenced given an image series as PATH: not an RTSTRUCT.
    r = runVoxseg({"convert", dir / "ct", "--referenced", dir / "ct", "-o", dir / "c.nii.gz"}, dir);
    EXPECT_EQ(r.exit_code, toInt(ExitCode::kUsage)) << r.err;
    EXPECT_FALSE(fs::exists(dir / "c.nii.gz"));
}

}  // namespace
}  // namespace voxseg::app
