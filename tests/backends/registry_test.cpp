// The backend registry: names, "auto" selection with a stated fallback, clear errors.
#include "backends/registry.h"
#include "core/log.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

namespace voxseg::engine {
namespace {

TEST(Registry, ListsBackendsBestFirstWithReferenceLast) {
    const auto names = availableBackends();
    ASSERT_FALSE(names.empty());
    EXPECT_EQ(names.back(), "reference");
    EXPECT_NE(std::find(names.begin(), names.end(), "cpu"), names.end());  // oneDNN is required
    for (const std::string& n : names) {
        auto b = createBackend(n);
        if (!b) {  // only a GPU backend may be listed yet unusable (no device here)
            EXPECT_EQ(n, "cuda") << b.status().toString();
            continue;
        }
        EXPECT_EQ((*b)->name(), n);
        EXPECT_TRUE((*b)->supportsPrecision(Precision::kFloat32));
        EXPECT_FALSE((*b)->deviceDescription().empty());
    }
}

// Records what reaches the log while it lives.
class CapturedLog : public log::Sink {
  public:
    void write(const log::Record& r) override { records.push_back(r); }
    std::vector<log::Record> records;
};

// Auto picks the best usable backend. Skipping one is said once: on a machine with no GPU at all
// (no NVIDIA device) as one info line, never as the caller's warning (issue 39: "every run warns
// about CUDA to a user without a GPU"); a GPU that exists but fails stays a warning.
TEST(Registry, AutoPicksTheBestUsableBackendAndSaysWhyItSkippedOne) {
    auto captured = std::make_shared<CapturedLog>();
    auto previous = log::setSink(captured);
    std::string warning;
    auto b = createBackend("auto", &warning);
    log::setSink(previous);
    ASSERT_TRUE(b.isOk()) << b.status().toString();
    const auto names = availableBackends();
    const bool cuda_listed = std::find(names.begin(), names.end(), "cuda") != names.end();
    const auto cuda = cuda_listed ? createBackend("cuda")
                                  : Result<std::unique_ptr<Backend>>(notFound("not built", "cuda"));
    EXPECT_EQ((*b)->name(), cuda.isOk() ? "cuda" : "cpu");
    std::vector<std::string> info_lines;
    for (const log::Record& r : captured->records)
        if (r.level == log::Level::kInfo && (r.message.find("using cpu") != std::string::npos ||
                                             r.message.find("on the CPU") != std::string::npos))
            info_lines.push_back(r.message);
    if (!cuda_listed || cuda.isOk()) {
        EXPECT_TRUE(warning.empty()) << warning;
        EXPECT_TRUE(info_lines.empty());
    } else if (!std::filesystem::exists("/dev/nvidia0") &&
               !std::filesystem::exists("/proc/driver/nvidia")) {
        // No NVIDIA device on this machine (CI, this build host): nothing to warn about.
        std::cout << "no GPU here (" << cuda.status().message() << "): one info line\n";
        EXPECT_TRUE(warning.empty()) << warning;
        ASSERT_EQ(info_lines.size(), 1u);
        EXPECT_EQ(info_lines[0], "no CUDA device: running on the CPU");
        // Once per process: a second auto pick (the next model run) says nothing at info level.
        log::setSink(captured);
        EXPECT_TRUE(createBackend("auto", &warning).isOk());
        log::setSink(previous);
        size_t info = 0;
        for (const log::Record& r : captured->records) info += r.level == log::Level::kInfo;
        EXPECT_EQ(info, 1u);
        EXPECT_TRUE(warning.empty()) << warning;
    } else {
        EXPECT_NE(warning.find("cuda"), std::string::npos) << warning;
        EXPECT_NE(warning.find("using cpu"), std::string::npos) << warning;
    }
}

TEST(Registry, UnknownNameIsInvalidAndListsTheChoices) {
    auto b = createBackend("tpu");
    ASSERT_FALSE(b.isOk());
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(b.status().message().find("reference"), std::string::npos);
    EXPECT_NE(b.status().message().find("auto"), std::string::npos);
    EXPECT_NE(b.status().message().find("cuda:N"), std::string::npos);
}

// Device names are parsed here and nowhere else (segment, batch and the viewer use DeviceSpec).
TEST(Registry, ParsesEveryDeviceNameAndRoundTrips) {
    EXPECT_EQ(*parseDevice("auto"), DeviceSpec::automatic());
    EXPECT_EQ(*parseDevice("cpu"), DeviceSpec::cpu());
    EXPECT_EQ(*parseDevice("reference"), DeviceSpec::reference());
    EXPECT_EQ(*parseDevice("cuda"), DeviceSpec::cuda(0));
    EXPECT_EQ(*parseDevice("cuda:3"), DeviceSpec::cuda(3));
    for (const char* name : {"auto", "cpu", "reference", "cuda:0", "cuda:12"})
        EXPECT_EQ(parseDevice(name)->toString(), name);
    for (const char* bad : {"", "CPU", "gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1234", "cuda0"}) {
        auto d = parseDevice(bad, "--devices");
        ASSERT_FALSE(d.isOk()) << bad;
        EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << bad;
        EXPECT_NE(d.status().message().find("--devices"), std::string::npos) << bad;
    }
}

// A named backend that is not compiled in is kNotFound, not a parse error.
TEST(Registry, CudaWithoutTheBackendIsNotFoundOrADeviceError) {
    const auto names = availableBackends();
    auto b = createBackend(DeviceSpec::cuda(1));
    if (b.isOk()) return;  // a machine with two GPUs
    if (std::find(names.begin(), names.end(), "cuda") == names.end())
        EXPECT_EQ(b.status().code(), StatusCode::kNotFound) << b.status().toString();
    else
        EXPECT_TRUE(b.status().code() == StatusCode::kNotFound ||
                    b.status().code() == StatusCode::kDeviceError)
            << b.status().toString();
}

}  // namespace
}  // namespace voxseg::engine
