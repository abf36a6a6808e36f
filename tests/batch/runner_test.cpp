// The batch runner end to end on a real network (the golden nnU-Net PlainConvUNet): fault
// isolation, resume, sharding, several devices, stops and the free-space guard.
#include "batch/runner.h"

#include "batch/journal.h"
#include "tests/batch/batch_test_util.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

namespace voxseg::batch {
namespace {
namespace fs = std::filesystem;
using batch::testing::makePackage;
using batch::testing::makeVolume;
using batch::testing::slurp;

constexpr int kGoodCases = 4;

struct Fixture {
    voxseg::testing::TempDir dir;
    std::string model;
    std::vector<BatchCase> cases;

    Fixture() {
        model = makePackage(dir.path());
        fs::create_directories(dir.path() / "in");
        for (int i = 0; i < kGoodCases; ++i) {
            const std::string path = dir / ("in/c" + std::to_string(i) + ".nii.gz");
            EXPECT_TRUE(io::writeImage(makeVolume(100 + i), path).isOk());
            cases.push_back({"case" + std::to_string(i), path, ""});
        }
    }
    void addBroken() {
        std::ofstream(dir / "in/broken.nii.gz") << "this is not a gzip'ed NIfTI file";
        cases.push_back({"broken", dir / "in/broken.nii.gz", ""});
        cases.push_back({"missing", dir / "in/missing.nii.gz", ""});
    }
    BatchOptions options(const std::string& out) const {
        BatchOptions o;
        o.model = model;
        o.output_root = dir / out;
        o.segment.device = engine::DeviceSpec::cpu();
        o.segment.threads = 2;
        o.segment.outputs.preview = false;
        o.min_free_bytes = 0;
        o.retry_delay_seconds = 0.001;
        return o;
    }
};

// No staging folders, temporary files or trash left anywhere under `root`.
std::vector<std::string> debris(const fs::path& root) {
    std::vector<std::string> found;
    for (const auto& e : fs::recursive_directory_iterator(root)) {
        const std::string name = e.path().filename().string();
        if (name.find("tmp") != std::string::npos || name.find(".voxseg-staging") == 0)
            found.push_back(e.path().string());
        if ((e.path().parent_path().filename() == "staging" ||
             e.path().parent_path().filename() == "trash") &&
            e.path().parent_path().parent_path().filename() == ".voxseg-batch")
            found.push_back(e.path().string());
    }
    return found;
}

TEST(BatchRunner, BadCasesAreRecordedAndTheRestFinish) {
    Fixture f;
    f.addBroken();
    auto r = runBatch(f.cases, f.options("out"), CancelToken());
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r->stop, StopReason::kNone);
    EXPECT_EQ(r->stats.done, kGoodCases);
    EXPECT_EQ(r->stats.failed, 2);
    for (int i = 0; i < kGoodCases; ++i) {
        const fs::path out = f.dir.path() / "out" / ("case" + std::to_string(i));
        EXPECT_TRUE(fs::exists(out / "segmentation.nii.gz")) << out;
        EXPECT_TRUE(fs::exists(out / "run.json"));
        EXPECT_TRUE(fs::exists(out / "statistics.json"));
    }
    EXPECT_FALSE(fs::exists(f.dir.path() / "out/broken"));
    EXPECT_FALSE(fs::exists(f.dir.path() / "out/missing"));
    EXPECT_TRUE(debris(f.dir.path() / "out").empty());

    auto summary = nlohmann::json::parse(slurp(r->summary_path));
    EXPECT_EQ(summary["counts"]["done"], kGoodCases);
    EXPECT_EQ(summary["counts"]["failed"], 2);
    ASSERT_EQ(summary["failures"].size(), 2u);
    std::set<std::string> failed;
    for (const auto& x : summary["failures"]) {
        failed.insert(x["case_id"].get<std::string>());
        EXPECT_FALSE(x["error"].get<std::string>().empty());
    }
    EXPECT_EQ(failed, (std::set<std::string>{"broken", "missing"}));
    for (const auto& c : summary["cases"])
        if (c["state"] == "done") EXPECT_GT(c["stages"]["inference"].get<double>(), 0.0);
    const std::string metrics = slurp(r->metrics_path);
    EXPECT_NE(metrics.find("state=\"done\"} " + std::to_string(kGoodCases)), std::string::npos)
        << metrics;
    EXPECT_NE(metrics.find("voxseg_batch_running{shard=\"0/1\"} 0"), std::string::npos);
}

TEST(BatchRunner, RerunSkipsCompleteCasesAndRedoesTheRest) {
    Fixture f;
    f.addBroken();
    auto first = runBatch(f.cases, f.options("out"), CancelToken());
    ASSERT_TRUE(first.isOk());
    const std::string label0 = slurp(f.dir.path() / "out/case0/segmentation.nii.gz");

    // An output deleted behind the batch's back is redone; the failed ones are retried.
    fs::remove(f.dir.path() / "out/case1/statistics.json");
    auto second = runBatch(f.cases, f.options("out"), CancelToken());
    ASSERT_TRUE(second.isOk()) << second.status().toString();
    EXPECT_EQ(second->stats.skipped, kGoodCases - 1);
    EXPECT_EQ(second->stats.done, 1);
    EXPECT_EQ(second->stats.failed, 2);
    EXPECT_TRUE(fs::exists(f.dir.path() / "out/case1/statistics.json"));
    EXPECT_EQ(slurp(f.dir.path() / "out/case0/segmentation.nii.gz"), label0);

    // Other options change the outputs: every case is redone.
    BatchOptions changed = f.options("out");
    changed.segment.overlap = 0.25;
    auto third = runBatch(f.cases, changed, CancelToken());
    ASSERT_TRUE(third.isOk());
    EXPECT_EQ(third->stats.skipped, 0);
    EXPECT_EQ(third->stats.done, kGoodCases);

    // --force ignores the journal.
    BatchOptions forced = changed;
    forced.redo_all = true;
    auto fourth = runBatch(f.cases, forced, CancelToken());
    ASSERT_TRUE(fourth.isOk());
    EXPECT_EQ(fourth->stats.done, kGoodCases);
    EXPECT_TRUE(debris(f.dir.path() / "out").empty());
}

TEST(BatchRunner, ShardsPartitionTheCasesAndMatchOneProcess) {
    Fixture f;
    auto whole = runBatch(f.cases, f.options("whole"), CancelToken());
    ASSERT_TRUE(whole.isOk());
    int done = 0;
    for (int i = 0; i < 3; ++i) {
        BatchOptions o = f.options("sharded");
        o.shard = {i, 3, "test"};
        auto r = runBatch(f.cases, o, CancelToken());
        ASSERT_TRUE(r.isOk()) << r.status().toString();
        done += r->stats.done;
        EXPECT_EQ(r->stats.done, r->stats.cases_in_shard);
        EXPECT_TRUE(fs::exists(f.dir.path() / "sharded/.voxseg-batch" /
                               ("journal-" + std::to_string(i) + "-of-3.jsonl")));
    }
    EXPECT_EQ(done, kGoodCases);
    for (const auto& c : f.cases)
        EXPECT_EQ(slurp(f.dir.path() / "sharded" / c.id / "segmentation.nii.gz"),
                  slurp(f.dir.path() / "whole" / c.id / "segmentation.nii.gz"))
            << c.id;
    // The whole batch, rerun unsharded over the sharded output, finds everything done.
    auto again = runBatch(f.cases, f.options("sharded"), CancelToken());
    ASSERT_TRUE(again.isOk());
    EXPECT_EQ(again->stats.skipped, kGoodCases);
}

TEST(BatchRunner, TwoCpuDevicesShareTheWorkWithIdenticalResults) {
    Fixture f;
    BatchOptions single = f.options("one");
    single.devices = {engine::DeviceSpec::cpu()};
    auto one = runBatch(f.cases, single, CancelToken());
    ASSERT_TRUE(one.isOk());
    EXPECT_EQ(one->stats.devices, std::vector<std::string>{"cpu"});
    BatchOptions o = f.options("two");
    o.devices = {engine::DeviceSpec::cpu(), engine::DeviceSpec::cpu()};
    o.segment.threads = 2;  // one thread per device
    o.loaders = 2;
    auto two = runBatch(f.cases, o, CancelToken());
    ASSERT_TRUE(two.isOk()) << two.status().toString();
    EXPECT_EQ(two->stats.done, kGoodCases);
    EXPECT_EQ(two->stats.devices.size(), 2u);
    for (const auto& c : f.cases)
        EXPECT_EQ(slurp(f.dir.path() / "two" / c.id / "segmentation.nii.gz"),
                  slurp(f.dir.path() / "one" / c.id / "segmentation.nii.gz"))
            << c.id;
}

TEST(BatchRunner, SeveralWritersFinishAndWriteEveryCaseIdentically) {
    // Writers export (scores -> label map) and write concurrently: 3 writers for 1 device must
    // give exactly what 1 writer gives, every case journaled once.
    Fixture f;
    BatchOptions single = f.options("one");
    single.devices = {engine::DeviceSpec::cpu()};
    single.writers = 1;
    auto one = runBatch(f.cases, single, CancelToken());
    ASSERT_TRUE(one.isOk()) << one.status().toString();
    BatchOptions o = f.options("three");
    o.devices = {engine::DeviceSpec::cpu()};
    o.writers = 3;
    o.prefetch = 4;
    auto three = runBatch(f.cases, o, CancelToken());
    ASSERT_TRUE(three.isOk()) << three.status().toString();
    EXPECT_EQ(three->stats.done, kGoodCases);
    for (const auto& c : f.cases) {
        EXPECT_EQ(slurp(f.dir.path() / "three" / c.id / "segmentation.nii.gz"),
                  slurp(f.dir.path() / "one" / c.id / "segmentation.nii.gz"))
            << c.id;
        // The export ran in a writer and its time is still reported per case.
        auto summary = nlohmann::json::parse(slurp(three->summary_path));
        bool found = false;
        for (const auto& rec : summary["cases"])
            if (rec["case_id"] == c.id) {
                found = true;
                EXPECT_TRUE(rec["stages"].contains("export")) << c.id;
            }
        EXPECT_TRUE(found) << c.id;
    }
}

// Without --devices, the CPU gets two workers when it has two cores to share, one otherwise.
TEST(BatchRunner, DefaultCpuRunUsesTwoWorkersWhenTwoCoresAreThere) {
    Fixture f;
    auto two = runBatch(f.cases, f.options("two"), CancelToken());  // threads = 2
    ASSERT_TRUE(two.isOk()) << two.status().toString();
    EXPECT_EQ(two->stats.devices, (std::vector<std::string>{"cpu", "cpu"}));
    EXPECT_EQ(two->stats.done, kGoodCases);
    BatchOptions o = f.options("one");
    o.segment.threads = 1;
    auto one = runBatch(f.cases, o, CancelToken());
    ASSERT_TRUE(one.isOk()) << one.status().toString();
    EXPECT_EQ(one->stats.devices, std::vector<std::string>{"cpu"});
    o = f.options("reference");
    o.segment.device = engine::DeviceSpec::reference();  // only the CPU backend is doubled
    o.devices.clear();
    auto ref = runBatch({f.cases.front()}, o, CancelToken());
    ASSERT_TRUE(ref.isOk()) << ref.status().toString();
    EXPECT_EQ(ref->stats.devices, std::vector<std::string>{"reference"});
}

TEST(BatchRunner, StopAfterTheFirstCaseLeavesTheRestForTheRerun) {
    Fixture f;
    CancelToken stop;
    BatchOptions o = f.options("out");
    o.grace_seconds = 0;  // cases in flight are abandoned at once
    o.prefetch = 1;
    o.writers = 1;  // the case being recorded is the only one written: the stop comes after it
    auto r =
        runBatch(f.cases, o, stop, [&](const CaseRecord&, const BatchStats&) { stop.cancel(); });
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r->stop, StopReason::kSignal);
    EXPECT_EQ(r->stats.done, 1);
    EXPECT_EQ(r->stats.done + r->stats.interrupted + r->stats.pending(), kGoodCases);
    EXPECT_EQ(nlohmann::json::parse(slurp(r->summary_path))["stopped"], "signal");
    EXPECT_TRUE(debris(f.dir.path() / "out").empty());
    int folders = 0;
    for (const auto& c : f.cases) folders += fs::exists(f.dir.path() / "out" / c.id);
    EXPECT_EQ(folders, r->stats.done);  // nothing half-written under a case name

    auto rerun = runBatch(f.cases, f.options("out"), CancelToken());
    ASSERT_TRUE(rerun.isOk());
    EXPECT_EQ(rerun->stop, StopReason::kNone);
    EXPECT_EQ(rerun->stats.skipped, r->stats.done);
    EXPECT_EQ(rerun->stats.done, kGoodCases - r->stats.done);
}

TEST(BatchRunner, WithinTheGracePeriodTheCasesInFlightFinish) {
    Fixture f;
    CancelToken stop;
    BatchOptions o = f.options("out");
    o.grace_seconds = 600;  // far longer than a case: nothing may be abandoned
    auto r =
        runBatch(f.cases, o, stop, [&](const CaseRecord&, const BatchStats&) { stop.cancel(); });
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r->stats.interrupted, 0);
    EXPECT_GE(r->stats.done, 1);
    EXPECT_EQ(r->stats.done + r->stats.pending(), kGoodCases);
    EXPECT_TRUE(debris(f.dir.path() / "out").empty());
}

TEST(BatchRunner, FreeSpaceGuardStopsBeforeWriting) {
    Fixture f;
    BatchOptions o = f.options("out");
    o.min_free_bytes = ~uint64_t{0};
    auto r = runBatch(f.cases, o, CancelToken());
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r->stop, StopReason::kDiskFull);
    EXPECT_EQ(r->stats.done, 0);
    for (const auto& c : f.cases) EXPECT_FALSE(fs::exists(f.dir.path() / "out" / c.id));
    EXPECT_TRUE(debris(f.dir.path() / "out").empty());
}

TEST(BatchRunner, MissingModelIsASetupError) {
    Fixture f;
    BatchOptions o = f.options("out");
    o.model = f.dir / "no-model";
    auto r = runBatch(f.cases, o, CancelToken());
    EXPECT_FALSE(r.isOk());
}

}  // namespace
}  // namespace voxseg::batch
