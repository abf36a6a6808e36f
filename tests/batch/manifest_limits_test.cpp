// Batch manifest limits (issue 19 part 3): a generated manifest of a million rows (the limit) is
// read within a measured memory budget, one row more is refused naming the manifest, the line
// and the limit; so is a JSON lines manifest over a lowered limit and a file over the byte limit
// (a sparse file, refused before it is read).
#include "batch/manifest.h"
#include "core/limits.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

namespace voxseg::batch {
namespace {
using voxseg::testing::TempDir;

long maxRssMb() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss / 1024;
}

std::string writeCsv(const TempDir& dir, size_t rows) {
    const std::string path = dir / "cases.csv";
    std::ofstream out(path);
    out << "case_id,input\n";
    for (size_t i = 0; i < rows; ++i) out << "case" << i << ",in/c" << i << ".nii.gz\n";
    return path;
}

TEST(ManifestLimits, MillionRowsReadWithinMemoryOneMoreRefused) {
    TempDir dir;
    const size_t rows = kMaxManifestRows;
    const long before = maxRssMb();
    const auto t0 = std::chrono::steady_clock::now();
    {
        auto cases = readManifest(writeCsv(dir, rows));
        ASSERT_TRUE(cases.isOk()) << cases.status().toString();
        EXPECT_EQ(cases->size(), rows);
        EXPECT_EQ(cases->back().id, "case" + std::to_string(rows - 1));
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const long grown = maxRssMb() - before;
    std::cout << rows << " rows read in " << s << " s, peak RSS grew by " << grown << " MB\n";
    EXPECT_LT(grown, 1024) << "a million-row manifest should not take a gigabyte";

    auto over = readManifest(writeCsv(dir, rows + 1));
    ASSERT_FALSE(over.isOk());
    const std::string msg = over.status().toString();
    EXPECT_NE(msg.find("cases.csv:" + std::to_string(rows + 2)), std::string::npos) << msg;
    EXPECT_NE(msg.find("limit " + std::to_string(rows) + " rows"), std::string::npos) << msg;
}

TEST(ManifestLimits, JsonLinesOverLoweredLimitRefused) {
    TempDir dir;
    std::ofstream(dir / "cases.jsonl") << R"({"case_id":"a","input":"a.nii.gz"})"
                                       << "\n"
                                       << R"({"case_id":"b","input":"b.nii.gz"})"
                                       << "\n"
                                       << R"({"case_id":"c","input":"c.nii.gz"})"
                                       << "\n";
    EXPECT_TRUE(readManifest(dir / "cases.jsonl", 3).isOk());
    auto over = readManifest(dir / "cases.jsonl", 2);
    ASSERT_FALSE(over.isOk());
    EXPECT_NE(over.status().toString().find("cases.jsonl:3"), std::string::npos);
    EXPECT_NE(over.status().toString().find("limit 2 rows"), std::string::npos);
}

TEST(ManifestLimits, OversizedFileRefusedBeforeReading) {
    TempDir dir;
    const std::string path = dir / "huge.csv";
    std::ofstream(path) << "case_id,input\n";
    ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(kMaxManifestBytes + 1)), 0);
    auto r = readManifest(path);
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().toString().find("huge.csv"), std::string::npos);
    EXPECT_NE(r.status().toString().find("limit " + std::to_string(kMaxManifestBytes)),
              std::string::npos)
        << r.status().toString();
}

}  // namespace
}  // namespace voxseg::batch
