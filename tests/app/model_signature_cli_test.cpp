// Signed model packages end to end (issue 19 part 5): `voxseg model keygen/sign/verify`, then
// `voxseg segment` and `voxseg batch` with --trusted-keys / --require-signed on a real package:
// a signed one runs, a tampered or unsigned one is refused with exit 5 and a message naming the
// package, and nothing is written.
#include "app/exit_codes.h"
#include "io/dicom_synth.h"
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

struct Fixture {
    TempDir dir;
    std::string model;
    std::string series;
    Fixture() {
        model = testing::writeTinyModelPackage(dir.path() / "model", "CT", 2.0);
        io::SynthSeriesSpec spec;
        spec.modality = "CT";
        spec.columns = 40;
        spec.rows = 36;
        spec.slices = 16;
        spec.row_spacing = spec.column_spacing = 2.0;
        spec.slice_spacing = 2.5;
        series = dir / "cases/ct";
        EXPECT_TRUE(io::writeSynthSeries(spec, series).isOk());
    }
    clitest::RunResult segment(const std::string& out, const std::vector<std::string>& extra) {
        std::vector<std::string> args = {"segment", series,    "-m",        model,
                                         "-o",      dir / out, "--outputs", "stats"};
        args.insert(args.end(), extra.begin(), extra.end());
        return runVoxseg(args, dir);
    }
};

TEST(ModelSignatureCli, SignedPackageRunsTamperedOrUnsignedIsRefused) {
    Fixture f;
    const std::string keys = f.dir / "ops.pub";
    // Unsigned, required: refused before anything is loaded or written.
    auto r = runVoxseg({"model", "keygen", f.dir / "ops", "--comment", "hospital AI team"}, f.dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = f.segment("unsigned", {"--trusted-keys", keys, "--require-signed"});
    EXPECT_EQ(r.exit_code, toInt(ExitCode::kUnsupportedInput)) << r.err;
    EXPECT_NE(r.err.find("is not signed and --require-signed is set"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(f.model), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(f.dir / "unsigned"));
    // Without --require-signed an unsigned package still runs (and the log says so).
    r = f.segment("optional", {"--trusted-keys", keys});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("model package not signed"), std::string::npos) << r.err;

    r = runVoxseg({"model", "sign", f.model, "--key", f.dir / "ops.key"}, f.dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = runVoxseg({"model", "verify", f.model, "--trusted-keys", keys}, f.dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("(hospital AI team)"), std::string::npos) << r.out;
    r = f.segment("signed", {"--trusted-keys", keys, "--require-signed"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(f.dir / "signed/run.json"));

    // One changed weight byte in the ONNX file.
    fs::path onnx;
    for (const auto& e : fs::directory_iterator(f.model))
        if (e.path().extension() == ".onnx") onnx = e.path();
    ASSERT_FALSE(onnx.empty());
    {
        std::fstream io(onnx, std::ios::in | std::ios::out | std::ios::binary);
        io.seekg(-16, std::ios::end);
        char c = 0;
        io.get(c);
        io.seekp(-16, std::ios::end);
        io.put(static_cast<char>(c ^ 0x01));
    }
    r = f.segment("tampered", {"--trusted-keys", keys, "--require-signed"});
    EXPECT_EQ(r.exit_code, toInt(ExitCode::kUnsupportedInput)) << r.err;
    EXPECT_NE(r.err.find(onnx.filename().string() + " was changed after signing"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(f.dir / "tampered"));
    r = runVoxseg({"model", "verify", f.model, "--trusted-keys", keys}, f.dir);
    EXPECT_EQ(r.exit_code, toInt(ExitCode::kUnsupportedInput)) << r.err;

    // batch shares the options and the check.
    r = runVoxseg({"batch", f.dir / "cases", "-m", f.model, "-o", f.dir / "batch", "--trusted-keys",
                   keys, "--require-signed"},
                  f.dir);
    EXPECT_EQ(r.exit_code, toInt(ExitCode::kUnsupportedInput)) << r.err;
    EXPECT_NE(r.err.find("was changed after signing"), std::string::npos) << r.err;

    // --require-signed alone cannot check anything: a usage error.
    r = f.segment("nokeys", {"--require-signed"});
    EXPECT_EQ(r.exit_code, toInt(ExitCode::kUsage)) << r.err;
}

}  // namespace
}  // namespace voxseg::app
