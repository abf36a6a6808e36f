// A TotalSegmentator package through `voxseg batch` (issue 37: one model load for many cases, its
// users' #581): four cases, the committed total_fast package of tests/pipeline/data/totalseg. Each
// worker loads the model once, whatever the number of cases, and every case's label map equals
// the one `voxseg segment` writes for the same input.
#include "tests/app/run_voxseg.h"

#include "io/image_io.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace voxseg::app::clitest {
namespace {
namespace fs = std::filesystem;

const fs::path kData = fs::path(VOXSEG_SOURCE_DIR) / "tests/pipeline/data/totalseg";

int count(const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

TEST(BatchTotalSegmentator, LoadsTheModelOncePerWorkerForManyCases) {
    voxseg::testing::TempDir dir;
    const fs::path pkg = kData / "packages" / "total_fast";
    ASSERT_TRUE(fs::exists(pkg / "model.json"));
    std::ofstream manifest(dir.path() / "cases.csv");
    manifest << "case_id,input\n";
    for (int i = 0; i < 4; ++i) {
        const fs::path in = dir.path() / ("ct" + std::to_string(i) + ".nii.gz");
        fs::copy_file(kData / "ct.nii.gz", in);
        manifest << "case" << i << "," << in.string() << "\n";
    }
    manifest.close();
    const RunResult batch = runVoxseg(
        {"batch", (dir.path() / "cases.csv").string(), "-m", pkg.string(), "-o",
         (dir.path() / "out").string(), "--device", "cpu", "--threads", "2", "--outputs", "nifti"},
        dir);
    ASSERT_EQ(batch.exit_code, 0) << batch.err;
    const std::string log = batch.out + batch.err;
    EXPECT_NE(log.find("4 done, 0 failed"), std::string::npos) << log;
    // One "model ... on cpu" line per Segmenter created: one per CPU worker (2 with 2 threads),
    // never one per case nor one more to find out the device.
    EXPECT_NE(log.find("2 CPU workers"), std::string::npos) << log;
    EXPECT_EQ(count(log, "model totalsegmentator-total_fast"), 2) << log;

    const RunResult single =
        runVoxseg({"segment", (dir.path() / "ct0.nii.gz").string(), "-m", pkg.string(), "-o",
                   (dir.path() / "single").string(), "--device", "cpu", "--outputs", "nifti"},
                  dir);
    ASSERT_EQ(single.exit_code, 0) << single.err;
    auto ref = io::readImage((dir.path() / "single" / "segmentation.nii.gz").string());
    ASSERT_TRUE(ref.isOk()) << ref.status().toString();
    for (int i = 0; i < 4; ++i) {
        auto got = io::readImage(
            (dir.path() / "out" / ("case" + std::to_string(i)) / "segmentation.nii.gz").string());
        ASSERT_TRUE(got.isOk()) << got.status().toString();
        ASSERT_EQ(got->geometry().voxelCount(), ref->geometry().voxelCount());
        const Volume a = got->castTo(PixelType::kUInt8), b = ref->castTo(PixelType::kUInt8);
        int64_t differ = 0;
        for (int64_t v = 0; v < a.geometry().voxelCount(); ++v)
            differ += a.data<uint8_t>()[v] != b.data<uint8_t>()[v];
        EXPECT_EQ(differ, 0) << "case" << i;
    }
}

}  // namespace
}  // namespace voxseg::app::clitest
