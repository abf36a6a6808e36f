// The committed brain-extraction package (sample_data/models/brain-extraction, deepbet 1.0.2's
// networks) on real T1 series of ../shared/data, against deepbet's own masks committed in
// tests/pipeline/data/deepbet (written by deepbet's run_bet through tools/deepbet_parity.py):
// Dice >= 0.995 and TIV within 0.5 % (issue 15's parity targets; measured: Dice >= 0.9995,
// TIV within 0.03 %, docs/brain-extraction.md). Skips when the data is absent.
#include "io/image_io.h"
#include "pipeline/segment.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace voxseg::pipeline {
namespace {
namespace fs = std::filesystem;

constexpr double kMinDice = 0.995;
constexpr double kMaxTivDiffPercent = 0.5;

struct Case {
    const char* name;   // the test's name (gtest would print the struct's bytes: pointers)
    const char* input;  // under ../shared/data (DICOM folder or image file)
    const char* mask;   // deepbet's, under tests/pipeline/data/deepbet
    double deepbet_tiv_ml;
};

class BrainExtractionModel : public ::testing::TestWithParam<Case> {};

TEST_P(BrainExtractionModel, ReproducesDeepbet) {
    const Case c = GetParam();
    const fs::path model = fs::path(VOXSEG_SOURCE_DIR) / "sample_data/models/brain-extraction";
    ASSERT_TRUE(fs::exists(model / "model.json")) << "no model package at " << model;
    VOXSEG_REQUIRE_DATA(c.input);
    SegmentOptions options;
    options.device = engine::DeviceSpec::cpu();
    options.outputs.preview = false;
    auto segmenter = Segmenter::create(model.string(), options);
    ASSERT_TRUE(segmenter.isOk()) << segmenter.status().toString();
    auto study = loadStudy(testing::sharedData(c.input).string(), "", {});
    ASSERT_TRUE(study.isOk()) << study.status().toString();
    testing::TempDir dir;
    auto report = segmenter->run(*study, c.input, (dir.path() / "out").string());
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    ASSERT_FALSE(report->empty_result);

    auto deepbet = io::readImage(
        (fs::path(VOXSEG_SOURCE_DIR) / "tests/pipeline/data/deepbet" / c.mask).string());
    ASSERT_TRUE(deepbet.isOk()) << deepbet.status().toString();
    const Volume& ours = report->label_map;
    ASSERT_TRUE(deepbet->geometry().approxEqual(ours.geometry(), 1e-3, 1e-4, 1e-4))
        << "deepbet's mask is not on the input's grid";
    const Volume theirs = deepbet->castTo(PixelType::kUInt8);
    int64_t a = 0, b = 0, both = 0;
    for (int64_t i = 0, n = ours.geometry().voxelCount(); i < n; ++i) {
        const bool x = ours.data<uint8_t>()[i] != 0, y = theirs.data<uint8_t>()[i] != 0;
        a += x, b += y, both += x && y;
    }
    const double dice = 2.0 * static_cast<double>(both) / static_cast<double>(a + b);
    EXPECT_GE(dice, kMinDice) << c.input;
    ASSERT_EQ(report->statistics.measurements.size(), 1u);
    EXPECT_EQ(report->statistics.measurements[0].name, "tiv_ml");
    const double tiv = report->statistics.measurements[0].value;
    EXPECT_NEAR(tiv, c.deepbet_tiv_ml, c.deepbet_tiv_ml * kMaxTivDiffPercent / 100.0) << c.input;
    std::cout << c.input << ": Dice " << dice << ", TIV " << tiv << " mL (deepbet "
              << c.deepbet_tiv_ml << ")\n";
}

INSTANTIATE_TEST_SUITE_P(
    RealT1, BrainExtractionModel,
    ::testing::Values(Case{"Xa30EnhancedT1", "dcm_qa_xa30/5_anat-T1w_acq-tfl",
                           "xa30_enhanced_t1_mask.nii.gz", 1573.0407500839233},
                      Case{"PyradiomicsBrain2Nrrd", "pyradiomics-data/brain2_image.nrrd",
                           "pyradiomics_brain2_mask.nii.gz", 1587.9376220703125}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace voxseg::pipeline
