// The committed hippocampus demo model (sample_data/models/hippocampus) on held-out cases of
// ../shared/data/msd-hippocampus-cropped (training.json's held_out_cases; never trained on),
// through the whole segment pipeline on the CPU, against the reference labels. The threshold
// sits below the lowest per-label mean measured by tools/eval_model.py over all 44 held-out
// cases (anterior 0.878, posterior 0.861; docs/hippocampus.md) by a margin for these 6 cases.
#include "io/image_io.h"
#include "pipeline/segment.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace voxseg::pipeline {
namespace {
namespace fs = std::filesystem;

constexpr int kCases = 6;
constexpr double kMinMeanDice = 0.80;  // per label, mean over the kCases cases

TEST(HippocampusModel, SegmentsHeldOutCases) {
    const fs::path model = fs::path(VOXSEG_SOURCE_DIR) / "sample_data/models/hippocampus";
    if (!fs::exists(model / "model.json")) GTEST_SKIP() << "no model package at " << model;
    VOXSEG_REQUIRE_DATA("msd-hippocampus-cropped/images");
    std::ifstream f(model / "training.json");
    const auto held_out = nlohmann::json::parse(f).at("held_out_cases");
    ASSERT_GE(held_out.size(), size_t{kCases});

    SegmentOptions options;
    options.device = engine::DeviceSpec::cpu();
    options.outputs.preview = options.outputs.statistics = false;
    auto segmenter = Segmenter::create(model.string(), options);
    ASSERT_TRUE(segmenter.isOk()) << segmenter.status().toString();
    testing::TempDir dir;
    double dice_sum[3] = {};
    for (int c = 0; c < kCases; ++c) {
        const std::string name = held_out[c].get<std::string>();
        const std::string image =
            testing::sharedData("msd-hippocampus-cropped/images/" + name + ".nii.gz");
        auto study = loadStudy(image, "", {});
        ASSERT_TRUE(study.isOk()) << study.status().toString();
        auto report = segmenter->run(*study, image, dir / name);
        ASSERT_TRUE(report.isOk()) << report.status().toString();
        auto ref = io::readImage(
            testing::sharedData("msd-hippocampus-cropped/labels/" + name + ".nii.gz"));
        ASSERT_TRUE(ref.isOk()) << ref.status().toString();
        const Volume& pred = report->label_map;
        ASSERT_EQ(pred.geometry().size, ref->geometry().size) << name;
        const int64_t n = pred.geometry().voxelCount();
        for (int label = 1; label <= 2; ++label) {
            int64_t both = 0, a = 0, b = 0;
            visitPixels(pred, [&](auto* p) {
                visitPixels(*ref, [&](auto* r) {
                    for (int64_t i = 0; i < n; ++i) {
                        const bool x = static_cast<int>(p[i]) == label;
                        const bool y = static_cast<int>(r[i]) == label;
                        a += x, b += y, both += x && y;
                    }
                });
            });
            const double dice = a + b == 0 ? 1.0 : 2.0 * both / double(a + b);
            std::printf("%s label %d Dice %.4f\n", name.c_str(), label, dice);
            dice_sum[label] += dice;
        }
    }
    for (int label = 1; label <= 2; ++label)
        EXPECT_GE(dice_sum[label] / kCases, kMinMeanDice) << "label " << label;
}

}  // namespace
}  // namespace voxseg::pipeline
