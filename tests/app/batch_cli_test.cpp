// `voxseg batch` as a real child process: exit codes (0, 7, 10), a SIGTERM in the middle of a
// case followed by a rerun (complete, outputs identical to an uninterrupted run, no debris).
#include "app/exit_codes.h"
#include "batch/journal.h"
#include "tests/batch/batch_test_util.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

extern char** environ;

namespace voxseg::app {
namespace {
namespace fs = std::filesystem;
using batch::testing::slurp;

constexpr int kCases = 6;

// Starts `voxseg args...` with stdout/stderr to files; returns the pid.
pid_t spawnVoxseg(const std::vector<std::string>& args, const std::string& out,
                  const std::string& err) {
    std::vector<std::string> all = {VOXSEG_BIN};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    if (posix_spawn(&pid, VOXSEG_BIN, &fa, nullptr, argv.data(), environ) != 0) pid = -1;
    posix_spawn_file_actions_destroy(&fa);
    return pid;
}

int waitExit(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int runVoxseg(const std::vector<std::string>& args, const voxseg::testing::TempDir& dir) {
    return waitExit(spawnVoxseg(args, dir / ".out", dir / ".err"));
}

struct Cases {
    voxseg::testing::TempDir dir;
    std::string model;
    std::string manifest;
    int count = kCases;
    explicit Cases(int broken = 0, int cases = kCases, std::array<int, 3> size = {64, 60, 44})
        : count(cases) {
        model = batch::testing::makePackage(dir.path());
        fs::create_directories(dir.path() / "in");
        std::ofstream csv(dir / "cases.csv");
        csv << "case_id,input\n";
        for (int i = 0; i < count; ++i) {
            const std::string name = "in/c" + std::to_string(i) + ".nii.gz";
            EXPECT_TRUE(
                io::writeImage(batch::testing::makeVolume(10 + i, {size[0], size[1], size[2]}),
                               dir / name)
                    .isOk());
            csv << "case" << i << "," << name << "\n";
        }
        for (int i = 0; i < broken; ++i) {
            std::ofstream(dir / ("in/bad" + std::to_string(i) + ".nii.gz")) << "garbage";
            csv << "bad" << i << ",in/bad" << i << ".nii.gz\n";
        }
        manifest = dir / "cases.csv";
    }
    std::vector<std::string> args(const std::string& out) const {
        return {"batch",    manifest, "-m",        model, "-o",        dir / out,
                "--device", "cpu",    "--threads", "1",   "--outputs", "nifti,stats"};
    }
};

std::vector<std::string> debris(const fs::path& root) {
    std::vector<std::string> found;
    for (const auto& e : fs::recursive_directory_iterator(root)) {
        const std::string name = e.path().filename().string();
        const std::string parent = e.path().parent_path().filename().string();
        if (name.find("tmp") != std::string::npos || name.rfind(".voxseg-staging", 0) == 0 ||
            parent == "staging" || parent == "trash")
            found.push_back(e.path().string());
    }
    return found;
}

std::vector<std::string> with(std::vector<std::string> a, std::vector<std::string> more) {
    a.insert(a.end(), more.begin(), more.end());
    return a;
}

TEST(BatchCli, BrokenCasesExit7AndAreInTheSummary) {
    Cases c(2);
    EXPECT_EQ(runVoxseg(c.args("out"), c.dir), toInt(ExitCode::kSomeCasesFailed))
        << slurp(c.dir.path() / ".err");
    const auto summary =
        nlohmann::json::parse(slurp(c.dir.path() / "out/.voxseg-batch/summary-0-of-1.json"));
    EXPECT_EQ(summary["counts"]["done"], kCases);
    EXPECT_EQ(summary["counts"]["failed"], 2);
    EXPECT_EQ(summary["failures"].size(), 2u);
    for (int i = 0; i < kCases; ++i)
        EXPECT_TRUE(fs::exists(c.dir.path() / "out" / ("case" + std::to_string(i)) /
                               "segmentation.nii.gz"));
}

TEST(BatchCli, CpuBatchWithoutDevicesRunsTwoWorkers) {
    // Regression: the CLI turned an empty --devices into {--device}, so runBatch's default of two
    // CPU workers was never used from the command line (only its unit test saw it).
    Cases c;
    auto devicesOf = [&](const std::string& out, std::vector<std::string> extra) {
        std::vector<std::string> a = {"batch",     c.manifest,  "-m",        c.model,
                                      "-o",        c.dir / out, "--device",  "cpu",
                                      "--threads", "2",         "--outputs", "stats"};
        a.insert(a.end(), extra.begin(), extra.end());
        EXPECT_EQ(runVoxseg(a, c.dir), 0) << slurp(c.dir.path() / ".err");
        return nlohmann::json::parse(
                   slurp(c.dir.path() / out / ".voxseg-batch/summary-0-of-1.json"))["devices"]
            .get<std::vector<std::string>>();
    };
    EXPECT_EQ(devicesOf("default", {}), (std::vector<std::string>{"cpu", "cpu"}));
    EXPECT_EQ(devicesOf("one", {"--devices", "cpu"}), std::vector<std::string>{"cpu"});
}

TEST(BatchCli, SigtermMidCaseThenRerunGivesIdenticalOutputsAndNoDebris) {
    Cases c;
    ASSERT_EQ(runVoxseg(c.args("reference"), c.dir), 0) << slurp(c.dir.path() / ".err");

    const std::string err = c.dir / "interrupted.err";
    const pid_t pid = spawnVoxseg(
        with(c.args("out"), {"--grace", "0", "--log-format", "json", "--prefetch", "1"}),
        c.dir / "interrupted.out", err);
    ASSERT_GT(pid, 0);
    // SIGTERM as soon as the first case is journaled: the second one is then in flight.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    bool first_done = false;
    while (std::chrono::steady_clock::now() < deadline) {
        if (slurp(err).find("case case") != std::string::npos &&
            slurp(err).find(" done in ") != std::string::npos) {
            first_done = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(first_done) << slurp(err);
    // Twice, as under Slurm (the job's processes and a forwarding wrapper both signal it): a
    // repeated SIGTERM must not turn the clean stop into a kill.
    ::kill(pid, SIGTERM);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ::kill(pid, SIGTERM);
    const int rc = waitExit(pid);
    ASSERT_EQ(rc, toInt(ExitCode::kBatchStopped)) << slurp(err);
    EXPECT_TRUE(debris(c.dir.path() / "out").empty()) << debris(c.dir.path() / "out")[0];
    auto journal = batch::readJournals(c.dir / "out/.voxseg-batch");
    ASSERT_TRUE(journal.isOk());
    int done = 0, folders = 0;
    for (const auto& [id, e] : *journal) done += e.state == batch::CaseState::kDone;
    for (int i = 0; i < kCases; ++i)
        folders += fs::exists(c.dir.path() / "out" / ("case" + std::to_string(i)));
    EXPECT_GE(done, 1);
    EXPECT_LT(done, kCases) << "the signal came too late to interrupt anything";
    EXPECT_EQ(folders, done);  // no case folder without its journal entry
    // JSON-lines logs: every stderr line is a JSON object.
    std::istringstream lines(slurp(err));
    for (std::string line; std::getline(lines, line);)
        EXPECT_FALSE(nlohmann::json::parse(line, nullptr, false).is_discarded()) << line;

    ASSERT_EQ(runVoxseg(c.args("out"), c.dir), 0) << slurp(c.dir.path() / ".err");
    EXPECT_TRUE(debris(c.dir.path() / "out").empty());
    for (int i = 0; i < kCases; ++i) {
        const std::string id = "case" + std::to_string(i);
        const std::string a = slurp(c.dir.path() / "out" / id / "segmentation.nii.gz");
        EXPECT_FALSE(a.empty()) << id;
        EXPECT_EQ(a, slurp(c.dir.path() / "reference" / id / "segmentation.nii.gz")) << id;
    }
    const auto summary =
        nlohmann::json::parse(slurp(c.dir.path() / "out/.voxseg-batch/summary-0-of-1.json"));
    EXPECT_EQ(summary["counts"]["skipped"], done);
    EXPECT_EQ(summary["counts"]["done"], kCases - done);
}

// No notice at all (SIGKILL, a lost node): whatever was staged is debris for the rerun to clear;
// the rerun completes with outputs identical to an uninterrupted run.
TEST(BatchCli, SigkillMidCaseThenRerunClearsDebrisAndCompletes) {
    Cases c;
    ASSERT_EQ(runVoxseg(c.args("reference"), c.dir), 0) << slurp(c.dir.path() / ".err");
    const std::string err = c.dir / "killed.err";
    const pid_t pid =
        spawnVoxseg(with(c.args("out"), {"--log-format", "json"}), c.dir / "killed.out", err);
    ASSERT_GT(pid, 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline &&
           slurp(err).find(" done in ") == std::string::npos)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ::kill(pid, SIGKILL);
    EXPECT_EQ(waitExit(pid), 128 + SIGKILL);

    ASSERT_EQ(runVoxseg(c.args("out"), c.dir), 0) << slurp(c.dir.path() / ".err");
    EXPECT_TRUE(debris(c.dir.path() / "out").empty()) << debris(c.dir.path() / "out")[0];
    for (int i = 0; i < kCases; ++i) {
        const std::string id = "case" + std::to_string(i);
        EXPECT_EQ(slurp(c.dir.path() / "out" / id / "segmentation.nii.gz"),
                  slurp(c.dir.path() / "reference" / id / "segmentation.nii.gz"))
            << id;
    }
}

// A DICOM study with two series and no series column fails alone, saying how to choose; the
// same study with a series column succeeds.
TEST(BatchCli, AmbiguousStudyFailsAloneAndTheSeriesColumnPicksOne) {
    Cases c;
    const std::string study = c.dir / "two-series";
    ASSERT_EQ(runVoxseg({"synth", study, "--size", "32x32x8", "--series-count", "2"}, c.dir), 0);
    std::ofstream(c.dir / "dicom.csv") << "case_id,input,series\nct,two-series,\n";
    const std::string model_ct = c.dir / "model-ct";
    fs::create_directories(model_ct);
    fs::copy(c.model, model_ct, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    std::string json = slurp(fs::path(model_ct) / "model.json");
    json.replace(json.find("\"MR\""), 4, "\"CT\"");
    std::ofstream(fs::path(model_ct) / "model.json") << json;
    const std::vector<std::string> args = {
        "batch",       c.dir / "dicom.csv", "-m",  model_ct,    "-o",
        c.dir / "out", "--device",          "cpu", "--threads", "1"};
    EXPECT_EQ(runVoxseg(args, c.dir), toInt(ExitCode::kSomeCasesFailed));
    EXPECT_NE(slurp(c.dir.path() / ".err").find("give this case a 'series'"), std::string::npos)
        << slurp(c.dir.path() / ".err");
    std::ofstream(c.dir / "dicom.csv") << "case_id,input,series\nct,two-series,1\n";
    EXPECT_EQ(runVoxseg(args, c.dir), 0) << slurp(c.dir.path() / ".err");
    EXPECT_TRUE(fs::exists(c.dir.path() / "out/ct/segmentation.nii.gz"));
}

TEST(BatchCli, UsageErrors) {
    Cases c;
    EXPECT_EQ(runVoxseg(with(c.args("out"), {"--shard", "4/4"}), c.dir), toInt(ExitCode::kUsage));
    EXPECT_EQ(runVoxseg(with(c.args("out"), {"--devices", "gpu"}), c.dir), toInt(ExitCode::kUsage));
    EXPECT_EQ(runVoxseg({"batch", c.dir / "nope.csv", "-m", c.model, "-o", c.dir / "o"}, c.dir),
              toInt(ExitCode::kInputNotFound));
}

// A manifest with more rows than --max-manifest-rows is refused whole, naming the option.
TEST(BatchCli, ManifestOverTheRowLimitIsRefusedNamingTheOption) {
    Cases c(0, 3, {16, 16, 16});
    EXPECT_NE(runVoxseg(with(c.args("out"), {"--max-manifest-rows", "2"}), c.dir), 0);
    const std::string err = slurp(c.dir.path() / ".err");
    EXPECT_NE(err.find("lists more than 2 cases (limit 2 rows per manifest)"), std::string::npos)
        << err;
    EXPECT_NE(err.find("--max-manifest-rows"), std::string::npos) << err;
    EXPECT_FALSE(fs::exists(c.dir.path() / "out" / "case0"));
    EXPECT_EQ(runVoxseg(with(c.args("out"), {"--max-manifest-rows", "3"}), c.dir), 0);
}

// Chaos (issue 19 part 6): 20 cases; 10 campaigns, each killing the batch 4 times at seeded
// random points (SIGKILL and SIGTERM alternately, 20 of each in all; every run resumes the
// last) and then running it to the end: 0 lost cases, 0 duplicates (every case journaled done
// exactly once per campaign), after any kill every case folder whole (journaled or not yet),
// 0 partial files, outputs identical to an uninterrupted run.
TEST(BatchCli, ChaosKilledAtRandomPointsLosesAndRepeatsNothing) {
    constexpr int kChaosCases = 20;
    Cases c(0, kChaosCases, {40, 36, 24});
    // The uninterrupted run's time, the faster of a cold and a warm run: the resumed runs are
    // warm, and points drawn from a slow cold run would fall after they ended (CI: 29 of 40).
    double full_ms = 0;
    for (const char* name : {"reference", "warm"}) {
        const auto t0 = std::chrono::steady_clock::now();
        ASSERT_EQ(runVoxseg(c.args(name), c.dir), 0) << slurp(c.dir.path() / ".err");
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        full_ms = full_ms == 0 ? ms : std::min(full_ms, ms);
    }
    std::mt19937 rng(2026);
    std::uniform_real_distribution<double> when(0.0, 1.0);
    int signals = 0, hit_running = 0;
    for (int campaign = 0; campaign < 10; ++campaign) {
        const fs::path out = c.dir.path() / ("out" + std::to_string(campaign));
        int remaining = kChaosCases;
        for (int k = 0; k < 4; ++k, ++signals) {
            const int signal = signals % 2 == 0 ? SIGKILL : SIGTERM;
            const pid_t pid = spawnVoxseg(with(c.args(out.filename().string()), {"--grace", "0"}),
                                          c.dir / ".out", c.dir / ".err");
            ASSERT_GT(pid, 0);
            // A point within the run that is left (model load included), short of its end by
            // a tenth for the noise of a shared machine.
            const double ms = 0.9 * when(rng) * full_ms * (remaining + 1) / (kChaosCases + 1);
            std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
            ::kill(pid, signal);
            hit_running += waitExit(pid) != 0;
            auto journal = batch::readJournals((out / ".voxseg-batch").string());
            ASSERT_TRUE(journal.isOk()) << journal.status().toString();
            remaining = kChaosCases;
            for (int i = 0; i < kChaosCases; ++i) {
                const std::string id = "case" + std::to_string(i);
                const bool journaled =
                    journal->count(id) && journal->at(id).state == batch::CaseState::kDone;
                remaining -= journaled;
                // Journaled done: its outputs are there. A folder not journaled yet (killed
                // between its rename into place and the journal's fsync) must be whole, never
                // partial; the next run redoes it and journals it once.
                if (journaled || fs::exists(out / id))
                    EXPECT_EQ(slurp(out / id / "segmentation.nii.gz"),
                              slurp(c.dir.path() / "reference" / id / "segmentation.nii.gz"))
                        << id << " after signal " << signals
                        << (journaled ? "" : " (not journaled)");
            }
        }
        ASSERT_EQ(runVoxseg(c.args(out.filename().string()), c.dir), 0)
            << slurp(c.dir.path() / ".err");
        EXPECT_TRUE(debris(out).empty()) << debris(out)[0];
        std::map<std::string, int> done;
        for (const auto& file : fs::directory_iterator(out / ".voxseg-batch")) {
            if (file.path().filename().string().rfind("journal-", 0) != 0) continue;
            auto entries = batch::readJournalFile(file.path().string());
            ASSERT_TRUE(entries.isOk()) << entries.status().toString();
            for (const auto& e : *entries) done[e.case_id] += e.state == batch::CaseState::kDone;
        }
        for (int i = 0; i < kChaosCases; ++i) {
            const std::string id = "case" + std::to_string(i);
            EXPECT_EQ(done[id], 1) << id << ": lost (0) or done more than once";
            EXPECT_EQ(slurp(out / id / "segmentation.nii.gz"),
                      slurp(c.dir.path() / "reference" / id / "segmentation.nii.gz"))
                << id;
        }
    }
    // The points must mostly hit running batches, or the test proves little.
    EXPECT_GE(hit_running, 30) << "uninterrupted run " << full_ms << " ms";
    std::printf(
        "chaos: %d signals (20 SIGKILL, 20 SIGTERM), %d hit a running batch; full run "
        "%.0f ms\n",
        signals, hit_running, full_ms);
}

}  // namespace
}  // namespace voxseg::app
