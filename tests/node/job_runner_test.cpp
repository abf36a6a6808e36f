// The node's JobRunner (issue 35): a failed job's reason.txt names the folder the job moved to
// (it named queue/<job>, where the job no longer is: item 7); work.json, written before the work
// starts, counts the node's stops while a job was in work, and a job left in work by
// kMaxInterruptions stopped nodes in a row is failed instead of segmented again (item 3: no
// crash loop, whatever took the node down). Segmentation runs in this process here.
#include "node/job_runner.h"

#include "core/atomic_file.h"
#include "pipeline/segment_options_schema.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace voxseg::node {
namespace {
namespace fs = std::filesystem;

struct Fixture {
    testing::TempDir dir;
    std::unique_ptr<Spool> spool;
    NodeConfig config;
    AuditLog audit;
    NodeMetrics metrics;
    std::string job;

    Fixture() {
        auto s = Spool::open(dir / "spool");
        EXPECT_TRUE(s.isOk());
        spool = std::move(*s);
        SeriesInfo series;
        series.study_uid = "1.2.3";
        series.series_uid = "1.2.3.4";
        series.modality = "CT";
        series.calling_ae = "PACS";
        auto path = spool->beginInstance(series, "1.2.3.4.1");
        EXPECT_TRUE(path.isOk());
        std::ofstream(*path) << "not DICOM at all";
        spool->endInstance(series.series_uid);
        auto jobs = spool->takeCompleteSeries(0.0);
        EXPECT_EQ(jobs.size(), 1u);
        job = jobs.empty() ? "" : jobs[0];
        config.spool_dir = dir / "spool";
        Route r;
        r.name = "ct";
        r.match.modality = {"CT"};
        r.model = std::string(VOXSEG_SOURCE_DIR) + "/sample_data/models/ct-phantom";
        EXPECT_TRUE(pipeline::applySegmentOption("--outputs", "seg", r.segment).isOk());
        config.routes = {r};
        EXPECT_TRUE(audit.open(dir / "audit.jsonl").isOk());
    }
    std::string reason() const {
        auto text = readFileBytes(spool->jobDir("failed", job) + "/reason.txt");
        return text.isOk() ? *text : "(no reason.txt)";
    }
};

TEST(NodeJobRunner, ReasonOfAFailedJobNamesTheFolderItMovedTo) {
    Fixture f;
    JobRunner runner(f.config, *f.spool, f.audit, f.metrics);
    EXPECT_EQ(runner.process(f.job, CancelToken()), JobOutcome::kFailed);
    const std::string reason = f.reason();
    EXPECT_EQ(reason.find(f.spool->jobDir("queue", f.job)), std::string::npos) << reason;
    EXPECT_NE(reason.find(f.spool->jobDir("failed", f.job)), std::string::npos) << reason;
}

TEST(NodeJobRunner, JobLeftInWorkByTooManyStoppedNodesIsFailedNotSegmentedAgain) {
    Fixture f;
    const std::string work = f.spool->jobDir("queue", f.job) + "/work.json";
    // Four stops counted, and in work when the node stopped once more.
    ASSERT_TRUE(
        writeFileAtomically(
            work,
            nlohmann::json{{"in_work", true}, {"interruptions", kMaxInterruptions - 1}}.dump())
            .isOk());
    JobRunner runner(f.config, *f.spool, f.audit, f.metrics);
    runner.recoverInterrupted();
    auto audit = readFileBytes(f.dir / "audit.jsonl");
    ASSERT_TRUE(audit.isOk());
    EXPECT_NE(audit->find("\"job_interrupted\""), std::string::npos) << *audit;
    EXPECT_EQ(runner.process(f.job, CancelToken()), JobOutcome::kFailed);
    EXPECT_NE(f.reason().find("the node stopped 5 times while this series was in work"),
              std::string::npos)
        << f.reason();
}

TEST(NodeJobRunner, AJobInWorkOnceIsSegmentedAgainAfterTheRestart) {
    Fixture f;
    const std::string work = f.spool->jobDir("queue", f.job) + "/work.json";
    ASSERT_TRUE(writeFileAtomically(work, R"({"in_work": true})").isOk());
    JobRunner runner(f.config, *f.spool, f.audit, f.metrics);
    runner.recoverInterrupted();
    auto text = readFileBytes(work);
    ASSERT_TRUE(text.isOk());
    const auto j = nlohmann::json::parse(*text);
    EXPECT_EQ(j["interruptions"], 1);
    EXPECT_EQ(j["in_work"], false);
    // Tried again (and fails here for its own reason: not DICOM), not failed for the stop.
    EXPECT_EQ(runner.process(f.job, CancelToken()), JobOutcome::kFailed);
    EXPECT_EQ(f.reason().find("the node stopped"), std::string::npos) << f.reason();
}

}  // namespace
}  // namespace voxseg::node
