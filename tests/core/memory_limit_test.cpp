// memoryLimitBytes: the lower of physical memory and a cgroup v2 / v1 limit, read from fake
// cgroup file systems in a temporary folder.
#include "core/memory_limit.h"

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace voxseg {
namespace {

namespace fs = std::filesystem;

class MemoryLimit : public ::testing::Test {
  protected:
    void SetUp() override {
        root_ = fs::temp_directory_path() / ("voxseg-cgroup-" + std::to_string(getpid()));
        fs::remove_all(root_);
        fs::create_directories(root_ / "memory");
    }
    void TearDown() override { fs::remove_all(root_); }
    void write(const fs::path& rel, const std::string& text) { std::ofstream(root_ / rel) << text; }
    fs::path root_;
};

constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST_F(MemoryLimit, NoCgroupFilesGivePhysicalMemory) {
    EXPECT_EQ(memoryLimitBytes(root_, 64 * kGiB), 64 * kGiB);
    EXPECT_EQ(memoryLimitBytes(root_, 0), 0u);
}

TEST_F(MemoryLimit, CgroupV2LimitBelowPhysicalWins) {
    write("memory.max", std::to_string(8 * kGiB) + "\n");
    EXPECT_EQ(memoryLimitBytes(root_, 64 * kGiB), 8 * kGiB);
    EXPECT_EQ(memoryLimitBytes(root_, 4 * kGiB), 4 * kGiB);  // the lower of the two
    EXPECT_EQ(memoryLimitBytes(root_, 0), 8 * kGiB);
}

TEST_F(MemoryLimit, CgroupV2MaxMeansNoLimit) {
    write("memory.max", "max\n");
    EXPECT_EQ(memoryLimitBytes(root_, 64 * kGiB), 64 * kGiB);
}

TEST_F(MemoryLimit, CgroupV1LimitAndItsNoLimitValue) {
    write("memory/memory.limit_in_bytes", std::to_string(2 * kGiB) + "\n");
    EXPECT_EQ(memoryLimitBytes(root_, 64 * kGiB), 2 * kGiB);
    write("memory/memory.limit_in_bytes", "9223372036854771712\n");  // v1's "unlimited"
    EXPECT_EQ(memoryLimitBytes(root_, 64 * kGiB), 64 * kGiB);
}

TEST_F(MemoryLimit, GarbageIsIgnored) {
    write("memory.max", "12abc\n");
    write("memory/memory.limit_in_bytes", "99999999999999999999999\n");
    EXPECT_EQ(memoryLimitBytes(root_, 64 * kGiB), 64 * kGiB);
}

// Issue 35: a process in a child cgroup (a systemd scope with MemoryMax=, a Slurm step) is held
// to that cgroup's limit, which the root of the hierarchy does not show.
TEST_F(MemoryLimit, OwnCgroupV2AndItsParentsCount) {
    fs::create_directories(root_ / "user.slice" / "test.scope");
    write("user.slice/memory.max", std::to_string(8 * kGiB) + "\n");
    write("user.slice/test.scope/memory.max", std::to_string(2 * kGiB) + "\n");
    EXPECT_EQ(memoryLimitBytes(root_, 64 * kGiB, "0::/user.slice/test.scope\n"), 2 * kGiB);
    write("user.slice/test.scope/memory.max", "max\n");
    EXPECT_EQ(memoryLimitBytes(root_, 64 * kGiB, "0::/user.slice/test.scope\n"), 8 * kGiB);
    EXPECT_EQ(memoryLimitBytes(root_, 64 * kGiB), 64 * kGiB);  // the root alone has none
}

TEST_F(MemoryLimit, OwnCgroupV1MemoryController) {
    fs::create_directories(root_ / "memory" / "jobs" / "42");
    write("memory/memory.limit_in_bytes", "9223372036854771712\n");
    write("memory/jobs/42/memory.limit_in_bytes", std::to_string(2 * kGiB) + "\n");
    const std::string self = "9:name=systemd:/\n4:memory:/jobs/42\n1:cpu,cpuacct:/\n0::/\n";
    EXPECT_EQ(memoryLimitBytes(root_, 64 * kGiB, self), 2 * kGiB);
}

TEST_F(MemoryLimit, OwnCgroupNotMountedHereCountsTheRootOnly) {
    write("memory.max", std::to_string(4 * kGiB) + "\n");
    EXPECT_EQ(memoryLimitBytes(root_, 64 * kGiB, "0::/docker/abc\n"), 4 * kGiB);
    EXPECT_EQ(memoryLimitBytes(root_, 64 * kGiB, "0::/../../etc\n"), 4 * kGiB);
}

// Issue 35: an address-space limit (ulimit -v; the fallback cap of the bomb tests) counts: an
// allocation beyond it fails, so a plan beyond it is refused like one beyond a cgroup's limit.
TEST(MemoryLimitOfThisProcess, AddressSpaceLimitCounts) {
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
    GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space: no RLIMIT_AS under it";
#endif
#endif
    const pid_t pid = fork();
    if (pid == 0) {
        const rlimit r{kGiB, kGiB};
        if (setrlimit(RLIMIT_AS, &r) != 0) _exit(2);
        const bool ok = memoryLimitBytes() <= kGiB &&
                        describeMemoryLimit().find("ulimit -v") != std::string::npos;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(MemoryLimitOfThisProcess, IsKnownAndAtMostPhysicalMemory) {
    const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
    const uint64_t limit = memoryLimitBytes();
    EXPECT_GT(limit, 0u);
    EXPECT_LE(static_cast<double>(limit), physical);
    EXPECT_NE(describeMemoryLimit().find("GiB of memory"), std::string::npos);
}

}  // namespace
}  // namespace voxseg
