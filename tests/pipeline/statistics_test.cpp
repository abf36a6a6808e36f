#include "pipeline/statistics.h"

#include "test_volumes.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <numbers>
#include <sstream>

namespace voxseg::pipeline {
namespace {

using voxseg::testing::makeGeometry;
using voxseg::testing::makeVolume;

constexpr double kVolumeRelTolerance = 0.02;  // the brief's 2 %
constexpr double kCentroidToleranceMm = 0.1;
constexpr double kIntensityTolerance = 1e-9;

const Vec3 kCentre{12.3, -7.1, 40.2};
constexpr double kRadius = 10.0;

TEST(Statistics, SphereVolumeCentroidAndIntensities) {
    // Anisotropic, oblique grid: the centroid must come out in LPS mm, not in index space.
    const Mat3 dir = {0.8, -0.6, 0, 0.6, 0.8, 0, 0, 0, 1};
    const Geometry g = makeGeometry({64, 60, 40}, {0.7, 0.8, 1.1}, {9.1, -39.5, 18}, dir);
    Volume labels = makeVolume<uint8_t>(g, [](const Vec3& p) {
        if (voxseg::testing::distance(p, kCentre) <= kRadius) return 1;
        if (p[2] > 55) return 2;
        return 0;
    });
    // Intensity: 40 inside the sphere; label 2 alternates 0 / 10 along i (mean 5, std 5).
    Volume image = Volume::allocate<int16_t>(g);
    image.info().modality = "CT";
    int64_t e = 0;
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i, ++e) {
                const uint8_t l = labels.data<uint8_t>()[e];
                image.data<int16_t>()[e] = l == 1 ? 40 : (l == 2 ? (i % 2) * 10 : -1000);
            }
    std::vector<LabelInfo> info{
        {1, "sphere", {255, 0, 0}}, {2, "slab", {0, 255, 0}}, {3, "absent", {0, 0, 255}}};
    auto report = computeStatistics(labels, &image, info);
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    ASSERT_EQ(report->labels.size(), 3u);
    EXPECT_EQ(report->intensity_unit, "HU");

    const LabelStatistics& s = report->labels[0];
    EXPECT_EQ(s.name, "sphere");
    const double expected_ml = 4.0 / 3.0 * std::numbers::pi * kRadius * kRadius * kRadius / 1000;
    EXPECT_NEAR(s.volume_ml, expected_ml, kVolumeRelTolerance * expected_ml);
    EXPECT_NEAR(s.volume_ml, s.voxels * 0.7 * 0.8 * 1.1 / 1000, 1e-12);
    EXPECT_LT(voxseg::testing::distance(s.centroid_lps, kCentre), kCentroidToleranceMm);
    ASSERT_TRUE(s.intensity.has_value());
    EXPECT_NEAR(s.intensity->mean, 40, kIntensityTolerance);
    EXPECT_NEAR(s.intensity->std, 0, kIntensityTolerance);
    // Bounding box holds every voxel of the label.
    for (int a = 0; a < 3; ++a) EXPECT_LE(s.bbox_min[a], s.bbox_max[a]);

    const LabelStatistics& slab = report->labels[1];
    ASSERT_TRUE(slab.intensity.has_value());
    EXPECT_NEAR(slab.intensity->mean, 5, kIntensityTolerance);
    EXPECT_NEAR(slab.intensity->std, 5, kIntensityTolerance);
    EXPECT_EQ(slab.intensity->min, 0);
    EXPECT_EQ(slab.intensity->max, 10);
    EXPECT_EQ(slab.bbox_min[0], 0);
    EXPECT_EQ(slab.bbox_max[0], 63);

    EXPECT_EQ(report->labels[2].voxels, 0);
    EXPECT_FALSE(report->labels[2].intensity.has_value());

    voxseg::testing::TempDir dir_out;
    ASSERT_TRUE(writeStatisticsJson(*report, dir_out / "statistics.json").isOk());
    ASSERT_TRUE(writeStatisticsCsv(*report, dir_out / "statistics.csv").isOk());
    std::ifstream jf(dir_out / "statistics.json");
    const auto j = nlohmann::json::parse(jf);
    EXPECT_EQ(j["labels"][0]["name"], "sphere");
    EXPECT_EQ(j["labels"][0]["voxels"].get<int64_t>(), s.voxels);
    EXPECT_NEAR(j["labels"][0]["centroid_lps_mm"][2].get<double>(), kCentre[2],
                kCentroidToleranceMm);
    EXPECT_TRUE(j["labels"][2]["centroid_lps_mm"].is_null());
    std::ifstream cf(dir_out / "statistics.csv");
    std::string header, row;
    std::getline(cf, header);
    std::getline(cf, row);
    EXPECT_EQ(header.substr(0, 22), "label,name,voxels,volu");
    EXPECT_EQ(row.substr(0, 9), "1,sphere,");
    // Nothing but the two outputs is left in the folder (no temporaries).
    int files = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir_out.path()))
        ++files;
    EXPECT_EQ(files, 2);
}

TEST(Statistics, ErrorsNameTheProblem) {
    const Geometry g = makeGeometry({4, 4, 4}, {1, 1, 1});
    Volume labels = Volume::allocate<uint8_t>(g);
    Volume other = Volume::allocate<int16_t>(makeGeometry({5, 4, 4}, {1, 1, 1}));
    auto r = computeStatistics(labels, &other, {});
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("grid"), std::string::npos);
    auto bad_path = writeStatisticsJson(StatisticsReport{}, "/nonexistent-folder/statistics.json");
    EXPECT_FALSE(bad_path.isOk());
}

}  // namespace
}  // namespace voxseg::pipeline
