#include "engine/model_package.h"

#include "engine/sha256.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
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
         "type": {"code": "5001000", "scheme": "SCT", "meaning": "Hippocampus"}},
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
    EXPECT_EQ(p.labels[0].type->meaning, "Hippocampus");
    EXPECT_FALSE(p.labels[1].category.has_value());
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
    EXPECT_EQ(second->models.size(), 2u);
    EXPECT_EQ(second->outputChannels(), 2);
    EXPECT_EQ(second->channelLabelValues(), (std::vector<int>{1, 2}));
    EXPECT_EQ(second->inference.convention, WindowConvention::kMonai);
    EXPECT_FALSE(second->inference.gaussian);
    EXPECT_EQ(second->orientation, "RAS");
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
    j["format_version"] = 2;
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

}  // namespace
}  // namespace voxseg::engine
