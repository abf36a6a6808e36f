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
#include "tests/pipeline/test_channel_package.h"
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
using testing::inA;
using testing::inB;
using testing::kT1Rule;
using testing::t2Spec;
using testing::valueAt;
constexpr auto dice = testing::diceWithCuboid;

class Channels : public ::testing::Test {
  protected:
    void SetUp() override {
        study_ = dir_.path() / "study";
        const std::string study = io::makeDicomUid(), frame = io::makeDicomUid();
        ASSERT_TRUE(
            io::writeSynthSeries(testing::t1Spec(study, frame), (study_ / "t1").string()).isOk());
        ASSERT_TRUE(io::writeSynthSeries(t2Spec(study, frame), (study_ / "t2").string()).isOk());
        ASSERT_TRUE(
            io::writeSynthSeries(testing::decoySpec(study, frame), (study_ / "map").string())
                .isOk());
    }

    // Loads the channels for `input` and segments them; checks both labels' Dice.
    json segment(const std::string& input, const std::vector<ChannelAssignment>& given,
                 const json& t1_rule = kT1Rule) {
        auto segmenter =
            Segmenter::create(testing::writeTwoChannelPackage(dir_.path() / "pkg", t1_rule), {});
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
        auto package =
            engine::readModelPackage(testing::writeTwoChannelPackage(dir_.path() / "pkg", rule));
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
    EXPECT_NE(t1.find(run["series"]["series_uid"].get<std::string>()), std::string::npos) << t1;
    EXPECT_NE(t2.find("resampled onto T1's grid"), std::string::npos) << t2;
    // Free text (SeriesDescription) is never kept in run.json (core/free_text.h, issue 35).
    EXPECT_EQ(t1.find("t1_mprage"), std::string::npos) << t1;
    EXPECT_EQ(t2.find("t2_tse"), std::string::npos) << t2;
    EXPECT_FALSE(run["series"].contains("description")) << run["series"];
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
    // The series by index, modality and UID; their descriptions are for `voxseg info`.
    EXPECT_NE(st.message().find("#0 MR"), std::string::npos) << st.toString();
    EXPECT_NE(st.message().find("shows their descriptions"), std::string::npos) << st.toString();
    EXPECT_EQ(st.message().find("t1_mprage"), std::string::npos) << st.toString();
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

// --labels on a version 1 package (one network, nothing to skip): only the named label is written.
TEST_F(Channels, LabelsKeepOnlyTheNamedStructureOfAVersionOnePackage) {
    SegmentOptions options;
    options.labels = {"t2_bright"};
    options.outputs.probabilities = true;
    auto segmenter =
        Segmenter::create(testing::writeTwoChannelPackage(dir_.path() / "pkg", kT1Rule), options);
    ASSERT_TRUE(segmenter.isOk()) << segmenter.status().toString();
    auto in = loadStudyChannels(study_.string(), "", {}, segmenter->model(), {});
    ASSERT_TRUE(in.isOk()) << in.status().toString();
    const fs::path out = dir_.path() / "only-t2";
    auto report = segmenter->run(*in, study_.string(), out.string());
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_GT(dice(report->label_map, 2), 0.9);
    EXPECT_EQ(dice(report->label_map, 1), 0.0);  // cuboid A is not labelled
    std::ifstream f(out / "statistics.json");
    const json stats = json::parse(f);
    ASSERT_EQ(stats["labels"].size(), 1u);
    EXPECT_EQ(stats["labels"][0]["name"], "t2_bright");
    EXPECT_TRUE(fs::exists(out / "probabilities_2.nii.gz"));
    EXPECT_FALSE(fs::exists(out / "probabilities_1.nii.gz"));
    EXPECT_FALSE(fs::exists(out / "probabilities_0.nii.gz"));
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
