// `voxseg model calibrate` on an interactive package (edit/interactive/interactive_calibration.h):
// the fabricated nnInteractive package on its phantom, three cases whose label maps are masks
// 2.6.0 produced (the structures to click on), two calibrate and the middle one is held back. The
// calibrated package records its ranges and the held-back check, the table names the held-back
// structure, and the package runs in int8 (percentile ranges: mse's clipping costs this
// fabricated network 0.19 Dice on the held-back structure, docs/interactive.md "int8") (`auto`
// picks it where the CPU runs 8-bit weights): its click session gives nearly fp32's object. A
// manifest without the labels column is refused with nothing written.
#include "edit/interactive/interactive_model.h"
#include "edit/interactive/interactive_session.h"
#include "edit/interactive/simulated_clicks.h"
#include "engine/cpu/cpu_backend.h"
#include "io/image_io.h"
#include "tests/app/run_voxseg.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace voxseg::edit::interactive {
namespace {

namespace fs = std::filesystem;
using app::clitest::runVoxseg;
using app::clitest::slurp;

const std::string kDir = std::string(VOXSEG_SOURCE_DIR) + "/tests/edit/data/nninteractive/";

std::vector<uint8_t> readMask(const std::string& path) {
    auto v = io::readImage(path);
    EXPECT_TRUE(v.isOk()) << path;
    const auto n = static_cast<size_t>(v->geometry().voxelCount());
    std::vector<uint8_t> out(n);
    visitPixels(*v, [&](const auto* p) {
        for (size_t i = 0; i < n; ++i) out[i] = p[i] != 0;
    });
    return out;
}

// The object after the clicks an fp32 session makes on `truth`, and after the same clicks with
// `model`.
std::pair<std::vector<uint8_t>, std::vector<uint8_t>> sessions(InteractiveModel& fp32,
                                                               InteractiveModel& model,
                                                               const Volume& image,
                                                               const std::vector<uint8_t>& truth) {
    InteractiveSession a(fp32.spec(), fp32.forward()), b(model.spec(), model.forward());
    EXPECT_TRUE(a.setImage(image).isOk());
    EXPECT_TRUE(b.setImage(image).isOk());
    auto clicks = simulateClicks(a, truth, 3);
    EXPECT_TRUE(clicks.isOk()) << clicks.status().toString();
    EXPECT_TRUE(replayClicks(b, clicks->clicks).isOk());
    return {a.target(), b.target()};
}

TEST(InteractiveCalibration, CalibratesOnClickSessionsAndRunsInInt8) {
    voxseg::testing::TempDir dir;
    {
        std::ofstream m(dir / "cases.csv");
        m << "case_id,input,channel:labels\n";
        m << "a," << kDir << "image.nii.gz," << kDir << "s0_step4.nii.gz\n";
        m << "b," << kDir << "image.nii.gz," << kDir << "s1_step3.nii.gz\n";
        m << "c," << kDir << "image.nii.gz," << kDir << "s2_step2.nii.gz\n";
    }
    const std::string out = dir / "calibrated";
    auto r = runVoxseg({"model",
                        "calibrate",
                        kDir + "model",
                        "--cases",
                        dir / "cases.csv",
                        "-o",
                        out,
                        "--min-cases",
                        "2",
                        "--held-back",
                        "1",
                        "--structures",
                        "1",
                        "--corrections",
                        "1",
                        "--method",
                        "percentile",
                        "--min-dice",
                        "0.9",
                        "--min-agreement",
                        "0.99"},
                       dir);
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    // Held back: the middle case (spread evenly), its largest structure (label 1).
    EXPECT_NE(r.out.find("b/1"), std::string::npos) << r.out;
    const auto model_json = nlohmann::json::parse(slurp(out + "/model.json"));
    const auto& q = model_json["quantization"];
    EXPECT_EQ(q["calibration"]["cases"], nlohmann::json({"a", "c"}));
    EXPECT_GT(q["activations"].size(), 3u);
    EXPECT_EQ(q["calibration"]["held_back"]["cases"], nlohmann::json({"b/1"}));
    EXPECT_GE(q["calibration"]["held_back"]["dice_min"].get<double>(), 0.9);
    EXPECT_TRUE(fs::exists(out + "/network.onnx"));

    // The calibrated package in int8 against the input in fp32, on a fourth structure.
    auto fp32 = InteractiveModel::load(kDir + "model", {});
    ASSERT_TRUE(fp32.isOk()) << fp32.status().toString();
    InteractiveModelOptions o;
    o.precision = engine::Precision::kInt8;
    auto int8 = InteractiveModel::load(out, o);
    ASSERT_TRUE(int8.isOk()) << int8.status().toString();
    EXPECT_NE((*int8)->describe().find("int8"), std::string::npos);
    auto image = io::readImage(kDir + "image.nii.gz");
    ASSERT_TRUE(image.isOk());
    const auto [a, b] = sessions(**fp32, **int8, *image, readMask(kDir + "s3_step3.nii.gz"));
    const double dice = diceScore(a, b);
    std::printf("int8 vs fp32 after 3 clicks on a held-out structure: Dice %.4f\n", dice);
    EXPECT_GE(dice, 0.9);
    // The uncalibrated input is refused in int8, naming what to do.
    auto refused = InteractiveModel::load(kDir + "model", o);
    ASSERT_FALSE(refused.isOk());
    EXPECT_NE(refused.status().message().find("calibrat"), std::string::npos)
        << refused.status().toString();
    // auto picks int8 where the CPU multiplies the record's 8-bit weights exactly.
    o.precision = engine::Precision::kAuto;
    auto chosen = InteractiveModel::load(out, o);
    ASSERT_TRUE(chosen.isOk()) << chosen.status().toString();
    const bool eight_bit = engine::cpuInt8WeightBits(engine::cpuInt8Traits()) == 8;
    EXPECT_EQ((*chosen)->precision() == engine::Precision::kInt8,
              eight_bit && q["weight_bits"] == 8)
        << (*chosen)->describe();
}

TEST(InteractiveCalibration, CasesWithoutLabelsAreRefusedWithNothingWritten) {
    voxseg::testing::TempDir dir;
    {
        std::ofstream m(dir / "cases.csv");
        m << "case_id,input\n";
        for (const char* id : {"a", "b", "c"}) m << id << "," << kDir << "image.nii.gz\n";
    }
    auto r = runVoxseg({"model", "calibrate", kDir + "model", "--cases", dir / "cases.csv", "-o",
                        dir / "calibrated", "--min-cases", "2", "--held-back", "1"},
                       dir);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("channel:labels"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "calibrated"));
}

}  // namespace
}  // namespace voxseg::edit::interactive
