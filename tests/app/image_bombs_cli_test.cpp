// `voxseg convert` on image bombs (issue 35, "memory only after trust") under a memory cap
// (tests/io/memory_cap.h: a memory cgroup, `systemd-run --user --scope -p MemoryMax=`, or
// `ulimit -v`), so that a failure is the kernel stopping voxseg, not the machine: the issue's
// 1,376-byte .nii claiming 1250^3 float64 is exit 5 at once with a small peak RSS (before: 15.4 GB
// for 40 s), a .nii.gz whose stream could hold that claim is exit 9 with advice (before: killed,
// exit 137). And item 7: a .nrrd that cannot be written names the output and the system error.
#include "app/exit_codes.h"
#include "tests/app/run_voxseg.h"
#include "tests/io/memory_cap.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace voxseg::app {
namespace {
namespace fs = std::filesystem;
using clitest::quote;
using clitest::runShell;
using clitest::runVoxseg;
using voxseg::testing::MemoryCgroup;
using voxseg::testing::TempDir;

constexpr uint64_t kCap = uint64_t{2} << 30;  // MemoryMax=2G, as the issue asks
constexpr int kBomb = 1250;                   // 1250^3 float64 = 15.6 GB

std::string niftiHeader(int n, int16_t datatype, int16_t bitpix) {
    std::string h(352, '\0');
    auto put16 = [&](int off, int16_t v) { std::memcpy(&h[off], &v, 2); };
    auto putf = [&](int off, float v) { std::memcpy(&h[off], &v, 4); };
    const int32_t size = 348;
    std::memcpy(&h[0], &size, 4);
    put16(40, 3);
    for (int d = 1; d <= 3; ++d) put16(40 + 2 * d, static_cast<int16_t>(n));
    for (int d = 4; d <= 7; ++d) put16(40 + 2 * d, 1);
    put16(70, datatype);
    put16(72, bitpix);
    for (int d = 0; d <= 3; ++d) putf(76 + 4 * d, 1.0f);
    putf(108, 352.0f);
    putf(112, 1.0f);
    h[123] = 10;
    put16(252, 1);
    std::memcpy(&h[344], "n+1", 4);
    return h;
}

std::string randomBytes(size_t n) {
    std::mt19937 rng(35);
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
}

std::string gzip(const std::string& path, const std::string& data) {
    gzFile f = gzopen(path.c_str(), "wb1");
    EXPECT_NE(f, nullptr);
    for (size_t done = 0; done < data.size();) {
        const auto n = static_cast<unsigned>(std::min<size_t>(data.size() - done, 1 << 22));
        gzwrite(f, data.data() + done, n);
        done += n;
    }
    gzclose(f);
    return path;
}

struct Measured {
    bool capped = true;  // false: no way to cap memory here (the run did not happen)
    clitest::RunResult run;
    int64_t peak_rss_kib = -1;  // from /usr/bin/time -f %M; -1 where it is not installed
};

// `voxseg args...` capped at kCap, its peak RSS measured by /usr/bin/time when installed (the
// last line of stderr).
Measured convertCapped(const std::vector<std::string>& args, const TempDir& dir,
                       const MemoryCgroup& cgroup) {
    std::string how;
    const std::string prefix = voxseg::testing::cappedShellPrefix(cgroup, kCap, &how);
    if (prefix.empty()) {
        std::cerr << "[no memory cap: " << how << "]\n";
        return Measured{.capped = false};
    }
    const bool timed = fs::exists("/usr/bin/time");
    std::string cmd =
        prefix + (timed ? " /usr/bin/time -f 'PEAK_RSS_KIB %M' " : " ") + quote(VOXSEG_BIN);
    for (const auto& a : args) cmd += " " + quote(a);
    Measured m;
    m.run = runShell(cmd, dir);
    const size_t at = m.run.err.rfind("PEAK_RSS_KIB ");
    if (at != std::string::npos) m.peak_rss_kib = std::stoll(m.run.err.substr(at + 13));
    std::cerr << "[memory cap 2 GiB: " << how << "] exit " << m.run.exit_code << ", peak RSS "
              << (m.peak_rss_kib >> 10) << " MiB: " << m.run.err << "\n";
    return m;
}

// The peak RSS of a `voxseg convert` that reads nothing (a missing input): the process's own
// baseline (libraries, allocator; about 240 MB in a release build, more under sanitizers). A
// refusal before allocation costs no more than this and a little.
int64_t baselineRssKib(const TempDir& dir, const MemoryCgroup& cgroup) {
    const auto m =
        convertCapped({"convert", dir / "missing.nii", "-o", dir / "none.nii.gz"}, dir, cgroup);
    return m.peak_rss_kib;
}
constexpr int64_t kRefusalOverBaselineKib = 64 * 1024;

// The file. Before: exit 5 after holding 15.4 GB for 40 s (under a 2 GiB cgroup: killed).
TEST(ImageBombsCli, TruncatedNiftiClaiming15GBIsRefusedAtOnce) {
    TempDir dir;
    MemoryCgroup cgroup(kCap);
    const std::string bomb = dir / "bomb.nii";
    std::ofstream(bomb, std::ios::binary) << niftiHeader(kBomb, 64, 64) << randomBytes(1024);
    ASSERT_EQ(fs::file_size(bomb), 1376u);
    const auto m = convertCapped({"convert", bomb, "-o", dir / "out.nii.gz"}, dir, cgroup);
    if (!m.capped) GTEST_SKIP() << "no memory cap here (see above)";
    EXPECT_EQ(m.run.exit_code, toInt(ExitCode::kUnsupportedInput)) << m.run.err;
    EXPECT_NE(m.run.err.find("truncated"), std::string::npos) << m.run.err;
    EXPECT_NE(m.run.err.find("bomb.nii"), std::string::npos) << m.run.err;
    if (m.peak_rss_kib >= 0)
        EXPECT_LT(m.peak_rss_kib, baselineRssKib(dir, cgroup) + kRefusalOverBaselineKib);
    EXPECT_FALSE(fs::exists(dir / "out.nii.gz"));
}

// A 16 MB .nii.gz claiming 1250^3 float64 (under --max-voxels; a stream of this size could
// inflate to it) under MemoryMax=2G: exit 9, naming the claim, the limit and what to do. Before:
// ITK allocated it and the kernel killed voxseg (exit 137).
TEST(ImageBombsCli, NiftiGzClaimOverTheMemoryLimitIsExit9WithAdvice) {
    TempDir dir;
    MemoryCgroup cgroup(kCap);
    const std::string bomb =
        gzip(dir / "bomb.nii.gz", niftiHeader(kBomb, 64, 64) + randomBytes(16u << 20));
    const auto m = convertCapped({"convert", bomb, "-o", dir / "out.nii.gz"}, dir, cgroup);
    if (!m.capped) GTEST_SKIP() << "no memory cap here (see above)";
    EXPECT_EQ(m.run.exit_code, toInt(ExitCode::kOutOfMemory)) << m.run.err;
    EXPECT_NE(m.run.err.find("1250 x 1250 x 1250"), std::string::npos) << m.run.err;
    EXPECT_NE(m.run.err.find("GiB of memory"), std::string::npos) << m.run.err;
    EXPECT_NE(m.run.err.find("run it where more memory is free"), std::string::npos) << m.run.err;
    if (m.peak_rss_kib >= 0)
        EXPECT_LT(m.peak_rss_kib, baselineRssKib(dir, cgroup) + kRefusalOverBaselineKib);
}

// --max-inflated-bytes bounds a .nii.gz's stream too (before: deflated DICOM only).
TEST(ImageBombsCli, MaxInflatedBytesRefusesACompressedImage) {
    TempDir dir;
    MemoryCgroup cgroup(kCap);
    const std::string img =
        gzip(dir / "small.nii.gz", niftiHeader(32, 2, 8) + std::string(32 * 32 * 32, '\1'));
    const auto lowered = convertCapped(
        {"convert", img, "-o", dir / "out.nrrd", "--max-inflated-bytes", "16384"}, dir, cgroup);
    if (!lowered.capped) GTEST_SKIP() << "no memory cap here (see above)";
    EXPECT_EQ(lowered.run.exit_code, toInt(ExitCode::kUnsupportedInput)) << lowered.run.err;
    EXPECT_NE(lowered.run.err.find("--max-inflated-bytes"), std::string::npos) << lowered.run.err;
    const auto fine = convertCapped({"convert", img, "-o", dir / "out.nrrd"}, dir, cgroup);
    EXPECT_EQ(fine.run.exit_code, 0) << fine.run.err;
}

// Issue 35 item 7: a .nrrd write that fails names the output asked for (not the temporary file
// beside it) and the system's reason. A 64 KiB tmpfs in a private mount namespace is a full
// disk (needs unprivileged user namespaces or root; skipped otherwise).
TEST(ImageBombsCli, NrrdWriteErrorNamesTheOutputAndTheSystemError) {
    TempDir dir;
    if (std::system("unshare -rm true >/dev/null 2>&1") != 0)
        GTEST_SKIP() << "cannot create a mount namespace (unshare -rm) here";
    const std::string img =
        gzip(dir / "in.nii.gz", niftiHeader(64, 2, 8) + randomBytes(64 * 64 * 64));
    const std::string mnt = dir / "mnt";
    fs::create_directories(mnt);
    const std::string out = mnt + "/out.nrrd";
    const std::string script = "mount -t tmpfs -o size=64k tmpfs " + quote(mnt) + " && " +
                               quote(VOXSEG_BIN) + " convert " + quote(img) + " -o " + quote(out) +
                               "; rc=$?; echo LEFT:; ls -A " + quote(mnt) + "; exit $rc";
    const auto r = runShell("unshare -rm sh -c " + quote(script), dir);
    EXPECT_EQ(r.exit_code, toInt(ExitCode::kOutputNotWritable)) << r.err;
    EXPECT_NE(r.err.find(out), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(".tmp"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "LEFT:\n") << r.out;
}

// The same through a file size limit (ulimit -f): "File too large". Not under AddressSanitizer,
// whose runtime the limit stops (tests/app/segment_cli_test.cpp says how).
TEST(ImageBombsCli, NrrdWriteOverTheFileSizeLimitNamesTheOutputAndTheSystemError) {
    if (voxseg::testing::underAddressSanitizer())
        GTEST_SKIP() << "ulimit -f stops the sanitizer runtime itself; runs in the normal build";
    TempDir dir;
    const std::string img =
        gzip(dir / "in.nii.gz", niftiHeader(64, 2, 8) + randomBytes(64 * 64 * 64));
    const std::string out = dir / "out.nrrd";
    const auto r = runShell("( ulimit -f 64; " + quote(VOXSEG_BIN) + " convert " + quote(img) +
                                " -o " + quote(out) + " 2>&1; echo \"exit $?\" ) | cat",
                            dir);
    EXPECT_NE(r.out.find("exit " + std::to_string(toInt(ExitCode::kOutputNotWritable))),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find(out), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("File too large"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(".tmp"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace voxseg::app
