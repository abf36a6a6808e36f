// pipeline/totalseg_statistics.h against TotalSegmentator 2.18.0's own get_basic_statistics:
// tests/pipeline/data/totalseg_stats/ (written by tests/pipeline/data/gen_totalseg_stats_golden.py)
// holds small NIfTI images and label maps and the JSON TotalSegmentator wrote for them, whole and
// for a roi_subset. The comparisons are exact on purpose: statistics_totalsegmentator.json must
// read back as the very numbers TotalSegmentator writes (float32 voxel volume, the int16 cast with
// numpy's wrap-around, round(5)); the last tests show the goldens tell those rules apart from their
// plausible alternatives.
#include "pipeline/totalseg_statistics.h"

#include "io/image_io.h"
#include "pipeline/statistics.h"
#include "tests/pipeline/test_volumes.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace voxseg::pipeline {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

const fs::path kDir = fs::path(VOXSEG_SOURCE_DIR) / "tests/pipeline/data/totalseg_stats";

std::string slurp(const fs::path& path) {
    std::ifstream f(path, std::ios::binary);
    EXPECT_TRUE(f) << path;
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::vector<LabelInfo> classMap(const std::string& name) {
    std::vector<LabelInfo> labels;
    const json map = json::parse(slurp(kDir / (name + "_labels.json")));
    for (auto it = map.begin(); it != map.end(); ++it) {
        LabelInfo l;
        l.value = std::stoi(it.key());
        l.name = it.value().get<std::string>();
        labels.push_back(l);
    }
    return labels;
}

struct Case {
    Volume image;
    Volume labels;
    std::vector<LabelInfo> class_map;
};

Case loadCase(const std::string& name) {
    Case c;
    auto image = io::readImage((kDir / (name + "_ct.nii.gz")).string());
    auto labels = io::readImage((kDir / (name + "_labels.nii.gz")).string());
    EXPECT_TRUE(image.isOk()) << image.status().toString();
    EXPECT_TRUE(labels.isOk()) << labels.status().toString();
    if (image.isOk()) c.image = *image;
    if (labels.isOk()) c.labels = *labels;
    c.class_map = classMap(name);
    return c;
}

// Every key in order, and every number exactly as TotalSegmentator wrote it.
void expectSameStatistics(const std::string& ours, const std::string& golden_text,
                          const std::string& what) {
    const ordered_json got = ordered_json::parse(ours);
    const ordered_json want = ordered_json::parse(golden_text);
    ASSERT_EQ(got.size(), want.size()) << what << "\n" << ours;
    auto g = got.begin();
    for (auto w = want.begin(); w != want.end(); ++w, ++g) {
        EXPECT_EQ(g.key(), w.key()) << what;
        for (const char* field : {"volume", "intensity"}) {
            const double a = (*g)[field].get<double>(), b = (*w)[field].get<double>();
            EXPECT_EQ(a, b) << what << " " << w.key() << " " << field << ": "
                            << std::setprecision(17) << a << " vs " << b;
        }
    }
}

TEST(TotalSegStatistics, MatchesTotalSegmentatorsOwnStatistics) {
    for (const std::string name : {"aniso", "float32"}) {
        SCOPED_TRACE(name);
        const Case c = loadCase(name);
        ASSERT_FALSE(c.image.empty());
        auto stats = computeTotalSegStatistics(c.labels, c.image, c.class_map);
        ASSERT_TRUE(stats.isOk()) << stats.status().toString();
        ASSERT_EQ(stats->size(), 7u);
        const std::string text = totalSegStatisticsToJson(*stats);
        expectSameStatistics(text, slurp(kDir / (name + "_expected.json")), name);
        // The numbers here print as Python prints them: the very text json.dump wrote.
        EXPECT_EQ(text, slurp(kDir / (name + "_expected.json")));
        // What the rules decided: 1 reaches the last 3 slices, 2 stops just short of them.
        EXPECT_TRUE((*stats)[0].touches_border);
        EXPECT_GT((*stats)[0].voxels, 0);
        EXPECT_FALSE((*stats)[1].touches_border);
        EXPECT_EQ((*stats)[2].voxels, 0);
    }
}

TEST(TotalSegStatistics, SubsetKeepsValueOrder) {
    const auto index = json::parse(slurp(kDir / "index.json"));
    for (const std::string name : {"aniso", "float32"}) {
        const Case c = loadCase(name);
        std::vector<LabelInfo> subset;  // in --labels' order, not the value order
        for (const auto& n : index["subset"])
            for (const LabelInfo& l : c.class_map)
                if (l.name == n.get<std::string>()) subset.push_back(l);
        ASSERT_EQ(subset.size(), index["subset"].size());
        auto stats = computeTotalSegStatistics(c.labels, c.image, subset);
        ASSERT_TRUE(stats.isOk()) << stats.status().toString();
        expectSameStatistics(totalSegStatisticsToJson(*stats),
                             slurp(kDir / (name + "_subset.json")), name + " subset");
    }
}

// The goldens depend on each rule: with float64 spacing products, a saturating int16 cast, or
// plain truncation instead of round(5), some number differs.
TEST(TotalSegStatistics, GoldensTellTheRulesApart) {
    const Case c = loadCase("float32");
    const ordered_json want = ordered_json::parse(slurp(kDir / "float32_expected.json"));
    auto stats = computeTotalSegStatistics(c.labels, c.image, c.class_map);
    ASSERT_TRUE(stats.isOk());
    const Geometry g = c.labels.geometry();
    const double f64_voxel = g.spacing[0] * g.spacing[1] * g.spacing[2];
    const auto& thirds = (*stats)[5];  // delta_thirds: 3 voxels, 20 / 3
    ASSERT_EQ(thirds.name, "delta_thirds");
    EXPECT_NE(static_cast<double>(thirds.voxels) * f64_voxel,
              want["delta_thirds"]["volume"].get<double>());
    EXPECT_NE(std::trunc(20.0 / 3.0 * 1e5) / 1e5, 6.66667);
    EXPECT_EQ(want["delta_thirds"]["intensity"].get<double>(), 6.66667);

    // gamma_wrap holds values outside int16: saturating them instead gives another mean.
    const Volume& img = c.image;
    const float* v = img.data<float>();
    const uint8_t* lab = c.labels.data<uint8_t>();
    int64_t n = 0, wrapped = 0, saturated = 0;
    for (int64_t i = 0; i < g.voxelCount(); ++i) {
        if (lab[i] != 5) continue;
        ++n;
        wrapped += numpyInt16(v[i]);
        saturated += static_cast<int64_t>(
            std::clamp(std::trunc(static_cast<double>(v[i])), -32768.0, 32767.0));
    }
    ASSERT_GT(n, 0);
    EXPECT_NE(wrapped, saturated);
    EXPECT_EQ(numpyRound5(static_cast<double>(wrapped) / static_cast<double>(n)),
              want["gamma_wrap"]["intensity"].get<double>());
}

// numpy 2.4.6 on x86-64: np.array([...], np.float64).astype(np.int16).
TEST(TotalSegStatistics, Int16CastWrapsAsNumpyDoes) {
    EXPECT_EQ(numpyInt16(40000.7), -25536);
    EXPECT_EQ(numpyInt16(-40000.7), 25536);
    EXPECT_EQ(numpyInt16(32767.9), 32767);
    EXPECT_EQ(numpyInt16(-32768.9), -32768);
    EXPECT_EQ(numpyInt16(-32769.2), 32767);
    EXPECT_EQ(numpyInt16(65536.0 * 3 + 5.5), 5);
    EXPECT_EQ(numpyInt16(-100.7), -100);
    EXPECT_EQ(numpyInt16(0.9), 0);
    EXPECT_EQ(numpyInt16(1e10), 0);
    EXPECT_EQ(numpyInt16(-1e10), 0);
    EXPECT_EQ(numpyInt16(3e9), 0);
    EXPECT_EQ(numpyInt16(std::numeric_limits<double>::quiet_NaN()), 0);
}

TEST(TotalSegStatistics, RoundIsNumpysRound5) {
    EXPECT_EQ(numpyRound5(2.0 / 3.0), 0.66667);
    EXPECT_EQ(numpyRound5(-2.0 / 3.0), -0.66667);
    EXPECT_EQ(numpyRound5(0.000005), 0.0);  // 0.5 after scaling: half to even
    EXPECT_EQ(numpyRound5(0.000015), 0.00002);
    EXPECT_EQ(numpyRound5(0.000025), 0.00002);
    EXPECT_EQ(numpyRound5(7.0), 7.0);
}

// touches_border looks at the first and last 3 slices of every axis; a volume of 6 or fewer
// voxels along an axis is all border.
TEST(TotalSegStatistics, BorderIsThreeSlicesOnEverySide) {
    const std::array<int64_t, 3> size{10, 12, 14};
    EXPECT_FALSE(touchesBorder({3, 3, 3}, {6, 8, 10}, size, 5));
    EXPECT_TRUE(touchesBorder({2, 3, 3}, {6, 8, 10}, size, 5));
    EXPECT_TRUE(touchesBorder({3, 3, 3}, {7, 8, 10}, size, 5));
    EXPECT_TRUE(touchesBorder({3, 3, 3}, {6, 8, 11}, size, 5));
    EXPECT_FALSE(touchesBorder({3, 3, 3}, {6, 8, 11}, size, 0));
    EXPECT_TRUE(touchesBorder({3, 3, 3}, {3, 3, 3}, {6, 20, 20}, 1));
    EXPECT_FALSE(touchesBorder({3, 3, 3}, {3, 3, 3}, {7, 7, 7}, 1));
}

TEST(TotalSegStatistics, RefusesAnImageOffTheGridAndAFloatLabelMap) {
    const Geometry g = testing::makeGeometry({8, 8, 8}, {1, 1, 1});
    const Geometry other = testing::makeGeometry({8, 8, 9}, {1, 1, 1});
    const Volume labels = Volume::allocate<uint8_t>(g);
    EXPECT_FALSE(
        computeTotalSegStatistics(labels, Volume::allocate<int16_t>(other), {{1, "a"}}).isOk());
    EXPECT_FALSE(computeTotalSegStatistics(Volume::allocate<float>(g), Volume::allocate<int16_t>(g),
                                           {{1, "a"}})
                     .isOk());
    auto empty = computeTotalSegStatistics(labels, Volume::allocate<int16_t>(g), {});
    ASSERT_TRUE(empty.isOk());
    EXPECT_EQ(totalSegStatisticsToJson(*empty), "{}");
}

// voxseg's own statistics.json carries the same rule per label ("touches_border").
TEST(TotalSegStatistics, VoxsegStatisticsSayWhichLabelsTouchTheBorder) {
    const Case c = loadCase("aniso");
    auto ours = computeStatistics(c.labels, &c.image, c.class_map);
    auto ts = computeTotalSegStatistics(c.labels, c.image, c.class_map);
    ASSERT_TRUE(ours.isOk() && ts.isOk());
    int touching = 0;
    for (const TotalSegLabelStatistics& t : *ts)
        for (const LabelStatistics& s : ours->labels)
            if (s.label == t.value) {
                EXPECT_EQ(s.touches_border, t.touches_border) << t.name;
                touching += s.touches_border;
            }
    EXPECT_EQ(touching, 1);
    const auto j = json::parse(statisticsToJson(*ours));
    EXPECT_TRUE(j["labels"][0]["touches_border"].get<bool>());
    EXPECT_FALSE(j["labels"][1]["touches_border"].get<bool>());
}

}  // namespace
}  // namespace voxseg::pipeline
