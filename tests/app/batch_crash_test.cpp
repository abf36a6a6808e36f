// Issue 35 item 3 (poison pill, batch): a case that kills its worker process (here SIGSEGV from
// the test-only hook VOXSEG_TEST_CRASH_ON, batch/child_process.h) is journaled failed with the
// reason, the other cases finish, the run exits 7; a rerun does not run it again (exit 7, the
// reason kept) unless --retry-failed. Before issue 35 the whole `voxseg batch` died of the
// signal, and every rerun died again.
#include "app/exit_codes.h"
#include "batch/journal.h"
#include "tests/batch/batch_test_util.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

extern char** environ;

namespace voxseg::app {
namespace {
namespace fs = std::filesystem;
using batch::testing::slurp;

// Runs `voxseg args...` (stdout/stderr to files in `dir`), with VOXSEG_TEST_CRASH_ON=`poison`
// when not empty; returns the exit code (128 + signal when killed).
int runVoxseg(const std::vector<std::string>& args, const fs::path& dir,
              const std::string& poison) {
    std::vector<std::string> all = {VOXSEG_BIN};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e)
        if (std::string(*e).rfind("VOXSEG_TEST_CRASH_ON=", 0) != 0) env.emplace_back(*e);
    if (!poison.empty()) env.push_back("VOXSEG_TEST_CRASH_ON=" + poison);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const std::string out = dir / ".out", err = dir / ".err";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, VOXSEG_BIN, &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return -1;
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// cases.csv in `dir` listing `count` volumes in/c<i>.nii.gz as case<i>, each of
// makeVolume(first_seed + i).
bool writeCases(const voxseg::testing::TempDir& dir, int count, int first_seed) {
    fs::create_directories(dir.path() / "in");
    std::ofstream csv(dir / "cases.csv");
    csv << "case_id,input\n";
    for (int i = 0; i < count; ++i) {
        const std::string name = "in/c" + std::to_string(i) + ".nii.gz";
        const Status written =
            io::writeImage(batch::testing::makeVolume(first_seed + i, {40, 36, 24}), dir / name);
        EXPECT_TRUE(written.isOk()) << written.toString();
        if (!written.isOk()) return false;
        csv << "case" << i << "," << name << "\n";
    }
    return static_cast<bool>(csv.flush());
}

int worker_deaths(const fs::path& state, const std::string& id) {
    int n = 0;
    for (const auto& f : fs::directory_iterator(state)) {
        if (f.path().filename().string().rfind("journal-", 0) != 0) continue;
        auto entries = batch::readJournalFile(f.path().string());
        if (!entries.isOk()) continue;
        for (const auto& e : *entries) n += e.case_id == id && e.worker_died;
    }
    return n;
}

TEST(BatchCrash, CaseThatKillsItsWorkerFailsAloneAndIsNotRerunUnlessAsked) {
    voxseg::testing::TempDir dir;
    const std::string model = batch::testing::makePackage(dir.path());
    ASSERT_TRUE(writeCases(dir, 3, 10));
    const fs::path out = dir.path() / "out";
    const fs::path state = out / ".voxseg-batch";
    const std::vector<std::string> args = {
        "batch", dir / "cases.csv", "-m", model,       "-o",   out.string(), "--device",
        "cpu",   "--threads",       "2",  "--outputs", "nifti"};
    auto with = [&](std::vector<std::string> more) {
        std::vector<std::string> a = args;
        a.insert(a.end(), more.begin(), more.end());
        return a;
    };
    const std::string err = dir / ".err";

    // 1. case1 kills its worker: recorded failed with the signal, the others are done, exit 7.
    ASSERT_EQ(runVoxseg(args, dir.path(), "case1"), toInt(ExitCode::kSomeCasesFailed))
        << slurp(err);
    EXPECT_TRUE(fs::exists(out / "case0/segmentation.nii.gz")) << slurp(err);
    EXPECT_TRUE(fs::exists(out / "case2/segmentation.nii.gz")) << slurp(err);
    EXPECT_FALSE(fs::exists(out / "case1"));
    auto summary = nlohmann::json::parse(slurp(state / "summary-0-of-1.json"));
    EXPECT_EQ(summary["counts"]["done"], 2) << summary.dump(2);
    EXPECT_EQ(summary["counts"]["failed"], 1) << summary.dump(2);
    ASSERT_EQ(summary["failures"].size(), 1u) << summary.dump(2);
    const std::string reason = summary["failures"][0].dump();
    EXPECT_NE(reason.find("case1"), std::string::npos) << reason;
    EXPECT_NE(reason.find("died of signal 11 (SIGSEGV) while segmenting this case"),
              std::string::npos)
        << reason;
    EXPECT_EQ(worker_deaths(state, "case1"), 1);
    EXPECT_NE(slurp(dir / ".out").find("2 done, 1 failed"), std::string::npos)
        << slurp(dir / ".out");

    // 2. A rerun does not run it again: still failed with its reason, exit 7, no new death.
    EXPECT_EQ(runVoxseg(args, dir.path(), "case1"), toInt(ExitCode::kSomeCasesFailed))
        << slurp(err);
    EXPECT_EQ(worker_deaths(state, "case1"), 1) << slurp(err);
    EXPECT_NE(slurp(err).find("killed its worker in an earlier run"), std::string::npos)
        << slurp(err);
    summary = nlohmann::json::parse(slurp(state / "summary-0-of-1.json"));
    EXPECT_EQ(summary["counts"]["skipped"], 2) << summary.dump(2);
    EXPECT_EQ(summary["counts"]["failed"], 1) << summary.dump(2);

    // 3. --retry-failed runs it again: still poisoned, it dies again (recorded once more) ...
    EXPECT_EQ(runVoxseg(with({"--retry-failed"}), dir.path(), "case1"),
              toInt(ExitCode::kSomeCasesFailed))
        << slurp(err);
    EXPECT_EQ(worker_deaths(state, "case1"), 2) << slurp(err);
    // ... and once the cause is gone it is done.
    EXPECT_EQ(runVoxseg(with({"--retry-failed"}), dir.path(), ""), 0) << slurp(err);
    EXPECT_TRUE(fs::exists(out / "case1/segmentation.nii.gz")) << slurp(err);
}

// --force redoes every case of earlier runs, but a case that killed a worker in this run is not
// run again by the next worker (it would die again, for ever).
TEST(BatchCrash, ForceDoesNotRunTheCaseThatKilledAWorkerTwiceInOneRun) {
    voxseg::testing::TempDir dir;
    const std::string model = batch::testing::makePackage(dir.path());
    ASSERT_TRUE(writeCases(dir, 3, 30));
    const fs::path out = dir.path() / "out";
    const std::vector<std::string> args = {
        "batch", dir / "cases.csv", "-m", model,       "-o",    out.string(), "--device",
        "cpu",   "--threads",       "2",  "--outputs", "nifti", "--force"};
    EXPECT_EQ(runVoxseg(args, dir.path(), "case0"), toInt(ExitCode::kSomeCasesFailed))
        << slurp(dir / ".err");
    EXPECT_EQ(worker_deaths(out / ".voxseg-batch", "case0"), 1) << slurp(dir / ".err");
    EXPECT_TRUE(fs::exists(out / "case1/segmentation.nii.gz")) << slurp(dir / ".err");
    EXPECT_TRUE(fs::exists(out / "case2/segmentation.nii.gz")) << slurp(dir / ".err");
}

// Several cases in flight when the worker dies (loader, two devices, writers): the supervisor
// runs them one at a time to find the one, and every other case is done.
TEST(BatchCrash, DeathWithSeveralCasesInFlightBlamesOnlyTheCulprit) {
    voxseg::testing::TempDir dir;
    const std::string model = batch::testing::makePackage(dir.path());
    ASSERT_TRUE(writeCases(dir, 6, 20));
    const fs::path out = dir.path() / "out";
    ASSERT_EQ(runVoxseg({"batch", dir / "cases.csv", "-m", model, "-o", out.string(), "--device",
                         "cpu", "--threads", "2", "--outputs", "nifti", "--loaders", "2",
                         "--prefetch", "3", "--devices", "cpu,cpu"},
                        dir.path(), "case3"),
              toInt(ExitCode::kSomeCasesFailed))
        << slurp(dir / ".err");
    for (int i = 0; i < 6; ++i)
        EXPECT_EQ(fs::exists(out / ("case" + std::to_string(i)) / "segmentation.nii.gz"), i != 3)
            << i << "\n"
            << slurp(dir / ".err");
    EXPECT_EQ(worker_deaths(out / ".voxseg-batch", "case3"), 1);
    for (int i = 0; i < 6; ++i)
        if (i != 3) EXPECT_EQ(worker_deaths(out / ".voxseg-batch", "case" + std::to_string(i)), 0);
}

}  // namespace
}  // namespace voxseg::app
