// The backend registry: names, "auto" selection with a stated fallback, clear errors.
#include "engine/registry.h"

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

TEST(Registry, UnknownNameIsNotFoundAndListsTheChoices) {
    auto b = createBackend("tpu");
    ASSERT_FALSE(b.isOk());
    EXPECT_EQ(b.status().code(), StatusCode::kNotFound);
    EXPECT_NE(b.status().message().find("reference"), std::string::npos);
    EXPECT_NE(b.status().message().find("auto"), std::string::npos);
}

}  // namespace
}  // namespace voxseg::engine
