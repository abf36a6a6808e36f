// Route matching: the first route in order whose every condition holds; each condition can
// reject; unmatched series say why per route.
#include "node/route_match.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace voxseg::node {
namespace {

NodeConfig twoRoutes() {
    const std::string model =
        (std::filesystem::path(VOXSEG_SOURCE_DIR) / "sample_data/models/ct-phantom").string();
    auto c = parseNodeConfig(
        nlohmann::json{{"spool_dir", "/tmp/x"},
                       {"allowed_callers", {{{"ae_title", "CT01"}}}},
                       {"routes",
                        {{{"name", "ct-thin"},
                          {"match",
                           {{"modality", "CT"},
                            {"series_description", "thin|1\\.0"},
                            {"calling_ae", {"CT01", "CT02"}},
                            {"min_slices", 50}}},
                          {"model", model}},
                         {{"name", "ct-any"},
                          {"match", {{"modality", {"CT"}}, {"body_part", {"head"}}}},
                          {"model", model}}}}}
            .dump(),
        "node.json", "/");
    EXPECT_TRUE(c.isOk()) << c.status().toString();
    return *c;
}

SeriesInfo series() {
    SeriesInfo s;
    s.modality = "CT";
    s.body_part = "HEAD";
    s.series_description = "Axial THIN 1.0 mm";
    s.calling_ae = "CT01";
    s.instances = 80;
    return s;
}

TEST(RouteMatch, FirstMatchingRouteInOrderWins) {
    const NodeConfig c = twoRoutes();
    const Route* r = matchRoute(c, series());
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->name, "ct-thin");
}

TEST(RouteMatch, EachConditionCanReject) {
    const NodeConfig c = twoRoutes();
    auto s = series();
    s.calling_ae = "MR01";  // not allowed by ct-thin: falls through to ct-any
    EXPECT_EQ(matchRoute(c, s)->name, "ct-any");
    s = series();
    s.instances = 49;
    EXPECT_EQ(matchRoute(c, s)->name, "ct-any");
    s = series();
    s.series_description = "scout";
    EXPECT_EQ(matchRoute(c, s)->name, "ct-any");
    s = series();
    s.frames_per_instance = 0;  // treated as one frame
    EXPECT_EQ(matchRoute(c, s)->name, "ct-thin");

    s = series();
    s.modality = "MR";
    std::string why;
    EXPECT_EQ(matchRoute(c, s, &why), nullptr);
    EXPECT_NE(why.find("ct-thin: modality 'MR' not in [CT]"), std::string::npos) << why;
    EXPECT_NE(why.find("ct-any: modality 'MR'"), std::string::npos) << why;

    s = series();
    s.body_part = "CHEST";
    s.calling_ae = "X";
    EXPECT_EQ(matchRoute(c, s, &why), nullptr);
    EXPECT_NE(why.find("ct-any: body part 'CHEST' not in [head]"), std::string::npos) << why;
}

TEST(RouteMatch, EnhancedSeriesCountFrames) {
    const NodeConfig c = twoRoutes();
    auto s = series();
    s.instances = 1;
    s.frames_per_instance = 120;
    EXPECT_EQ(matchRoute(c, s)->name, "ct-thin");
}

// A sender's SeriesDescription of a million characters (VR LO allows 64): the pattern is
// searched in its first 64 characters. Before, libstdc++'s backtracking matcher recursed once
// per character for "portal.*venous" and the node died of a stack overflow.
TEST(RouteMatch, HugeSeriesDescriptionIsMatchedOnItsFirst64Characters) {
    const std::string model =
        (std::filesystem::path(VOXSEG_SOURCE_DIR) / "sample_data/models/ct-phantom").string();
    auto c =
        parseNodeConfig(nlohmann::json{{"spool_dir", "/tmp/x"},
                                       {"allowed_callers", {{{"ae_title", "CT01"}}}},
                                       {"routes",
                                        {{{"name", "portal"},
                                          {"match", {{"series_description", "portal.*venous"}}},
                                          {"model", model}}}}}
                            .dump(),
                        "node.json", "/");
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    auto s = series();
    s.series_description = "Portal venous 5mm";
    ASSERT_NE(matchRoute(*c, s), nullptr);
    s.series_description = "portal " + std::string(1000000, 'x') + " venous";
    std::string why;
    EXPECT_EQ(matchRoute(*c, s, &why), nullptr);
    EXPECT_NE(why.find("series description does not match /portal.*venous/"), std::string::npos)
        << why.substr(0, 200);
    s.series_description = "portal " + std::string(50, 'x') + " venous" + std::string(1000000, 'y');
    EXPECT_NE(matchRoute(*c, s), nullptr);
}

// A damaged series.json in the spool: counts that are not ints (1e300 frames was cast to int,
// undefined behaviour; found beside fuzz_batch_journal's finding of session 12) make the record
// corrupt; the slice count is an int64 product, so two big ints do not overflow it.
TEST(RouteMatch, SeriesRecordCountsMustBeInts) {
    nlohmann::json j = series().toJson();
    j["study_uid"] = "1.2";
    j["series_uid"] = "1.2.3";
    ASSERT_TRUE(SeriesInfo::fromJson(j).isOk());
    for (const nlohmann::json& bad : {nlohmann::json(1e300), nlohmann::json(2.5),
                                      nlohmann::json(int64_t{1} << 40), nlohmann::json("80")}) {
        auto k = j;
        k["frames_per_instance"] = bad;
        EXPECT_FALSE(SeriesInfo::fromJson(k).isOk()) << bad.dump();
        k = j;
        k["instances"] = bad;
        EXPECT_FALSE(SeriesInfo::fromJson(k).isOk()) << bad.dump();
    }
    auto s = series();
    s.instances = 2000000000;
    s.frames_per_instance = 2000000000;
    EXPECT_EQ(s.slices(), int64_t{4000000000000000000});
}

}  // namespace
}  // namespace voxseg::node
