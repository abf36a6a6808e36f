// The segment pipeline end to end: a real ONNX network (tests/engine/golden/nnunet_plain.onnx,
// an nnU-Net PlainConvUNet exported from PyTorch) in a model package, on a synthetic volume.
#include "pipeline/segment.h"

#include "core/sha256.h"
#include "io/image_io.h"
#include "tests/pipeline/test_model_package.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

namespace voxseg::pipeline {
namespace {
namespace fs = std::filesystem;

std::string makePackage(const testing::TempDir& dir, const std::string& modality) {
    return testing::makeTinyModelPackage(dir, modality);
}

StudyInput makeStudy(const std::string& modality) {
    Geometry g;
    g.size = {30, 28, 22};
    g.spacing = {0.9, 0.8, 1.2};
    g.origin = {-12, 30, 7};
    const double a = 0.2;
    g.direction = {std::cos(a), -std::sin(a), 0, std::sin(a), std::cos(a), 0, 0, 0, 1};
    Volume v = Volume::allocate<float>(g, {.modality = modality});
    std::mt19937 rng(7);
    std::normal_distribution<float> noise(0.f, 5.f);
    float* p = v.data<float>();
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i) {
                const double r = std::hypot(i - 15.0, j - 14.0, k - 11.0);
                *p++ = (r < 7 ? 100.f : 20.f) + noise(rng);
            }
    StudyInput in;
    in.volume = v;
    return in;
}

TEST(Segment, WritesEveryOutputOnTheInputGridAndNothingElse) {
    testing::TempDir dir;
    SegmentOptions options;
    options.device = engine::DeviceSpec::cpu();
    options.outputs.probabilities = true;
    auto segmenter = Segmenter::create(makePackage(dir, "MR"), options);
    ASSERT_TRUE(segmenter.isOk()) << segmenter.status().toString();
    const StudyInput study = makeStudy("MR");
    const std::string out = dir / "out";
    auto report = segmenter->run(study, "synthetic", out);
    ASSERT_TRUE(report.isOk()) << report.status().toString();

    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(out)) names.insert(e.path().filename().string());
    const std::set<std::string> expected = {"segmentation.nii.gz",
                                            "statistics.json",
                                            "statistics.csv",
                                            "preview.png",
                                            "run.json",
                                            "probabilities_0.nii.gz",
                                            "probabilities_1.nii.gz",
                                            "probabilities_2.nii.gz"};
    EXPECT_EQ(names, expected);  // no staging folder or temporary file left

    auto labels = io::readImage(out + "/segmentation.nii.gz");
    ASSERT_TRUE(labels.isOk()) << labels.status().toString();
    EXPECT_TRUE(labels->geometry().approxEqual(study.volume.geometry(), 1e-4, 1e-5, 1e-5));
    int64_t counts[3] = {0, 0, 0};
    const int64_t n = labels->geometry().voxelCount();
    visitPixels(*labels, [&](auto* px) {
        for (int64_t i = 0; i < n; ++i) {
            ASSERT_GE(px[i], 0);
            ASSERT_LE(px[i], 2);
            ++counts[static_cast<int>(px[i])];
        }
    });
    ASSERT_EQ(report->statistics.labels.size(), 2u);
    EXPECT_EQ(report->statistics.labels[0].voxels, counts[1]);
    EXPECT_EQ(report->statistics.labels[1].voxels, counts[2]);

    // Probabilities of the three channels sum to one everywhere on the original grid.
    auto p0 = io::readImage(out + "/probabilities_0.nii.gz");
    auto p1 = io::readImage(out + "/probabilities_1.nii.gz");
    auto p2 = io::readImage(out + "/probabilities_2.nii.gz");
    ASSERT_TRUE(p0.isOk() && p1.isOk() && p2.isOk());
    for (int64_t i = 0; i < n; i += 97)
        EXPECT_NEAR(p0->data<float>()[i] + p1->data<float>()[i] + p2->data<float>()[i], 1.0, 1e-4);

    std::ifstream f(out + "/run.json");
    const auto run = nlohmann::json::parse(f);
    EXPECT_EQ(run["model"]["name"], "test-net");
    EXPECT_EQ(run["model"]["sha256"].get<std::string>().size(), 64u);
    EXPECT_EQ(run["device"]["backend"], "cpu");
    EXPECT_GT(run["inference"]["patches"].get<int>(), 1);  // 30x28x22 needs several 16x24x20
    EXPECT_TRUE(run["timings_s"].contains("inference"));
}

std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

// The outputs are written side by side; the files are the same as written one after another, and
// an output that fails fails the study with its own error while nothing reaches the folder.
TEST(Segment, OutputsWrittenSideBySideEqualThoseWrittenInTurn) {
    testing::TempDir dir;
    const std::string package = makePackage(dir, "MR");
    const StudyInput study = makeStudy("MR");
    std::vector<std::vector<std::string>> written;  // file names in the order reported
    auto runWith = [&](int output_threads, const std::string& format,
                       const std::string& out) -> Status {
        SegmentOptions options;
        options.device = engine::DeviceSpec::cpu();
        options.outputs.probabilities = true;
        options.outputs.label_format = format;
        options.output_threads = output_threads;
        auto segmenter = Segmenter::create(package, options);
        if (!segmenter.isOk()) return segmenter.status();
        auto report = segmenter->run(study, "synthetic", out);
        if (!report.isOk()) return report.status();
        written.emplace_back();
        for (const auto& path : report->written)
            written.back().push_back(fs::path(path).filename().string());
        return Status::ok();
    };
    ASSERT_TRUE(runWith(1, "nii.gz", dir / "in_turn").isOk());
    ASSERT_TRUE(runWith(4, "nii.gz", dir / "side_by_side").isOk());
    int compared = 0;
    for (const auto& e : fs::directory_iterator(dir / "in_turn")) {
        const std::string name = e.path().filename().string();
        if (name == "run.json") continue;  // timings differ
        EXPECT_EQ(slurp(e.path().string()), slurp((dir.path() / "side_by_side" / name).string()))
            << name;
        ++compared;
    }
    EXPECT_EQ(compared, 7);
    ASSERT_EQ(written.size(), 2u);
    EXPECT_EQ(written[0], written[1]);
    EXPECT_EQ(written[0].front(), "segmentation.nii.gz");
    EXPECT_EQ(written[0].back(), "run.json");

    const Status bad = runWith(4, "xyz", dir / "bad");
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(bad.toString().find("unknown output format"), std::string::npos) << bad.toString();
    EXPECT_FALSE(fs::exists(dir / "bad"));
}

TEST(Segment, WrongModalityIsAClearErrorAndLeavesExistingOutputsAlone) {
    testing::TempDir dir;
    SegmentOptions options;
    options.device = engine::DeviceSpec::cpu();
    auto segmenter = Segmenter::create(makePackage(dir, "CT"), options);
    ASSERT_TRUE(segmenter.isOk()) << segmenter.status().toString();
    const std::string out = dir / "out";
    fs::create_directories(out);
    std::ofstream(out + "/segmentation.nii.gz") << "previous result";
    auto report = segmenter->run(makeStudy("MR"), "mr.nii.gz", out);
    ASSERT_FALSE(report.isOk());
    EXPECT_EQ(report.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(report.status().message().find("expects CT"), std::string::npos);
    std::ifstream f(out + "/segmentation.nii.gz");
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(f), {}), "previous result");
    EXPECT_EQ(std::distance(fs::directory_iterator(out), {}), 1);
}

TEST(Segment, DamagedModelIsRefusedBeforeAnyWork) {
    testing::TempDir dir;
    const std::string folder = makePackage(dir, "MR");
    std::ofstream(folder + "/model.onnx", std::ios::app) << "x";
    SegmentOptions options;
    options.device = engine::DeviceSpec::cpu();
    auto segmenter = Segmenter::create(folder, options);
    ASSERT_FALSE(segmenter.isOk());
    EXPECT_EQ(segmenter.status().code(), StatusCode::kCorruptData);
    EXPECT_NE(segmenter.status().toString().find("sha256"), std::string::npos);
}

}  // namespace
}  // namespace voxseg::pipeline
