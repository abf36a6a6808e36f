// The backend registry: names, "auto" selection with a stated fallback, clear errors.
#include "backends/registry.h"

#include <gtest/gtest.h>

#include <algorithm>

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

TEST(Registry, AutoPicksTheBestUsableBackendAndSaysWhyItSkippedOne) {
    std::string warning;
    auto b = createBackend("auto", &warning);
    ASSERT_TRUE(b.isOk()) << b.status().toString();
    const auto names = availableBackends();
    const bool cuda_listed = std::find(names.begin(), names.end(), "cuda") != names.end();
    const bool cuda_usable = cuda_listed && createBackend("cuda").isOk();
    EXPECT_EQ((*b)->name(), cuda_usable ? "cuda" : "cpu");
    if (cuda_listed && !cuda_usable) {
        EXPECT_NE(warning.find("cuda"), std::string::npos) << warning;
        EXPECT_NE(warning.find("using cpu"), std::string::npos) << warning;
    } else {
        EXPECT_TRUE(warning.empty()) << warning;
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
