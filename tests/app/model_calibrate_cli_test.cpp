// `voxseg model calibrate` on the command line (issue 40): too few cases refused with exit 2 and
// nothing written; a calibration of the tiny golden network on 4 synthetic cases (7-bit weights:
// int8 runs on every CPU) writes a package whose model.json records the held-back validation,
// prints the table, and `segment --precision int8` runs it while the uncalibrated input package
// is refused with the reason (exit 5).
#include "app/exit_codes.h"
#include "core/volume.h"
#include "io/image_io.h"
#include "tests/app/run_voxseg.h"
#include "tests/pipeline/test_model_package.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace voxseg::app {
namespace {
namespace fs = std::filesystem;
using clitest::runVoxseg;
using voxseg::testing::TempDir;

// Case folders cases/cN/image.nii.gz: a blob in a 20x24x16 volume (one patch of the network).
void writeCases(const fs::path& root, int n) {
    for (int c = 1; c <= n; ++c) {
        Geometry g;
        g.size = {20, 24, 16};
        Volume v = Volume::allocate<float>(g, {.modality = "MR"});
        float* p = v.data<float>();
        for (int64_t k = 0; k < 16; ++k)
            for (int64_t j = 0; j < 24; ++j)
                for (int64_t i = 0; i < 20; ++i)
                    *p++ = std::hypot(i - 10.0, j - 12.0, k - 8.0) < 3 + c ? 100.f : 20.f + i % 3;
        fs::create_directories(root / ("c" + std::to_string(c)));
        ASSERT_TRUE(
            io::writeImage(v, (root / ("c" + std::to_string(c)) / "image.nii.gz").string()).isOk());
    }
}

TEST(ModelCalibrateCli, RefusesTooFewCasesThenCalibratesAndSegmentRunsInt8) {
    TempDir dir;
    const std::string model = testing::writeTinyModelPackage(dir.path() / "model", "MR");
    writeCases(dir.path() / "cases", 4);
    const std::string out = dir / "int8";
    auto few = runVoxseg({"model", "calibrate", model, "--cases", dir / "cases", "-o", out}, dir);
    EXPECT_EQ(few.exit_code, toInt(ExitCode::kUsage)) << few.err;
    EXPECT_NE(few.err.find("4 cases given"), std::string::npos) << few.err;
    EXPECT_FALSE(fs::exists(out));

    auto ok = runVoxseg(
        {"model", "calibrate", model, "--cases", dir / "cases", "-o", out, "--min-cases", "2",
         "--held-back", "2", "--weight-bits", "7", "--min-dice", "0", "--min-agreement", "0"},
        dir);
    ASSERT_EQ(ok.exit_code, 0) << ok.err;
    EXPECT_NE(ok.out.find("held-back case"), std::string::npos) << ok.out;
    EXPECT_NE(ok.out.find("(mse, 7-bit weights) on 2 cases"), std::string::npos) << ok.out;
    const auto j = nlohmann::json::parse(std::ifstream(fs::path(out) / "model.json"));
    const auto& held = j["quantization"]["calibration"]["held_back"];
    EXPECT_EQ(held["cases"], nlohmann::json({"c2", "c4"}));
    EXPECT_EQ(j["quantization"]["calibration"]["cases"], nlohmann::json({"c1", "c3"}));

    const std::string image = dir / "cases/c1/image.nii.gz";
    auto int8 = runVoxseg({"segment", image, "-m", out, "-o", dir / "seg", "--device", "cpu",
                           "--precision", "int8", "--outputs", "stats"},
                          dir);
    EXPECT_EQ(int8.exit_code, 0) << int8.err;
    auto refused = runVoxseg({"segment", image, "-m", model, "-o", dir / "seg2", "--device", "cpu",
                              "--precision", "int8", "--outputs", "stats"},
                             dir);
    EXPECT_EQ(refused.exit_code, toInt(ExitCode::kUnsupportedInput)) << refused.err;
    EXPECT_NE(refused.err.find("has no int8 calibration"), std::string::npos) << refused.err;

    // --keep-float none: no layer stays float; --norm-inputs int8 records s8 scales for the
    // convolutions' outputs its normalisations read; a value outside the list is a usage error.
    const std::string all = dir / "int8_all";
    auto every = runVoxseg(
        {"model", "calibrate",     model,  "--cases",         dir / "cases", "-o",
         all,     "--min-cases",   "2",    "--held-back",     "2",           "--weight-bits",
         "7",     "--min-dice",    "0",    "--min-agreement", "0",           "--keep-float",
         "none",  "--norm-inputs", "int8", "--zero-points",   "where-needed"},
        dir);
    ASSERT_EQ(every.exit_code, 0) << every.err;
    const auto ja = nlohmann::json::parse(std::ifstream(fs::path(all) / "model.json"));
    // --zero-points where-needed: recorded, and fewer tensors with a zero point than by default.
    EXPECT_EQ(ja["quantization"]["calibration"]["zero_points"], "where-needed");
    auto zero_points = [](const nlohmann::json& acts) {
        int n = 0;
        for (const auto& [name, a] : acts.items()) n += a["zero_point"].get<int>() != 0;
        return n;
    };
    EXPECT_LT(zero_points(ja["quantization"]["activations"]),
              zero_points(j["quantization"]["activations"]))
        << ja["quantization"]["activations"].dump();
    const size_t norm_inputs = ja["quantization"]["norm_inputs"].size();
    EXPECT_GT(norm_inputs, 0u) << ja["quantization"].dump();
    EXPECT_NE(every.out.find("and " + std::to_string(norm_inputs) + " 8-bit normalisation inputs"),
              std::string::npos)
        << every.out;
    EXPECT_FALSE(ja["quantization"].contains("float_layers")) << ja["quantization"].dump();
    EXPECT_GT(ja["quantization"]["activations"].size(), j["quantization"]["activations"].size());
    auto bad = runVoxseg({"model", "calibrate", model, "--cases", dir / "cases", "-o",
                          dir / "int8_bad", "--keep-float", "middle"},
                         dir);
    EXPECT_EQ(bad.exit_code, toInt(ExitCode::kUsage)) << bad.err;
    EXPECT_FALSE(fs::exists(dir / "int8_bad"));
    auto bad_zp = runVoxseg({"model", "calibrate", model, "--cases", dir / "cases", "-o",
                             dir / "int8_bad", "--zero-points", "symmetric"},
                            dir);
    EXPECT_EQ(bad_zp.exit_code, toInt(ExitCode::kUsage)) << bad_zp.err;
    EXPECT_FALSE(fs::exists(dir / "int8_bad"));
}

}  // namespace
}  // namespace voxseg::app
