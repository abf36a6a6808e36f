// The model card's checks (pipeline/input_checks.h, model.json "intended_input" and
// labels[i].plausible_volume_ml; issue 39 item 2): the keys are read, written back and checked
// strictly; the hippocampus demo (made for ~40 mm crops) is warned about a whole-head-sized input
// before the run and refuses it with --strict-input, a crop-sized input is not warned; after a
// run every label with a range is flagged exactly when its volume is outside it, in the report,
// statistics.json and run.json. Synthetic volumes only (the real whole-head T1:
// model_card_data_test).
#include "pipeline/input_checks.h"
#include "core/volume.h"
#include "engine/model/model_package.h"
#include "pipeline/segment.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

namespace voxseg::pipeline {
namespace {
namespace fs = std::filesystem;

fs::path hippocampusModel() {
    return fs::path(VOXSEG_SOURCE_DIR) / "sample_data/models/hippocampus";
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

// An MR volume at `spacing` with a bright ellipsoid in noise (something for the network to see).
Volume syntheticMr(std::array<int64_t, 3> size, double spacing) {
    Geometry g;
    g.size = size;
    g.spacing = {spacing, spacing, spacing};
    VolumeInfo info;
    info.modality = "MR";
    Volume v = Volume::allocate<float>(g, info);
    float* p = v.data<float>();
    uint32_t seed = 12345;
    int64_t idx = 0;
    for (int64_t k = 0; k < size[2]; ++k)
        for (int64_t j = 0; j < size[1]; ++j)
            for (int64_t i = 0; i < size[0]; ++i, ++idx) {
                seed = seed * 1664525u + 1013904223u;
                const double di = (i - size[0] / 2.0) / (size[0] / 3.0),
                             dj = (j - size[1] / 2.0) / (size[1] / 3.0),
                             dk = (k - size[2] / 2.0) / (size[2] / 3.0);
                const double inside = di * di + dj * dj + dk * dk < 1.0 ? 400.0 : 100.0;
                p[idx] = static_cast<float>(inside + (seed >> 24) / 8.0);
            }
    return v;
}

std::vector<std::string> inputWarnings(const std::vector<std::string>& warnings) {
    std::vector<std::string> out;
    for (const auto& w : warnings)
        if (contains(w, "--strict-input refuses")) out.push_back(w);
    return out;
}

TEST(ModelCard, ShippedHippocampusDeclaresItsIntendedInputAndRangesThatRoundTrip) {
    auto p = engine::readModelPackage(hippocampusModel());
    ASSERT_TRUE(p.isOk()) << p.status().toString();
    ASSERT_TRUE(p->intended_input);
    EXPECT_EQ(p->intended_input->modalities, std::vector<std::string>{"MR"});
    EXPECT_TRUE(p->intended_input->expects_crop);
    ASSERT_FALSE(p->intended_input->extent_mm.empty());
    // The training crops (31-43 x 40-59 x 24-47 mm) are inside; a whole head (>= 150 mm) is not.
    for (const auto& r : p->intended_input->extent_mm) {
        EXPECT_LE(r[0], 24.0);
        EXPECT_GE(r[1], 59.0);
        EXPECT_LT(r[1], 150.0);
    }
    ASSERT_EQ(p->plausible_volumes.size(), 2u);
    for (const auto& v : p->plausible_volumes) {
        EXPECT_LE(v.low_ml, 1.0) << v.label;  // MSD crops: 1.0 .. 2.6 mL per label
        EXPECT_GE(v.high_ml, 2.6) << v.label;
        EXPECT_LT(v.high_ml, 10.0) << v.label;  // the 103 and 115 mL are far outside
    }
    // Written and read back unchanged.
    const std::string text = engine::modelPackageToJson(*p);
    auto again = engine::parseModelPackage(text, "written");
    ASSERT_TRUE(again.isOk()) << again.status().toString();
    EXPECT_EQ(engine::modelPackageToJson(*again), text);
    ASSERT_TRUE(again->intended_input);
    EXPECT_EQ(again->intended_input->extent_mm, p->intended_input->extent_mm);
    EXPECT_EQ(again->plausible_volumes.size(), 2u);
}

TEST(ModelCard, TheKeysAreCheckedStrictly) {
    auto p = engine::readModelPackage(hippocampusModel());
    ASSERT_TRUE(p.isOk()) << p.status().toString();
    const auto base = nlohmann::json::parse(engine::modelPackageToJson(*p));
    auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& key) {
        nlohmann::json j = base;
        edit(j);
        auto r = engine::parseModelPackage(j.dump(), "edited");
        EXPECT_FALSE(r.isOk()) << j.dump();
        if (!r.isOk()) EXPECT_TRUE(contains(r.status().message(), key)) << r.status().message();
    };
    refused([](auto& j) { j["intended_input"]["extent"] = 3; }, "intended_input");
    refused([](auto& j) { j["intended_input"]["extent_mm"] = {90, 15}; }, "extent_mm");
    refused([](auto& j) { j["intended_input"]["extent_mm"] = {1, 2, 3, 4}; }, "extent_mm");
    refused([](auto& j) { j["intended_input"]["spacing_mm"] = "1mm"; }, "spacing_mm");
    refused([](auto& j) { j["intended_input"]["expects_crop"] = "yes"; }, "expects_crop");
    refused([](auto& j) { j["intended_input"]["modality"] = nlohmann::json::array(); }, "modality");
    refused(
        [](auto& j) {
            j["labels"][0]["plausible_volume_ml"] = {4, 0.5};
        },
        "labels[0].plausible_volume_ml");
    refused([](auto& j) { j["labels"][1]["plausible_ml"] = {0.5, 4}; }, "labels[1]");
    // Per-axis extents are accepted too.
    nlohmann::json j = base;
    j["intended_input"]["extent_mm"] = {{20, 60}, {30, 80}, {20, 60}};
    auto per_axis = engine::parseModelPackage(j.dump(), "per-axis");
    ASSERT_TRUE(per_axis.isOk()) << per_axis.status().toString();
    EXPECT_EQ(per_axis->intended_input->extent_mm.size(), 3u);
}

TEST(ModelCard, WholeHeadIsOutsideTheHippocampusModelsInputACropIsNot) {
    auto p = engine::readModelPackage(hippocampusModel());
    ASSERT_TRUE(p.isOk()) << p.status().toString();
    InputDescription head{.geometry = {}, .modality = "MR"};
    head.geometry.size = {256, 256, 176};
    const auto findings = checkIntendedInput(*p, head, true);
    ASSERT_EQ(findings.size(), 1u) << ::testing::PrintToString(findings);
    EXPECT_TRUE(contains(findings[0], "input extent 256x256x176 mm")) << findings[0];
    EXPECT_TRUE(contains(findings[0], "expects crops")) << findings[0];
    const double factor = 256.0 / p->intended_input->extent_mm[0][1];
    char expected[32];
    std::snprintf(expected, sizeof expected, "%.1fx too large", factor);
    EXPECT_TRUE(contains(findings[0], expected)) << findings[0];

    InputDescription crop{.geometry = {}, .modality = "MR"};
    crop.geometry.size = {36, 50, 35};
    EXPECT_TRUE(checkIntendedInput(*p, crop, true).empty());

    // A crop-sized CT at 3 mm: modality and spacing are both named.
    InputDescription ct{.geometry = {}, .modality = "CT"};
    ct.geometry.size = {12, 16, 12};
    ct.geometry.spacing = {3, 3, 3};
    const auto ct_findings = checkIntendedInput(*p, ct, true);
    ASSERT_EQ(ct_findings.size(), 2u) << ::testing::PrintToString(ct_findings);
    EXPECT_TRUE(contains(ct_findings[0], "modality CT")) << ct_findings[0];
    EXPECT_TRUE(contains(ct_findings[1], "spacing 3x3x3 mm")) << ct_findings[1];
    EXPECT_EQ(checkIntendedInput(*p, ct, false).size(), 1u) << "--ignore-modality";

    const Status refusal = strictInputRefusal(*p, findings, "head.nii.gz");
    EXPECT_EQ(refusal.code(), StatusCode::kFailedPrecondition);
    EXPECT_TRUE(contains(refusal.toString(), "head.nii.gz")) << refusal.toString();
    EXPECT_TRUE(contains(refusal.message(), findings[0])) << refusal.message();
}

TEST(ModelCard, VolumesOutsideTheirRangeAreFlagged) {
    auto p = engine::readModelPackage(hippocampusModel());
    ASSERT_TRUE(p.isOk()) << p.status().toString();
    StatisticsReport stats;
    for (auto [label, ml] : {std::pair{1, 115.2}, std::pair{2, 2.0}, std::pair{3, 7.0}}) {
        LabelStatistics s;
        s.label = label;
        s.name = "label " + std::to_string(label);
        s.volume_ml = ml;
        stats.labels.push_back(s);
    }
    const auto warnings = flagImplausibleVolumes(*p, stats);
    ASSERT_EQ(warnings.size(), 1u) << ::testing::PrintToString(warnings);
    EXPECT_TRUE(contains(warnings[0], "label 1 115.20 mL")) << warnings[0];
    EXPECT_TRUE(stats.labels[0].implausible);
    EXPECT_FALSE(stats.labels[1].implausible);
    ASSERT_TRUE(stats.labels[1].plausible_volume_ml);
    EXPECT_FALSE(stats.labels[2].plausible_volume_ml) << "label 3 has no range";
    EXPECT_FALSE(stats.labels[2].implausible);
    const auto j = nlohmann::json::parse(statisticsToJson(stats));
    EXPECT_TRUE(j["labels"][0]["implausible"].get<bool>());
    EXPECT_FALSE(j["labels"][1]["implausible"].get<bool>());
    EXPECT_FALSE(j["labels"][2].contains("implausible"));
}

TEST(ModelCard, SegmenterWarnsBeforeTheRunAndRefusesWithStrictInput) {
    SegmentOptions options;
    options.device = engine::DeviceSpec::cpu();
    auto segmenter = Segmenter::create(hippocampusModel().string(), options);
    ASSERT_TRUE(segmenter.isOk()) << segmenter.status().toString();
    StudyInput head;
    head.volume = syntheticMr({256, 256, 176}, 1.0);  // a whole head's extent
    auto work = segmenter->prepare(head, "head.nii.gz");
    ASSERT_TRUE(work.isOk()) << work.status().toString();
    const auto warned = inputWarnings(work->report.warnings);
    ASSERT_EQ(warned.size(), 1u) << ::testing::PrintToString(work->report.warnings);
    EXPECT_TRUE(contains(warned[0], "256x256x176 mm")) << warned[0];

    options.strict_input = true;
    auto strict = Segmenter::create(hippocampusModel().string(), options);
    ASSERT_TRUE(strict.isOk()) << strict.status().toString();
    testing::TempDir dir;
    const fs::path out = dir.path() / "refused";
    auto refused = strict->run(head, "head.nii.gz", out.string());
    ASSERT_FALSE(refused.isOk());
    EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_TRUE(contains(refused.status().message(), "--strict-input"));
    EXPECT_TRUE(contains(refused.status().message(), "256x256x176 mm"));
    EXPECT_FALSE(fs::exists(out)) << "nothing written";
}

TEST(ModelCard, CropRunIsNotWarnedAndItsVolumesAreJudgedInEveryRecord) {
    SegmentOptions options;
    options.device = engine::DeviceSpec::cpu();
    options.strict_input = true;  // a crop passes even the strict check
    options.outputs.preview = false;
    options.outputs.label_map = false;
    auto segmenter = Segmenter::create(hippocampusModel().string(), options);
    ASSERT_TRUE(segmenter.isOk()) << segmenter.status().toString();
    StudyInput crop;
    crop.volume = syntheticMr({36, 50, 35}, 1.0);
    testing::TempDir dir;
    const fs::path out = dir.path() / "out";
    auto report = segmenter->run(crop, "crop.nii.gz", out.string());
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_TRUE(inputWarnings(report->warnings).empty())
        << ::testing::PrintToString(report->warnings);

    const auto stats = nlohmann::json::parse(slurp(out / "statistics.json"));
    const auto run = nlohmann::json::parse(slurp(out / "run.json"));
    ASSERT_EQ(stats["labels"].size(), 2u);
    ASSERT_EQ(stats["warnings"], run["warnings"]);
    for (const auto& l : stats["labels"]) {
        const double ml = l["volume_ml"].get<double>();
        const auto range = l["plausible_volume_ml"].get<std::array<double, 2>>();
        const bool outside = ml < range[0] || ml > range[1];
        EXPECT_EQ(l["implausible"].get<bool>(), outside) << l.dump();
        bool warned = false;
        for (const auto& w : run["warnings"])
            warned |= contains(w.get<std::string>(),
                               "implausible result: " + l["name"].get<std::string>());
        EXPECT_EQ(warned, outside) << l.dump() << run["warnings"].dump();
    }
}

// Issue 39: the channel modality check that segment refuses with and the viewer's dialog shows
// before a run: one mismatch per differing channel, unknown modalities not compared, and the
// refusal names the front end's own way to run anyway (the viewer does not name a CLI flag).
TEST(ModelCard, ModalityMismatchesAndTheRefusalNameTheFrontEndsOverride) {
    auto p = engine::readModelPackage(hippocampusModel());
    ASSERT_TRUE(p.isOk()) << p.status().toString();
    EXPECT_TRUE(modalityMismatches(*p, {"MR"}).empty());
    EXPECT_TRUE(modalityMismatches(*p, {""}).empty()) << "unknown: not compared";
    const auto mm = modalityMismatches(*p, {"CT"});
    ASSERT_EQ(mm.size(), 1u);
    EXPECT_EQ(mm[0].have, "CT");
    EXPECT_EQ(mm[0].want, "MR");
    EXPECT_EQ(modalityMismatchReason(*p, mm[0]),
              "input is CT but model hippocampus-demo expects MR");
    const Status cli = modalityRefusal(*p, mm[0], "--ignore-modality", "ct.nii.gz");
    EXPECT_EQ(cli.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(contains(cli.message(), "(or --ignore-modality to run anyway)")) << cli.message();
    const Status gui = modalityRefusal(*p, mm[0], "tick \"Run anyway\"", "ct.nii.gz");
    EXPECT_FALSE(contains(gui.message(), "--")) << gui.message();
}

}  // namespace
}  // namespace voxseg::pipeline
