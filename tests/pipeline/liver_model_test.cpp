// The shipped liver package (sample_data/models/liver: pyliverlesionseg 0.3's liver network, then
// its lesion network inside the liver; docs/liver-model.md) on TotalSegmentator's own test CT in
// ../shared/data/totalsegmentator-tests, run once (one test: ctest runs each test in its own
// process, and the run is the cost) and checked twice:
// - the liver (labels 1 and 2: a lesion is painted over the liver) against TotalSegmentator's
//   (example_seg.nii.gz, class 5), an independent model's output on the same grid. Measured: Dice
//   0.966 (example_ct_sm), 0.961 (example_ct); the gate leaves room for float rounding only;
// - the lesions against pyliverlesionseg's own lesion pipeline on the same CT and the same liver
//   (tests/pipeline/data/gen_liver_lesion_golden.py: its functions, pymirc's zoom3d, DeepVoxNet's
//   tiling, the same weights), committed as voxel lists in
//   tests/pipeline/data/liver_lesion/example_ct_sm.json. No lesion ground truth is available.
// Skips when the data is absent. About 2 minutes on 2 cores (16 lesion tiles).
#include "io/image_io.h"
#include "pipeline/segment.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

namespace voxseg::pipeline {
namespace {
namespace fs = std::filesystem;

constexpr int kTotalSegmentatorLiver = 5;  // class_map["total"]
constexpr double kMinDice = 0.95;
constexpr int kLiver = 1, kLesion = 2;
// The golden holds 2 lesion voxels under voxseg's output rule (the original's 1 x 1 x 3 mm
// lesion voxels have sigmoid 0.53-0.92: not borderline for float rounding); voxseg finds both. With
// the window applied after the resampling instead of before ("normalize_first" off) it found 1: a
// voxel differing, or a lesion voxel the original does not have, is a regression.
constexpr size_t kMaxLesionVoxelsDiffering = 0;

void expectLiverAgreesWithTotalSegmentator(const SegmentReport& report) {
    auto ts =
        io::readImage(testing::sharedData("totalsegmentator-tests/example_seg.nii.gz").string());
    ASSERT_TRUE(ts.isOk()) << ts.status().toString();
    const Volume& ours = report.label_map;
    ASSERT_TRUE(ts->geometry().approxEqual(ours.geometry(), 1e-3, 1e-4, 1e-4));
    const Volume theirs = ts->castTo(PixelType::kUInt8);
    int64_t a = 0, b = 0, both = 0;
    for (int64_t i = 0, n = ours.geometry().voxelCount(); i < n; ++i) {
        const uint8_t v = ours.data<uint8_t>()[i];
        const bool x = v == kLiver || v == kLesion;
        const bool y = theirs.data<uint8_t>()[i] == kTotalSegmentatorLiver;
        a += x, b += y, both += x && y;
    }
    ASSERT_GT(b, 1000) << "TotalSegmentator's map has no liver";
    const double dice = 2.0 * static_cast<double>(both) / static_cast<double>(a + b);
    std::cout << "liver Dice vs TotalSegmentator: " << dice << " (" << a << " / " << b
              << " voxels)\n";
    EXPECT_GE(dice, kMinDice);
}

using Voxel = std::array<int64_t, 3>;

std::set<Voxel> voxelList(const nlohmann::json& j) {
    std::set<Voxel> out;
    for (const auto& v : j)
        out.insert({v[0].get<int64_t>(), v[1].get<int64_t>(), v[2].get<int64_t>()});
    return out;
}

void expectLesionsAgreeWithPyliverlesionseg(const SegmentReport& report) {
    const fs::path golden_path =
        fs::path(VOXSEG_SOURCE_DIR) / "tests/pipeline/data/liver_lesion/example_ct_sm.json";
    std::ifstream in(golden_path);
    ASSERT_TRUE(in) << "missing golden " << golden_path;
    const nlohmann::json golden = nlohmann::json::parse(in);
    const std::set<Voxel> original = voxelList(golden.at("voxels_original_rule"));
    const std::set<Voxel> same_rule = voxelList(golden.at("voxels_voxseg_rule"));

    // both stages ran, the lesion stage tiled as the original did
    ASSERT_EQ(report.stages.size(), 2u);
    EXPECT_EQ(report.stages[1].name, "lesion");
    EXPECT_EQ(report.stages[1].patches, golden.at("tiles").get<int64_t>());

    const Volume& map = report.label_map;
    const Geometry g = map.geometry();
    auto at = [&](int64_t i, int64_t j, int64_t k) {
        return map.data<uint8_t>()[(k * g.size[1] + j) * g.size[0] + i];
    };
    std::set<Voxel> ours;
    size_t near_liver = 0;
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i) {
                if (at(i, j, k) != kLesion) continue;
                ours.insert({i, j, k});
                // inside the liver mask the lesion network saw (the liver dilated by 2 voxels
                // at 1 x 1 x 3 mm): a liver voxel within the 18-neighbourhood on this 3 mm grid
                bool near = false;
                for (int64_t dk = -1; dk <= 1; ++dk)
                    for (int64_t dj = -1; dj <= 1; ++dj)
                        for (int64_t di = -1; di <= 1; ++di) {
                            if (di != 0 && dj != 0 && dk != 0) continue;
                            const int64_t a = i + di, b = j + dj, c = k + dk;
                            if (a >= 0 && b >= 0 && c >= 0 && a < g.size[0] && b < g.size[1] &&
                                c < g.size[2] && at(a, b, c) == kLiver)
                                near = true;
                        }
                near_liver += near;
            }
    size_t differing = 0, not_in_original = 0;
    for (const Voxel& v : ours) {
        differing += same_rule.count(v) == 0;
        not_in_original += original.count(v) == 0;
    }
    for (const Voxel& v : same_rule) differing += ours.count(v) == 0;
    std::cout << "lesion voxels: voxseg " << ours.size() << ", pyliverlesionseg " << original.size()
              << " (" << same_rule.size() << " under voxseg's output rule), " << differing
              << " differing\n";
    EXPECT_EQ(near_liver, ours.size()) << "a lesion voxel lies outside the liver's mask";
    EXPECT_EQ(not_in_original, 0u) << "a lesion voxel pyliverlesionseg does not find";
    EXPECT_LE(differing, kMaxLesionVoxelsDiffering);
    EXPECT_FALSE(ours.empty()) << "the lesion stage found nothing (pyliverlesionseg: "
                               << original.size() << " voxels)";
}

TEST(LiverModel, AgreesWithTotalSegmentatorsLiverOnItsTestCt) {
    const fs::path model = fs::path(VOXSEG_SOURCE_DIR) / "sample_data/models/liver";
    ASSERT_TRUE(fs::exists(model / "model.json")) << "no model package at " << model;
    VOXSEG_REQUIRE_DATA("totalsegmentator-tests/example_ct_sm.nii.gz");
    SegmentOptions options;
    options.device = engine::DeviceSpec::cpu();
    options.precision = engine::Precision::kFloat32;
    options.outputs.preview = false;
    auto segmenter = Segmenter::create(model.string(), options);
    ASSERT_TRUE(segmenter.isOk()) << segmenter.status().toString();
    const std::string input =
        testing::sharedData("totalsegmentator-tests/example_ct_sm.nii.gz").string();
    auto study = loadStudy(input, "", {});
    ASSERT_TRUE(study.isOk()) << study.status().toString();
    testing::TempDir dir;
    auto report = segmenter->run(*study, input, (dir.path() / "out").string());
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    {
        SCOPED_TRACE("liver");
        expectLiverAgreesWithTotalSegmentator(*report);
    }
    {
        SCOPED_TRACE("lesions");
        expectLesionsAgreeWithPyliverlesionseg(*report);
    }
}

}  // namespace
}  // namespace voxseg::pipeline
