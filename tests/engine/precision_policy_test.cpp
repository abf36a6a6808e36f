// The one precision policy (engine::choosePrecision, Backend::autoPrecision): what "auto" means
// on each backend and why, the model.json "precision" key, explicit requests.
#include "backends/registry.h"
#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/model/model_package.h"
#include "tests/engine/model_json_fixture.h"
#include "tests/engine/op_cases.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace voxseg::engine {
namespace {

using nlohmann::json;

// Every CPU branch, whatever this machine has.
TEST(PrecisionPolicy, CpuAutoIsBf16WithAmxOrOnAmdWithAvx512Bf16) {
    for (bool amd : {false, true}) {
        const PrecisionChoice amx = cpuAutoPrecision({true, true, amd});
        EXPECT_EQ(amx.precision, Precision::kBFloat16);
        EXPECT_NE(amx.reason.find("AMX"), std::string::npos) << amx.reason;
    }
    const PrecisionChoice zen = cpuAutoPrecision({false, true, true});
    EXPECT_EQ(zen.precision, Precision::kBFloat16);
    EXPECT_NE(zen.reason.find("AMD"), std::string::npos) << zen.reason;
    const PrecisionChoice intel = cpuAutoPrecision({false, true, false});
    EXPECT_EQ(intel.precision, Precision::kFloat32);
    EXPECT_NE(intel.reason.find("slower"), std::string::npos) << intel.reason;
    for (bool amd : {false, true})
        EXPECT_EQ(cpuAutoPrecision({false, false, amd}).precision, Precision::kFloat32);
}

// An int8 plan's float parts run at the CPU's auto float precision: bf16 where auto picks it.
TEST(PrecisionPolicy, Int8FloatPartsFollowTheCpusAutoPrecision) {
    for (bool amx : {false, true})
        for (bool bf16 : {false, true})
            for (bool amd : {false, true}) {
                const CpuBf16Traits cpu{amx, bf16 || amx, amd};
                EXPECT_EQ(cpuInt8FloatPrecision(cpu), cpuAutoPrecision(cpu).precision);
            }
    EXPECT_EQ(cpuInt8FloatPrecision({true, true, false}), Precision::kBFloat16);
    EXPECT_EQ(cpuInt8FloatPrecision({false, true, false}), Precision::kFloat32);
    EXPECT_EQ(cpuInt8FloatPrecision({false, false, true}), Precision::kFloat32);
}

// INT8 runs a package with exactly the weight bits its calibration validated: 7-bit packages on
// every CPU, 8-bit ones where VNNI or AMX multiplies them exactly; elsewhere the refusal says why
// and what to do. Every branch, whatever this machine has.
TEST(PrecisionPolicy, CpuInt8RunsTheValidatedWeightBitsWhereTheCpuMultipliesThemExactly) {
    for (const CpuInt8Traits& vnni :
         {CpuInt8Traits{true, false, false}, CpuInt8Traits{false, true, false},
          CpuInt8Traits{true, false, true}}) {
        EXPECT_TRUE(cpuInt8Support(vnni, 8).isOk());
        EXPECT_TRUE(cpuInt8Support(vnni, 7).isOk());
        EXPECT_EQ(cpuInt8WeightBits(vnni), 8);
        EXPECT_EQ(cpuInt8WeightQmax(vnni), 127);
    }
    EXPECT_TRUE(cpuInt8Support({}, 7).isOk());
    EXPECT_EQ(cpuInt8WeightBits({}), 7);
    EXPECT_EQ(cpuInt8WeightQmax({}), 63);
    const Status refused = cpuInt8Support({}, 8);
    ASSERT_FALSE(refused.isOk());
    EXPECT_EQ(refused.code(), StatusCode::kUnsupported);
    for (const char* word :
         {"8-bit", "7-bit", "avx512_vnni", "avx_vnni", "amx_int8",
          "recalibrate on this CPU or with --weight-bits 7", "--precision fp32", "docs/int8.md"})
        EXPECT_NE(refused.message().find(word), std::string::npos) << word;
    EXPECT_FALSE(cpuInt8Support({}, 9).isOk());
    // This machine's answer is consistent with its traits.
    const CpuInt8Traits here = cpuInt8Traits();
    EXPECT_EQ(cpuInt8Support(here, 8).isOk(), cpuInt8WeightQmax(here) == 127);
    EXPECT_TRUE(cpuInt8Support(here, 7).isOk());
}

TEST(PrecisionPolicy, AutoAsksTheBackendAndSaysWhy) {
    for (const std::string& name : availableBackends()) {
        auto backend = createBackend(name);
        if (!backend) continue;  // cuda without a device
        auto choice = choosePrecision(**backend, Precision::kAuto, {});
        ASSERT_TRUE(choice.isOk()) << choice.status().toString();
        EXPECT_EQ(choice->precision, (*backend)->autoPrecision().precision) << name;
        EXPECT_TRUE((*backend)->supportsPrecision(choice->precision)) << name;
        EXPECT_EQ(choice->reason.rfind("auto: ", 0), 0u) << choice->reason;
    }
    auto reference = makeReferenceBackend();
    EXPECT_EQ(reference->autoPrecision().precision, Precision::kFloat32);
}

TEST(PrecisionPolicy, ModelThatRequiresFp32StaysFp32UnderAuto) {
    auto cpu = makeCpuBackend();
    const ModelPrecisionHints hints{true, "thin structures lose Dice in bf16", "demo"};
    auto choice = choosePrecision(*cpu, Precision::kAuto, hints);
    ASSERT_TRUE(choice.isOk());
    EXPECT_EQ(choice->precision, Precision::kFloat32);
    EXPECT_NE(choice->reason.find("thin structures"), std::string::npos) << choice->reason;
    EXPECT_NE(choice->reason.find("demo"), std::string::npos) << choice->reason;
    // Explicit bf16 still runs where the CPU has it, with a warning naming the model's reason.
    std::string warning;
    auto bf16 = choosePrecision(*cpu, Precision::kBFloat16, hints, &warning);
    if (!cpu->supportsPrecision(Precision::kBFloat16)) {
        EXPECT_EQ(bf16.status().code(), StatusCode::kUnsupported);
        return;
    }
    ASSERT_TRUE(bf16.isOk()) << bf16.status().toString();
    EXPECT_EQ(bf16->precision, Precision::kBFloat16);
    EXPECT_NE(warning.find("requires fp32"), std::string::npos) << warning;
    // fp32 asked for: no warning.
    warning.clear();
    EXPECT_EQ(choosePrecision(*cpu, Precision::kFloat32, hints, &warning)->precision,
              Precision::kFloat32);
    EXPECT_TRUE(warning.empty()) << warning;
}

// "auto" takes int8 only for a package whose calibration was validated on held-back cases, with
// weight bits the device runs exactly; otherwise the usual choice, saying why int8 was not taken.
TEST(PrecisionPolicy, AutoPicksInt8OnlyForAValidatedCalibrationTheDeviceRunsExactly) {
    auto cpu = makeCpuBackend();
    ModelPrecisionHints hints{false, "", "hippocampus", 7};
    auto seven = choosePrecision(*cpu, Precision::kAuto, hints);
    ASSERT_TRUE(seven.isOk()) << seven.status().toString();
    EXPECT_EQ(seven->precision, Precision::kInt8);
    for (const char* word : {"auto: int8", "hippocampus", "7-bit", "held-back"})
        EXPECT_NE(seven->reason.find(word), std::string::npos) << word << ": " << seven->reason;

    // 8-bit weights: int8 where this CPU multiplies them exactly, else the usual choice + why.
    hints.int8_validated_weight_bits = 8;
    auto eight = choosePrecision(*cpu, Precision::kAuto, hints);
    ASSERT_TRUE(eight.isOk());
    if (cpuInt8Support(cpuInt8Traits(), 8).isOk()) {
        EXPECT_EQ(eight->precision, Precision::kInt8);
    } else {
        EXPECT_EQ(eight->precision, cpu->autoPrecision().precision);
        EXPECT_NE(eight->reason.find("not used"), std::string::npos) << eight->reason;
        EXPECT_NE(eight->reason.find("--weight-bits 7"), std::string::npos) << eight->reason;
    }

    // No validated calibration, or a model that requires fp32: never int8.
    hints.int8_validated_weight_bits = 0;
    EXPECT_EQ(choosePrecision(*cpu, Precision::kAuto, hints)->precision,
              cpu->autoPrecision().precision);
    EXPECT_EQ(choosePrecision(*cpu, Precision::kAuto, {true, "thin", "m", 7})->precision,
              Precision::kFloat32);

    // A backend without int8 keeps its own choice and says so.
    auto reference = makeReferenceBackend();
    auto ref = choosePrecision(*reference, Precision::kAuto, {false, "", "m", 7});
    ASSERT_TRUE(ref.isOk());
    EXPECT_EQ(ref->precision, Precision::kFloat32);
    EXPECT_NE(ref->reason.find("has no int8"), std::string::npos) << ref->reason;
}

// precisionHints() carries a calibration's weight bits only once held-back cases validated it.
TEST(PrecisionPolicy, HintsCarryOnlyAValidatedCalibration) {
    json j = fixtures::minimalModelJson();
    j["quantization"] = json::parse(R"({"weight_bits": 7,
        "activations": {"x": {"scale": 0.01, "zero_point": 0}},
        "calibration": {"method": "mse", "cases": ["c1"],
                        "held_back": {"cases": ["c2"], "dice_min": 0.997, "dice_mean": 0.998,
                                      "voxel_agreement": 0.9996}}})");
    auto validated = parseModelPackage(j.dump(), "t/model.json");
    ASSERT_TRUE(validated.isOk()) << validated.status().toString();
    EXPECT_EQ(validated->precisionHints().int8_validated_weight_bits, 7);
    j["quantization"]["calibration"].erase("held_back");
    auto unvalidated = parseModelPackage(j.dump(), "t/model.json");
    ASSERT_TRUE(unvalidated.isOk()) << unvalidated.status().toString();
    EXPECT_EQ(unvalidated->precisionHints().int8_validated_weight_bits, 0);
}

TEST(PrecisionPolicy, UnsupportedExplicitPrecisionSaysUseFp32) {
    auto reference = makeReferenceBackend();
    auto r = choosePrecision(*reference, Precision::kBFloat16, {});
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(r.status().message().find("fp32"), std::string::npos) << r.status().message();
}

// kAuto is a request: compile() takes a resolved precision and says so otherwise.
TEST(PrecisionPolicy, CompileRefusesAnUnresolvedAuto) {
    testing::GraphBuilder b;
    b.output(b.node(OpKind::kRelu, {b.input("x", {1, 2, 3, 4, 5})}));
    const Graph g = b.graph();
    for (const std::string& name : availableBackends()) {
        auto backend = createBackend(name);
        if (!backend) continue;
        CompileOptions options;
        options.precision = Precision::kAuto;
        auto exe = (*backend)->compile(g, {{1, 2, 3, 4, 5}}, options);
        ASSERT_FALSE(exe.isOk()) << name;
        EXPECT_NE(exe.status().message().find("auto"), std::string::npos) << exe.status().message();
        options.precision = Precision::kFloat32;
        EXPECT_TRUE((*backend)->compile(g, {{1, 2, 3, 4, 5}}, options).isOk()) << name;
    }
}

TEST(PrecisionPolicy, ParsesEveryNameIncludingAuto) {
    for (Precision p : {Precision::kAuto, Precision::kFloat32, Precision::kFloat16,
                        Precision::kBFloat16, Precision::kInt8, Precision::kFp8})
        EXPECT_EQ(*parsePrecision(precisionName(p)), p);
    EXPECT_STREQ(precisionName(Precision::kInt8), "int8");
    EXPECT_STREQ(precisionName(Precision::kFp8), "fp8");
    EXPECT_TRUE(usesCalibration(Precision::kInt8));
    EXPECT_TRUE(usesCalibration(Precision::kFp8));
    EXPECT_FALSE(usesCalibration(Precision::kBFloat16));
    EXPECT_EQ(*parsePrecision("bfloat16"), Precision::kBFloat16);
    auto bad = parsePrecision("fp64");
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(bad.status().message().find("auto"), std::string::npos);
    EXPECT_NE(bad.status().message().find("int8"), std::string::npos);
    EXPECT_NE(bad.status().message().find("fp8"), std::string::npos);
}

// fp8 is a GPU precision: the cpu backend refuses it and says where it runs.
TEST(PrecisionPolicy, Fp8OnTheCpuIsRefusedWithWhereItRuns) {
    auto cpu = makeCpuBackend();
    EXPECT_FALSE(cpu->supportsPrecision(Precision::kFp8));
    ModelPrecisionHints hints;
    hints.model = "m";
    auto choice = choosePrecision(*cpu, Precision::kFp8, hints);
    ASSERT_FALSE(choice.isOk());
    EXPECT_NE(choice.status().message().find("precision fp8 is not supported by backend cpu"),
              std::string::npos)
        << choice.status().message();
    EXPECT_NE(choice.status().message().find("sm_89"), std::string::npos)
        << choice.status().message();
}

TEST(PrecisionPolicy, ModelJsonPrecisionKeyIsReadCheckedAndWritten) {
    json j = fixtures::minimalModelJson();
    auto plain = parseModelPackage(j.dump(), "t/model.json");
    ASSERT_TRUE(plain.isOk()) << plain.status().toString();
    EXPECT_FALSE(plain->precision.requires_fp32);
    EXPECT_FALSE(plain->precisionHints().requires_fp32);

    j["precision"] = {{"requires_fp32", true}, {"reason", "Dice 0.91 in bf16"}};
    auto strict = parseModelPackage(j.dump(), "t/model.json");
    ASSERT_TRUE(strict.isOk()) << strict.status().toString();
    EXPECT_TRUE(strict->precision.requires_fp32);
    EXPECT_EQ(strict->precisionHints().reason, "Dice 0.91 in bf16");
    EXPECT_EQ(strict->precisionHints().model, "demo");
    auto again = parseModelPackage(modelPackageToJson(*strict), "written");
    ASSERT_TRUE(again.isOk()) << again.status().toString();
    EXPECT_TRUE(again->precision.requires_fp32);
    EXPECT_EQ(again->precision.reason, "Dice 0.91 in bf16");

    for (const json& bad : {json("fp32"), json{{"requires_fp32", "yes"}}, json{{"reason", "x"}},
                            json{{"requires_fp32", true}, {"fp16", false}}}) {
        j["precision"] = bad;
        auto r = parseModelPackage(j.dump(), "t/model.json");
        ASSERT_FALSE(r.isOk()) << bad.dump();
        EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
        EXPECT_NE(r.status().message().find("precision"), std::string::npos)
            << r.status().message();
    }
}

}  // namespace
}  // namespace voxseg::engine
