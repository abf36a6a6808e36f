#include "core/file_io.h"

#include "tests/test_data.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

namespace voxseg {
namespace {

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

TEST(ReadFileBytes, ReadsBinaryContentWhole) {
    testing::TempDir dir;
    const std::string path = dir / "bytes.bin";
    std::string data(100000, '\0');
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
    std::ofstream(path, std::ios::binary) << data;
    auto r = readFileBytes(path);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(*r, data);
    std::ofstream(path, std::ios::binary | std::ios::trunc).flush();
    r = readFileBytes(path);
    ASSERT_TRUE(r.isOk());
    EXPECT_TRUE(r->empty());
}

TEST(ReadFileBytes, MissingFileIsNotFoundNamingFileAndReason) {
    testing::TempDir dir;
    const std::string path = dir / "absent.json";
    auto r = readFileBytes(path, "the label sidecar");
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
    const std::string text = r.status().toString();
    EXPECT_TRUE(contains(text, "absent.json")) << text;
    EXPECT_TRUE(contains(text, "the label sidecar")) << text;
    EXPECT_TRUE(contains(text, std::strerror(ENOENT))) << text;
}

TEST(ReadFileBytes, FolderIsAnIoError) {
    testing::TempDir dir;
    auto r = readFileBytes(dir.path().string(), "the manifest");
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kIoError);
    EXPECT_TRUE(contains(r.status().toString(), std::strerror(EISDIR))) << r.status().toString();
}

TEST(ReadFileBytes, OversizedFileRefusedBeforeReading) {
    testing::TempDir dir;
    const std::string path = dir / "huge.csv";
    std::ofstream(path) << "x";
    // Sparse: 64 GiB would take minutes (and the memory) to read; the cap must stop it first.
    ASSERT_EQ(::truncate(path.c_str(), off_t{64} << 30), 0);
    auto r = readFileBytes(path, "manifest", {uint64_t{1} << 20, "split it"});
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    const std::string text = r.status().toString();
    EXPECT_TRUE(contains(text, "limit 1048576 bytes: split it")) << text;
    EXPECT_TRUE(contains(text, std::to_string(uint64_t{64} << 30))) << text;
    EXPECT_TRUE(contains(text, "huge.csv")) << text;
    ASSERT_EQ(::truncate(path.c_str(), 1 << 20), 0);  // exactly at the cap: read
    r = readFileBytes(path, "manifest", {uint64_t{1} << 20, {}});
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r->size(), size_t{1} << 20);
}

TEST(ReadFileBytes, ReadsFilesWhoseSizeIsNotReported) {
    auto r = readFileBytes("/proc/self/status");  // st_size 0, content > 1 KiB
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_TRUE(contains(*r, "VmRSS")) << r->size();
}

TEST(WriteAllBytes, WritesEverythingAndReportsErrno) {
    testing::TempDir dir;
    const std::string path = dir / "out.bin";
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    const std::string data(300000, 'v');
    size_t written = 0;
    EXPECT_EQ(writeAllBytes(fd, data.data(), data.size(), &written), 0);
    EXPECT_EQ(written, data.size());
    ::close(fd);
    EXPECT_EQ(*readFileBytes(path), data);
    EXPECT_EQ(writeAllBytes(fd, data.data(), data.size(), &written), EBADF);  // closed
    EXPECT_EQ(errno, EBADF);
    EXPECT_EQ(written, 0u);
}

void onAlarm(int) {}

// A blocking pipe write interrupted by a signal returns short (or EINTR when nothing went
// through); writeAllBytes must carry on until every byte is in.
TEST(WriteAllBytes, RetriesInterruptedAndShortWrites) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    struct sigaction sa {
    }, old{};
    sa.sa_handler = onAlarm;  // no SA_RESTART: the write sees the signal
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(::sigaction(SIGALRM, &sa, &old), 0);
    std::string received;
    std::thread reader([&] {
        sigset_t alarm;  // the signals go to the writing thread
        sigemptyset(&alarm);
        sigaddset(&alarm, SIGALRM);
        pthread_sigmask(SIG_BLOCK, &alarm, nullptr);
        char buf[4096];
        for (;;) {
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            const ssize_t n = ::read(fds[0], buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            received.append(buf, static_cast<size_t>(n));
        }
    });
    itimerval every_ms{{0, 1000}, {0, 1000}};
    ASSERT_EQ(::setitimer(ITIMER_REAL, &every_ms, nullptr), 0);
    std::string data(2 << 20, '\0');
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i % 251);
    size_t written = 0;
    const int err = writeAllBytes(fds[1], data.data(), data.size(), &written);
    itimerval off{};
    ::setitimer(ITIMER_REAL, &off, nullptr);
    ::close(fds[1]);
    reader.join();
    ::close(fds[0]);
    ::sigaction(SIGALRM, &old, nullptr);
    EXPECT_EQ(err, 0);
    EXPECT_EQ(written, data.size());
    EXPECT_TRUE(received == data) << received.size() << " of " << data.size() << " bytes";
}

}  // namespace
}  // namespace voxseg
