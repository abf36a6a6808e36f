// The spool's bookkeeping: a series is queued only after its quiet period and never while an
// instance is being written; a restart finds the series still arriving and drops temporaries a
// killed writer left; job folders move between areas whole; the audit log never keeps a
// registered patient identifier; the metrics text has every family.
#include "node/spool.h"

#include "batch/gpu_metrics.h"
#include "node/audit_log.h"
#include "node/metrics.h"

#include "core/log.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace voxseg::node {
namespace {
namespace fs = std::filesystem;

SeriesInfo series(const std::string& uid) {
    SeriesInfo s;
    s.study_uid = "1.2.3";
    s.series_uid = uid;
    s.modality = "CT";
    s.calling_ae = "PACS";
    return s;
}

void writeInstance(Spool& spool, const SeriesInfo& s, const std::string& sop,
                   uint64_t association = 0) {
    auto path = spool.beginInstance(s, sop, association);
    ASSERT_TRUE(path.isOk()) << path.status().toString();
    std::ofstream(*path) << "not really DICOM";
    spool.endInstance(s.series_uid);
}

TEST(NodeSpool, SeriesIsQueuedAfterItsQuietPeriodOnly) {
    testing::TempDir dir;
    auto spool = Spool::open(dir / "spool");
    ASSERT_TRUE(spool.isOk());
    Spool& sp = **spool;
    writeInstance(sp, series("1.2.3.4"), "1.2.3.4.1");
    writeInstance(sp, series("1.2.3.4"), "1.2.3.4.2");
    EXPECT_TRUE(sp.takeCompleteSeries(0.3).empty());
    // A write in flight holds the series back however long it is quiet.
    auto path = sp.beginInstance(series("1.2.3.4"), "1.2.3.4.3");
    ASSERT_TRUE(path.isOk());
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    EXPECT_TRUE(sp.takeCompleteSeries(0.3).empty());
    std::ofstream(*path) << "x";
    sp.endInstance("1.2.3.4");
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    auto jobs = sp.takeCompleteSeries(0.3);
    ASSERT_EQ(jobs.size(), 1u);
    EXPECT_EQ(sp.jobs("queue"), jobs);
    auto info = Spool::readSeries(sp.jobDir("queue", jobs[0]));
    ASSERT_TRUE(info.isOk());
    EXPECT_EQ(info->instances, 3);
    EXPECT_EQ(info->calling_ae, "PACS");
    EXPECT_EQ(sp.incomingCount(), 0u);
    ASSERT_TRUE(sp.move("queue", jobs[0], "failed").isOk());
    EXPECT_TRUE(sp.jobs("queue").empty());
    EXPECT_EQ(sp.jobs("failed"), jobs);
}

// group_by study: the quiet period runs from the newest instance of any series of the study,
// then every series of it is queued at once; another study and grouping by series are not held
// back by it; a restart keeps the grouping (the study UID comes back from series.json).
TEST(NodeSpool, StudyGroupingWaitsForEverySeriesOfTheStudy) {
    testing::TempDir dir;
    auto spool = Spool::open(dir / "spool");
    ASSERT_TRUE(spool.isOk());
    Spool& sp = **spool;
    SeriesInfo other = series("5.6.7.1");
    other.study_uid = "5.6.7";
    writeInstance(sp, series("1.2.3.1"), "1.2.3.1.1");
    writeInstance(sp, other, "5.6.7.1.1");
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    writeInstance(sp, series("1.2.3.2"), "1.2.3.2.1");  // same study, later
    // 1.2.3.1 and the other study are quiet for 0.3 s; 1.2.3.2 is not, so study 1.2.3 waits.
    auto jobs = sp.takeCompleteSeries(0.3, GroupBy::kStudy);
    ASSERT_EQ(jobs.size(), 1u);
    EXPECT_EQ(Spool::readSeries(sp.jobDir("queue", jobs[0]))->series_uid, "5.6.7.1");
    // A write in flight in one series holds back the whole study.
    auto path = sp.beginInstance(series("1.2.3.2"), "1.2.3.2.2");
    ASSERT_TRUE(path.isOk());
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    EXPECT_TRUE(sp.takeCompleteSeries(0.3, GroupBy::kStudy).empty());
    std::ofstream(*path) << "x";
    sp.endInstance("1.2.3.2");
    EXPECT_TRUE(sp.takeCompleteSeries(0.3, GroupBy::kStudy).empty());
    {  // after a restart the study is still one group, timed by its newest file
        auto reopened = Spool::open(dir / "spool");
        ASSERT_TRUE(reopened.isOk());
        EXPECT_TRUE((*reopened)->takeCompleteSeries(0.3, GroupBy::kStudy).empty());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    jobs = sp.takeCompleteSeries(0.3, GroupBy::kStudy);
    ASSERT_EQ(jobs.size(), 2u);
    std::set<std::string> uids;
    for (const auto& j : jobs) uids.insert(Spool::readSeries(sp.jobDir("queue", j))->series_uid);
    EXPECT_EQ(uids, (std::set<std::string>{"1.2.3.1", "1.2.3.2"}));
    EXPECT_EQ(sp.incomingCount(), 0u);

    // The same arrivals grouped by series: the earlier series goes alone.
    writeInstance(sp, series("1.2.3.3"), "1.2.3.3.1");
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    writeInstance(sp, series("1.2.3.4"), "1.2.3.4.1");
    jobs = sp.takeCompleteSeries(0.3, GroupBy::kSeries);
    ASSERT_EQ(jobs.size(), 1u);
    EXPECT_EQ(Spool::readSeries(sp.jobDir("queue", jobs[0]))->series_uid, "1.2.3.3");
}

TEST(NodeSpool, RestartFindsArrivingSeriesAndDropsTemporaries) {
    testing::TempDir dir;
    {
        auto spool = Spool::open(dir / "spool");
        ASSERT_TRUE(spool.isOk());
        writeInstance(**spool, series("9.8.7"), "9.8.7.1");
        // A writer killed mid-file leaves an AtomicFile temporary beside the instances.
        std::ofstream(dir / "spool/incoming/9.8.7/.tmp-abc-9.8.7.2.dcm") << "half";
    }
    auto spool = Spool::open(dir / "spool");
    ASSERT_TRUE(spool.isOk());
    EXPECT_EQ((*spool)->incomingCount(), 1u);
    EXPECT_FALSE(fs::exists(dir / "spool/incoming/9.8.7/.tmp-abc-9.8.7.2.dcm"));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto jobs = (*spool)->takeCompleteSeries(0.2);
    ASSERT_EQ(jobs.size(), 1u);
    EXPECT_EQ(Spool::readSeries((*spool)->jobDir("queue", jobs[0]))->instances, 1);
}

int markers(const fs::path& dir) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir))
        n += e.path().filename().string().rfind(".receiving-", 0) == 0 ? 1 : 0;
    return n;
}

// A sender cut off mid-series (an aborted association, or the node killed while receiving)
// sends the series again: the series waits for that resend instead of being segmented half
// received and then a second time whole (the duplicate SEG the node chaos test found).
TEST(NodeSpool, InterruptedSeriesWaitsForTheResendAcrossARestart) {
    testing::TempDir dir;
    const fs::path folder = dir / "spool/incoming/4.4.4";
    {
        auto spool = Spool::open(dir / "spool");
        ASSERT_TRUE(spool.isOk());
        writeInstance(**spool, series("4.4.4"), "4.4.4.1", 7);
        writeInstance(**spool, series("4.4.4"), "4.4.4.2", 7);
        EXPECT_EQ(markers(folder), 1);  // one per association, written with its first instance
        EXPECT_EQ((*spool)->endAssociation(7, false), std::vector<std::string>{"4.4.4"});
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        EXPECT_TRUE((*spool)->takeCompleteSeries(0.1, GroupBy::kSeries, 30.0).empty());
        EXPECT_EQ(markers(folder), 1);
    }
    // A restart (the node was killed: nothing was called) still knows the series interrupted.
    auto spool = Spool::open(dir / "spool");
    ASSERT_TRUE(spool.isOk());
    Spool& sp = **spool;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_TRUE(sp.takeCompleteSeries(0.1, GroupBy::kSeries, 30.0).empty());
    // The resend, released normally, joins the folder and ends the wait: quiet_seconds again.
    writeInstance(sp, series("4.4.4"), "4.4.4.1", 1);
    writeInstance(sp, series("4.4.4"), "4.4.4.2", 1);
    writeInstance(sp, series("4.4.4"), "4.4.4.3", 1);
    EXPECT_EQ(sp.endAssociation(1, true), std::vector<std::string>{"4.4.4"});
    EXPECT_EQ(markers(folder), 0);
    EXPECT_TRUE(sp.takeCompleteSeries(0.2, GroupBy::kSeries, 30.0).empty());  // quiet first
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto jobs = sp.takeCompleteSeries(0.2, GroupBy::kSeries, 30.0);
    ASSERT_EQ(jobs.size(), 1u);
    EXPECT_EQ(Spool::readSeries(sp.jobDir("queue", jobs[0]))->instances, 3);
    EXPECT_EQ(markers(sp.jobDir("queue", jobs[0])), 0);
    EXPECT_TRUE(sp.endAssociation(1, true).empty());  // reported once
}

TEST(NodeSpool, InterruptedSeriesNotSentAgainIsTakenAfterTheLongerWait) {
    testing::TempDir dir;
    auto spool = Spool::open(dir / "spool");
    ASSERT_TRUE(spool.isOk());
    Spool& sp = **spool;
    writeInstance(sp, series("6.6.6"), "6.6.6.1", 3);
    writeInstance(sp, series("6.6.7"), "6.6.7.1", 4);
    sp.endAssociation(3, false);
    sp.endAssociation(4, true);
    EXPECT_EQ(markers(dir / "spool/incoming/6.6.7"), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    auto jobs = sp.takeCompleteSeries(0.1, GroupBy::kSeries, 0.6);
    ASSERT_EQ(jobs.size(), 1u);  // the released one
    EXPECT_EQ(Spool::readSeries(sp.jobDir("queue", jobs[0]))->series_uid, "6.6.7");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    jobs = sp.takeCompleteSeries(0.1, GroupBy::kSeries, 0.6);
    ASSERT_EQ(jobs.size(), 1u);
    EXPECT_EQ(Spool::readSeries(sp.jobDir("queue", jobs[0]))->series_uid, "6.6.6");
    EXPECT_EQ(markers(sp.jobDir("queue", jobs[0])), 0);
}

TEST(NodeSpool, RetentionRemovesOnlyOldJobs) {
    testing::TempDir dir;
    auto spool = Spool::open(dir / "spool");
    ASSERT_TRUE(spool.isOk());
    Spool& sp = **spool;
    fs::create_directories(sp.jobDir("unmatched", "old"));
    fs::create_directories(sp.jobDir("unmatched", "new"));
    fs::last_write_time(sp.jobDir("unmatched", "old"),
                        fs::file_time_type::clock::now() - std::chrono::hours(25));
    EXPECT_EQ(sp.removeOlderThan("unmatched", 24.0), 1);
    EXPECT_EQ(sp.jobs("unmatched"), std::vector<std::string>{"new"});
    // A series folder removed by hand while arriving is forgotten, not retried forever.
    writeInstance(sp, series("5.5.5"), "5.5.5.1");
    fs::remove_all(dir / "spool/incoming/5.5.5");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(sp.takeCompleteSeries(0.0).empty());
    EXPECT_EQ(sp.incomingCount(), 0u);
}

TEST(NodeSpool, UnsafeUidsBecomeSafeFolderNames) {
    EXPECT_EQ(seriesKey("1.2.840.5"), "1.2.840.5");
    const std::string k = seriesKey("../../etc/passwd");
    EXPECT_EQ(k.find('/'), std::string::npos);
    EXPECT_EQ(k[0], 'h');
    EXPECT_NE(seriesKey(".."), "..");
}

TEST(NodeAudit, LinesAreJsonWithoutRegisteredIdentifiers) {
    testing::TempDir dir;
    AuditLog audit;
    ASSERT_TRUE(audit.open(dir / "audit.jsonl").isOk());
    log::registerIdentifier("DOE^JANE-4711");
    log::registerIdentifier("4711");  // a short patient ID: UIDs keep their digits
    audit.record("series_received", {{"series_uid", "1.2.4711.3"}, {"note", "from DOE^JANE-4711"}});
    std::ifstream in(dir / "audit.jsonl");
    std::string line;
    ASSERT_TRUE(std::getline(in, line));
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["event"], "series_received");
    EXPECT_EQ(j["series_uid"], "1.2.4711.3");
    EXPECT_TRUE(j.contains("time"));
    EXPECT_EQ(line.find("DOE^JANE-4711"), std::string::npos) << line;
}

TEST(NodeMetrics, RendersEveryFamily) {
    NodeMetrics m;
    m.instances_received = 28;
    m.associations_rejected_disk = 2;
    m.disk_guard = true;
    m.addStageSeconds("infer", 0.5);
    m.addStageSeconds("infer", 0.25);
    const std::string t = m.render();
    EXPECT_NE(t.find("voxseg_node_instances_received_total 28\n"), std::string::npos) << t;
    EXPECT_NE(t.find("voxseg_node_associations_rejected_total{reason=\"out_of_resources\"} 2"),
              std::string::npos);
    EXPECT_NE(t.find("voxseg_node_disk_guard 1\n"), std::string::npos);
    EXPECT_NE(t.find("voxseg_node_stage_seconds_total{stage=\"infer\"} 0.750000"),
              std::string::npos);
    EXPECT_NE(t.find("voxseg_node_stage_runs_total{stage=\"infer\"} 2"), std::string::npos);
    EXPECT_NE(t.find("# TYPE voxseg_node_queue_depth gauge"), std::string::npos);
    // GPU gauges only where NVML reports a device (batch/gpu_metrics.h).
    EXPECT_EQ(t.find("voxseg_node_gpu_") == std::string::npos, batch::sampleGpus().empty());
}

}  // namespace
}  // namespace voxseg::node
