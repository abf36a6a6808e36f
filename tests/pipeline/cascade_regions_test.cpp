// Issue 15 parts 1, 5: nnU-Net cascades (a stage's prediction fed to a later stage as one-hot
// channels), region-based outputs (sigmoid regions painted in regions_class_order) and
// `--labels` (only the named structures written, only the stages they need run). The networks are
// 1x1x1 convolutions generated here (tests/pipeline/test_stage_package.h) whose output is a known
// function of their input channels, so a wrong channel order, a missing resample or another
// painting rule gives another label map.
#include "pipeline/resample.h"
#include "pipeline/segment.h"
#include "pipeline/stages.h"

#include "tests/pipeline/test_stage_package.h"
#include "tests/pipeline/test_volumes.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace voxseg::pipeline {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::makeGeometry;
using testing::valueAt;

Volume row(const std::vector<uint8_t>& values) {
    Volume v = Volume::allocate<uint8_t>(
        makeGeometry({static_cast<int64_t>(values.size()), 1, 1}, {1, 1, 1}));
    std::copy(values.begin(), values.end(), v.data<uint8_t>());
    return v;
}

std::vector<uint8_t> values(const Volume& v) {
    return {v.data<uint8_t>(), v.data<uint8_t>() + v.geometry().voxelCount()};
}

// Reference values: nnU-Net's resize_segmentation (order 1) with scikit-image 0.19.3,
//   for c in np.unique(seg): out[resize(seg == c, new, 1, mode="edge", clip=True,
//                                       anti_aliasing=False) >= 0.5] = c
TEST(CascadeResample, SegmentationIsNnUNetsResizeSegmentation) {
    auto up = resampleSegmentation(row({0, 1, 1, 0}), {6, 1, 1});
    ASSERT_TRUE(up.isOk()) << up.status().toString();
    EXPECT_EQ(values(*up), (std::vector<uint8_t>{0, 1, 1, 1, 1, 0}));  // nearest: ..., 0, 0
    const Volume two = row({0, 1, 1, 0, 2, 2, 0, 1});
    auto up13 = resampleSegmentation(two, {13, 1, 1});
    ASSERT_TRUE(up13.isOk());
    EXPECT_EQ(values(*up13), (std::vector<uint8_t>{0, 0, 1, 1, 1, 0, 2, 2, 2, 2, 0, 1, 1}));
    auto down = resampleSegmentation(two, {5, 1, 1});
    ASSERT_TRUE(down.isOk());
    EXPECT_EQ(values(*down), (std::vector<uint8_t>{0, 1, 2, 2, 1}));
    // The anisotropic axis with order 0 (scipy map_coordinates order 0 on the same positions).
    auto separate = resampleSegmentation(row({0, 1, 1, 0}), {6, 1, 1}, 0);
    ASSERT_TRUE(separate.isOk());
    EXPECT_EQ(values(*separate), (std::vector<uint8_t>{0, 1, 1, 1, 0, 0}));
    // Same field of view, as the image resampling.
    EXPECT_NEAR(up->geometry().spacing[0], 4.0 / 6.0, 1e-12);
}

std::vector<uint8_t> readBytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The one-hot channels nnU-Net 2.5.1's own functions make of a previous stage's label map
// (crop_to_nonzero, resample_data_or_seg_to_shape with the default plans' seg settings,
// convert_labelmap_to_one_hot), committed by tests/pipeline/data/gen_cascade_golden.py, against
// voxseg's resampleSegmentation + oneHotChannels with the separate axis StageRunner picks: an
// anisotropic case (z 4 mm -> 3 mm, separately with order 0) and an isotropic one.
TEST(CascadeGolden, OneHotChannelsAreNnUNets) {
    const fs::path dir = fs::path(VOXSEG_SOURCE_DIR) / "tests/pipeline/data/cascade";
    std::ifstream f(dir / "index.json");
    ASSERT_TRUE(f) << dir;
    const json index = json::parse(f);
    const std::vector<int> labels = index["labels"].get<std::vector<int>>();
    ASSERT_EQ(index["cases"].size(), 2u);
    for (const json& c : index["cases"]) {
        SCOPED_TRACE(c["name"].get<std::string>());
        // zyx (numpy) -> the index axes i = x, j = y, k = z.
        auto ijk = [](const json& zyx) {
            return std::array<double, 3>{zyx[2].get<double>(), zyx[1].get<double>(),
                                         zyx[0].get<double>()};
        };
        const auto shape = ijk(c["shape_zyx"]), spacing = ijk(c["spacing_zyx"]);
        const auto target = ijk(c["target_spacing_zyx"]), new_shape = ijk(c["new_shape_zyx"]);
        const std::array<int64_t, 3> size{static_cast<int64_t>(shape[0]),
                                          static_cast<int64_t>(shape[1]),
                                          static_cast<int64_t>(shape[2])};
        Volume seg = Volume::allocate<uint8_t>(makeGeometry(size, spacing));
        const auto bytes = readBytes(dir / (c["name"].get<std::string>() + "_seg.u8"));
        ASSERT_EQ(static_cast<int64_t>(bytes.size()), seg.geometry().voxelCount());
        std::copy(bytes.begin(), bytes.end(), seg.data<uint8_t>());
        // StageRunner's grid and separate axis for a stage at `target` spacing.
        const auto out_size = resampledSize(seg.geometry(), target);
        ASSERT_EQ(out_size, (std::array<int64_t, 3>{static_cast<int64_t>(new_shape[0]),
                                                    static_cast<int64_t>(new_shape[1]),
                                                    static_cast<int64_t>(new_shape[2])}));
        const Geometry net = resampledGeometry(seg.geometry(), out_size);
        const int axis = separateAxis(seg.geometry().spacing, net.spacing);
        EXPECT_EQ(axis, c["name"] == "aniso" ? 2 : -1);
        auto on_net = resampleSegmentation(seg, out_size, axis);
        ASSERT_TRUE(on_net.isOk()) << on_net.status().toString();
        const auto hot = oneHotChannels(*on_net, labels);
        const auto want = readBytes(dir / (c["name"].get<std::string>() + "_onehot.u8"));
        const int64_t n = net.voxelCount();
        ASSERT_EQ(static_cast<int64_t>(want.size()), n * static_cast<int64_t>(labels.size()));
        for (size_t l = 0; l < labels.size(); ++l) {
            int64_t differ = 0, voxels = 0;
            for (int64_t i = 0; i < n; ++i) {
                const bool got = hot[l].data<float>()[i] == 1.0f;
                const bool expected = want[static_cast<size_t>(l * n + i)] != 0;
                differ += got != expected;
                voxels += expected;
            }
            std::printf("%s label %d: %lld voxels, %lld differ from nnU-Net\n",
                        c["name"].get<std::string>().c_str(), labels[l],
                        static_cast<long long>(voxels), static_cast<long long>(differ));
            EXPECT_EQ(differ, 0) << "label " << labels[l];
        }
    }
}

TEST(CascadeResample, OneHotChannelsFollowTheListedOrder) {
    const auto hot = oneHotChannels(row({0, 2, 1, 2}), {2, 1});
    ASSERT_EQ(hot.size(), 2u);
    EXPECT_EQ(std::vector<float>(hot[0].data<float>(), hot[0].data<float>() + 4),
              (std::vector<float>{0, 1, 0, 1}));
    EXPECT_EQ(std::vector<float>(hot[1].data<float>(), hot[1].data<float>() + 4),
              (std::vector<float>{0, 0, 1, 0}));
}

// Nested cuboids on a 40x36x32 grid of 1.1 x 0.9 x 1.3 mm: intensity 0 outside, `outer` in the
// big cuboid, `middle` in the medium one and `inner` in the small one.
constexpr int64_t kNi = 40, kNj = 36, kNk = 32;
int zone(int64_t i, int64_t j, int64_t k) {  // 0 outside, 1 big, 2 medium, 3 small
    auto in = [&](int64_t m) {
        return i >= 6 + m && i < 34 - m && j >= 5 + m && j < 31 - m && k >= 4 + m && k < 28 - m;
    };
    return in(8) ? 3 : in(4) ? 2 : in(0) ? 1 : 0;
}

StudyInput nestedStudy(int16_t outer, int16_t middle, int16_t inner) {
    Volume v = Volume::allocate<int16_t>(
        makeGeometry({kNi, kNj, kNk}, {1.1, 0.9, 1.3}, {-20, 10, 5}), {.modality = "MR"});
    const int16_t by_zone[4] = {0, outer, middle, inner};
    int16_t* p = v.data<int16_t>();
    for (int64_t k = 0; k < kNk; ++k)
        for (int64_t j = 0; j < kNj; ++j)
            for (int64_t i = 0; i < kNi; ++i) p[(k * kNj + j) * kNi + i] = by_zone[zone(i, j, k)];
    StudyInput in;
    in.volume = v;
    return in;
}

// Dice of `label` in `labels` against the voxels whose zone maps to it.
template <typename Truth>
double dice(const Volume& labels, int label, Truth truth) {
    int64_t a = 0, b = 0, both = 0;
    for (int64_t k = 0; k < kNk; ++k)
        for (int64_t j = 0; j < kNj; ++j)
            for (int64_t i = 0; i < kNi; ++i) {
                const bool t = truth(zone(i, j, k)) == label;
                const bool g = valueAt<uint8_t>(labels, i, j, k) == label;
                a += t, b += g, both += t && g;
            }
    return a + b == 0 ? 1.0 : 2.0 * static_cast<double>(both) / static_cast<double>(a + b);
}

json baseJson() {
    return {{"format_version", 2}, {"name", "cascade-test"},
            {"version", "0.1"},    {"description", "1x1x1 networks"},
            {"license", "MIT"},    {"channels", {{{"modality", "MR"}}}},
            {"axis_order", "xyz"}, {"orientation", "RAS"}};
}

const json kWindow = {{"scheme", "window"}, {"window", {0, 200}}, {"range", {0, 1}}};

// 3d_lowres (2.5 mm): label 1 where the normalised intensity x > 0.25, label 2 where x > 0.75
// (logits 0, 4x - 1, 8x - 4). 3d_cascade_fullres (1 mm, channels [image, one-hot 1, one-hot 2]):
// logits [0.5, one-hot 2, one-hot 1], i.e. the low-resolution labels swapped, whatever the image.
std::string writeCascade(const fs::path& folder) {
    fs::create_directories(folder);
    const std::string low = testing::writeOnnx(
        folder, "lowres.onnx", testing::conv1x1NetworkOnnx(1, 3, {0, 4, 8}, {0, -1, -4}));
    const std::string full = testing::writeOnnx(
        folder, "fullres.onnx",
        testing::conv1x1NetworkOnnx(3, 3, {0, 0, 0, 0, 0, 1, 0, 1, 0}, {0.5f, 0, 0}));
    json j = baseJson();
    j["labels"] = {{{"value", 1}, {"name", "core"}, {"color", {255, 0, 0}}},
                   {{"value", 2}, {"name", "shell"}, {"color", {0, 255, 0}}}};
    j["stages"] = {{{"name", "3d_lowres"},
                    {"file", "lowres.onnx"},
                    {"sha256", low},
                    {"spacing_mm", {2.5, 2.5, 2.5}},
                    {"patch_size", {8, 8, 8}},
                    {"normalization", kWindow},
                    {"output", {{"kind", "softmax"}, {"labels", {1, 2}}}}},
                   {{"name", "3d_cascade_fullres"},
                    {"file", "fullres.onnx"},
                    {"sha256", full},
                    {"one_hot_from", {{"stage", "3d_lowres"}}},
                    {"spacing_mm", {1.0, 1.0, 1.0}},
                    {"patch_size", {16, 16, 16}},
                    {"normalization", kWindow},
                    {"output", {{"kind", "softmax"}, {"labels", {1, 2}}}}}};
    std::ofstream(folder / "model.json") << j.dump(2);
    return folder.string();
}

TEST(Cascade, LowResolutionPredictionFeedsTheFullResolutionStageAsOneHotChannels) {
    testing::TempDir dir;
    SegmentOptions options;
    options.outputs.preview = false;
    auto segmenter = Segmenter::create(writeCascade(dir.path() / "pkg"), options);
    ASSERT_TRUE(segmenter.isOk()) << segmenter.status().toString();
    // Intensities 100 (x = 0.5: low-res label 1) and 180 (x = 0.9: label 2) in the medium and
    // small cuboids; the big one is 0 like the background.
    const StudyInput study = nestedStudy(0, 100, 180);
    auto report = segmenter->run(study, "synthetic", (dir.path() / "out").string());
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    ASSERT_EQ(report->stages.size(), 2u);
    EXPECT_NE(report->stages[0].network, report->stages[1].network);  // resampled between them
    const Volume& labels = report->label_map;
    ASSERT_TRUE(labels.geometry().approxEqual(study.volume.geometry()));
    // Swapped: the small cuboid (low-res 2) is 1, the medium shell (low-res 1) is 2. Channels in
    // another order, or the image where a one-hot channel belongs, give other labels.
    auto truth = [](int z) { return z == 3 ? 1 : z == 2 ? 2 : 0; };
    const double d1 = dice(labels, 1, truth), d2 = dice(labels, 2, truth);
    std::printf("cascade Dice: label 1 %.4f, label 2 %.4f\n", d1, d2);
    EXPECT_GT(d1, 0.85);
    EXPECT_GT(d2, 0.85);
    EXPECT_EQ(valueAt<uint8_t>(labels, 20, 18, 16), 1);
    EXPECT_EQ(valueAt<uint8_t>(labels, 12, 18, 16), 2);
    EXPECT_EQ(valueAt<uint8_t>(labels, 2, 2, 2), 0);
}

// NetworkResidency::kOneAtATime (`voxseg segment`): the same labels as with every network kept;
// each stage's network is read from the package when the stage runs, its sha256 checked again,
// so a file changed after the package was loaded is refused then (a resident runner never reads
// it again).
TEST(Cascade, NetworksOneAtATimeGiveTheSameLabelsAndAreReadWhenTheirStageRuns) {
    testing::TempDir dir;
    const std::string pkg = writeCascade(dir.path() / "pkg");
    const StudyInput study = nestedStudy(0, 100, 180);
    SegmentOptions resident;
    resident.outputs.preview = false;
    SegmentOptions one = resident;
    one.networks_resident = false;
    auto a = Segmenter::create(pkg, resident);
    auto b = Segmenter::create(pkg, one);
    ASSERT_TRUE(a.isOk() && b.isOk());
    auto ra = a->run(study, "synthetic", (dir.path() / "a").string());
    auto rb = b->run(study, "synthetic", (dir.path() / "b").string());
    ASSERT_TRUE(ra.isOk() && rb.isOk()) << rb.status().toString();
    const auto n = static_cast<size_t>(ra->label_map.geometry().voxelCount());
    ASSERT_EQ(rb->label_map.geometry().voxelCount(), ra->label_map.geometry().voxelCount());
    EXPECT_EQ(std::memcmp(ra->label_map.data<uint8_t>(), rb->label_map.data<uint8_t>(), n), 0);
    // A second study on the same one-at-a-time segmenter compiles again and agrees again.
    auto rb2 = b->run(study, "synthetic", (dir.path() / "b2").string());
    ASSERT_TRUE(rb2.isOk()) << rb2.status().toString();
    EXPECT_EQ(std::memcmp(ra->label_map.data<uint8_t>(), rb2->label_map.data<uint8_t>(), n), 0);

    // The full-resolution network replaced on disk after both were loaded.
    auto c = Segmenter::create(pkg, one);
    ASSERT_TRUE(c.isOk());
    std::ofstream(fs::path(pkg) / "fullres.onnx", std::ios::app) << "x";
    auto rc = c->run(study, "synthetic", (dir.path() / "c").string());
    ASSERT_FALSE(rc.isOk());
    EXPECT_NE(rc.status().message().find("fullres.onnx does not match model.json's sha256"),
              std::string::npos)
        << rc.status().toString();
    auto ra2 = a->run(study, "synthetic", (dir.path() / "a2").string());  // resident: unaffected
    EXPECT_TRUE(ra2.isOk()) << ra2.status().toString();
}

TEST(Cascade, NetworkWithoutTheOneHotInputsIsRefusedOnLoad) {
    testing::TempDir dir;
    const std::string pkg = writeCascade(dir.path() / "pkg");
    // The full-resolution network takes 3 channels; linking only label 2 gives it 2.
    std::ifstream in(fs::path(pkg) / "model.json");
    json j = json::parse(in);
    in.close();
    j["stages"][1]["one_hot_from"]["labels"] = {2};
    std::ofstream(fs::path(pkg) / "model.json") << j.dump(2);
    auto segmenter = Segmenter::create(pkg, SegmentOptions{});
    ASSERT_FALSE(segmenter.isOk());
    EXPECT_NE(segmenter.status().message().find("stage 3d_cascade_fullres"), std::string::npos)
        << segmenter.status().toString();
    EXPECT_NE(segmenter.status().message().find("[1, 2, 16, 16, 16]"), std::string::npos)
        << segmenter.status().toString();
}

// A BraTS-like region model: channel c's logit is 4x - (c + 1), so region 0 ("whole") holds
// x > 0.25, region 1 x > 0.5 and region 2 x > 0.75, nested as whole tumour / tumour core /
// enhancing tumour.
std::string writeRegions(const fs::path& folder, const std::vector<int>& class_order,
                         bool nearest) {
    fs::create_directories(folder);
    const std::string sha = testing::writeOnnx(
        folder, "regions.onnx", testing::conv1x1NetworkOnnx(1, 3, {4, 4, 4}, {-1, -2, -3}));
    json j = baseJson();
    j["labels"] = {{{"value", 1}, {"name", "edema"}, {"color", {255, 0, 0}}},
                   {{"value", 2}, {"name", "necrosis"}, {"color", {0, 255, 0}}},
                   {{"value", 3}, {"name", "enhancing"}, {"color", {0, 0, 255}}}};
    json stage = {{"name", "regions"},
                  {"file", "regions.onnx"},
                  {"sha256", sha},
                  {"normalization", kWindow},
                  {"output",
                   {{"kind", "regions"},
                    {"regions", {{1, 2, 3}, {2, 3}, {3}}},
                    {"regions_class_order", class_order}}}};
    if (nearest) {
        stage["shape"] = {20, 18, 16};
    } else {
        stage["spacing_mm"] = {1.5, 1.5, 1.5};
        stage["patch_size"] = {16, 16, 16};
    }
    j["stages"] = nlohmann::json::array({stage});  // {stage} is a copy, not an array, in clang
    std::ofstream(folder / "model.json") << j.dump(2);
    return folder.string();
}

TEST(Regions, SigmoidRegionsArePaintedInRegionsClassOrder) {
    for (const bool nearest : {false, true}) {
        SCOPED_TRACE(nearest ? "fixed shape, nearest-exact" : "spacing, logits interpolated");
        testing::TempDir dir;
        SegmentOptions options;
        options.outputs.preview = false;
        // Intensities 70, 120, 180: x = 0.35, 0.6, 0.9 -> regions {0}, {0, 1}, {0, 1, 2}.
        const StudyInput study = nestedStudy(70, 120, 180);
        auto segmenter =
            Segmenter::create(writeRegions(dir.path() / "a", {1, 2, 3}, nearest), options);
        ASSERT_TRUE(segmenter.isOk()) << segmenter.status().toString();
        auto report = segmenter->run(study, "synthetic", (dir.path() / "out_a").string());
        ASSERT_TRUE(report.isOk()) << report.status().toString();
        // nnU-Net BraTS order [1, 2, 3]: the zones keep their own label. (The most probable
        // channel above 0.5, the sigmoid rule, would give 1 everywhere: channel 0 is highest.)
        auto same = [](int z) { return z; };
        for (int label = 1; label <= 3; ++label) {
            const double d = dice(report->label_map, label, same);
            std::printf("regions [1, 2, 3] label %d Dice %.4f\n", label, d);
            EXPECT_GT(d, 0.85) << label;
        }
        EXPECT_EQ(valueAt<uint8_t>(report->label_map, 20, 18, 16), 3);
        EXPECT_EQ(valueAt<uint8_t>(report->label_map, 7, 18, 16), 1);

        // Order [3, 2, 1]: channel 0 paints 3, channel 1 paints 2 over it, channel 2 paints 1.
        auto reversed =
            Segmenter::create(writeRegions(dir.path() / "b", {3, 2, 1}, nearest), options);
        ASSERT_TRUE(reversed.isOk()) << reversed.status().toString();
        auto r2 = reversed->run(study, "synthetic", (dir.path() / "out_b").string());
        ASSERT_TRUE(r2.isOk()) << r2.status().toString();
        auto flipped = [](int z) { return z == 0 ? 0 : 4 - z; };
        for (int label = 1; label <= 3; ++label)
            EXPECT_GT(dice(r2->label_map, label, flipped), 0.85) << label;
    }
}

// Two independent result stages (TotalSegmentator-like parts) and a cascade: `--labels` writes
// only the named structures and runs only the stages that produce them (and their links).
TEST(Labels, OnlyTheNamedStructuresAreWrittenAndOnlyTheirStagesRun) {
    testing::TempDir dir;
    const fs::path pkg = dir.path() / "pkg";
    writeCascade(pkg);
    std::ifstream in(pkg / "model.json");
    json j = json::parse(in);
    in.close();
    // A third stage, a result of its own: label 3 where x > 0.25 (the medium and small cuboids).
    const std::string part =
        testing::writeOnnx(pkg, "part.onnx", testing::conv1x1NetworkOnnx(1, 2, {0, 4}, {0, -1}));
    j["labels"].push_back({{"value", 3}, {"name", "bright"}, {"color", {0, 0, 255}}});
    json first = {{"name", "part"},
                  {"file", "part.onnx"},
                  {"sha256", part},
                  {"result", true},
                  {"shape", {20, 18, 16}},
                  {"normalization", kWindow},
                  {"output", {{"kind", "softmax"}, {"labels", {3}}}}};
    j["stages"].insert(j["stages"].begin(), first);
    j["measurements"] = {{{"name", "bright_ml"}, {"kind", "volume_ml"}, {"labels", {3}}},
                         {{"name", "core_ml"}, {"kind", "volume_ml"}, {"labels", {1}}}};
    std::ofstream(pkg / "model.json") << j.dump(2);
    const StudyInput study = nestedStudy(0, 100, 180);

    {  // Every label: all three stages; "part" is painted first, the cascade over it.
        auto all = Segmenter::create(pkg.string(), SegmentOptions{});
        ASSERT_TRUE(all.isOk()) << all.status().toString();
        auto report = all->run(study, "synthetic", (dir.path() / "all").string());
        ASSERT_TRUE(report.isOk()) << report.status().toString();
        EXPECT_EQ(report->stages.size(), 3u);
        EXPECT_EQ(valueAt<uint8_t>(report->label_map, 20, 18, 16), 1);  // cascade over part
    }
    {  // "bright": only stage "part".
        SegmentOptions options;
        options.labels = {"bright"};
        auto seg = Segmenter::create(pkg.string(), options);
        ASSERT_TRUE(seg.isOk()) << seg.status().toString();
        const fs::path out = dir.path() / "bright";
        auto report = seg->run(study, "synthetic", out.string());
        ASSERT_TRUE(report.isOk()) << report.status().toString();
        ASSERT_EQ(report->stages.size(), 1u);
        EXPECT_EQ(report->stages[0].name, "part");
        auto truth = [](int z) { return z >= 2 ? 3 : 0; };
        EXPECT_GT(dice(report->label_map, 3, truth), 0.85);
        for (int64_t i = 0; i < report->label_map.geometry().voxelCount(); ++i)
            ASSERT_NE(report->label_map.data<uint8_t>()[i], 1) << "label 1 was not asked for";
        std::ifstream sf(out / "statistics.json");
        const json stats = json::parse(sf);
        ASSERT_EQ(stats["labels"].size(), 1u);
        EXPECT_EQ(stats["labels"][0]["name"], "bright");
        ASSERT_EQ(stats["measurements"].size(), 1u);  // core_ml needs label 1
        EXPECT_EQ(stats["measurements"][0]["name"], "bright_ml");
        std::ifstream rf(out / "run.json");
        const json run = json::parse(rf);
        EXPECT_EQ(run["labels"], json({"bright"}));
        EXPECT_EQ(run["stages"].size(), 1u);
    }
    {  // "core": the cascade (both of its stages), not "part"; label 2 cleared.
        SegmentOptions options;
        options.labels = {"core"};
        auto seg = Segmenter::create(pkg.string(), options);
        ASSERT_TRUE(seg.isOk()) << seg.status().toString();
        auto report = seg->run(study, "synthetic", (dir.path() / "core").string());
        ASSERT_TRUE(report.isOk()) << report.status().toString();
        ASSERT_EQ(report->stages.size(), 2u);
        EXPECT_EQ(report->stages[0].name, "3d_lowres");
        EXPECT_EQ(report->stages[1].name, "3d_cascade_fullres");
        auto truth = [](int z) { return z == 3 ? 1 : 0; };
        EXPECT_GT(dice(report->label_map, 1, truth), 0.85);
        EXPECT_EQ(valueAt<uint8_t>(report->label_map, 12, 18, 16), 0);  // shell: label 2, cleared
    }
    {  // An unknown name is refused before anything runs, naming the package's labels.
        SegmentOptions options;
        options.labels = {"liver"};
        auto seg = Segmenter::create(pkg.string(), options);
        ASSERT_FALSE(seg.isOk());
        EXPECT_NE(seg.status().message().find("no label \"liver\""), std::string::npos)
            << seg.status().toString();
        EXPECT_NE(seg.status().message().find("core, shell, bright"), std::string::npos)
            << seg.status().toString();
    }
}

}  // namespace
}  // namespace voxseg::pipeline
