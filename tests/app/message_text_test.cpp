// Issue 35 item 7: a doubled ": :" in messages. Ten callers gave Status::withContext a context
// that ends in ": " ("loading NAME: ", "flood_fill: ", "DICOM SEG PATH: ", "channel T2: ") and
// withContext added its own. Two of them through the CLI, each message checked whole:
// `convert` of a series with a damaged RLE slice ("loading series UID [0]: : frame 1: RLE ...")
// and `edit` with a flood fill seeded outside the image ("flood_fill: : seed_mm ...").
#include "tests/app/run_voxseg.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

namespace voxseg::app {
namespace {
namespace fs = std::filesystem;
using clitest::quote;
using clitest::runShell;
using clitest::runVoxseg;
using voxseg::testing::TempDir;

std::string readAll(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(MessageText, DamagedSliceOfASeriesIsNamedWithOneColon) {
    TempDir dir;
    if (runShell("command -v dcmcrle", dir).exit_code != 0)
        GTEST_SKIP() << "dcmcrle (DCMTK, scripts/deps.sh) not installed";
    const fs::path study = dir / "study";
    auto r = runVoxseg({"synth", study.string(), "--size", "40x36x10"}, dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // One slice RLE-compressed, then its RLE header claims 15 segments where 2 are expected: the
    // header scan accepts it, decoding the pixels does not.
    const fs::path slice = study / "CT0003", rle = dir / "rle.dcm";
    ASSERT_TRUE(fs::exists(slice));
    r = runShell("dcmcrle " + quote(slice.string()) + " " + quote(rle.string()), dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string bytes = readAll(rle);
    const size_t item = bytes.rfind(std::string("\xfe\xff\x00\xe0", 4));
    ASSERT_NE(item, std::string::npos);
    ASSERT_LT(item + 12, bytes.size());
    bytes[item + 8] = 15;
    std::ofstream(slice, std::ios::binary | std::ios::trunc) << bytes;

    r = runVoxseg({"convert", study.string(), "-o", dir / "out.nii.gz"}, dir);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_TRUE(std::regex_search(
        r.err, std::regex(R"(: loading series [0-9.]+ \[0\]: frame 1: RLE data has 15 segments)")))
        << r.err;
    EXPECT_EQ(r.err.find(": :"), std::string::npos) << r.err;
}

TEST(MessageText, EditOpThatFailsIsNamedWithOneColon) {
    TempDir dir;
    const fs::path study = dir / "phantom";
    auto r = runVoxseg({"phantom", study.string(), "--size", "48x48x12"}, dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const fs::path ops = dir / "ops.jsonl";
    std::ofstream(ops) << R"({"op":"flood_fill","label":1,"seed_mm":[9999,9999,9999],)"
                       << R"("min":-2000,"max":3000})"
                       << "\n";
    r = runVoxseg(
        {"edit", (study / "dicom").string(), "--labels", (study / "labels.nii.gz").string(),
         "--ops", ops.string(), "-o", dir / "edited.nii.gz"},
        dir);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("line 1: flood_fill: seed_mm [9999, 9999, 9999] is outside the image"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find(": :"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace voxseg::app
