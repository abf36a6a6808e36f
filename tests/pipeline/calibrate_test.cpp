// `voxseg model calibrate` end to end (issue 40, pipeline/calibrate.h) with the tiny golden
// network (tests/pipeline/test_model_package.h) on small synthetic cases: the record covers every
// tensor the int8 policy names, the held-back cases were not calibrated on, the input package is
// untouched, the output runs in int8 and the input does not; too few cases and a missed gate
// write nothing. 7-bit weights: int8 runs exactly on every CPU (docs/int8.md).
#include "pipeline/calibrate.h"
#include "core/sha256.h"
#include "engine/model/model_package.h"
#include "engine/quant/int8_policy.h"
#include "io/image_io.h"
#include "tests/pipeline/test_model_package.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <set>

namespace voxseg::pipeline {
namespace {
namespace fs = std::filesystem;

// A blob in noise: 20x24x16 at 1 mm, one patch of the tiny network (z 16, y 24, x 20).
std::string writeCase(const fs::path& folder, uint32_t seed) {
    Geometry g;
    g.size = {20, 24, 16};
    g.spacing = {1.0, 1.0, 1.0};
    Volume v = Volume::allocate<float>(g, {.modality = "MR"});
    std::mt19937 rng(seed);
    std::normal_distribution<float> noise(0.f, 5.f);
    const double radius = 3.0 + seed % 4;
    float* p = v.data<float>();
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i)
                *p++ =
                    (std::hypot(i - 15.0, j - 13.0, k - 11.0) < radius ? 100.f : 20.f) + noise(rng);
    fs::create_directories(folder);
    const std::string path = (folder / ("case" + std::to_string(seed) + ".nii.gz")).string();
    EXPECT_TRUE(io::writeImage(v, path).isOk());
    return path;
}

std::vector<CalibrationCase> makeCases(const fs::path& folder, int n) {
    std::vector<CalibrationCase> cases;
    for (int i = 1; i <= n; ++i)
        cases.push_back({"c" + std::to_string(i), writeCase(folder, static_cast<uint32_t>(i))});
    return cases;
}

CalibrateOptions smallOptions() {
    CalibrateOptions o;
    o.min_cases = 2;
    o.held_back.count = 2;
    o.weight_bits = 7;
    o.segment.device = engine::DeviceSpec::cpu();
    o.segment.threads = 2;
    return o;
}

std::map<std::string, std::string> digests(const fs::path& folder) {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::directory_iterator(folder))
        out[e.path().filename().string()] = *sha256File(e.path());
    return out;
}

std::set<std::string> entries(const fs::path& folder) {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(folder)) out.insert(e.path().filename().string());
    return out;
}

TEST(Calibrate, RecordsEveryCandidateTensorValidatesOnHeldBackCasesAndRunsInInt8) {
    testing::TempDir dir;
    const fs::path in = testing::writeTinyModelPackage(dir.path() / "in", "MR");
    const auto before = digests(in);
    const auto cases = makeCases(dir.path() / "cases", 4);
    CalibrateOptions o = smallOptions();
    o.gate = {0.0, 0.5};  // the figures are checked below; int8's accuracy is docs/int8.md's
    auto report = calibratePackage(in, cases, dir.path() / "out", o);
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    ASSERT_TRUE(report->gate.isOk()) << report->gate.toString();
    EXPECT_EQ(digests(in), before);  // the input package is only read
    EXPECT_EQ(entries(dir.path()), (std::set<std::string>{"in", "cases", "out"}));

    auto out = engine::loadModelPackage(dir.path() / "out");
    ASSERT_TRUE(out.isOk()) << out.status().toString();
    ASSERT_TRUE(out->package.quantization.has_value());
    const engine::QuantizationRecord& q = *out->package.quantization;
    EXPECT_EQ(out->package.models.front().sha256, *sha256File(in / "model.onnx"));
    const auto float_layers = engine::quant::defaultInt8FloatLayers(out->graphs.front());
    const auto tensors = engine::quant::int8CandidateTensors(out->graphs.front(), float_layers);
    ASSERT_FALSE(tensors.empty());
    std::set<std::string> recorded;
    for (const auto& [name, a] : q.activations) {
        recorded.insert(name);
        EXPECT_GT(a.scale, 0.0f) << name;
    }
    EXPECT_EQ(recorded, std::set<std::string>(tensors.begin(), tensors.end()));
    EXPECT_EQ(q.float_layers, float_layers);
    EXPECT_EQ(q.weight_bits, 7);
    EXPECT_EQ(q.method, engine::RangeMethod::kMse);
    // Held back: c2 and c4 (spread evenly), never calibrated on.
    EXPECT_EQ(q.calibration_cases, (std::vector<std::string>{"c1", "c3"}));
    ASSERT_TRUE(q.held_back.has_value());
    EXPECT_EQ(q.held_back->cases, (std::vector<std::string>{"c2", "c4"}));
    EXPECT_GT(q.held_back->voxel_agreement, 0.9);
    EXPECT_LE(q.held_back->dice_min, q.held_back->dice_mean);
    // The gate it passed is recorded with the figures.
    EXPECT_DOUBLE_EQ(q.held_back->min_dice, 0.0);
    EXPECT_DOUBLE_EQ(q.held_back->min_agreement, 0.5);
    EXPECT_GT(report->patches, 0);

    // The output runs in int8; the input, without a record, is refused with the reason.
    SegmentOptions int8;
    int8.device = engine::DeviceSpec::cpu();
    int8.precision = engine::Precision::kInt8;
    auto seg = Segmenter::create((dir.path() / "out").string(), int8);
    EXPECT_TRUE(seg.isOk()) << seg.status().toString();
    auto refused = Segmenter::create(in.string(), int8);
    ASSERT_FALSE(refused.isOk());
    EXPECT_NE(refused.status().message().find("has no int8 calibration"), std::string::npos);
}

TEST(Calibrate, TooFewCasesAndAMissedGateWriteNothing) {
    testing::TempDir dir;
    const fs::path in = testing::writeTinyModelPackage(dir.path() / "in", "MR");
    const auto cases = makeCases(dir.path() / "cases", 4);
    // Defaults: 8 calibration cases and 2 held back.
    CalibrateOptions defaults;
    defaults.segment.device = engine::DeviceSpec::cpu();
    auto few = calibratePackage(in, cases, dir.path() / "out", defaults);
    ASSERT_FALSE(few.isOk());
    EXPECT_EQ(few.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(few.status().message().find("4 cases given"), std::string::npos);
    EXPECT_EQ(entries(dir.path()), (std::set<std::string>{"in", "cases"}));

    // The held-back run compared with another run that differs (mirroring on every axis) under
    // a gate of exact agreement: refused, and the staged copy is gone.
    CalibrateOptions o = smallOptions();
    o.gate = {1.0, 1.0};
    SegmentOptions other = o.segment;
    other.precision = engine::Precision::kFloat32;
    other.tta = true;
    o.candidate = other;
    auto report = calibratePackage(in, cases, dir.path() / "out", o);
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_EQ(report->gate.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(report->gate.message().find("fails the accuracy gate"), std::string::npos);
    EXPECT_LT(report->summary.voxel_agreement, 1.0);
    EXPECT_EQ(entries(dir.path()), (std::set<std::string>{"in", "cases"}));
}

}  // namespace
}  // namespace voxseg::pipeline
