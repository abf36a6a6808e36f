// model.json "quantization" (engine/model/model_quantization.h): read, checked, written back,
// and the package's half of the int8 decision.
#include "engine/model/model_quantization.h"

#include "engine/model/model_package.h"
#include "tests/engine/model_json_fixture.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>

namespace voxseg::engine {
namespace {

using nlohmann::json;

json validSection() {
    return json::parse(R"({"quantization": {
        "weight_bits": 8,
        "activations": {"enc.0.out": {"scale": 0.0125, "zero_point": 17},
                        "enc.1.out": {"scale": 0.031, "zero_point": 0}},
        "float_layers": ["enc.0.conv", "head.conv"],
        "norm_inputs": {"enc.0.conv1.out": [0.021, 0.0305, 0.5]},
        "calibration": {"method": "percentile", "percentile": 99.99,
                        "cases": ["c01", "c02", "c03"],
                        "held_back": {"cases": ["c09", "c10"], "dice_min": 0.9961,
                                      "dice_mean": 0.9984, "voxel_agreement": 0.99953}}}})");
}

TEST(ModelQuantization, ReadsWritesAndReadsBackTheSameRecord) {
    const json doc = validSection();
    auto q = readQuantization(doc["quantization"], "quantization", "pkg/model.json");
    ASSERT_TRUE(q.isOk()) << q.status().message();
    EXPECT_EQ(q->activations.size(), 2u);
    EXPECT_FLOAT_EQ(q->activations.at("enc.0.out").scale, 0.0125f);
    EXPECT_EQ(q->activations.at("enc.0.out").zero_point, 17);
    EXPECT_EQ(q->float_layers, (std::vector<std::string>{"enc.0.conv", "head.conv"}));
    ASSERT_EQ(q->norm_inputs.count("enc.0.conv1.out"), 1u);
    EXPECT_EQ(q->norm_inputs.at("enc.0.conv1.out"), (std::vector<float>{0.021f, 0.0305f, 0.5f}));
    EXPECT_EQ(q->method, RangeMethod::kPercentile);
    EXPECT_DOUBLE_EQ(q->percentile, 99.99);
    ASSERT_TRUE(q->held_back.has_value());
    EXPECT_DOUBLE_EQ(q->held_back->dice_min, 0.9961);
    EXPECT_TRUE(int8PackageSupport(*q, "liver").isOk());

    auto again = readQuantization(quantizationJson(*q), "quantization", "written");
    ASSERT_TRUE(again.isOk()) << again.status().message();
    EXPECT_EQ(quantizationJson(*again), quantizationJson(*q));
    // calibrate --zero-points: absent means always (records before it); where-needed round-trips.
    EXPECT_EQ(q->zero_points, quant::ZeroPoints::kAlways);
    EXPECT_FALSE(quantizationJson(*q)["calibration"].contains("zero_points"));
    json z = validSection();
    z["quantization"]["calibration"]["zero_points"] = "where-needed";
    auto zq = readQuantization(z["quantization"], "quantization", "pkg/model.json");
    ASSERT_TRUE(zq.isOk()) << zq.status().message();
    EXPECT_EQ(zq->zero_points, quant::ZeroPoints::kWhereNeeded);
    EXPECT_EQ(quantizationJson(*zq)["calibration"]["zero_points"], "where-needed");
    // calibrate --upsampling: absent means float; int8 round-trips.
    EXPECT_FALSE(q->int8_upsampling);
    EXPECT_FALSE(quantizationJson(*q).contains("upsampling"));
    z["quantization"]["upsampling"] = "int8";
    auto uq = readQuantization(z["quantization"], "quantization", "pkg/model.json");
    ASSERT_TRUE(uq.isOk()) << uq.status().message();
    EXPECT_TRUE(uq->int8_upsampling);
    EXPECT_EQ(quantizationJson(*uq)["upsampling"], "int8");
}

// The gate the figures passed is recorded (calibrate's --min-dice / --min-agreement), optional
// when reading records written before it; a record whose figures are below its own gate is refused.
TEST(ModelQuantization, HeldBackRecordsTheGateItPassed) {
    json doc = validSection();
    auto old = readQuantization(doc["quantization"], "quantization", "pkg/model.json");
    ASSERT_TRUE(old.isOk()) << old.status().message();
    EXPECT_EQ(old->held_back->min_dice, 0);
    json& h = doc["quantization"]["calibration"]["held_back"];
    h["min_dice"] = 0.995;
    h["min_agreement"] = 0.999;
    auto q = readQuantization(doc["quantization"], "quantization", "pkg/model.json");
    ASSERT_TRUE(q.isOk()) << q.status().message();
    EXPECT_DOUBLE_EQ(q->held_back->min_dice, 0.995);
    EXPECT_DOUBLE_EQ(q->held_back->min_agreement, 0.999);
    const json written = quantizationJson(*q);
    EXPECT_EQ(written["calibration"]["held_back"]["min_dice"], 0.995);
    EXPECT_EQ(written["calibration"]["held_back"]["min_agreement"], 0.999);

    h["min_dice"] = 0.999;  // dice_min 0.9961 is below it
    auto below = readQuantization(doc["quantization"], "quantization", "pkg/model.json");
    ASSERT_FALSE(below.isOk());
    EXPECT_NE(below.status().message().find("below its own gate"), std::string::npos)
        << below.status().message();
    h["min_dice"] = 1.5;
    auto range = readQuantization(doc["quantization"], "quantization", "pkg/model.json");
    ASSERT_FALSE(range.isOk());
    EXPECT_NE(range.status().message().find("min_dice"), std::string::npos);
}

// Each bad value is refused with its key path and what is expected.
TEST(ModelQuantization, BadValuesAreRefusedNamingTheKey) {
    struct Bad {
        const char* pointer;
        json value;
        const char* key;
    };
    const Bad bads[] = {
        {"/quantization/activations/enc.0.out/scale", 0.0, "scale"},
        {"/quantization/activations/enc.0.out/scale", -1.0, "scale"},
        {"/quantization/activations/enc.0.out/zero_point", 256, "zero_point"},
        {"/quantization/activations/enc.0.out/zero_point", 1.5, "zero_point"},
        {"/quantization/activations", json::object(), "activations"},
        {"/quantization/weight_bits", 4, "weight_bits"},
        {"/quantization/calibration/method", "kl", "method"},
        {"/quantization/calibration/percentile", 30.0, "percentile"},
        {"/quantization/calibration/cases", json::array(), "cases"},
        {"/quantization/calibration/held_back/cases", json::array({"c09", "c02"}), "c02"},
        {"/quantization/calibration/held_back/dice_min", 1.2, "dice_min"},
        {"/quantization/calibration/hold_back", 1, "hold_back"},
        {"/quantization/calibration/zero_points", "symmetric", "zero_points"},
        {"/quantization/upsampling", "int4", "upsampling"},
        {"/quantization/upsampling", true, "upsampling"},
        {"/quantization/norm_inputs/enc.0.conv1.out/1", 0.0, "norm_inputs"},
        {"/quantization/norm_inputs/enc.0.conv1.out", json::array(), "norm_inputs"},
        {"/quantization/norm_inputs/enc.0.conv1.out", 0.5, "norm_inputs"},
    };
    for (const Bad& b : bads) {
        json doc = validSection();
        doc[json::json_pointer(b.pointer)] = b.value;
        auto q = readQuantization(doc["quantization"], "quantization", "pkg/model.json");
        ASSERT_FALSE(q.isOk()) << b.pointer << " = " << b.value.dump();
        if (&b == &bads[0]) std::printf("e.g. %s\n", q.status().message().c_str());
        EXPECT_NE(q.status().message().find(b.key), std::string::npos)
            << b.pointer << ": " << q.status().message();
        EXPECT_EQ(q.status().subject(), "pkg/model.json") << q.status().message();
    }
}

TEST(ModelQuantization, Int8IsRefusedWithoutCalibrationOrWithoutHeldBackCases) {
    const Status none = int8PackageSupport(std::nullopt, "hippocampus");
    ASSERT_FALSE(none.isOk());
    EXPECT_EQ(none.code(), StatusCode::kUnsupported);
    for (const char* word :
         {"hippocampus", "no int8 calibration", "voxseg model calibrate", "--precision fp32"})
        EXPECT_NE(none.message().find(word), std::string::npos) << word;

    json doc = validSection();
    doc["quantization"]["calibration"].erase("held_back");
    auto q = readQuantization(doc["quantization"], "quantization", "pkg/model.json");
    ASSERT_TRUE(q.isOk()) << q.status().message();
    const Status unmeasured = int8PackageSupport(*q, "hippocampus");
    ASSERT_FALSE(unmeasured.isOk());
    EXPECT_NE(unmeasured.message().find("held-back"), std::string::npos);
}

// The runtime uses exactly the weight bits calibration validated: an 8-bit package on a CPU that
// multiplies 7-bit weights exactly (no VNNI/AMX) is refused, a 7-bit one runs on both.
TEST(ModelQuantization, EightBitPackagesAreRefusedOnSevenBitCpus) {
    auto q = readQuantization(validSection()["quantization"], "quantization", "pkg/model.json");
    ASSERT_TRUE(q.isOk()) << q.status().message();
    ASSERT_EQ(q->weight_bits, 8);
    EXPECT_TRUE(int8PackageSupport(*q, "liver", 8).isOk());
    const Status refused = int8PackageSupport(*q, "liver", 7);
    ASSERT_FALSE(refused.isOk());
    EXPECT_EQ(refused.code(), StatusCode::kUnsupported);
    for (const char* word : {"liver", "8-bit", "7-bit",
                             "recalibrate on this CPU or with "
                             "--weight-bits 7",
                             "--precision fp32"})
        EXPECT_NE(refused.message().find(word), std::string::npos) << word;
    q->weight_bits = 7;
    EXPECT_TRUE(int8PackageSupport(*q, "liver", 7).isOk());
    EXPECT_TRUE(int8PackageSupport(*q, "liver", 8).isOk());
}

// The section as part of a package: read with the rest of model.json, its errors name the key,
// written back by modelPackageToJson (so a calibrated package's model.json, which its signature
// covers, carries it).
TEST(ModelQuantization, PackageReadsAndWritesTheSection) {
    json j = fixtures::minimalModelJson();
    auto plain = parseModelPackage(j.dump(), "t/model.json");
    ASSERT_TRUE(plain.isOk()) << plain.status().toString();
    EXPECT_FALSE(plain->quantization.has_value());
    EXPECT_FALSE(int8PackageSupport(plain->quantization, plain->name).isOk());

    j["quantization"] = validSection()["quantization"];
    auto calibrated = parseModelPackage(j.dump(), "t/model.json");
    ASSERT_TRUE(calibrated.isOk()) << calibrated.status().toString();
    ASSERT_TRUE(calibrated->quantization.has_value());
    EXPECT_EQ(calibrated->quantization->activations.at("enc.1.out").scale, 0.031f);
    EXPECT_TRUE(int8PackageSupport(calibrated->quantization, calibrated->name).isOk());
    auto again = parseModelPackage(modelPackageToJson(*calibrated), "written");
    ASSERT_TRUE(again.isOk()) << again.status().toString();
    ASSERT_TRUE(again->quantization.has_value());
    EXPECT_EQ(quantizationJson(*again->quantization), quantizationJson(*calibrated->quantization));

    j["quantization"]["activations"]["enc.1.out"]["zero_point"] = -1;
    auto bad = parseModelPackage(j.dump(), "t/model.json");
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(bad.status().message().find("quantization.activations['enc.1.out'].zero_point"),
              std::string::npos)
        << bad.status().message();
}

}  // namespace
}  // namespace voxseg::engine
