// The model card (pipeline/model_card.h; issue 39 item 2): the shipped packages' cards hold
// what a reader needs before a run (description, intended input, licence, citation,
// disclaimer, declared measurements, plausible results), and nothing the package lacks.
#include "pipeline/model_card.h"

#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

namespace voxseg::pipeline {
namespace {

std::map<std::string, std::string> card(const std::string& model) {
    auto p = engine::readModelPackage(std::filesystem::path(VOXSEG_SOURCE_DIR) /
                                      "sample_data/models" / model);
    EXPECT_TRUE(p.isOk()) << p.status().toString();
    std::map<std::string, std::string> out;
    if (!p.isOk()) return out;
    for (const auto& e : modelCard(*p)) {
        EXPECT_FALSE(e.text.empty()) << e.heading;
        EXPECT_EQ(out.count(e.heading), 0u) << e.heading;
        out[e.heading] = e.text;
    }
    return out;
}

bool has(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

TEST(ModelCardText, HippocampusSaysWhatItIsMadeForAndWhatNot) {
    auto c = card("hippocampus");
    EXPECT_EQ(c["Model"], "hippocampus-demo 1.0.0");
    EXPECT_TRUE(has(c["Description"], "Anterior and posterior hippocampus")) << c["Description"];
    EXPECT_TRUE(has(c["Intended input"], "MR; head")) << c["Intended input"];
    EXPECT_TRUE(has(c["Intended input"], "extent 15..90 mm on every axis"));
    EXPECT_TRUE(has(c["Intended input"], "spacing 0.6..1.5 mm"));
    EXPECT_TRUE(has(c["Intended input"], "crops around the structure, not a whole image"));
    EXPECT_EQ(c["Licence"], "CC BY-SA 4.0");
    EXPECT_TRUE(has(c["Attribution"], "Medical Segmentation Decathlon"));
    EXPECT_TRUE(has(c["Disclaimer"], "not a clinical model")) << c["Disclaimer"];
    EXPECT_EQ(c["Plausible results"],
              "Anterior hippocampus 0.5..4 mL; Posterior hippocampus 0.5..4 mL");
    EXPECT_EQ(c.count("Measurements"), 0u) << "the hippocampus model declares none";
    EXPECT_EQ(c.count("Citation"), 0u);
}

TEST(ModelCardText, BrainExtractionDeclaresItsTivAndCitation) {
    auto c = card("brain-extraction");
    EXPECT_TRUE(has(c["Measurements"], "tiv_ml: volume of Brain in mL; total intracranial volume"))
        << c["Measurements"];
    EXPECT_TRUE(has(c["Citation"], "deepbet")) << c["Citation"];
    EXPECT_TRUE(has(c["Intended input"], "extent 100..400 mm on every axis"));
}

TEST(ModelCardText, PerAxisExtentAndMeasurementValues) {
    auto c = card("ct-phantom");
    EXPECT_TRUE(has(c["Intended input"], "extent 200..650 x 200..650 x 80..2000 mm (axes i, j, k)"))
        << c["Intended input"];
    Measurement m{"tiv_ml", 1452.34, "mL", "total intracranial volume"};
    EXPECT_EQ(measurementText(m), "tiv_ml 1452.3 mL (total intracranial volume)");
}

}  // namespace
}  // namespace voxseg::pipeline
