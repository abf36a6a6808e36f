// Deeply nested DICOM through the real `voxseg` (issue 35 items 2 and 3): a CT instance whose
// private sequence nests 5,600 or 10,000 levels deep is refused cleanly by `info`, `convert`,
// `segment` and `batch` (exit 3 naming the file and the depth; batch: that case failed with the
// reason, the others done, exit 7). Before the nesting check the same files ended in SIGSEGV
// (exit 139) inside DCMTK's recursive parser: 10,000 deep on the main thread, three files of
// 5,600 in a folder in the scan threads.
#include "app/exit_codes.h"
#include "io/dicom_synth.h"
#include "tests/app/run_voxseg.h"
#include "tests/io/deep_dicom.h"
#include "tests/pipeline/test_model_package.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

namespace voxseg::app {
namespace {

namespace fs = std::filesystem;
using clitest::runVoxseg;
using testing::DeepDicomSpec;
using testing::DeepSyntax;
using testing::TempDir;

// Exit 3, as every file a DICOM scan refuses: no image series left in the input.
const int kInputExit = toInt(ExitCode::kInputNotFound);

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

std::string deepFile(const TempDir& dir, const std::string& name, int depth,
                     DeepSyntax syntax = DeepSyntax::kExplicitLittle, bool undefined = true) {
    DeepDicomSpec s;
    s.depth = depth;
    s.syntax = syntax;
    s.undefined_lengths = undefined;
    return testing::writeDeepDicom(dir.path() / name, s);
}

// Three files of 5,600 levels in one folder: the header scan reads them in parallel threads.
std::string deepFolder(const TempDir& dir) {
    const std::string folder = dir / "deep5600";
    deepFile(dir, "deep5600/a.dcm", 5600, DeepSyntax::kExplicitLittle, true);
    deepFile(dir, "deep5600/b.dcm", 5600, DeepSyntax::kImplicitLittle, true);
    deepFile(dir, "deep5600/c.dcm", 5600, DeepSyntax::kExplicitLittle, false);
    return folder;
}

std::string goodSeries(const TempDir& dir, const std::string& name) {
    io::SynthSeriesSpec spec;
    spec.columns = 40;
    spec.rows = 36;
    spec.slices = 12;
    spec.row_spacing = spec.column_spacing = 2.0;
    spec.slice_spacing = 2.5;
    EXPECT_TRUE(io::writeSynthSeries(spec, dir / name).isOk());
    return dir / name;
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& more) {
    a.insert(a.end(), more.begin(), more.end());
    return a;
}

void expectRefusal(const clitest::RunResult& r, const std::string& depth, const char* what) {
    EXPECT_EQ(r.exit_code, kInputExit) << what << ": " << r.err;
    EXPECT_TRUE(contains(r.err, depth + " levels deep")) << what << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "--max-nesting-depth")) << what << ": " << r.err;
}

TEST(NestingCli, InfoConvertAndSegmentRefuseDeepFilesWithExit3) {
    TempDir dir;
    const std::string deep = deepFile(dir, "deep10000.dcm", 10000);
    const std::string folder = deepFolder(dir);
    const std::string model = testing::writeTinyModelPackage(dir.path() / "model", "CT", 2.0);
    for (const auto& [input, depth] :
         std::vector<std::pair<std::string, std::string>>{{deep, "10000"}, {folder, "5600"}}) {
        auto r = runVoxseg({"info", input}, dir);
        expectRefusal(r, depth, "info");
        EXPECT_TRUE(contains(r.err, input)) << r.err;  // names the file (or its folder)
        expectRefusal(runVoxseg({"convert", input, "-o", dir / "out.nii.gz"}, dir), depth,
                      "convert");
        EXPECT_FALSE(fs::exists(dir / "out.nii.gz"));
        expectRefusal(runVoxseg({"segment", input, "-m", model, "-o", dir / "seg", "--device",
                                 "cpu", "--outputs", "nifti"},
                                dir),
                      depth, "segment");
    }
    // info lists the skipped file with its reason next to a good series.
    const std::string study = goodSeries(dir, "study");
    fs::copy_file(deep, fs::path(study) / "deep.dcm");
    auto r = runVoxseg({"info", study}, dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out + r.err, "10000 levels deep")) << r.out << r.err;
    r = runVoxseg({"convert", study, "-o", dir / "study.nii.gz"}, dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(NestingCli, TheLimitIsAnOption) {
    TempDir dir;
    const std::string file = deepFile(dir, "deep150.dcm", 150);
    expectRefusal(runVoxseg({"info", file}, dir), "150", "default limit");
    auto r = runVoxseg({"info", file, "--max-nesting-depth", "200"}, dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    r = runVoxseg({"info", file, "--max-nesting-depth", "2000"}, dir);
    EXPECT_EQ(r.exit_code, toInt(ExitCode::kUsage)) << r.err;
}

// One poisoned case fails with the reason, the others finish: exit 7, not a crashed batch.
TEST(NestingCli, BatchFailsTheDeepCaseAndFinishesTheOthers) {
    TempDir dir;
    const std::string model = testing::writeTinyModelPackage(dir.path() / "model", "CT", 2.0);
    goodSeries(dir, "in/good1");
    goodSeries(dir, "in/good2");
    deepFile(dir, "in/poison/IM1", 10000);
    {
        std::ofstream csv(dir / "cases.csv");
        csv << "case_id,input\ngood1,in/good1\npoison,in/poison\ngood2,in/good2\n";
    }
    const std::vector<std::string> args = {"batch",     dir / "cases.csv", "-m",  model,       "-o",
                                           dir / "out", "--device",        "cpu", "--threads", "1",
                                           "--outputs", "nifti,stats"};
    auto r = runVoxseg(args, dir);
    ASSERT_EQ(r.exit_code, toInt(ExitCode::kSomeCasesFailed)) << r.err;
    const auto summary =
        nlohmann::json::parse(clitest::slurp(dir.path() / "out/.voxseg-batch/summary-0-of-1.json"));
    EXPECT_EQ(summary["counts"]["done"], 2);
    EXPECT_EQ(summary["counts"]["failed"], 1);
    ASSERT_EQ(summary["failures"].size(), 1u);
    EXPECT_EQ(summary["failures"][0]["case_id"], "poison");
    EXPECT_TRUE(contains(summary["failures"][0]["error"].get<std::string>(), "10000 levels deep"))
        << summary.dump(2);
    EXPECT_TRUE(fs::exists(dir.path() / "out/good1/segmentation.nii.gz"));
    EXPECT_TRUE(fs::exists(dir.path() / "out/good2/segmentation.nii.gz"));
    // A rerun does not crash either (the failed case is skipped or fails the same way).
    r = runVoxseg(with(args, {"--retry-failed"}), dir);
    EXPECT_EQ(r.exit_code, toInt(ExitCode::kSomeCasesFailed)) << r.err;
}

}  // namespace
}  // namespace voxseg::app
