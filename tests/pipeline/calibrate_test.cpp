// `voxseg model calibrate` end to end (issue 40, pipeline/calibrate.h) with the tiny golden
// network (tests/pipeline/test_model_package.h) on small synthetic cases: the record covers every
// tensor the int8 policy names, the held-back cases were not calibrated on, the input package is
// untouched, the output runs in int8 and the input does not; too few cases and a missed gate
// write nothing. 7-bit weights: int8 runs exactly on every CPU (docs/int8.md).
#include "pipeline/calibrate.h"
#include "core/file_io.h"
#include "core/sha256.h"
#include "engine/model/model_package.h"
#include "engine/quant/int8_policy.h"
#include "io/image_io.h"
#include "pipeline/stage_quantization.h"
#include "tests/pipeline/test_model_package.h"
#include "tests/pipeline/test_stage_package.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
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

// Two stages, each the golden PlainConvUNet (labels 1-2 and 3-4, no link between them, so both
// run on every case).
fs::path writeTwoStagePackage(const fs::path& folder) {
    return testing::writeStagePackage(folder, [&](nlohmann::json& j) {
        const std::string sha = testing::writeOnnx(
            folder, "unet.onnx",
            *readFileBytes(
                (fs::path(VOXSEG_SOURCE_DIR) / "tests/engine/golden/nnunet_plain.onnx").string()));
        j["axis_order"] = "zyx";
        j["orientation"] = "native";
        j["labels"] = nlohmann::json::array();
        for (int v = 1; v <= 4; ++v)
            j["labels"].push_back({{"name", "label " + std::to_string(v)},
                                   {"value", v},
                                   {"color", {40 * v, 200 - 40 * v, 100}}});
        for (int s = 0; s < 2; ++s) {
            auto& st = j["stages"][s];
            st["file"] = "unet.onnx";
            st["sha256"] = sha;
            st["shape"] = {16, 24, 20};
            st["output"] = {{"kind", "softmax"}, {"labels", {2 * s + 1, 2 * s + 2}}};
            st["result"] = true;  // both stages' labels are results: both run
            st.erase("crop_to");
            st.erase("postprocess");
        }
        j.erase("measurements");
    });
}

// Staged packages: every stage's tensors calibrated under "<stage>/<tensor>", each stage's
// compile sees its own; a key naming no stage is refused.
TEST(Calibrate, StagedPackagesKeepEachStagesRanges) {
    testing::TempDir dir;
    const fs::path in = writeTwoStagePackage(dir.path() / "in");
    const auto cases = makeCases(dir.path() / "cases", 4);
    CalibrateOptions o = smallOptions();
    o.gate = {0.0, 0.5};
    auto report = calibratePackage(in, cases, dir.path() / "out", o);
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    ASSERT_TRUE(report->gate.isOk()) << report->gate.toString();
    auto out = engine::loadModelPackage(dir.path() / "out");
    ASSERT_TRUE(out.isOk()) << out.status().toString();
    ASSERT_TRUE(out->package.quantization.has_value());
    const engine::QuantizationRecord& q = *out->package.quantization;
    const auto floats = engine::quant::defaultInt8FloatLayers(out->graphs.front());
    const auto tensors = engine::quant::int8CandidateTensors(out->graphs.front(), floats);
    ASSERT_FALSE(tensors.empty());
    std::set<std::string> want, want_floats;
    for (const char* stage : {"coarse", "fine"}) {
        for (const auto& t : tensors) want.insert(std::string(stage) + "/" + t);
        for (const auto& f : floats) want_floats.insert(std::string(stage) + "/" + f);
    }
    std::set<std::string> recorded;
    for (const auto& [name, a] : q.activations) recorded.insert(name);
    EXPECT_EQ(recorded, want);
    EXPECT_EQ(std::set<std::string>(q.float_layers.begin(), q.float_layers.end()), want_floats);
    ASSERT_TRUE(q.held_back.has_value());
    SegmentOptions int8;
    int8.device = engine::DeviceSpec::cpu();
    int8.precision = engine::Precision::kInt8;
    auto seg = Segmenter::create((dir.path() / "out").string(), int8);
    ASSERT_TRUE(seg.isOk()) << seg.status().toString();

    // A record whose key names no stage is refused, naming the key.
    auto j = nlohmann::json::parse(*readFileBytes((dir.path() / "out" / "model.json").string()));
    j["quantization"]["activations"]["nostage/x"] = {{"scale", 0.01}, {"zero_point", 0}};
    std::ofstream(dir.path() / "out" / "model.json") << j.dump(2);
    auto bad = Segmenter::create((dir.path() / "out").string(), int8);
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(bad.status().message().find("'nostage/x' names no stage"), std::string::npos)
        << bad.status().message();
}

// --norm-inputs int8 --keep-float none --upsampling int8: each stage's normalisation inputs get
// per-channel s8 scales under their stage's name, no layer stays float (the image itself is
// observed), the up-samplings' inputs are calibrated and the record says int8 up-sampling, the
// held-back cases are validated so, and the package runs in int8.
TEST(Calibrate, EightBitNormInputsAndEveryConvPerStage) {
    testing::TempDir dir;
    const fs::path in = writeTwoStagePackage(dir.path() / "in");
    const auto cases = makeCases(dir.path() / "cases", 4);
    CalibrateOptions o = smallOptions();
    o.gate = {0.0, 0.5};
    o.norm_inputs_s8 = true;
    o.keep_float = {false, false};
    o.int8_upsampling = true;
    auto report = calibratePackage(in, cases, dir.path() / "out", o);
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    ASSERT_TRUE(report->gate.isOk()) << report->gate.toString();
    auto out = engine::loadModelPackage(dir.path() / "out");
    ASSERT_TRUE(out.isOk()) << out.status().toString();
    const engine::QuantizationRecord& q = *out->package.quantization;
    const engine::Graph& g = out->graphs.front();
    const auto inputs = engine::quant::int8NormInputs(g, {});
    const auto floats = engine::quant::defaultInt8FloatLayers(g);
    ASSERT_GT(inputs.size(), engine::quant::int8NormInputs(g, floats).size());
    EXPECT_TRUE(q.float_layers.empty());
    for (const char* stage : {"coarse", "fine"})  // the first conv reads the image: observed
        EXPECT_EQ(q.activations.count(std::string(stage) + "/" + g.values[g.inputs[0]].name), 1u);
    EXPECT_TRUE(q.int8_upsampling);
    const auto with_up = engine::quant::int8CandidateTensors(g, {}, /*upsampling=*/true);
    ASSERT_GT(with_up.size(), engine::quant::int8CandidateTensors(g, {}).size());
    for (const auto& t : with_up) EXPECT_EQ(q.activations.count("fine/" + t), 1u) << t;
    std::set<std::string> want;
    for (const char* stage : {"coarse", "fine"})
        for (const auto& in8 : inputs) want.insert(std::string(stage) + "/" + in8.tensor);
    std::set<std::string> recorded;
    for (const auto& [name, scales] : q.norm_inputs) {
        recorded.insert(name);
        for (float sc : scales) EXPECT_GT(sc, 0.0f) << name;
    }
    EXPECT_EQ(recorded, want);
    ASSERT_TRUE(q.held_back.has_value());
    EXPECT_GT(q.held_back->voxel_agreement, 0.9);
    SegmentOptions int8;
    int8.device = engine::DeviceSpec::cpu();
    int8.precision = engine::Precision::kInt8;
    EXPECT_TRUE(Segmenter::create((dir.path() / "out").string(), int8).isOk());
}

// A stage's compile sees exactly its own keys, without the prefix, and its observer hands the
// prefixed names back.
TEST(Calibrate, StageCompileOptionsSplitTheRecordAndTheObserver) {
    engine::CompileOptions c;
    auto record = std::make_shared<engine::QuantizationRecord>();
    record->weight_bits = 7;
    record->activations = {{"coarse/a", {0.1f, 1}}, {"coarse/b", {0.2f, 2}}, {"fine/a", {0.3f, 3}}};
    record->float_layers = {"coarse/conv0", "fine/conv9"};
    c.quantization = record;
    std::vector<std::string> seen;
    c.observer.tensors = {"coarse/a", "fine/a", "fine/b"};
    c.observer.callback = [&](const std::string& n, const float*, const engine::Shape&) {
        seen.push_back(n);
    };
    const engine::CompileOptions fine = stageCompileOptions(c, "fine");
    ASSERT_TRUE(fine.quantization);
    EXPECT_EQ(fine.quantization->weight_bits, 7);
    ASSERT_EQ(fine.quantization->activations.size(), 1u);
    EXPECT_FLOAT_EQ(fine.quantization->activations.at("a").scale, 0.3f);
    EXPECT_EQ(fine.quantization->float_layers, (std::vector<std::string>{"conv9"}));
    EXPECT_EQ(fine.observer.tensors, (std::vector<std::string>{"a", "b"}));
    fine.observer.callback("b", nullptr, {});
    EXPECT_EQ(seen, (std::vector<std::string>{"fine/b"}));
    const engine::CompileOptions other = stageCompileOptions(c, "coars");  // no prefix match
    EXPECT_TRUE(other.quantization->activations.empty());
    EXPECT_FALSE(other.observer.active());
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
