// A stage's mask (pipeline/mask_input.h) and the tiling of 'valid' networks
// (pipeline/valid_tiles.h), the two pieces pyliverlesionseg's lesion stage needs: the dilation
// against scipy, the masked and cut image, DeepVoxNet's tile starts, and a whole tiled run with a
// tiny 'valid' network whose answer is known (a shift by one voxel: every output voxel shows
// where its input came from, 0 where that lies outside the image).
#include "pipeline/mask_input.h"
#include "pipeline/valid_tiles.h"

#include "engine/backend.h"
#include "engine/model/model_package.h"
#include "engine/onnx/import.h"
#include "tests/pipeline/test_stage_package.h"
#include "tests/pipeline/test_volumes.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

namespace voxseg::pipeline {
namespace {
using testing::makeGeometry;

Volume maskWith(const std::array<int64_t, 3>& size,
                const std::vector<std::array<int64_t, 3>>& voxels) {
    Volume m = Volume::allocate<uint8_t>(makeGeometry(size, {1, 1, 1}));
    for (const auto& v : voxels) m.data<uint8_t>()[(v[2] * size[1] + v[1]) * size[0] + v[0]] = 1;
    return m;
}

int64_t count(const Volume& m) {
    int64_t n = 0;
    for (int64_t i = 0; i < m.geometry().voxelCount(); ++i) n += m.data<uint8_t>()[i] != 0;
    return n;
}

// scipy 1.17: binary_dilation(m, iterate_structure(generate_binary_structure(3, 2), 2)).sum()
// is 93 for one voxel inside a 7^3 volume and 91 for voxels (0,0,0) and (5,4,2) of 7x6x5 (border
// value 0, the structure cut at the edges); one 18-neighbourhood step gives 19.
TEST(MaskInput, Dilate18TwiceIsScipysIteratedStructure) {
    auto once = dilate18(maskWith({7, 7, 7}, {{3, 3, 3}}), 1);
    ASSERT_TRUE(once.isOk()) << once.status().toString();
    EXPECT_EQ(count(*once), 19);
    auto twice = dilate18(maskWith({7, 7, 7}, {{3, 3, 3}}), 2);
    ASSERT_TRUE(twice.isOk());
    EXPECT_EQ(count(*twice), 93);
    auto edges = dilate18(maskWith({7, 6, 5}, {{0, 0, 0}, {5, 4, 2}}), 2);
    ASSERT_TRUE(edges.isOk());
    EXPECT_EQ(count(*edges), 91);
    // corners of the 3^3 neighbourhood are not in it
    EXPECT_EQ(once->data<uint8_t>()[(2 * 7 + 2) * 7 + 2], 0);
    EXPECT_EQ(once->data<uint8_t>()[(3 * 7 + 2) * 7 + 2], 1);
}

TEST(MaskInput, MaskedImageIsCutToTheBoxWithTheOutsideValue) {
    const Geometry g = makeGeometry({6, 5, 4}, {1, 1, 1});
    Volume image = Volume::allocate<float>(g);
    for (int64_t i = 0; i < g.voxelCount(); ++i) image.data<float>()[i] = static_cast<float>(i);
    const Volume mask = maskWith({6, 5, 4}, {{1, 1, 1}, {3, 2, 2}});
    const auto box = maskBox(mask);
    ASSERT_TRUE(box.has_value());
    EXPECT_EQ(box->begin, (std::array<int64_t, 3>{1, 1, 1}));
    EXPECT_EQ(box->size, (std::array<int64_t, 3>{3, 2, 2}));
    EXPECT_FALSE(maskBox(Volume::allocate<uint8_t>(g)).has_value());
    auto cut = maskedImage(image, mask, *box, -0.5);
    ASSERT_TRUE(cut.isOk()) << cut.status().toString();
    EXPECT_EQ(cut->geometry().size, box->size);
    const float* p = cut->data<float>();
    EXPECT_FLOAT_EQ(p[0], static_cast<float>((1 * 5 + 1) * 6 + 1));  // (1,1,1): inside
    EXPECT_FLOAT_EQ(p[(1 * 2 + 1) * 3 + 2], static_cast<float>((2 * 5 + 2) * 6 + 3));
    EXPECT_FLOAT_EQ(p[1], -0.5f);  // (2,1,1): outside the mask
    int64_t outside = 0;
    for (int64_t i = 0; i < cut->geometry().voxelCount(); ++i) outside += p[i] == -0.5f;
    EXPECT_EQ(outside, 12 - 2);
    EXPECT_FLOAT_EQ(image.data<float>()[(1 * 5 + 1) * 6 + 2], 38.0f);  // the input is kept
}

// DeepVoxNet.predict: [*range(0, n, s), n - s] when s does not divide n, s = min(n, o).
TEST(ValidTiles, StartsAreDeepVoxNets) {
    EXPECT_EQ(validTileStarts(190, 92), (std::vector<int64_t>{0, 92, 184, 98}));
    EXPECT_EQ(validTileStarts(184, 92), (std::vector<int64_t>{0, 92}));
    EXPECT_EQ(validTileStarts(30, 42), (std::vector<int64_t>{0}));
    EXPECT_EQ(validTileStarts(92, 92), (std::vector<int64_t>{0}));
}

// Conv 3x3x3 without padding whose only weight 1 sits at kernel index (0, 1, 1): output voxel
// (i, j, k) = input (i, j + 1, k + 1) of its patch, i.e. image (i - 1, j, k) once the patch is
// centred ('valid': the output is 1 voxel smaller per side).
std::string shiftNetworkOnnx() {
    onnx::ModelProto model;
    model.set_ir_version(8);
    model.add_opset_import()->set_version(17);
    auto* g = model.mutable_graph();
    g->set_name("shift");
    auto* in = g->add_input();
    in->set_name("input");
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto_DataType_FLOAT);
    for (const char* d : {"N", "C", "D", "H", "W"})
        tt->mutable_shape()->add_dim()->set_dim_param(d);
    auto* w = g->add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto_DataType_FLOAT);
    for (int d : {1, 1, 3, 3, 3}) w->add_dims(d);
    for (int i = 0; i < 27; ++i) w->add_float_data(i == 4 ? 1.0f : 0.0f);  // (0, 1, 1)
    auto* conv = g->add_node();
    conv->set_op_type("Conv");
    conv->add_input("input");
    conv->add_input("w");
    conv->add_output("out");
    g->add_output()->set_name("out");
    return model.SerializeAsString();
}

TEST(ValidTiles, ShiftNetworkGivesTheShiftedImageWithZerosOutside) {
    engine::OnnxImportOptions options;
    options.input_shapes = {{1, 1, 7, 6, 5}};
    auto graph = engine::importOnnxBytes(shiftNetworkOnnx(), options, "shift");
    ASSERT_TRUE(graph.isOk()) << graph.status().toString();
    auto backend = engine::makeReferenceBackend();
    // patch 7x6x5 -> output 5x4x3; the image 13x11x2 needs 4x4x1 tiles (the last axis is
    // smaller than the output: one tile, centred, its output clipped)
    auto tiles = ValidTiles::create(*backend, *graph, 1, {7, 6, 5}, {5, 4, 3}, {});
    ASSERT_TRUE(tiles.isOk()) << tiles.status().toString();
    const int64_t d0 = 13, d1 = 11, d2 = 2;
    engine::Tensor image(engine::DType::kFloat32, {1, d0, d1, d2});
    for (int64_t i = 0; i < image.numel(); ++i) image.data<float>()[i] = 1.0f + i;
    engine::SlidingWindowStats stats;
    auto out = (*tiles)->run(image, {}, &stats);
    ASSERT_TRUE(out.isOk()) << out.status().toString();
    EXPECT_EQ(stats.patches, 4 * 4 * 1);  // 0, 5, 10, 8 and 0, 4, 8, 7
    ASSERT_EQ(out->shape(), (engine::Shape{1, d0, d1, d2}));
    int64_t wrong = 0;
    for (int64_t i = 0; i < d0; ++i)
        for (int64_t j = 0; j < d1; ++j)
            for (int64_t k = 0; k < d2; ++k) {
                const float want = i == 0 ? 0.0f : image.data<float>()[((i - 1) * d1 + j) * d2 + k];
                wrong += out->data<float>()[(i * d1 + j) * d2 + k] != want;
            }
    EXPECT_EQ(wrong, 0);
    // a network whose output is not the patch's centred part is refused
    EXPECT_FALSE(ValidTiles::create(*backend, *graph, 1, {7, 6, 5}, {5, 4, 4}, {}).isOk());
}

// The keys as model.json gives them: read back, and refused (naming the key) where the stage
// cannot use them.
TEST(MaskInput, ModelJsonKeysAreReadAndCheckedPerStage) {
    const std::string sha(64, 'a');
    nlohmann::json j = testing::stagePackageJson(sha, sha);
    nlohmann::json& fine = j["stages"][1];
    fine.erase("shape");
    fine["spacing_mm"] = {1.0, 1.0, 3.0};
    fine["patch_size"] = {9, 8, 7};
    fine["interpolation"] = "linear";
    fine["output"] = {{"kind", "sigmoid"}, {"labels", {1}}};
    fine["mask"] = {{"stage", "coarse"}, {"label", 5}, {"dilate", 2}, {"outside", -0.5}};
    fine["inference"] = {{"output_size", {5, 4, 3}}};
    fine["normalize_first"] = true;
    auto ok = engine::parseModelPackage(j.dump(), "test");
    ASSERT_TRUE(ok.isOk()) << ok.status().toString();
    const auto& st = ok->stages[1];
    ASSERT_TRUE(st.mask.has_value());
    EXPECT_EQ(st.mask->stage_index, 0);
    EXPECT_EQ(st.mask->dilate, 2);
    EXPECT_DOUBLE_EQ(st.mask->outside, -0.5);
    EXPECT_EQ(st.inference.output_size, (std::vector<int64_t>{5, 4, 3}));
    auto again = engine::parseModelPackage(engine::modelPackageToJson(*ok), "round trip");
    ASSERT_TRUE(again.isOk()) << again.status().toString();
    EXPECT_EQ(again->stages[1].inference.output_size, st.inference.output_size);
    EXPECT_EQ(again->stages[1].mask->label, 5);
    EXPECT_TRUE(again->stages[1].normalize_first);
    EXPECT_FALSE(again->stages[0].normalize_first);

    auto refused = [&](nlohmann::json bad, const std::string& key) {
        auto r = engine::parseModelPackage(bad.dump(), "test");
        ASSERT_FALSE(r.isOk()) << key;
        EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().toString();
    };
    nlohmann::json bad = j;
    bad["stages"][1]["mask"]["label"] = 7;  // the coarse stage gives label 5 only
    refused(bad, "stages[1].mask.label");
    bad = j;
    bad["stages"][1]["inference"]["overlap"] = 0.5;
    refused(bad, "stages[1].inference.overlap");
    bad = j;
    bad["stages"][1]["inference"]["output_size"] = {6, 4, 3};  // 9 - 6 is odd
    refused(bad, "stages[1].inference.output_size");
    bad = j;
    bad["stages"][1]["grid"] = "monai";
    refused(bad, "stages[1].");
    bad = j;
    bad["stages"][0]["mask"] = j["stages"][1]["mask"];  // no earlier stage
    refused(bad, "stages[0].mask");
}

}  // namespace
}  // namespace voxseg::pipeline
