// Staged model packages (format_version 2): the resize, percentile and crop-link rules against
// PyTorch/numpy/deepbet values, and the whole chain through Segmenter with tiny threshold
// networks (tests/pipeline/test_stage_package.h) whose right answer is known.
#include "pipeline/stages.h"

#include "io/image_io.h"
#include "pipeline/normalization.h"
#include "pipeline/segment.h"
#include "tests/pipeline/test_stage_package.h"
#include "tests/pipeline/test_volumes.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace voxseg::pipeline {
namespace {
namespace fs = std::filesystem;
using testing::makeGeometry;
using testing::valueAt;

Volume ramp(int64_t n) {  // value = i along axis 0, 1 voxel along the others
    Volume v = Volume::allocate<float>(makeGeometry({n, 1, 1}, {1, 1, 1}));
    for (int64_t i = 0; i < n; ++i) v.data<float>()[i] = static_cast<float>(i);
    return v;
}

// Reference values: torch 1.13 F.interpolate(torch.arange(n), size, mode=...).
TEST(StageResize, NearestExactPicksPyTorchsSourceVoxels) {
    auto down = resizeNearestExact(ramp(5), {3, 1, 1});
    ASSERT_TRUE(down.isOk()) << down.status().toString();
    EXPECT_EQ(std::vector<float>(down->data<float>(), down->data<float>() + 3),
              (std::vector<float>{0, 2, 4}));
    auto up = resizeNearestExact(ramp(3), {7, 1, 1});
    ASSERT_TRUE(up.isOk());
    EXPECT_EQ(std::vector<float>(up->data<float>(), up->data<float>() + 7),
              (std::vector<float>{0, 0, 1, 1, 1, 2, 2}));
    // 130 -> 128 (the GE T1's slices onto deepbet's 128^3): output 60..69 read 61..70.
    auto gs = resizeNearestExact(ramp(130), {128, 1, 1});
    ASSERT_TRUE(gs.isOk());
    for (int d = 60; d < 70; ++d) EXPECT_EQ(gs->data<float>()[d], d + 1.0f) << d;
    // Same field of view: voxel 0's centre moves by half the new spacing.
    EXPECT_NEAR(gs->geometry().spacing[0], 130.0 / 128.0, 1e-12);
    EXPECT_NEAR(gs->geometry().origin[0], 0.5 * 130.0 / 128.0 - 0.5, 1e-12);
}

TEST(StageResize, LinearMatchesPyTorchAlignCornersFalse) {
    Volume v = Volume::allocate<float>(makeGeometry({4, 1, 1}, {1, 1, 1}));
    const float in[4] = {0, 10, 20, 40};
    std::copy(in, in + 4, v.data<float>());
    auto up = resizeLinear(v, {6, 1, 1});
    ASSERT_TRUE(up.isOk());
    const float want_up[6] = {0.0f, 5.0f, 11.666667f, 18.333334f, 30.0f, 40.0f};
    for (int i = 0; i < 6; ++i) EXPECT_NEAR(up->data<float>()[i], want_up[i], 1e-4) << i;
    auto down = resizeLinear(v, {3, 1, 1});
    ASSERT_TRUE(down.isOk());
    const float want_down[3] = {1.6666669f, 15.0f, 36.666668f};
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(down->data<float>()[i], want_down[i], 1e-4) << i;
}

// torch.quantile / numpy.percentile (linear interpolation).
TEST(StageNormalization, PercentilesMatchTorchQuantile) {
    auto p = percentileValues(ramp(100), 0.5, 99.5);
    ASSERT_TRUE(p.isOk());
    EXPECT_NEAR((*p)[0], 0.495, 1e-9);
    EXPECT_NEAR((*p)[1], 98.505, 1e-9);
    Volume v = Volume::allocate<float>(makeGeometry({8, 1, 1}, {1, 1, 1}));
    const float x[8] = {3, 1, 4, 1, 5, 9, 2, 6};
    std::copy(x, x + 8, v.data<float>());
    p = percentileValues(v, 25, 90);
    ASSERT_TRUE(p.isOk());
    EXPECT_NEAR((*p)[0], 1.75, 1e-9);
    EXPECT_NEAR((*p)[1], 6.9, 1e-6);
}

// deepbet's normalize(): (x - low) / (high - low) clamped to [0, 1], z-score with torch's
// (sample) std, then 0.226 x + 0.449: the result has mean 0.449 and sample std 0.226.
TEST(StageNormalization, PercentileZScoreAffineIsDeepbetsNormalize) {
    engine::Normalization n;
    n.scheme = engine::Normalization::Scheme::kPercentile;
    n.percentile_low = 0.5, n.percentile_high = 99.5;
    n.has_range = true;
    n.zscore = true;
    n.std_ddof = 1;
    n.affine_scale = 0.226, n.affine_shift = 0.449;
    const std::array<double, 2> clip{10.0, 60.0};
    auto out = normalize(ramp(100), n, nullptr, &clip);
    ASSERT_TRUE(out.isOk()) << out.status().toString();
    const float* y = out->data<float>();
    double mean = 0, sq = 0;
    for (int i = 0; i < 100; ++i) mean += y[i];
    mean /= 100;
    for (int i = 0; i < 100; ++i) sq += (y[i] - mean) * (y[i] - mean);
    EXPECT_NEAR(mean, 0.449, 1e-6);
    EXPECT_NEAR(std::sqrt(sq / 99), 0.226, 1e-6);
    EXPECT_FLOAT_EQ(y[0], y[10]);   // clipped below at 10
    EXPECT_FLOAT_EQ(y[60], y[99]);  // and above at 60
    EXPECT_LT(y[10], y[11]);
}

TEST(StageNormalization, WindowClipsAndMapsOntoTheRange) {
    engine::Normalization n;
    n.scheme = engine::Normalization::Scheme::kWindow;
    n.clip_low = 50, n.clip_high = 150;
    n.has_range = true;
    n.range_low = -1, n.range_high = 1;
    n.affine_scale = 2, n.affine_shift = 0.5;
    auto out = normalize(ramp(200), n);
    ASSERT_TRUE(out.isOk()) << out.status().toString();
    const float* y = out->data<float>();
    EXPECT_FLOAT_EQ(y[0], -1.5f);  // clipped at 50 -> -1, then x 2 + 0.5
    EXPECT_FLOAT_EQ(y[100], 0.5f);
    EXPECT_FLOAT_EQ(y[125], 1.5f);
    EXPECT_FLOAT_EQ(y[199], 2.5f);
}

TEST(StageLink, BoxIsDeepbetsBoxWithMargin) {
    // A 16^3 network grid over a 40x36x32 region: label 1 fills network voxels [4, 8) per axis.
    const Geometry oriented = makeGeometry({40, 36, 32}, {1, 1, 1});
    Volume labels = Volume::allocate<uint8_t>(makeGeometry({16, 16, 16}, {2.5, 2.25, 2}));
    uint8_t* p = labels.data<uint8_t>();
    for (int k = 4; k < 8; ++k)
        for (int j = 4; j < 8; ++j)
            for (int i = 4; i < 8; ++i) p[(k * 16 + j) * 16 + i] = 1;
    CropBox region;
    region.size = oriented.size;
    engine::CropLink link;
    link.label = 1;
    link.margin_fraction = 0.1;
    auto box = linkBox(labels, region, oriented, link);
    ASSERT_TRUE(box.has_value());
    // axis 0: centre 6 x 2.5 = 15, size 4 x 2.5 x 1.2 = 12 -> [9, 21)
    EXPECT_EQ(box->begin[0], 9);
    EXPECT_EQ(box->size[0], 12);
    // axis 1: centre 13.5 -> 14 (half to even), size 10.8 -> 11: [int(8.5), int(19.5)) = [8, 19)
    EXPECT_EQ(box->begin[1], 8);
    EXPECT_EQ(box->size[1], 11);
    // axis 2: centre 12, size 9.6 -> 10: [7, 17)
    EXPECT_EQ(box->begin[2], 7);
    EXPECT_EQ(box->size[2], 10);

    // A stray voxel: part of the box with slice_fraction 0, ignored above 1/256 of a slice.
    p[(15 * 16 + 15) * 16 + 15] = 1;
    auto wide = linkBox(labels, region, oriented, link);
    ASSERT_TRUE(wide.has_value());
    EXPECT_EQ(wide->begin[0] + wide->size[0], 40);  // clipped at the volume's end
    link.slice_fraction = 0.01;                     // a slice of 4x4 voxels is 16/256 > 0.01
    auto narrow = linkBox(labels, region, oriented, link);
    ASSERT_TRUE(narrow.has_value());
    EXPECT_EQ(narrow->begin, box->begin);
    EXPECT_EQ(narrow->size, box->size);

    // Margin in mm: 4 mm each side on top of the fraction.
    link.slice_fraction = 0.01;
    link.margin_mm = 4;
    auto mm = linkBox(labels, region, oriented, link);
    ASSERT_TRUE(mm.has_value());
    EXPECT_EQ(mm->size[0], 20);  // 12 + 8

    // No voxel of the label: no box.
    link.label = 2;
    EXPECT_FALSE(linkBox(labels, region, oriented, link).has_value());
}

// A dark volume with a bright cuboid (a dark hole in its centre) and a small bright blob far away.
StudyInput brightCuboidStudy(bool with_cuboid = true) {
    const Geometry g = makeGeometry({40, 36, 32}, {1.1, 0.9, 1.3}, {-20, 10, 5});
    Volume v = Volume::allocate<int16_t>(g, {.modality = "MR"});
    int16_t* p = v.data<int16_t>();
    for (int64_t k = 0; k < 32; ++k)
        for (int64_t j = 0; j < 36; ++j)
            for (int64_t i = 0; i < 40; ++i) {
                int16_t value = 20;
                const bool cuboid = i >= 10 && i < 30 && j >= 8 && j < 28 && k >= 6 && k < 26;
                const bool hole = i >= 19 && i < 22 && j >= 17 && j < 20 && k >= 15 && k < 18;
                const bool blob = i >= 36 && j >= 32 && k >= 28 && i < 39 && j < 35 && k < 31;
                if (with_cuboid && cuboid && !hole) value = 200;
                if (blob) value = 200;
                p[(k * 36 + j) * 40 + i] = value;
            }
    StudyInput in;
    in.volume = v;
    return in;
}

double diceWithCuboid(const Volume& labels) {
    int64_t a = 0, b = 0, both = 0;
    for (int64_t k = 0; k < 32; ++k)
        for (int64_t j = 0; j < 36; ++j)
            for (int64_t i = 0; i < 40; ++i) {
                const bool truth = i >= 10 && i < 30 && j >= 8 && j < 28 && k >= 6 && k < 26;
                const bool got = valueAt<uint8_t>(labels, i, j, k) == 1;
                a += truth, b += got, both += truth && got;
            }
    return 2.0 * static_cast<double>(both) / static_cast<double>(a + b);
}

nlohmann::json readJson(const fs::path& path) {
    std::ifstream f(path);
    return nlohmann::json::parse(f);
}

TEST(Stages, ChainFindsTheBoxThenSegmentsItOnTheInputGrid) {
    testing::TempDir dir;
    SegmentOptions options;
    options.device = engine::DeviceSpec::cpu();
    auto segmenter = Segmenter::create(testing::writeStagePackage(dir.path() / "pkg"), options);
    ASSERT_TRUE(segmenter.isOk()) << segmenter.status().toString();
    const StudyInput study = brightCuboidStudy();
    const fs::path out = dir.path() / "out";
    auto report = segmenter->run(study, "synthetic", out.string());
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_FALSE(report->empty_result);

    const Volume& labels = report->label_map;
    ASSERT_EQ(labels.pixelType(), PixelType::kUInt8);
    EXPECT_TRUE(labels.geometry().approxEqual(study.volume.geometry()));
    EXPECT_GT(diceWithCuboid(labels), 0.95);
    EXPECT_EQ(valueAt<uint8_t>(labels, 20, 18, 16), 1);  // the hole was filled
    EXPECT_EQ(valueAt<uint8_t>(labels, 37, 33, 29), 0);  // the blob lies outside the box
    EXPECT_EQ(valueAt<uint8_t>(labels, 2, 2, 2), 0);

    // The box: the cuboid plus about 10 % on each side, never the blob (oriented RAS: i and j
    // are flipped, k kept).
    ASSERT_EQ(report->stages.size(), 2u);
    const StageTrace& fine = report->stages[1];
    EXPECT_EQ(report->stages[0].network, (std::array<int64_t, 3>{16, 16, 16}));
    EXPECT_EQ(fine.network, (std::array<int64_t, 3>{24, 24, 24}));
    EXPECT_LE(fine.region.begin[2], 6 - 1);
    EXPECT_GE(fine.region.begin[2] + fine.region.size[2], 26 + 1);
    EXPECT_LE(fine.region.begin[2] + fine.region.size[2], 29);
    for (int a = 0; a < 3; ++a) {
        EXPECT_GE(fine.region.size[a], 22) << a;
        EXPECT_LE(fine.region.size[a], 26) << a;
    }

    // The measurement in statistics.json and run.json: label 1's voxels x voxel volume.
    int64_t voxels = 0;
    for (int64_t i = 0; i < labels.geometry().voxelCount(); ++i)
        voxels += labels.data<uint8_t>()[i];
    const double ml = static_cast<double>(voxels) * 1.1 * 0.9 * 1.3 / 1000.0;
    const auto stats = readJson(out / "statistics.json");
    ASSERT_EQ(stats["measurements"].size(), 1u);
    EXPECT_EQ(stats["measurements"][0]["name"], "bright_ml");
    EXPECT_NEAR(stats["measurements"][0]["value"].get<double>(), ml, 1e-9);
    EXPECT_EQ(stats["measurements"][0]["unit"], "mL");
    const auto run = readJson(out / "run.json");
    EXPECT_NEAR(run["measurements"]["bright_ml"].get<double>(), ml, 1e-9);
    EXPECT_EQ(run["empty_result"], false);
    ASSERT_EQ(run["stages"].size(), 2u);
    EXPECT_EQ(run["stages"][1]["name"], "fine");
    EXPECT_EQ(run["model"]["citation"], "none");
    EXPECT_EQ(run["model"]["sha256"].get<std::string>().size(), 2u * 64 + 1);  // both files
}

TEST(Stages, LinearLastStageMapsScoresBack) {
    testing::TempDir dir;
    SegmentOptions options;
    options.device = engine::DeviceSpec::cpu();
    options.outputs.preview = false;
    const std::string pkg = testing::writeStagePackage(dir.path() / "pkg", [](nlohmann::json& j) {
        j["stages"][1]["interpolation"] = "linear";
        j["stages"][1]["output"] = {{"kind", "softmax"}, {"labels", {1}}};
        j["stages"][1]["file"] = "coarse.onnx";  // logits
        j["stages"][1]["sha256"] = j["stages"][0]["sha256"];
    });
    auto segmenter = Segmenter::create(pkg, options);
    ASSERT_TRUE(segmenter.isOk()) << segmenter.status().toString();
    auto report = segmenter->run(brightCuboidStudy(), "synthetic", (dir.path() / "out").string());
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_GT(diceWithCuboid(report->label_map), 0.95);
}

// A stage resampled to a spacing and run as a sliding window over several patches (nnU-Net-like),
// cropped with a margin in mm, mapped back with spline-resampled scores; --tta mirrors it.
TEST(Stages, SpacingStageRunsASlidingWindowOnTheBox) {
    testing::TempDir dir;
    SegmentOptions options;
    options.device = engine::DeviceSpec::cpu();
    options.outputs.preview = false;
    options.tta = true;
    const std::string pkg = testing::writeStagePackage(dir.path() / "pkg", [](nlohmann::json& j) {
        auto& fine = j["stages"][1];
        fine.erase("shape");
        fine["spacing_mm"] = {1.5, 1.5, 1.5};
        fine["patch_size"] = {8, 8, 8};
        fine["interpolation"] = "spline3";
        fine["inference"] = {{"overlap", 0.5}};
        fine["crop_to"] = {{"stage", "coarse"}, {"label", 5}, {"margin_mm", 3.0}};
    });
    auto segmenter = Segmenter::create(pkg, options);
    ASSERT_TRUE(segmenter.isOk()) << segmenter.status().toString();
    const fs::path out = dir.path() / "out";
    auto report = segmenter->run(brightCuboidStudy(), "synthetic", out.string());
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_GT(diceWithCuboid(report->label_map), 0.95);
    ASSERT_EQ(report->stages.size(), 2u);
    const StageTrace& fine = report->stages[1];
    // The box is the cuboid (22 x 18 x 26 mm) plus 3 mm each side, on a 1.5 mm grid.
    EXPECT_GT(fine.patches, 8);
    EXPECT_NEAR(static_cast<double>(fine.network[2]), fine.region.size[2] * 1.3 / 1.5, 1.0);
    EXPECT_GE(fine.region.size[2] * 1.3, 26.0 + 2 * 3.0 - 2 * 1.3);
    const auto run = readJson(out / "run.json");
    EXPECT_EQ(run["stages"][1]["patches"].get<int64_t>(), fine.patches);
}

// Issue 15 part 6: a first stage that finds nothing gives a warning and an empty result (the run
// succeeds: exit code 0, run.json "empty_result": true), never a crop of zero size.
TEST(Stages, FirstStageFindingNothingGivesAnEmptyResultWithAWarning) {
    testing::TempDir dir;
    SegmentOptions options;
    options.device = engine::DeviceSpec::cpu();
    const std::string pkg = testing::writeStagePackage(dir.path() / "pkg", [](nlohmann::json& j) {
        j["stages"][0]["normalization"]["window"] = {500, 600};  // nothing is above 550
    });
    auto segmenter = Segmenter::create(pkg, options);
    ASSERT_TRUE(segmenter.isOk()) << segmenter.status().toString();
    const StudyInput study = brightCuboidStudy();
    const fs::path out = dir.path() / "out";
    auto report = segmenter->run(study, "synthetic", out.string());
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_TRUE(report->empty_result);
    ASSERT_FALSE(report->warnings.empty());
    EXPECT_NE(report->warnings.back().find("stage coarse found no voxels of label 5"),
              std::string::npos)
        << report->warnings.back();
    EXPECT_TRUE(report->label_map.geometry().approxEqual(study.volume.geometry()));
    for (int64_t i = 0; i < report->label_map.geometry().voxelCount(); ++i)
        ASSERT_EQ(report->label_map.data<uint8_t>()[i], 0);
    EXPECT_EQ(report->stages.size(), 1u);  // the fine stage never ran
    const auto run = readJson(out / "run.json");
    EXPECT_EQ(run["empty_result"], true);
    EXPECT_EQ(run["measurements"]["bright_ml"].get<double>(), 0.0);
    EXPECT_TRUE(fs::exists(out / "segmentation.nii.gz"));
}

TEST(Stages, NetworkThatDoesNotMatchItsStageIsRefusedOnLoad) {
    testing::TempDir dir;
    SegmentOptions options;
    options.device = engine::DeviceSpec::cpu();
    // The coarse network returns 2 channels; a sigmoid with 3 labels needs 3.
    const std::string pkg = testing::writeStagePackage(dir.path() / "pkg", [](nlohmann::json& j) {
        j["labels"].push_back({{"value", 2}, {"name", "b"}, {"color", {0, 0, 255}}});
        j["labels"].push_back({{"value", 3}, {"name", "c"}, {"color", {0, 255, 0}}});
        j["stages"][0]["output"] = {{"kind", "sigmoid"}, {"labels", {5, 6, 7}}};
    });
    auto segmenter = Segmenter::create(pkg, options);
    ASSERT_FALSE(segmenter.isOk());
    EXPECT_NE(segmenter.status().message().find("stage coarse"), std::string::npos)
        << segmenter.status().toString();
    EXPECT_NE(segmenter.status().message().find("implies [1, 3, 16, 16, 16]"), std::string::npos)
        << segmenter.status().toString();
}

TEST(Stages, ProbabilityMapsAreRefusedForStagedModels) {
    testing::TempDir dir;
    SegmentOptions options;
    options.device = engine::DeviceSpec::cpu();
    options.outputs.probabilities = true;
    auto segmenter = Segmenter::create(testing::writeStagePackage(dir.path() / "pkg"), options);
    ASSERT_FALSE(segmenter.isOk());
    EXPECT_NE(segmenter.status().message().find("probabilities"), std::string::npos);
}

}  // namespace
}  // namespace voxseg::pipeline
