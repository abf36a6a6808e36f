#include "core/atomic_file.h"

#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace voxseg {
namespace {

std::string readAll(const std::string& path) {
    std::ifstream f(path);
    return {std::istreambuf_iterator<char>(f), {}};
}

TEST(AtomicFile, UncommittedWriteLeavesExistingFileUntouched) {
    testing::TempDir dir;
    const std::string target = dir / "out.txt";
    std::ofstream(target) << "old";
    {
        AtomicFile f(target);
        std::ofstream(f.tempPath()) << "half";
        // no commit: simulated failure
    }
    EXPECT_EQ(readAll(target), "old");
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

TEST(AtomicFile, CommitReplacesTarget) {
    testing::TempDir dir;
    const std::string target = dir / "out.txt";
    AtomicFile f(target);
    ASSERT_TRUE(f.checkWritable().isOk());
    std::ofstream(f.tempPath()) << "new";
    ASSERT_TRUE(f.commit().isOk());
    EXPECT_EQ(readAll(target), "new");
}

TEST(AtomicFile, MissingFolderIsAClearError) {
    AtomicFile f("/nonexistent-voxseg-dir/out.nii.gz");
    Status s = f.checkWritable();
    EXPECT_EQ(s.code(), StatusCode::kIoError);
    EXPECT_NE(s.toString().find("/nonexistent-voxseg-dir/out.nii.gz"), std::string::npos);
}

}  // namespace
}  // namespace voxseg
