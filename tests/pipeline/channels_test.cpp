// Issue 15 part 4: several input series as the channels of one model. A two-channel package
// (a generated 1x1x1 ONNX network: label 1 where channel T1 is bright and T2 is not, label 2 the
// other way round) on a DICOM study of three MR series written with DCMTK (T1 on a 1 x 1 x 1.5 mm
// grid, T2 on a coarser 2 x 2 x 3 mm grid, a derived T1 map as a decoy) and on NIfTI files: the
// rules pick T1 and T2, T2 is resampled onto T1's grid, a swapped or unresampled channel gives
// other labels, and a missing, ambiguous or unregistered channel is an error naming it.
#include "pipeline/channels.h"

#include "io/dicom_synth.h"
#include "io/image_io.h"
#include "pipeline/segment.h"
#include "tests/pipeline/test_stage_package.h"
#include "tests/pipeline/test_volumes.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace voxseg::pipeline {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::valueAt;

// Cuboid A is bright in T1 only, cuboid B in T2 only (LPS mm).
bool inA(const Vec3& p) {
    return p[0] >= 6 && p[0] < 18 && p[1] >= 6 && p[1] < 18 && p[2] >= 6 && p[2] < 24;
}
bool inB(const Vec3& p) {
    return p[0] >= 22 && p[0] < 34 && p[1] >= 16 && p[1] < 30 && p[2] >= 9 && p[2] < 27;
}

io::SynthSeriesSpec t1Spec(const std::string& study, const std::string& frame) {
    io::SynthSeriesSpec s;
    s.study_uid = study;
    s.frame_of_reference_uid = frame;
    s.modality = "MR";
    s.description = "t1_mprage";
    s.series_number = 2;
    s.columns = 40, s.rows = 36, s.slices = 24;
    s.column_spacing = s.row_spacing = 1.0;
    s.slice_spacing = 1.5;
    s.echo_time = 3;
    s.value = [](int i, int j, int k) { return inA({1.0 * i, 1.0 * j, 1.5 * k}) ? 200 : 10; };
    return s;
}

// The same field of view on a 2 x 2 x 3 mm grid (voxel edges on T1's).
io::SynthSeriesSpec t2Spec(const std::string& study, const std::string& frame) {
    io::SynthSeriesSpec s;
    s.study_uid = study;
    s.frame_of_reference_uid = frame;
    s.modality = "MR";
    s.description = "t2_tse";
    s.series_number = 3;
    s.columns = 20, s.rows = 18, s.slices = 12;
    s.column_spacing = s.row_spacing = 2.0;
    s.slice_spacing = 3.0;
    s.origin = {0.5, 0.5, 0.75};
    s.echo_time = 90;
    s.value = [](int i, int j, int k) {
        return inB({0.5 + 2.0 * i, 0.5 + 2.0 * j, 0.75 + 3.0 * k}) ? 200 : 10;
    };
    return s;
}

io::SynthSeriesSpec decoySpec(const std::string& study, const std::string& frame) {
    io::SynthSeriesSpec s = t1Spec(study, frame);
    s.description = "t1_map";
    s.image_type = "DERIVED\\PRIMARY\\T1MAP";
    s.series_number = 4;
    s.value = [](int, int, int) { return 500; };
    return s;
}

json channelJson(const std::string& name, const json& match) {
    return {{"name", name},
            {"modality", "MR"},
            {"match", match},
            {"normalization", {{"scheme", "window"}, {"window", {0, 200}}, {"range", {0, 1}}}}};
}

// Version 1, two channels; logits [0, T1 - T2 - 0.5, T2 - T1 - 0.5] on the normalised values.
std::string writePackage(const fs::path& folder, const json& t1_match) {
    fs::create_directories(folder);
    const std::string sha = testing::writeOnnx(
        folder, "model.onnx",
        testing::conv1x1NetworkOnnx(2, 3, {0, 0, 1, -1, -1, 1}, {0, -0.5f, -0.5f}));
    const json j = {
        {"name", "two-channel-test"},
        {"version", "0.1"},
        {"description", "T1 and T2"},
        {"license", "MIT"},
        {"channels",
         {channelJson("T1", t1_match), channelJson("T2", {{"echo_time_ms", {50, 200}}})}},
        {"spacing_mm", {1.5, 1.0, 1.0}},
        {"patch_size", {16, 16, 16}},
        {"axis_order", "zyx"},
        {"orientation", "native"},
        {"labels",
         {{{"value", 1}, {"name", "t1_bright"}, {"color", {255, 0, 0}}},
          {{"value", 2}, {"name", "t2_bright"}, {"color", {0, 255, 0}}}}},
        {"output", "softmax"},
        {"sha256", sha}};
    std::ofstream(folder / "model.json") << j.dump(2);
    return folder.string();
}

const json kT1Rule = {{"series_description", "t1"}, {"image_type", "ORIGINAL"}};

double dice(const Volume& labels, int label) {
    const Geometry g = labels.geometry();
    int64_t a = 0, b = 0, both = 0;
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i) {
                const Vec3 p = g.indexToPhysical({1.0 * i, 1.0 * j, 1.0 * k});
                const bool t = label == 1 ? inA(p) : inB(p);
                const bool got = valueAt<uint8_t>(labels, i, j, k) == label;
                a += t, b += got, both += t && got;
            }
    return 2.0 * static_cast<double>(both) / static_cast<double>(a + b);
}

class Channels : public ::testing::Test {
  protected:
    void SetUp() override {
        study_ = dir_.path() / "study";
        const std::string study = io::makeDicomUid(), frame = io::makeDicomUid();
        ASSERT_TRUE(io::writeSynthSeries(t1Spec(study, frame), (study_ / "t1").string()).isOk());
        ASSERT_TRUE(io::writeSynthSeries(t2Spec(study, frame), (study_ / "t2").string()).isOk());
        ASSERT_TRUE(
            io::writeSynthSeries(decoySpec(study, frame), (study_ / "map").string()).isOk());
    }

    // Loads the channels for `input` and segments them; checks both labels' Dice.
    json segment(const std::string& input, const std::vector<ChannelAssignment>& given,
                 const json& t1_rule = kT1Rule) {
        auto segmenter = Segmenter::create(writePackage(dir_.path() / "pkg", t1_rule), {});
        EXPECT_TRUE(segmenter.isOk()) << segmenter.status().toString();
        if (!segmenter.isOk()) return {};
        auto in = loadStudyChannels(input, "", given, segmenter->model(), {});
        EXPECT_TRUE(in.isOk()) << in.status().toString();
        if (!in.isOk()) return {};
        EXPECT_EQ(in->extra_channels.size(), 1u);
        const fs::path out = dir_.path() / ("out" + std::to_string(++runs_));
        auto report = segmenter->run(*in, input, out.string());
        EXPECT_TRUE(report.isOk()) << report.status().toString();
        if (!report.isOk()) return {};
        EXPECT_TRUE(report->label_map.geometry().approxEqual(in->volume.geometry()));
        const double d1 = dice(report->label_map, 1), d2 = dice(report->label_map, 2);
        std::printf("two channels: Dice T1-only %.4f, T2-only %.4f\n", d1, d2);
        EXPECT_GT(d1, 0.9);
        EXPECT_GT(d2, 0.9);
        std::ifstream f(out / "run.json");
        return json::parse(f);
    }

    Status loadError(const std::vector<ChannelAssignment>& given, const json& rule = kT1Rule) {
        auto package = engine::readModelPackage(writePackage(dir_.path() / "pkg", rule));
        EXPECT_TRUE(package.isOk()) << package.status().toString();
        auto in = loadStudyChannels(study_.string(), "", given, *package, {});
        EXPECT_FALSE(in.isOk());
        return in.isOk() ? Status::ok() : in.status();
    }

    testing::TempDir dir_;
    fs::path study_;
    int runs_ = 0;
};

TEST_F(Channels, RulesPickTwoSeriesOfOneStudyAndT2IsResampledOntoT1) {
    const json run = segment(study_.string(), {});
    ASSERT_EQ(run["channels"].size(), 2u);
    const std::string t1 = run["channels"][0], t2 = run["channels"][1];
    EXPECT_NE(t1.find("\"t1_mprage\""), std::string::npos) << t1;
    EXPECT_NE(t2.find("\"t2_tse\""), std::string::npos) << t2;
    EXPECT_NE(t2.find("resampled onto T1's grid"), std::string::npos) << t2;
    EXPECT_EQ(run["series"]["description"], "t1_mprage");
}

TEST_F(Channels, AmbiguousRulesAreNamedAndAnExplicitMappingResolvesThem) {
    const json loose = {{"series_description", "^t1"}};  // t1_mprage and t1_map
    const Status st = loadError({}, loose);
    EXPECT_EQ(st.code(), StatusCode::kAmbiguous) << st.toString();
    EXPECT_NE(st.message().find("channel T1: 2 series match"), std::string::npos) << st.toString();
    EXPECT_NE(st.message().find("--channel T1="), std::string::npos) << st.toString();
    // --channel T1=FOLDER picks the series (a path), T2 still by its rule.
    segment(study_.string(), {{"T1", (study_ / "t1").string()}}, loose);
}

TEST_F(Channels, MissingChannelIsAnErrorNamingIt) {
    fs::remove_all(study_ / "t2");
    const Status st = loadError({});
    EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.toString();
    EXPECT_NE(st.message().find("channel T2: no series of the study matches its rules (modality "
                                "MR, echo time 50..200 ms)"),
              std::string::npos)
        << st.toString();
    EXPECT_NE(st.message().find("\"t1_mprage\""), std::string::npos) << st.toString();
    const Status unknown = loadError({{"FLAIR", "x"}});
    EXPECT_NE(unknown.message().find("no channel of that name (its channels: T1, T2)"),
              std::string::npos)
        << unknown.toString();
}

TEST_F(Channels, ChannelsOfAnotherFrameOfReferenceAreRefused) {
    fs::remove_all(study_ / "t2");
    io::SynthSeriesSpec other = t2Spec(io::makeDicomUid(), io::makeDicomUid());
    ASSERT_TRUE(io::writeSynthSeries(other, (study_ / "t2").string()).isOk());
    const Status st = loadError({});
    EXPECT_NE(st.message().find("channel T2"), std::string::npos) << st.toString();
    EXPECT_NE(st.message().find("must share one frame of reference"), std::string::npos)
        << st.toString();
}

TEST_F(Channels, NiftiFilesAreMappedExplicitly) {
    auto t1 = loadStudy((study_ / "t1").string(), "", {});
    auto t2 = loadStudy((study_ / "t2").string(), "", {});
    ASSERT_TRUE(t1.isOk() && t2.isOk());
    const fs::path t1_file = dir_.path() / "t1.nii.gz", t2_file = dir_.path() / "t2.nii.gz";
    ASSERT_TRUE(io::writeImage(t1->volume, t1_file.string()).isOk());
    ASSERT_TRUE(io::writeImage(t2->volume, t2_file.string()).isOk());
    const json run = segment(t1_file.string(), {{"T2", t2_file.string()}});
    EXPECT_NE(run["channels"][1].get<std::string>().find("no frame of reference"),
              std::string::npos)
        << run["channels"][1];
    // Without the mapping the second channel cannot be found in an image file.
    auto package = engine::readModelPackage(dir_.path() / "pkg");
    ASSERT_TRUE(package.isOk());
    auto in = loadStudyChannels(t1_file.string(), "", {}, *package, {});
    ASSERT_FALSE(in.isOk());
    EXPECT_NE(in.status().message().find("channel T2"), std::string::npos);
    EXPECT_NE(in.status().message().find("--channel T2=PATH"), std::string::npos);
    // Both mapped, in the wrong order: the labels swap, so the Dice check above can fail.
    auto swapped = loadStudyChannels(
        t1_file.string(), "", {{"T1", t2_file.string()}, {"T2", t1_file.string()}}, *package, {});
    ASSERT_TRUE(swapped.isOk()) << swapped.status().toString();
    auto segmenter = Segmenter::create((dir_.path() / "pkg").string(), {});
    ASSERT_TRUE(segmenter.isOk());
    auto report = segmenter->run(*swapped, "swapped", (dir_.path() / "swapped").string());
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_LT(dice(report->label_map, 1), 0.1);
}

TEST(ChannelAssignments, ParseNameEqualsValue) {
    auto a = parseChannelAssignments({"T2=/data/t2.nii.gz", "FLAIR=3"});
    ASSERT_TRUE(a.isOk());
    ASSERT_EQ(a->size(), 2u);
    EXPECT_EQ((*a)[0].name, "T2");
    EXPECT_EQ((*a)[1].value, "3");
    EXPECT_FALSE(parseChannelAssignments({"T2"}).isOk());
    EXPECT_FALSE(parseChannelAssignments({"=x"}).isOk());
    EXPECT_FALSE(parseChannelAssignments({"T2=a", "T2=b"}).isOk());
}

}  // namespace
}  // namespace voxseg::pipeline
