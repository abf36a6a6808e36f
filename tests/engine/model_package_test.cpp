#include "engine/model/model_package.h"

#include "core/limits.h"
#include "core/sha256.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iterator>

namespace voxseg::engine {
namespace {

using nlohmann::json;

const std::string kOnnxBytes = "not really onnx, but hashed like it";

json validJson() {
    return json::parse(R"json({
      "name": "hippocampus-demo",
      "version": "1.0.0",
      "description": "3D U-Net for the hippocampus (MSD Task04)",
      "license": "CC-BY-SA-4.0",
      "channels": [{"modality": "MR", "normalization": {"scheme": "zscore", "mask": "nonzero"}},
                   {"modality": "CT", "normalization": {"scheme": "ct", "clip": [-1000, 1500],
                                                        "mean": 80.5, "std": 120.0}},
                   {"modality": "PT", "normalization": {"scheme": "none"}}],
      "spacing_mm": [1.0, 1.0, 1.5],
      "patch_size": [40, 56, 40],
      "axis_order": "zyx",
      "orientation": "native",
      "labels": [
        {"value": 1, "name": "anterior", "color": [255, 0, 0],
         "category": {"code": "91723000", "scheme": "SCT", "meaning": "Anatomical Structure"},
         "type": {"code": "5001000", "scheme": "SCT", "meaning": "Hippocampus"},
         "type_modifier": {"code": "7771000", "scheme": "SCT", "meaning": "Left"}},
        {"value": 2, "name": "posterior", "color": [0, 255, 0]}
      ],
      "output": "softmax",
      "inference": {"overlap": 0.5, "gaussian_sigma_scale": 0.125, "mirror_axes": [0, 2]},
      "_comment": "keys starting with _ are ignored",
      "sha256": "0000000000000000000000000000000000000000000000000000000000000000"
    })json");
}

Result<ModelPackage> parse(const json& j) { return parseModelPackage(j.dump(), "test/model.json"); }

// Expects a failure whose message names `key` and contains `what`.
void expectError(const json& j, const std::string& key, const std::string& what) {
    auto r = parse(j);
    ASSERT_FALSE(r.isOk()) << "accepted: " << j.dump();
    EXPECT_EQ(r.status().subject(), "test/model.json");
    EXPECT_NE(r.status().message().find("'" + key + "'"), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
}

TEST(ModelPackage, ParsesEveryKey) {
    auto r = parse(validJson());
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    const ModelPackage& p = *r;
    EXPECT_EQ(p.name, "hippocampus-demo");
    EXPECT_EQ(p.license, "CC-BY-SA-4.0");
    ASSERT_EQ(p.channels.size(), 3u);
    EXPECT_EQ(p.channels[0].normalization.scheme, Normalization::Scheme::kZScore);
    EXPECT_TRUE(p.channels[0].normalization.nonzero_mask);
    EXPECT_EQ(p.channels[1].normalization.scheme, Normalization::Scheme::kCT);
    EXPECT_EQ(p.channels[1].normalization.clip_low, -1000.0);
    EXPECT_EQ(p.channels[1].normalization.std, 120.0);
    EXPECT_EQ(p.channels[2].normalization.scheme, Normalization::Scheme::kNone);
    EXPECT_EQ(p.patch_size, (std::vector<int64_t>{40, 56, 40}));
    EXPECT_EQ(p.spacing_mm, (std::vector<double>{1.0, 1.0, 1.5}));
    EXPECT_EQ(p.axis_order, AxisOrder::kZyx);
    ASSERT_EQ(p.labels.size(), 2u);
    EXPECT_EQ(p.labels[0].type.meaning, "Hippocampus");
    ASSERT_TRUE(p.labels[0].type_modifier.has_value());
    EXPECT_EQ(p.labels[0].type_modifier->meaning, "Left");
    EXPECT_FALSE(p.labels[1].type_modifier.has_value());
    EXPECT_EQ(p.labels[1].category, defaultLabelCategory());  // not stated: the default
    EXPECT_EQ(p.labels[1].color[1], 255);
    EXPECT_EQ(p.outputChannels(), 3);
    EXPECT_EQ(p.channelLabelValues(), (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(p.inference.mirror_axes, (std::vector<int>{0, 2}));
    EXPECT_EQ(p.inference.convention, WindowConvention::kNnUNet);
    ASSERT_EQ(p.models.size(), 1u);
    EXPECT_EQ(p.models[0].file, "model.onnx");
    const auto o = p.slidingWindowOptions();
    EXPECT_EQ(o.patch_size, p.patch_size);
    EXPECT_EQ(o.mirror_axes, p.inference.mirror_axes);
}

TEST(ModelPackage, WritesWhatItReads) {
    json j = validJson();
    j["output"] = "sigmoid";
    j["axis_order"] = "xyz";
    j["orientation"] = "RAS";
    j["inference"]["convention"] = "monai";
    j["inference"]["gaussian"] = false;
    j.erase("sha256");
    j["models"] =
        json::parse(R"([{"file": "fold0.onnx", "sha256": ")" + std::string(64, 'a') +
                    R"("}, {"file": "fold1.onnx", "sha256": ")" + std::string(64, 'b') + R"("}])");
    auto first = parse(j);
    ASSERT_TRUE(first.isOk()) << first.status().toString();
    auto second = parseModelPackage(modelPackageToJson(*first), "written");
    ASSERT_TRUE(second.isOk()) << second.status().toString();
    EXPECT_EQ(modelPackageToJson(*first), modelPackageToJson(*second));
    EXPECT_EQ(second->labels[0].type_modifier, first->labels[0].type_modifier);
    EXPECT_EQ(second->models.size(), 2u);
    EXPECT_EQ(second->outputChannels(), 2);
    EXPECT_EQ(second->channelLabelValues(), (std::vector<int>{1, 2}));
    EXPECT_EQ(second->inference.convention, WindowConvention::kMonai);
    EXPECT_FALSE(second->inference.gaussian);
    EXPECT_EQ(second->orientation, "RAS");
    EXPECT_EQ(second->inference.accumulation, Accumulation::kNormalized);
    // The default is not written.
    EXPECT_EQ(modelPackageToJson(*second).find("accumulate"), std::string::npos);
    j["inference"]["convention"] = "nnunet";
    j["inference"]["accumulate"] = "nnunet-fp16";
    auto third = parse(j);
    ASSERT_TRUE(third.isOk()) << third.status().toString();
    auto fourth = parseModelPackage(modelPackageToJson(*third), "written");
    ASSERT_TRUE(fourth.isOk()) << fourth.status().toString();
    EXPECT_EQ(fourth->inference.accumulation, Accumulation::kNnUNetFp16);
    EXPECT_EQ(fourth->slidingWindowOptions().accumulation, Accumulation::kNnUNetFp16);
}

// Issue 39: model.json "disclaimer" (optional) is read, written back, and declared by every
// shipped model (the viewer shows it with the model's card).
TEST(ModelPackage, DisclaimerIsReadAndWritten) {
    json j = validJson();
    j["disclaimer"] = "not a clinical model";
    auto first = parse(j);
    ASSERT_TRUE(first.isOk()) << first.status().toString();
    EXPECT_EQ(first->disclaimer, "not a clinical model");
    auto second = parseModelPackage(modelPackageToJson(*first), "written");
    ASSERT_TRUE(second.isOk()) << second.status().toString();
    EXPECT_EQ(second->disclaimer, "not a clinical model");
    j["disclaimer"] = 3;
    EXPECT_FALSE(parse(j).isOk());
    for (const char* m : {"hippocampus", "ct-phantom", "brain-extraction", "liver"}) {
        auto shipped =
            readModelPackage(std::filesystem::path(VOXSEG_SOURCE_DIR) / "sample_data/models" / m);
        ASSERT_TRUE(shipped.isOk()) << shipped.status().toString();
        std::string lower = shipped->disclaimer;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        EXPECT_NE(lower.find("not a clinical model"), std::string::npos)
            << m << ": " << shipped->disclaimer;
    }
}

TEST(ModelPackage, MissingRequiredKeysAreNamed) {
    for (const char* key :
         {"name", "version", "description", "license", "channels", "spacing_mm", "patch_size",
          "axis_order", "orientation", "labels", "output", "sha256"}) {
        json j = validJson();
        j.erase(key);
        expectError(j, key, "missing");
    }
    json j = validJson();
    j["labels"][1].erase("color");
    expectError(j, "labels[1].color", "missing");
    j = validJson();
    j["channels"][1]["normalization"].erase("std");
    expectError(j, "channels[1].normalization.std", "missing");
}

TEST(ModelPackage, WrongTypesAndValuesAreExplained) {
    json j = validJson();
    j["name"] = 5;
    expectError(j, "name", "expected a string, got an integer 5");
    j = validJson();
    j["patch_size"] = {40, 56.5, 40};
    expectError(j, "patch_size[1]", "expected an integer");
    j = validJson();
    j["patch_size"] = {40, 0, 40};
    expectError(j, "patch_size[1]", "1..4096");
    j = validJson();
    j["spacing_mm"] = {1.0, 1.0};
    expectError(j, "spacing_mm", "has 2 entries but patch_size has 3");
    j = validJson();
    j["spacing_mm"] = {1.0, -1.0, 1.0};
    expectError(j, "spacing_mm[1]", "> 0");
    j = validJson();
    j["labels"][1]["value"] = 1;
    expectError(j, "labels[1].value", "label value 1 is used twice");
    j = validJson();
    j["labels"][1]["value"] = 0;
    expectError(j, "labels[1].value", "1..32767");
    j = validJson();
    j["labels"][0]["color"] = {255, 0};
    expectError(j, "labels[0].color", "[r, g, b]");
    j = validJson();
    j["labels"][0]["color"] = {255, 0, 256};
    expectError(j, "labels[0].color[2]", "0..255");
    j = validJson();
    j["labels"][0]["type"].erase("meaning");
    expectError(j, "labels[0].type.meaning", "missing");
    j = validJson();
    j["output"] = "logits";
    expectError(j, "output", "\"softmax\"");
    j = validJson();
    j["axis_order"] = "zxy";
    expectError(j, "axis_order", "\"zyx\"");
    j = validJson();
    j["orientation"] = "RAR";
    expectError(j, "orientation", "\"RAS\"");
    j = validJson();
    j["channels"][0]["normalization"]["scheme"] = "minmax";
    expectError(j, "channels[0].normalization.scheme", "\"zscore\"");
    j = validJson();
    j["channels"][1]["normalization"]["clip"] = {10, -10};
    expectError(j, "channels[1].normalization.clip", "low must be below high");
    j = validJson();
    j["channels"][1]["normalization"]["std"] = 0;
    expectError(j, "channels[1].normalization.std", "> 0");
    j = validJson();
    j["inference"]["overlap"] = 1.0;
    expectError(j, "inference.overlap", "[0, 1)");
    j = validJson();
    j["inference"]["mirror_axes"] = {0, 0};
    expectError(j, "inference.mirror_axes[1]", "twice");
    j = validJson();
    j["patch_size"] = {64, 64};
    j["spacing_mm"] = {1.0, 1.0};
    expectError(j, "inference.mirror_axes[1]", "not a spatial axis of the 2D patch");
    j = validJson();
    j["inference"]["convention"] = "totalseg";
    expectError(j, "inference.convention", "\"monai\"");
    j = validJson();
    j["inference"]["accumulate"] = "fp16";
    expectError(j, "inference.accumulate", "\"nnunet-fp16\"");
    j = validJson();
    j["inference"]["accumulate"] = "nnunet-fp16";
    j["inference"]["convention"] = "monai";
    expectError(j, "inference.accumulate", "needs \"convention\": \"nnunet\"");
    j = validJson();
    j["inference"]["overlapp"] = 0.5;
    expectError(j, "inference.overlapp", "unknown key");
    j = validJson();
    j["sha256"] = "ABC";
    expectError(j, "sha256", "64 lower-case hex");
    j = validJson();
    j["models"] = json::array();
    expectError(j, "models", "not both");
    j = validJson();
    j.erase("sha256");
    j["models"] =
        json::parse(R"([{"file": "../evil.onnx", "sha256": ")" + std::string(64, 'a') + R"("}])");
    expectError(j, "models[0].file", "inside the package folder");
    j = validJson();
    j["format_version"] = 3;
    auto newer = parse(j);
    EXPECT_EQ(newer.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(newer.status().message().find("update voxseg"), std::string::npos);
}

TEST(ModelPackage, InvalidJsonSaysWhere) {
    auto r = parseModelPackage("{\"name\": \"x\",\n \"version\": }", "pkg/model.json");
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kCorruptData);
    EXPECT_NE(r.status().message().find("line 2"), std::string::npos) << r.status().message();
    r = parseModelPackage("[1, 2]", "pkg/model.json");
    EXPECT_NE(r.status().message().find("JSON object"), std::string::npos);
}

void writeFile(const std::filesystem::path& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
}

TEST(ModelPackage, ReadsFolderAndChecksSha256) {
    voxseg::testing::TempDir dir;
    json j = validJson();
    j["sha256"] = sha256Hex(kOnnxBytes);
    writeFile(dir.path() / "model.json", j.dump(2));
    writeFile(dir.path() / "model.onnx", kOnnxBytes);
    auto p = readModelPackage(dir.path());
    ASSERT_TRUE(p.isOk()) << p.status().toString();
    EXPECT_EQ(p->folder, dir.path());
    EXPECT_TRUE(verifyModelFiles(*p).isOk());

    writeFile(dir.path() / "model.onnx", kOnnxBytes + " ");  // edited
    Status st = verifyModelFiles(*p);
    EXPECT_EQ(st.code(), StatusCode::kCorruptData);
    EXPECT_NE(st.message().find("model.onnx does not match model.json's sha256: the package is "
                                "damaged or was edited"),
              std::string::npos)
        << st.message();
    std::filesystem::remove(dir.path() / "model.onnx");
    st = verifyModelFiles(*p);
    EXPECT_EQ(st.code(), StatusCode::kNotFound);
    EXPECT_NE(st.message().find("model.onnx named in model.json is missing"), std::string::npos);
}

TEST(ModelPackage, FolderErrors) {
    voxseg::testing::TempDir dir;
    auto r = readModelPackage(dir.path() / "absent");
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
    r = readModelPackage(dir.path());
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
    EXPECT_NE(r.status().message().find("no model.json"), std::string::npos);
    writeFile(dir.path() / "model.json", std::string(kMaxModelJsonBytes + 1, ' '));
    r = readModelPackage(dir.path());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

// End to end: a package around the MONAI UNet golden (tests/engine/data/sliding_window), loaded,
// compiled on the reference backend and run; the result must match MONAI's.
std::string readBytes(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

const std::filesystem::path kGoldenDir =
    std::filesystem::path(VOXSEG_SOURCE_DIR) / "tests/engine/data/sliding_window";

json monaiPackageJson(const std::string& onnx_bytes) {
    json j = validJson();
    j["channels"] = json::parse(R"([{"modality": "MR", "normalization": {"scheme": "none"}}])");
    j["patch_size"] = {16, 20, 24};
    j["inference"] =
        json::parse(R"({"overlap": 0.5, "gaussian_sigma_scale": 0.125, "convention": "monai"})");
    j["sha256"] = sha256Hex(onnx_bytes);
    return j;
}

TEST(ModelPackage, LoadsImportsAndRunsTheNetwork) {
    voxseg::testing::TempDir dir;
    const std::string onnx = readBytes(kGoldenDir / "monai_unet.onnx");
    ASSERT_FALSE(onnx.empty());
    writeFile(dir.path() / "model.onnx", onnx);
    writeFile(dir.path() / "model.json", monaiPackageJson(onnx).dump(2));
    auto model = loadModelPackage(dir.path());
    ASSERT_TRUE(model.isOk()) << model.status().toString();
    ASSERT_EQ(model->graphs.size(), 1u);

    auto backend = makeReferenceBackend();
    auto sw = createSlidingWindow(*backend, *model, 2);
    ASSERT_TRUE(sw.isOk()) << sw.status().toString();
    EXPECT_EQ((*sw)->numClasses(), 3);
    Tensor image(DType::kFloat32, {1, 29, 23, 37});
    std::ifstream(kGoldenDir / "monai_odd_input.bin", std::ios::binary)
        .read(static_cast<char*>(image.raw()), static_cast<std::streamsize>(image.bytes()));
    Tensor expected(DType::kFloat32, {3, 29, 23, 37});
    std::ifstream(kGoldenDir / "monai_odd_overlap50_output.bin", std::ios::binary)
        .read(static_cast<char*>(expected.raw()), static_cast<std::streamsize>(expected.bytes()));
    auto result = (*sw)->run(image);
    ASSERT_TRUE(result.isOk()) << result.status().toString();
    float worst = 0.0f;
    for (int64_t i = 0; i < expected.numel(); ++i)
        worst = std::max(worst, std::abs(result->data<float>()[i] - expected.data<float>()[i]));
    EXPECT_LE(worst, 1e-4f);

    // Labels from the averaged logits.
    std::vector<uint8_t> labels(static_cast<size_t>(29 * 23 * 37));
    const auto values = model->package.channelLabelValues();
    ASSERT_TRUE(argmaxLabels(*result, std::span<uint8_t>(labels), values).isOk());
    EXPECT_TRUE(std::any_of(labels.begin(), labels.end(), [](uint8_t l) { return l != 0; }));

    // "accumulate": "nnunet-fp16": the host window in nnU-Net's float16 arithmetic, float16
    // scores whatever accumulator is asked for: within float16 rounding of the float32 mean
    // where windows overlap, further off where one window's subnormal float16 corner weights
    // are all a voxel has (nnU-Net's own behaviour at the image border).
    LoadedModel fp16 = *model;
    fp16.package.inference.convention = WindowConvention::kNnUNet;
    fp16.package.inference.accumulation = Accumulation::kNnUNetFp16;
    auto half = createSlidingWindow(*backend, fp16, 2, {}, DType::kFloat32);
    ASSERT_TRUE(half.isOk()) << half.status().toString();
    EXPECT_EQ((*half)->accumulator(), DType::kFloat16);
    EXPECT_NE((*half)->describe().find("nnU-Net"), std::string::npos) << (*half)->describe();
    fp16.package.inference.accumulation = Accumulation::kNormalized;
    auto plain = createSlidingWindow(*backend, fp16, 2, {}, DType::kFloat32);
    ASSERT_TRUE(plain.isOk());
    auto h = (*half)->run(image);
    auto f = (*plain)->run(image);
    ASSERT_TRUE(h.isOk() && f.isOk()) << h.status().toString();
    ASSERT_EQ(h->dtype(), DType::kFloat16);
    const Tensor h32 = scoresAsFloat32(*h);
    int64_t close = 0;
    float gap = 0.0f;
    for (int64_t i = 0; i < h32.numel(); ++i) {
        const float g = std::abs(h32.data<float>()[i] - f->data<float>()[i]) /
                        std::max(1.0f, std::abs(f->data<float>()[i]));
        close += g <= 4e-3f;
        gap = std::max(gap, g);
    }
    std::printf("nnunet-fp16 vs float32 mean: %.2f %% of logits within 4e-3, worst %.3g\n",
                100.0 * static_cast<double>(close) / static_cast<double>(h32.numel()), gap);
    EXPECT_GE(close, h32.numel() * 9 / 10);
    EXPECT_GT(gap, 4e-3f);
}

TEST(ModelPackage, EnsembleOfTheSameNetworkGivesTheSameResult) {
    voxseg::testing::TempDir dir;
    const std::string onnx = readBytes(kGoldenDir / "monai_unet.onnx");
    writeFile(dir.path() / "fold0.onnx", onnx);
    writeFile(dir.path() / "fold1.onnx", onnx);
    json j = monaiPackageJson(onnx);
    j.erase("sha256");
    j["models"] = {{{"file", "fold0.onnx"}, {"sha256", sha256Hex(onnx)}},
                   {{"file", "fold1.onnx"}, {"sha256", sha256Hex(onnx)}}};
    writeFile(dir.path() / "model.json", j.dump(2));
    auto model = loadModelPackage(dir.path());
    ASSERT_TRUE(model.isOk()) << model.status().toString();
    ASSERT_EQ(model->graphs.size(), 2u);
    auto backend = makeReferenceBackend();
    const Tensor image =
        Tensor::fromFloats({1, 16, 20, 30}, std::vector<float>(16 * 20 * 30, 0.5f));
    auto ensemble = createSlidingWindow(*backend, *model, 1);
    ASSERT_TRUE(ensemble.isOk());
    SlidingWindowStats stats;
    auto both = (*ensemble)->run(image, {}, &stats);
    ASSERT_TRUE(both.isOk());
    EXPECT_EQ(stats.forward_passes, 2 * stats.patches);
    LoadedModel single{model->package, {model->graphs[0]}};
    auto one = (*createSlidingWindow(*backend, single, 1))->run(image);
    ASSERT_TRUE(one.isOk());
    for (int64_t i = 0; i < one->numel(); ++i)
        ASSERT_NEAR(both->data<float>()[i], one->data<float>()[i], 1e-6f) << i;
}

TEST(ModelPackage, NetworkThatDoesNotMatchModelJsonIsRefused) {
    voxseg::testing::TempDir dir;
    const std::string onnx = readBytes(kGoldenDir / "monai_unet.onnx");
    writeFile(dir.path() / "model.onnx", onnx);
    json j = monaiPackageJson(onnx);
    j["labels"].push_back(json::parse(R"({"value": 3, "name": "third", "color": [1, 2, 3]})"));
    writeFile(dir.path() / "model.json", j.dump(2));
    auto model = loadModelPackage(dir.path());
    ASSERT_FALSE(model.isOk());
    EXPECT_NE(model.status().message().find("produces [1, 3, 16, 20, 24]"), std::string::npos)
        << model.status().message();
    EXPECT_NE(model.status().message().find("expects [1, 4, 16, 20, 24]"), std::string::npos);

    // A truncated network whose sha256 was updated too: the import names the file.
    const std::string truncated = onnx.substr(0, onnx.size() / 2);
    writeFile(dir.path() / "model.onnx", truncated);
    j = monaiPackageJson(truncated);
    writeFile(dir.path() / "model.json", j.dump(2));
    model = loadModelPackage(dir.path());
    ASSERT_FALSE(model.isOk());
    EXPECT_EQ(model.status().code(), StatusCode::kCorruptData) << model.status().toString();
    EXPECT_NE(model.status().message().find("model.onnx"), std::string::npos);

    // And a damaged one with the old sha256: refused before parsing.
    j = monaiPackageJson(onnx);
    writeFile(dir.path() / "model.json", j.dump(2));
    model = loadModelPackage(dir.path());
    EXPECT_NE(model.status().message().find("does not match model.json's sha256"),
              std::string::npos);
}

// ---- format_version 2: stages ----

// deepbet's two-stage brain extraction, as sample_data/models/brain-extraction describes it.
json stagedJson() {
    const std::string h = std::string(64, 'a');
    return json::parse(R"json({
      "format_version": 2,
      "name": "brain-extraction",
      "version": "1.0.2",
      "description": "deepbet",
      "license": "MIT",
      "attribution": "deepbet authors",
      "citation": "Fisch et al. 2024",
      "channels": [{"modality": "MR"}],
      "axis_order": "xyz",
      "orientation": "RAS",
      "labels": [{"value": 1, "name": "brain", "color": [255, 200, 0]}],
      "stages": [
        {"name": "bbox", "file": "bbox_model.onnx", "sha256": ")json" +
                       h + R"json(",
         "shape": [128, 128, 128], "interpolation": "nearest-exact",
         "normalization": {"scheme": "percentile", "percentiles": [0.5, 99.5], "range": [0, 1],
                           "zscore": true, "std_ddof": 1, "affine": [0.226, 0.449]},
         "output": {"kind": "probability", "channels": 2, "channel": 1, "threshold": 0.5,
                    "label": 1},
         "postprocess": {"largest_component": true}},
        {"name": "brain", "file": "model.onnx", "sha256": ")json" +
                       h + R"json(",
         "crop_to": {"stage": "bbox", "label": 1, "margin_fraction": 0.1, "slice_fraction": 0.02},
         "shape": [256, 256, 256], "interpolation": "nearest-exact",
         "normalization": {"scheme": "percentile", "percentiles": [0.5, 99.5],
                           "percentiles_of": "bbox", "range": [0, 1], "zscore": true,
                           "std_ddof": 1, "affine": [0.226, 0.449]},
         "output": {"kind": "probability", "channels": 2, "channel": 1, "threshold": 0.5},
         "postprocess": {"largest_component": true, "fill_holes": "3d"}}
      ],
      "measurements": [{"name": "tiv_ml", "kind": "volume_ml", "labels": [1],
                        "description": "total intracranial volume"}]
    })json");
}

// A model.json chaining more stages than kMaxStages is refused when it is read (each stage
// is a network compiled at load), naming the count and the limit.
TEST(ModelPackageStages, MoreStagesThanTheLimitAreRefused) {
    auto withStages = [](size_t count) {
        json j = stagedJson();
        const json bbox = j["stages"][0];
        j["stages"] = json::array();
        for (size_t i = 0; i < count; ++i) {
            json st = bbox;
            st["name"] = "s" + std::to_string(i);
            j["stages"].push_back(st);
        }
        return j;
    };
    auto many = parse(withStages(kMaxStages + 1));
    ASSERT_FALSE(many.isOk());
    EXPECT_NE(many.status().toString().find(std::to_string(kMaxStages + 1) + " stages > limit " +
                                            std::to_string(kMaxStages)),
              std::string::npos)
        << many.status().toString();
    auto at_limit = parse(withStages(kMaxStages));
    if (!at_limit.isOk())  // other checks may object to copies of one stage; the limit must not
        EXPECT_EQ(at_limit.status().toString().find("stages > limit"), std::string::npos)
            << at_limit.status().toString();
}

TEST(ModelPackageStages, ParsesEveryKey) {
    auto r = parse(stagedJson());
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    const ModelPackage& p = *r;
    EXPECT_EQ(p.format_version, 2);
    EXPECT_EQ(p.citation, "Fisch et al. 2024");
    ASSERT_EQ(p.stages.size(), 2u);
    ASSERT_EQ(p.models.size(), 2u);  // one file per stage, hashed like an ensemble's
    EXPECT_EQ(p.models[1].file, "model.onnx");
    const StageSpec& bbox = p.stages[0];
    EXPECT_EQ(bbox.shape, (std::vector<int64_t>{128, 128, 128}));
    EXPECT_EQ(bbox.interpolation, Interpolation::kNearestExact);
    EXPECT_EQ(bbox.normalization.scheme, Normalization::Scheme::kPercentile);
    EXPECT_EQ(bbox.normalization.percentile_high, 99.5);
    EXPECT_TRUE(bbox.normalization.zscore);
    EXPECT_EQ(bbox.normalization.std_ddof, 1);
    EXPECT_EQ(bbox.normalization.affine_scale, 0.226);
    EXPECT_EQ(bbox.normalization.percentiles_of_stage, -1);
    EXPECT_EQ(bbox.output.kind, StageOutputKind::kProbability);
    EXPECT_EQ(bbox.outputChannels(), 2);
    EXPECT_TRUE(bbox.postprocess.largest_component);
    EXPECT_FALSE(bbox.crop_to.has_value());
    const StageSpec& brain = p.stages[1];
    ASSERT_TRUE(brain.crop_to.has_value());
    EXPECT_EQ(brain.crop_to->stage_index, 0);
    EXPECT_EQ(brain.crop_to->margin_fraction, 0.1);
    EXPECT_EQ(brain.crop_to->slice_fraction, 0.02);
    EXPECT_EQ(brain.normalization.percentiles_of_stage, 0);
    EXPECT_EQ(brain.output.labels, (std::vector<int>{1}));  // default: the first label
    EXPECT_EQ(brain.postprocess.fill_holes, FillHoles::k3D);
    ASSERT_EQ(p.measurements.size(), 1u);
    EXPECT_EQ(p.measurements[0].name, "tiv_ml");
    EXPECT_EQ(p.measurements[0].labels, (std::vector<int>{1}));
}

TEST(ModelPackageStages, WritesWhatItReads) {
    json j = stagedJson();
    j["stages"][0].erase("shape");
    j["stages"][0]["spacing_mm"] = {2.0, 2.0, 3.0};
    j["stages"][0]["patch_size"] = {32, 32, 16};
    j["stages"][0]["interpolation"] = "spline3";
    j["stages"][0]["inference"] = {{"overlap", 0.25}, {"mirror_axes", {0, 1}}};
    j["stages"][0]["output"] = {{"kind", "softmax"}, {"labels", {7}}};
    j["stages"][1]["crop_to"] = {{"stage", "bbox"}, {"label", 7}, {"margin_mm", 12.5}};
    j["stages"][1]["normalization"] = {
        {"scheme", "window"}, {"window", {-100, 300}}, {"range", {-1, 1}}};
    auto first = parse(j);
    ASSERT_TRUE(first.isOk()) << first.status().toString();
    auto second = parseModelPackage(modelPackageToJson(*first), "written");
    ASSERT_TRUE(second.isOk()) << second.status().toString() << modelPackageToJson(*first);
    EXPECT_EQ(modelPackageToJson(*first), modelPackageToJson(*second));
    const StageSpec& s0 = second->stages[0];
    EXPECT_EQ(s0.patch_size, (std::vector<int64_t>{32, 32, 16}));
    EXPECT_EQ(s0.spacing_mm, (std::vector<double>{2.0, 2.0, 3.0}));
    EXPECT_EQ(s0.inference.overlap, 0.25);
    EXPECT_EQ(s0.outputChannels(), 2);
    EXPECT_EQ(s0.channelLabelValues(), (std::vector<int>{0, 7}));
    EXPECT_EQ(second->stages[1].crop_to->margin_mm, 12.5);
    EXPECT_EQ(second->stages[1].normalization.scheme, Normalization::Scheme::kWindow);
    EXPECT_EQ(second->stages[1].normalization.range_low, -1.0);
}

TEST(ModelPackageStages, CascadeLinksToMissingStagesOrLabelsAreRefused) {
    json j = stagedJson();
    j["stages"][1]["crop_to"]["stage"] = "box";
    expectError(j, "stages[1].crop_to.stage", "no earlier stage is named \"box\"");
    j = stagedJson();
    j["stages"][1]["crop_to"]["label"] = 2;
    expectError(j, "stages[1].crop_to.label", "stage \"bbox\" produces no label 2");
    // A link to a later stage (or to itself) is a link to a missing stage.
    j = stagedJson();
    j["stages"][0]["crop_to"] = {{"stage", "brain"}, {"label", 1}};
    expectError(j, "stages[0].crop_to.stage", "this is the first stage");
    j = stagedJson();
    j["stages"][1]["crop_to"]["stage"] = "brain";
    expectError(j, "stages[1].crop_to.stage", "earlier stages: \"bbox\"");
    j = stagedJson();
    j["stages"][1]["normalization"]["percentiles_of"] = "nowhere";
    expectError(j, "stages[1].normalization.percentiles_of", "no earlier stage");
    j = stagedJson();
    j["stages"][1]["crop_to"]["margin_fraction"] = -0.1;
    expectError(j, "stages[1].crop_to.margin_fraction", "[0, 10]");
    j = stagedJson();
    j["stages"][1]["crop_to"]["slice_fraction"] = 1.0;
    expectError(j, "stages[1].crop_to.slice_fraction", "[0, 1)");
    j = stagedJson();
    j["stages"][1]["crop_to"].erase("label");
    expectError(j, "stages[1].crop_to.label", "missing");
}

TEST(ModelPackageStages, EveryStageKeyIsChecked) {
    json j = stagedJson();
    j["stages"][1]["shapee"] = {1, 2, 3};
    expectError(j, "stages[1].shapee", "unknown key");
    j = stagedJson();
    j["stages"][1]["crop_to"]["margin"] = 0.1;
    expectError(j, "stages[1].crop_to.margin", "unknown key");
    j = stagedJson();
    j["stages"][1]["name"] = "bbox";
    expectError(j, "stages[1].name", "used twice");
    j = stagedJson();
    j["stages"][0]["spacing_mm"] = {1, 1, 1};
    expectError(j, "stages[0].spacing_mm", "not both");
    j = stagedJson();
    j["stages"][0].erase("shape");
    expectError(j, "stages[0].shape", "missing");
    j = stagedJson();
    j["stages"][0].erase("shape");
    j["stages"][0]["spacing_mm"] = {1, 1, 1};
    expectError(j, "stages[0].patch_size", "missing");
    j = stagedJson();
    j["stages"][0]["patch_size"] = {8, 8, 8};
    expectError(j, "stages[0].patch_size", "drop patch_size");
    j = stagedJson();
    j["stages"][0]["shape"] = {128, 0, 128};
    expectError(j, "stages[0].shape[1]", "1..4096");
    j = stagedJson();
    j["stages"][0]["interpolation"] = "cubic";
    expectError(j, "stages[0].interpolation", "nearest-exact");
    j = stagedJson();
    j["stages"][0]["inference"] = {{"overlap", 0.5}};
    expectError(j, "stages[0].inference", "fixed shape");
    j = stagedJson();
    j["stages"][0]["output"]["kind"] = "argmax";
    expectError(j, "stages[0].output.kind", "\"probability\"");
    j = stagedJson();
    j["stages"][0]["output"]["channel"] = 2;
    expectError(j, "stages[0].output.channel", "not one of the network's 2 channels");
    j = stagedJson();
    j["stages"][0]["output"]["threshold"] = 1.5;
    expectError(j, "stages[0].output.threshold", "(0, 1)");
    j = stagedJson();
    j["stages"][0]["output"].erase("channels");
    expectError(j, "stages[0].output.channels", "missing");
    j = stagedJson();
    j["stages"][1]["output"]["label"] = 3;
    expectError(j, "stages[1].output", "label 3 is not in \"labels\"");
    j = stagedJson();
    j["stages"][0]["postprocess"]["fill_holes"] = "2d";
    expectError(j, "stages[0].postprocess.fill_holes", "\"3d\"");
    j = stagedJson();
    j["stages"][0]["postprocess"]["largest"] = true;
    expectError(j, "stages[0].postprocess.largest", "unknown key");
    j = stagedJson();
    j["stages"][0]["normalization"]["percentiles"] = {0.5, 100.5};
    expectError(j, "stages[0].normalization.percentiles", "[0, 100]");
    j = stagedJson();
    j["stages"][0]["normalization"]["percentiles"] = {99.5, 0.5};
    expectError(j, "stages[0].normalization.percentiles", "below");
    j = stagedJson();
    j["stages"][0]["normalization"]["std_ddof"] = 2;
    expectError(j, "stages[0].normalization.std_ddof", "0..1");
    j = stagedJson();
    j["stages"][0]["normalization"]["percentiles_of"] = "bbox";  // itself: allowed
    EXPECT_TRUE(parse(j).isOk());
    j = stagedJson();
    j["stages"][0]["normalization"] = {{"scheme", "window"}};
    expectError(j, "stages[0].normalization.window", "missing");
    j = stagedJson();
    j["stages"][0]["normalization"] = {{"scheme", "minmax"}};
    expectError(j, "stages[0].normalization.scheme", "\"percentile\" or \"window\"");
    j = stagedJson();
    j["stages"][0]["sha256"] = "abc";
    expectError(j, "stages[0].sha256", "64 lower-case hex digits");
    j = stagedJson();
    j["stages"][0]["file"] = "../bbox.onnx";
    expectError(j, "stages[0].file", "inside the package folder");
    j = stagedJson();
    j["stages"] = json::array();
    expectError(j, "stages", "at least one stage");
}

TEST(ModelPackageStages, VersionsKeepTheirOwnKeys) {
    json j = stagedJson();
    j["spacing_mm"] = {1, 1, 1};
    expectError(j, "spacing_mm", "not a top-level key in format_version 2");
    j = stagedJson();
    j["sha256"] = std::string(64, 'a');
    expectError(j, "sha256", "not a top-level key in format_version 2");
    j = stagedJson();
    j.erase("stages");
    expectError(j, "stages", "missing");
    j = stagedJson();
    j["channels"][0]["normalization"] = {{"scheme", "none"}};
    expectError(j, "channels[0].normalization", "unknown key");
    j = stagedJson();
    j["stagez"] = json::array();
    expectError(j, "stagez", "unknown key");
    j = validJson();
    j["stages"] = stagedJson()["stages"];
    expectError(j, "stages", "needs \"format_version\": 2");
    j = validJson();
    j["citation"] = "x";
    expectError(j, "citation", "needs \"format_version\": 2");
}

// The new normalisation schemes also serve version 1 channels (normalised before resampling),
// without the stage reference.
TEST(ModelPackageStages, VersionOneChannelsTakeWindowAndPercentile) {
    json j = validJson();
    j["channels"][2]["normalization"] = {{"scheme", "window"}, {"window", {-160, 240}}};
    j["channels"][0]["normalization"] = {{"scheme", "percentile"}, {"percentiles", {1, 99}}};
    auto r = parse(j);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r->channels[2].normalization.scheme, Normalization::Scheme::kWindow);
    EXPECT_EQ(r->channels[2].normalization.clip_low, -160.0);
    EXPECT_TRUE(r->channels[2].normalization.has_range);  // [0, 1] by default
    EXPECT_EQ(r->channels[2].normalization.range_high, 1.0);
    EXPECT_EQ(r->channels[0].normalization.percentile_low, 1.0);
    EXPECT_FALSE(r->channels[0].normalization.zscore);
    j["channels"][0]["normalization"]["percentiles_of"] = "bbox";
    expectError(j, "channels[0].normalization.percentiles_of", "unknown key");
}

TEST(ModelPackageStages, MeasurementsAreChecked) {
    json j = stagedJson();
    j["measurements"][0]["labels"] = {2};
    expectError(j, "measurements[0].labels[0]", "label 2 is not in \"labels\"");
    j = stagedJson();
    j["measurements"][0]["kind"] = "count";
    expectError(j, "measurements[0].kind", "volume_ml");
    j = stagedJson();
    j["measurements"].push_back(j["measurements"][0]);
    expectError(j, "measurements[1].name", "twice");
    j = stagedJson();
    j["measurements"][0]["unit"] = "cm3";
    expectError(j, "measurements[0].unit", "unknown key");
    j = stagedJson();
    j["measurements"][0].erase("labels");
    expectError(j, "measurements[0].labels", "missing");
}

// Issue 15 parts 1, 5, 6: the cascade's one-hot link, region outputs and result stages.
json cascadeJson() {
    json j = stagedJson();
    j["labels"] = {{{"value", 1}, {"name", "kidney"}, {"color", {255, 0, 0}}},
                   {{"value", 2}, {"name", "tumour"}, {"color", {0, 255, 0}}}};
    j["stages"][0] = {{"name", "3d_lowres"},
                      {"file", "lowres.onnx"},
                      {"sha256", std::string(64, 'b')},
                      {"spacing_mm", {2.0, 2.0, 2.5}},
                      {"patch_size", {64, 64, 48}},
                      {"normalization", {{"scheme", "zscore"}}},
                      {"output", {{"kind", "softmax"}, {"labels", {2, 1}}}}};
    j["stages"][1] = {{"name", "3d_cascade_fullres"},
                      {"file", "fullres.onnx"},
                      {"sha256", std::string(64, 'c')},
                      {"one_hot_from", {{"stage", "3d_lowres"}}},
                      {"spacing_mm", {1.0, 1.0, 1.25}},
                      {"patch_size", {96, 96, 64}},
                      {"normalization", {{"scheme", "zscore"}}},
                      {"output", {{"kind", "softmax"}, {"labels", {1, 2}}}}};
    j.erase("measurements");
    return j;
}

TEST(ModelPackageStages, OneHotLinkIsReadAndWritten) {
    auto r = parse(cascadeJson());
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    const StageSpec& full = r->stages[1];
    ASSERT_TRUE(full.one_hot_from.has_value());
    EXPECT_EQ(full.one_hot_from->stage_index, 0);
    // nnU-Net: one channel per foreground label, ascending (not the stage's channel order).
    EXPECT_EQ(full.one_hot_from->labels, (std::vector<int>{1, 2}));
    EXPECT_EQ(full.inputChannels(r->channels.size()), 3);
    EXPECT_EQ(r->stages[0].inputChannels(r->channels.size()), 1);
    EXPECT_FALSE(r->stages[0].result);
    EXPECT_TRUE(full.result);
    auto again = parseModelPackage(modelPackageToJson(*r), "written");
    ASSERT_TRUE(again.isOk()) << again.status().toString();
    EXPECT_EQ(modelPackageToJson(*r), modelPackageToJson(*again));
    json j = cascadeJson();
    j["stages"][1]["one_hot_from"]["labels"] = {2};
    r = parse(j);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r->stages[1].inputChannels(1), 2);
}

TEST(ModelPackageStages, OneHotLinksToMissingStagesOrLabelsAreRefused) {
    json j = cascadeJson();
    j["stages"][1]["one_hot_from"]["stage"] = "3d_fullres";
    expectError(j, "stages[1].one_hot_from.stage", "no earlier stage is named \"3d_fullres\"");
    j = cascadeJson();
    j["stages"][1]["one_hot_from"]["labels"] = {1, 3};
    expectError(j, "stages[1].one_hot_from.labels[1]", "stage \"3d_lowres\" produces no label 3");
    j = cascadeJson();
    j["stages"][1]["one_hot_from"]["labels"] = {1, 1};
    expectError(j, "stages[1].one_hot_from.labels[1]", "twice");
    j = cascadeJson();
    j["stages"][0]["one_hot_from"] = {{"stage", "3d_cascade_fullres"}};
    expectError(j, "stages[0].one_hot_from.stage", "this is the first stage");
    j = cascadeJson();
    j["stages"][1]["one_hot_from"]["label"] = 1;
    expectError(j, "stages[1].one_hot_from.label", "unknown key");
}

TEST(ModelPackageStages, ResultStagesAreChecked) {
    json j = cascadeJson();
    j["stages"][1]["result"] = false;
    expectError(j, "stages[1].result", "the last stage always");
    // Two result stages may not both produce a label.
    j = cascadeJson();
    j["stages"][0]["result"] = true;
    expectError(j, "stages[1].output", "label 1 is produced by two result stages");
    // A result stage's labels must be in "labels".
    j = cascadeJson();
    j["stages"][0]["result"] = true;
    j["stages"][0]["output"]["labels"] = {5};
    expectError(j, "stages[0].output", "its label 5 is not in \"labels\"");
    j["labels"].push_back({{"value", 5}, {"name", "body"}, {"color", {0, 0, 255}}});
    auto r = parse(j);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_TRUE(r->stages[0].result);
}

// "grid": "monai" (MONAI Spacingd/Invertd, pipeline/monai_spacing.h): read and written back;
// refused where it cannot be repeated (a fixed shape, another interpolation, a sigmoid output, a
// cascade link) and for an unknown grid, naming the key.
TEST(ModelPackageStages, MonaiGridIsReadAndChecked) {
    auto monai = [] {
        json j = stagedJson();
        j["stages"].erase(1);
        j["stages"][0].erase("shape");
        j["stages"][0]["spacing_mm"] = {3.0, 3.0, 3.5};
        j["stages"][0]["patch_size"] = {64, 64, 32};
        j["stages"][0]["interpolation"] = "linear";
        j["stages"][0]["grid"] = "monai";
        j["stages"][0]["normalization"] = {
            {"scheme", "window"}, {"window", {-1000, 400}}, {"range", {0, 1}}};
        j["stages"][0]["output"] = {{"kind", "softmax"}};
        j["stages"][0].erase("postprocess");
        j.erase("measurements");
        return j;
    };
    auto r = parse(monai());
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r->stages[0].grid, StageGrid::kMonai);
    auto again = parseModelPackage(modelPackageToJson(*r), "written");
    ASSERT_TRUE(again.isOk()) << again.status().toString();
    EXPECT_EQ(again->stages[0].grid, StageGrid::kMonai);
    json j = monai();
    j["stages"][0]["grid"] = "fov";
    r = parse(j);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r->stages[0].grid, StageGrid::kFieldOfView);
    j = monai();
    j["stages"][0]["grid"] = "nnunet";
    expectError(j, "stages[0].grid", "expected \"fov\"");
    j = monai();
    j["stages"][0]["interpolation"] = "spline3";
    expectError(j, "stages[0].grid", "\"interpolation\": \"linear\"");
    j = monai();
    j["stages"][0]["output"] = {{"kind", "sigmoid"}};
    expectError(j, "stages[0].grid", "softmax output");
    j = stagedJson();
    j["stages"][0]["grid"] = "monai";
    expectError(j, "stages[0].grid", "not a fixed shape");
}

// TotalSegmentator's packages (tools/export_totalsegmentator.py): "grid": "totalsegmentator"
// and a "roi_subset" crop link are read and written back; the grid is refused where it cannot be
// repeated and the link refuses the keys of the label_box rule, naming them.
TEST(ModelPackageStages, TotalSegmentatorGridAndRoiSubsetLink) {
    auto totalseg = [] {
        json j = stagedJson();
        for (json& st : j["stages"]) {
            st.erase("shape");
            st["spacing_mm"] = {6.0, 6.0, 6.0};
            st["patch_size"] = {32, 32, 32};
            st["interpolation"] = "linear";
            st["grid"] = "totalsegmentator";
            st["normalization"] = {
                {"scheme", "ct"}, {"clip", {-1000, 1000}}, {"mean", 50}, {"std", 200}};
            st["output"] = {{"kind", "softmax"}, {"labels", {1}}};
            st.erase("postprocess");
        }
        j["stages"][0]["result"] = false;
        j["stages"][1]["crop_to"] = {{"stage", "bbox"}, {"rule", "roi_subset"}, {"margin_mm", 20}};
        j.erase("measurements");
        return j;
    };
    auto r = parse(totalseg());
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r->stages[1].grid, StageGrid::kTotalSegmentator);
    ASSERT_TRUE(r->stages[1].crop_to.has_value());
    EXPECT_EQ(r->stages[1].crop_to->rule, CropRule::kRoiSubset);
    EXPECT_EQ(r->stages[1].crop_to->margin_mm, 20.0);
    auto again = parseModelPackage(modelPackageToJson(*r), "written");
    ASSERT_TRUE(again.isOk()) << again.status().toString();
    EXPECT_EQ(again->stages[0].grid, StageGrid::kTotalSegmentator);
    EXPECT_EQ(again->stages[1].crop_to->rule, CropRule::kRoiSubset);

    json j = totalseg();
    j["stages"][1]["crop_to"]["label"] = 1;
    expectError(j, "stages[1].crop_to.label", "not used by \"rule\": \"roi_subset\"");
    j = totalseg();
    j["stages"][1]["crop_to"]["labels"] = {1};
    expectError(j, "stages[1].crop_to.labels", "--labels chooses them");
    j = totalseg();
    j["stages"][1]["crop_to"]["rule"] = "roi";
    expectError(j, "stages[1].crop_to.rule", "expected \"label_box\"");

    // A crop task's link ("rule": "labels"): fixed values of the linked stage, read and written
    // back; a value the stage does not produce is refused, naming it and listing the stage's.
    j = totalseg();
    j["stages"][1]["crop_to"] = {
        {"stage", "bbox"}, {"rule", "labels"}, {"labels", {1}}, {"margin_mm", 20}};
    auto crop = parse(j);
    ASSERT_TRUE(crop.isOk()) << crop.status().toString();
    EXPECT_EQ(crop->stages[1].crop_to->rule, CropRule::kLabelSet);
    EXPECT_EQ(crop->stages[1].crop_to->labels, std::vector<int>{1});
    auto crop_again = parseModelPackage(modelPackageToJson(*crop), "written");
    ASSERT_TRUE(crop_again.isOk()) << crop_again.status().toString();
    EXPECT_EQ(crop_again->stages[1].crop_to->rule, CropRule::kLabelSet);
    EXPECT_EQ(crop_again->stages[1].crop_to->labels, std::vector<int>{1});
    j["stages"][1]["crop_to"]["labels"] = {1, 7};
    expectError(j, "stages[1].crop_to.labels", "produces no label 7 (its labels: 1)");
    j["stages"][1]["crop_to"].erase("labels");
    expectError(j, "stages[1].crop_to.labels", "");
    j["stages"][1]["crop_to"]["label"] = 1;
    expectError(j, "stages[1].crop_to.label", "not used by \"rule\": \"labels\"");
    j = totalseg();
    j["stages"][1]["interpolation"] = "spline3";
    expectError(j, "stages[1].grid", "order 1");
    j = totalseg();
    j["stages"][1]["output"] = {{"kind", "sigmoid"}};
    expectError(j, "stages[1].grid", "softmax");
    j = stagedJson();
    j["stages"][0]["grid"] = "totalsegmentator";
    expectError(j, "stages[0].grid", "not a fixed shape");
}

TEST(ModelPackageStages, RegionOutputsAsNnUNetExportsThem) {
    json j = cascadeJson();
    j["labels"].push_back({{"value", 3}, {"name", "enhancing"}, {"color", {0, 0, 255}}});
    j["stages"].erase(0);
    j["stages"][0].erase("one_hot_from");
    j["stages"][0]["output"] = {{"kind", "regions"},
                                {"regions", {{1, 2, 3}, {2, 3}, {3}}},
                                {"regions_class_order", {1, 2, 3}}};
    auto r = parse(j);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    const StageOutput& out = r->stages[0].output;
    EXPECT_EQ(out.kind, StageOutputKind::kRegions);
    EXPECT_EQ(out.labels, (std::vector<int>{1, 2, 3}));
    EXPECT_EQ(out.regions[1], (std::vector<int>{2, 3}));
    EXPECT_EQ(r->stages[0].outputChannels(), 3);
    EXPECT_EQ(r->stages[0].channelLabelValues(), (std::vector<int>{1, 2, 3}));
    auto again = parseModelPackage(modelPackageToJson(*r), "written");
    ASSERT_TRUE(again.isOk()) << again.status().toString();
    EXPECT_EQ(modelPackageToJson(*r), modelPackageToJson(*again));

    json bad = j;
    bad["stages"][0]["output"]["regions_class_order"] = {1, 2};
    expectError(bad, "stages[0].output.regions_class_order", "one label value per region");
    bad = j;
    bad["stages"][0]["output"]["regions"] = {{1, 2, 3}, json::array(), {3}};
    expectError(bad, "stages[0].output.regions[1]", "at least one label value");
    bad = j;
    bad["stages"][0]["output"]["threshold"] = 0.4;
    expectError(bad, "stages[0].output.threshold", "unknown key");
    bad = j;
    bad["stages"][0]["output"].erase("regions_class_order");
    expectError(bad, "stages[0].output.regions_class_order", "missing");
    bad = j;
    bad["stages"][0]["output"]["regions_class_order"] = {1, 2, 4};
    expectError(bad, "stages[0].output", "its label 4 is not in \"labels\"");
}

// Issue 15 part 4: channel names and the series each channel takes.
TEST(ModelPackage, ChannelsHaveNamesAndSeriesRules) {
    json j = validJson();
    j["channels"][0]["name"] = "T1";
    j["channels"][0]["match"] = {{"series_description", "t1.*mprage"}, {"image_type", "ORIGINAL"}};
    j["channels"][1]["match"] = {{"echo_time_ms", {80, 120}}};
    auto r = parse(j);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r->channels[0].name, "T1");
    EXPECT_EQ(r->channels[1].name, "channel1");  // default for several channels
    EXPECT_EQ(r->channels[0].match.series_description, "t1.*mprage");
    EXPECT_EQ(r->channels[0].match.image_type, "ORIGINAL");
    ASSERT_TRUE(r->channels[1].match.echo_time_ms.has_value());
    EXPECT_EQ((*r->channels[1].match.echo_time_ms)[1], 120.0);
    EXPECT_TRUE(r->channels[2].match.empty());
    auto again = parseModelPackage(modelPackageToJson(*r), "written");
    ASSERT_TRUE(again.isOk()) << again.status().toString();
    EXPECT_EQ(modelPackageToJson(*r), modelPackageToJson(*again));
    // One channel: its name defaults to the modality.
    json one = validJson();
    one["channels"].erase(1);
    one["channels"].erase(1);
    auto single = parse(one);
    ASSERT_TRUE(single.isOk()) << single.status().toString();
    EXPECT_EQ(single->channels[0].name, "MR");

    json bad = j;
    bad["channels"][0]["match"]["series_description"] = "t1(";
    expectError(bad, "channels[0].match.series_description", "not a valid regular expression");
    bad = j;
    bad["channels"][1]["name"] = "T1";
    expectError(bad, "channels[1].name", "used twice");
    bad = j;
    bad["channels"][0]["name"] = "T1 weighted";
    expectError(bad, "channels[0].name", "letters, digits");
    bad = j;
    bad["channels"][1]["match"] = {{"echo_time_ms", {120, 80}}};
    expectError(bad, "channels[1].match.echo_time_ms", "low <= high");
    bad = j;
    bad["channels"][1]["match"] = {{"sequence", "tse"}};
    expectError(bad, "channels[1].match.sequence", "unknown key");
    // Format version 2: one image channel (stages normalise one channel).
    json v2 = stagedJson();
    v2["channels"].push_back({{"modality", "MR"}, {"name", "T2"}});
    expectError(v2, "channels", "format_version 2 packages take one image channel");
}

// Per-label post-processing, 6-connectivity and the stage grid (TotalSegmentator's body task:
// largest body_trunc component, small body_extremities components removed, on its resampled
// grid): read, written back, and refused where they cannot apply.
TEST(ModelPackageStages, PerLabelPostprocessOnTheStageGrid) {
    auto body = [] {
        json j = stagedJson();
        json& st = j["stages"][1];
        st.erase("shape");
        st.erase("crop_to");
        st["spacing_mm"] = {1.5, 1.5, 1.5};
        st["patch_size"] = {48, 48, 48};
        st["interpolation"] = "linear";
        st["grid"] = "totalsegmentator";
        st["normalization"] = {
            {"scheme", "ct"}, {"clip", {-1000, 1000}}, {"mean", 50}, {"std", 200}};
        st["output"] = {{"kind", "softmax"}, {"labels", {1, 2}}};
        st["postprocess"] = json::parse(R"({"grid": "stage", "connectivity": 6, "labels":
            {"1": {"largest_component": true}, "2": {"min_component_ml": 50}}})");
        j["labels"].push_back({{"value", 2}, {"name", "body_extremities"}, {"color", {0, 0, 255}}});
        j.erase("measurements");
        return j;
    };
    auto r = parse(body());
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    auto check = [](const StagePostprocess& pp) {
        EXPECT_TRUE(pp.on_stage_grid);
        EXPECT_FALSE(pp.fully_connected);
        EXPECT_FALSE(pp.largest_component);  // the stage-wide rule stays off
        ASSERT_EQ(pp.labels.size(), 2u);
        EXPECT_TRUE(pp.labels.at(1).largest_component);
        EXPECT_EQ(pp.labels.at(1).min_component_ml, 0.0);
        EXPECT_FALSE(pp.labels.at(2).largest_component);
        EXPECT_EQ(pp.labels.at(2).min_component_ml, 50.0);
        EXPECT_TRUE(pp.any());
    };
    check(r->stages[1].postprocess);
    auto again = parseModelPackage(modelPackageToJson(*r), "written");
    ASSERT_TRUE(again.isOk()) << again.status().toString();
    check(again->stages[1].postprocess);
    // The defaults: 26-connected, on the input grid.
    EXPECT_TRUE(r->stages[0].postprocess.fully_connected);
    EXPECT_FALSE(r->stages[0].postprocess.on_stage_grid);

    json j = body();
    j["stages"][1]["postprocess"]["labels"]["3"] = {{"largest_component", true}};
    expectError(j, "stages[1].postprocess.labels.3", "produces no label 3");
    j = body();
    j["stages"][1]["postprocess"]["labels"]["spleen"] = {{"largest_component", true}};
    expectError(j, "stages[1].postprocess.labels.spleen", "label value");
    j = body();
    j["stages"][1]["postprocess"]["labels"]["1"]["grid"] = "stage";
    expectError(j, "stages[1].postprocess.labels.1.grid", "unknown key");
    j = body();
    j["stages"][1]["postprocess"]["connectivity"] = 18;
    expectError(j, "stages[1].postprocess.connectivity", "expected 6");
    j = body();
    j["stages"][1]["postprocess"]["grid"] = "network";
    expectError(j, "stages[1].postprocess.grid", "\"stage\"");
    j = body();
    j["stages"][1]["grid"] = "fov";
    expectError(j, "stages[1].postprocess.grid", "needs \"grid\": \"totalsegmentator\"");
}

}  // namespace
}  // namespace voxseg::engine
