// Model package limits (issue 19 part 3): an ONNX file larger than the limit is refused before
// it is read (a sparse 3 GB file: no time, no memory), a graph with more nodes than the limit
// right after parsing, a model.json listing thousands of labels or ONNX files when it is read.
// Each message names the input, the claim and the limit. The limits are OnnxImportOptions
// fields (defaults in core/limits.h); the tests lower them on the real golden PlainConvUNet.
#include "core/limits.h"
#include "engine/model/model_package.h"
#include "engine/onnx/import.h"
#include "tests/pipeline/test_model_package.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

namespace voxseg::engine {
namespace {
namespace fs = std::filesystem;
using voxseg::testing::TempDir;

const fs::path kGolden = fs::path(VOXSEG_SOURCE_DIR) / "tests/engine/golden/nnunet_plain.onnx";

void expectNames(const Status& s, const std::vector<std::string>& parts) {
    for (const auto& p : parts) EXPECT_NE(s.toString().find(p), std::string::npos) << s.toString();
}

TEST(ModelLimits, OversizedOnnxRefusedBeforeReading) {
    TempDir dir;
    const std::string big = dir / "huge.onnx";
    { std::ofstream(big) << ""; }
    ASSERT_EQ(truncate(big.c_str(), off_t{3} << 30), 0);  // sparse: 3 GiB, no blocks
    const auto t0 = std::chrono::steady_clock::now();
    auto g = importOnnx(big);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_FALSE(g.isOk());
    expectNames(g.status(),
                {"huge.onnx", "3221225472 bytes", "limit " + std::to_string(kMaxModelFileBytes)});
    EXPECT_LT(s, 0.5) << "the file was read";
    // The real network against a limit one byte below its size, then at its size.
    OnnxImportOptions options;
    options.max_file_bytes = fs::file_size(kGolden) - 1;
    g = importOnnx(kGolden, options);
    ASSERT_FALSE(g.isOk());
    expectNames(g.status(),
                {"nnunet_plain.onnx", "limit " + std::to_string(options.max_file_bytes)});
    options.max_file_bytes += 1;
    EXPECT_TRUE(importOnnx(kGolden, options).isOk());
}

TEST(ModelLimits, GraphWithTooManyNodesRefused) {
    auto all = importOnnx(kGolden);
    ASSERT_TRUE(all.isOk()) << all.status().toString();
    OnnxImportOptions options;
    options.max_nodes = 5;
    auto g = importOnnx(kGolden, options);
    ASSERT_FALSE(g.isOk());
    expectNames(g.status(), {"nnunet_plain.onnx", "nodes > limit 5 nodes"});
}

// model.json rewritten with `key` replaced by `n` copies of `make(i)`.
template <typename Make>
Status packageWith(const TempDir& dir, const std::string& key, size_t n, Make make) {
    const std::string folder = voxseg::testing::makeTinyModelPackage(dir, "CT");
    nlohmann::json j;
    std::ifstream(folder + "/model.json") >> j;
    nlohmann::json list = nlohmann::json::array();
    for (size_t i = 0; i < n; ++i) list.push_back(make(i));
    j[key] = list;
    if (key == "models") j.erase("sha256");
    std::ofstream(folder + "/model.json") << j.dump();
    return readModelPackage(folder).status();
}

TEST(ModelLimits, ThousandsOfLabelsRefused) {
    TempDir dir;
    auto label = [](size_t i) {
        return nlohmann::json{
            {"value", i + 1}, {"name", "l" + std::to_string(i)}, {"color", {1, 2, 3}}};
    };
    const Status many = packageWith(dir, "labels", kMaxLabels + 1, label);
    ASSERT_FALSE(many.isOk());
    expectNames(many, {"model.json", "labels", std::to_string(kMaxLabels + 1) + " labels",
                       "limit " + std::to_string(kMaxLabels)});
    TempDir dir2;
    EXPECT_TRUE(packageWith(dir2, "labels", kMaxLabels, label).isOk());
}

TEST(ModelLimits, ThousandsOfModelFilesRefused) {
    TempDir dir;
    auto file = [](size_t i) {
        return nlohmann::json{{"file", "f" + std::to_string(i) + ".onnx"},
                              {"sha256", std::string(64, 'a')}};
    };
    const Status many = packageWith(dir, "models", 5000, file);
    ASSERT_FALSE(many.isOk());
    expectNames(many, {"model.json", "5000 ONNX files", "limit " + std::to_string(kMaxModelFiles)});
    TempDir dir2;
    const Status few = packageWith(dir2, "models", 5, file);
    EXPECT_EQ(few.toString().find("limit"), std::string::npos) << few.toString();
}

}  // namespace
}  // namespace voxseg::engine
