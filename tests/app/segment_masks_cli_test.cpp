// `voxseg segment --outputs masks,ts-stats` as a subprocess (issue 37, "Outputs its users
// expect"): masks/<label name>.nii.gz per label in TotalSegmentator's layout (uint8 0/1, on the
// label map's geometry, written also for labels with no voxels) and
// statistics_totalsegmentator.json (TotalSegmentator's --statistics; its numbers are checked
// against TotalSegmentator itself in tests/pipeline/totalseg_statistics_test.cpp, here against
// the same function on the files the run wrote). A label name that cannot be a file name is
// refused before any work.
#include "app/exit_codes.h"
#include "io/image_io.h"
#include "pipeline/totalseg_statistics.h"
#include "tests/app/run_voxseg.h"
#include "tests/pipeline/test_model_package.h"
#include "tests/pipeline/test_volumes.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace voxseg::app {
namespace {
namespace fs = std::filesystem;
using voxseg::testing::TempDir;

using clitest::runVoxseg;
using clitest::slurp;

// A float CT-like image (fractional, negative values) with a bright ball in it, as a NIfTI file.
std::string makeImage(const TempDir& dir) {
    const Geometry g = testing::makeGeometry({40, 36, 24}, {2.0, 2.0, 2.5}, {-40, -30, 10});
    const Volume v = testing::makeVolume<float>(g, [](const Vec3& p) {
        const double r = std::sqrt(p[0] * p[0] + p[1] * p[1] + (p[2] - 40) * (p[2] - 40));
        return (r < 14 ? 300.7 : -120.3) + 0.37 * p[0] - 0.11 * p[2];
    });
    const std::string path = dir / "ct.nii.gz";
    EXPECT_TRUE(io::writeImage(v, path).isOk());
    return path;
}

std::vector<LabelInfo> tinyLabels() {
    LabelInfo one, two;
    one.value = 1;
    one.name = "one";
    two.value = 2;
    two.name = "two";
    return {one, two};
}

// Every mask is (segmentation == value) on the segmentation's geometry; returns the voxel counts.
std::vector<int64_t> checkMasks(const fs::path& out) {
    auto seg = io::readImage((out / "segmentation.nii.gz").string());
    EXPECT_TRUE(seg.isOk());
    if (!seg.isOk()) return {};
    std::vector<int64_t> counts;
    for (const LabelInfo& l : tinyLabels()) {
        auto mask = io::readImage((out / "masks" / (l.name + ".nii.gz")).string());
        EXPECT_TRUE(mask.isOk()) << l.name;
        if (!mask.isOk()) return {};
        EXPECT_EQ(mask->pixelType(), PixelType::kUInt8) << l.name;
        EXPECT_TRUE(mask->geometry().approxEqual(seg->geometry(), 1e-6, 1e-9)) << l.name;
        const uint8_t* m = mask->data<uint8_t>();
        const uint8_t* s = seg->data<uint8_t>();
        int64_t count = 0, wrong = 0;
        for (int64_t i = 0; i < seg->geometry().voxelCount(); ++i) {
            count += m[i];
            wrong += m[i] != (s[i] == l.value ? 1 : 0);
        }
        EXPECT_EQ(wrong, 0) << l.name;
        counts.push_back(count);
    }
    return counts;
}

TEST(SegmentMasksCli, WritesMasksAndTotalSegmentatorStatistics) {
    TempDir dir;
    const std::string model = testing::writeTinyModelPackage(dir.path() / "model", "CT", 2.0);
    const std::string ct = makeImage(dir);
    const fs::path out = dir / "out";
    auto r = runVoxseg({"segment", ct, "-m", model, "-o", out.string(), "--device", "cpu",
                        "--outputs", "nifti,masks,ts-stats"},
                       dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::vector<int64_t> counts = checkMasks(out);
    ASSERT_EQ(counts.size(), 2u);
    EXPECT_GT(counts[0] + counts[1], 0) << "the tiny network found nothing: a weak test";
    EXPECT_FALSE(fs::exists(out / "statistics.json"));  // only what --outputs asked for

    // TotalSegmentator's file: the labels in value order, the numbers of the same computation on
    // what the run wrote.
    const auto written =
        nlohmann::ordered_json::parse(slurp(out / "statistics_totalsegmentator.json"));
    auto seg = io::readImage((out / "segmentation.nii.gz").string());
    auto image = io::readImage(ct);
    ASSERT_TRUE(seg.isOk() && image.isOk());
    auto expected = pipeline::computeTotalSegStatistics(*seg, *image, tinyLabels());
    ASSERT_TRUE(expected.isOk()) << expected.status().toString();
    EXPECT_EQ(written,
              nlohmann::ordered_json::parse(pipeline::totalSegStatisticsToJson(*expected)));
    ASSERT_EQ(written.size(), 2u);
    EXPECT_EQ(written.begin().key(), "one");

    const auto run = nlohmann::json::parse(slurp(out / "run.json"));
    EXPECT_EQ(run["grids"]["outputs"]["masks"], "volume");
    EXPECT_EQ(run["grids"]["outputs"]["statistics_totalsegmentator.json"], "volume");
}

// Post-processing that removes every component leaves empty labels: their masks are still
// written (all zero), as TotalSegmentator writes them, and their statistics are 0.0; --labels
// writes only the masks of the labels asked for.
TEST(SegmentMasksCli, EmptyLabelsGetEmptyMasksAndLabelsPicksThem) {
    TempDir dir;
    const std::string model = testing::writeTinyModelPackage(dir.path() / "model", "CT", 2.0);
    const std::string ct = makeImage(dir);
    const fs::path out = dir / "out";
    auto r = runVoxseg({"segment", ct, "-m", model, "-o", out.string(), "--device", "cpu",
                        "--outputs", "nifti,masks,ts-stats", "--min-component-ml", "100000"},
                       dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(checkMasks(out), (std::vector<int64_t>{0, 0}));
    const auto stats = nlohmann::json::parse(slurp(out / "statistics_totalsegmentator.json"));
    for (const char* name : {"one", "two"}) {
        EXPECT_EQ(stats[name]["volume"].get<double>(), 0.0) << name;
        EXPECT_EQ(stats[name]["intensity"].get<double>(), 0.0) << name;
    }

    const fs::path only = dir / "only";
    r = runVoxseg({"segment", ct, "-m", model, "-o", only.string(), "--device", "cpu", "--outputs",
                   "masks,ts-stats", "--labels", "two"},
                  dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(only / "masks/two.nii.gz"));
    EXPECT_FALSE(fs::exists(only / "masks/one.nii.gz"));
    const auto subset = nlohmann::json::parse(slurp(only / "statistics_totalsegmentator.json"));
    EXPECT_EQ(subset.size(), 1u);
    EXPECT_TRUE(subset.contains("two"));
}

// A label name with '/' would write outside masks/: refused before any work, naming the label,
// and nothing is left behind. Without 'masks' the same package runs.
TEST(SegmentMasksCli, LabelNameThatIsNotAFileNameIsRefused) {
    TempDir dir;
    const std::string model = testing::writeTinyModelPackage(dir.path() / "model", "CT", 2.0);
    auto j = nlohmann::json::parse(slurp(fs::path(model) / "model.json"));
    j["labels"][1]["name"] = "../two";
    std::ofstream(fs::path(model) / "model.json") << j.dump(2);
    const std::string ct = makeImage(dir);
    const fs::path out = dir / "out";
    auto r = runVoxseg(
        {"segment", ct, "-m", model, "-o", out.string(), "--device", "cpu", "--outputs", "masks"},
        dir);
    EXPECT_EQ(r.exit_code, toInt(ExitCode::kUsage)) << r.err;
    EXPECT_NE(r.err.find("label 2 \"../two\" cannot name its mask file"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("holds '/'"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
    EXPECT_FALSE(fs::exists(dir.path() / "two.nii.gz"));

    r = runVoxseg(
        {"segment", ct, "-m", model, "-o", out.string(), "--device", "cpu", "--outputs", "nifti"},
        dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace voxseg::app
