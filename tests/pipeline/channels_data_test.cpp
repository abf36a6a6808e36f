// Issue 15 part 4 on real DICOM: dcm_qa_frag holds two series of one Siemens XA30 study (the same
// T1 acquisition, JPEG Lossless and JPEG 2000 compressed, one with prescan normalisation: ImageType
// NORM). A two-channel package's rules pick them apart (ImageType NORM for the first channel;
// the second takes the remaining series of the same description), both share the frame of
// reference and the grid, and the whole segment run goes through on them.
#include "pipeline/channels.h"

#include "pipeline/segment.h"
#include "tests/pipeline/test_channel_package.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace voxseg::pipeline {
namespace {
namespace fs = std::filesystem;

TEST(ChannelsData, RulesPickTwoSeriesOfARealStudy) {
    VOXSEG_REQUIRE_DATA("dcm_qa_frag/In");
    voxseg::testing::TempDir dir;
    const std::string pkg =
        voxseg::testing::writeTwoChannelPackage(dir.path() / "pkg", {{"image_type", "NORM"}});
    // The second channel's rule: the description, which both series have.
    std::ifstream in(fs::path(pkg) / "model.json");
    nlohmann::json j = nlohmann::json::parse(in);
    in.close();
    j["channels"][1]["match"] = {{"series_description", "T1w"}};
    j["spacing_mm"] = {2.0, 2.0, 2.0};  // the series' own; few, large patches
    j["patch_size"] = {64, 64, 64};
    std::ofstream(fs::path(pkg) / "model.json") << j.dump(2);

    auto segmenter = Segmenter::create(pkg, {});
    ASSERT_TRUE(segmenter.isOk()) << segmenter.status().toString();
    const std::string study = voxseg::testing::sharedData("dcm_qa_frag/In").string();
    auto input = loadStudyChannels(study, "", {}, segmenter->model(), {});
    ASSERT_TRUE(input.isOk()) << input.status().toString();
    ASSERT_TRUE(input->series.has_value());
    ASSERT_EQ(input->extra_series.size(), 1u);
    ASSERT_TRUE(input->extra_series[0].has_value());
    const io::SeriesCandidate& first = *input->series;
    const io::SeriesCandidate& second = *input->extra_series[0];
    std::printf("T1: %s (%s), T2: %s (%s)\n", first.series_uid.c_str(), first.image_type.c_str(),
                second.series_uid.c_str(), second.image_type.c_str());
    EXPECT_NE(first.image_type.find("NORM"), std::string::npos);
    EXPECT_EQ(second.image_type.find("NORM"), std::string::npos);
    EXPECT_NE(first.series_uid, second.series_uid);
    EXPECT_EQ(first.frame_of_reference_uid, second.frame_of_reference_uid);
    EXPECT_TRUE(input->extra_channels[0].geometry().approxEqual(input->volume.geometry()));
    for (const auto& note : input->channel_notes) std::printf("  %s\n", note.c_str());

    auto report = segmenter->run(*input, study, (dir.path() / "out").string());
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_TRUE(report->label_map.geometry().approxEqual(input->volume.geometry()));
}

}  // namespace
}  // namespace voxseg::pipeline
