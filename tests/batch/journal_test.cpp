// The journal: fsync'ed JSON lines, latest entry per case over every shard's file, and lines
// cut short by a crash skipped.
#include "batch/journal.h"

#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <fstream>

namespace voxseg::batch {
namespace {

JournalEntry entry(const std::string& id, CaseState state, double time) {
    JournalEntry e;
    e.case_id = id;
    e.state = state;
    e.input = "/in/" + id;
    e.model_sha256 = "m";
    e.options_hash = "o";
    e.time = time;
    if (state == CaseState::kDone) e.files = {{"segmentation.nii.gz", 123}, {"run.json", 9}};
    if (state == CaseState::kFailed) {
        e.error = "corrupt";
        e.error_code = "corrupt_data";
    }
    return e;
}

TEST(Journal, RoundTripAndLatestEntryWins) {
    voxseg::testing::TempDir dir;
    {
        auto j = Journal::open(dir / "state/journal-0-of-2.jsonl");
        ASSERT_TRUE(j.isOk()) << j.status().toString();
        ASSERT_TRUE(j->append(entry("a", CaseState::kFailed, 1.0)).isOk());
        ASSERT_TRUE(j->append(entry("b", CaseState::kDone, 2.0)).isOk());
    }
    {
        auto j = Journal::open(dir / "state/journal-1-of-2.jsonl");
        ASSERT_TRUE(j.isOk());
        ASSERT_TRUE(j->append(entry("a", CaseState::kDone, 3.0)).isOk());
    }
    std::ofstream(dir / "state/other.jsonl") << "{\"case_id\":\"b\",\"state\":\"failed\"}\n";
    auto all = readJournals(dir / "state");
    ASSERT_TRUE(all.isOk()) << all.status().toString();
    ASSERT_EQ(all->size(), 2u);
    EXPECT_EQ(all->at("a").state, CaseState::kDone);
    EXPECT_EQ(all->at("b").state, CaseState::kDone);  // other.jsonl is not a journal
    ASSERT_EQ(all->at("b").files.size(), 2u);
    EXPECT_EQ(all->at("b").files[0].name, "segmentation.nii.gz");
    EXPECT_EQ(all->at("b").files[0].bytes, 123u);
    EXPECT_EQ(all->at("b").input, "/in/b");
}

TEST(Journal, LineCutShortByACrashIsSkippedAndTheNextEntryParses) {
    voxseg::testing::TempDir dir;
    const std::string path = dir / "journal-0-of-1.jsonl";
    {
        auto j = Journal::open(path);
        ASSERT_TRUE(j->append(entry("a", CaseState::kDone, 1.0)).isOk());
    }
    std::ofstream(path, std::ios::app) << "{\"case_id\":\"b\",\"sta";  // killed mid-write
    int skipped = 0;
    auto torn = readJournalFile(path, &skipped);  // the torn last line is dropped
    ASSERT_TRUE(torn.isOk()) << torn.status().toString();
    EXPECT_EQ(skipped, 1);
    ASSERT_EQ(torn->size(), 1u);
    {
        auto j = Journal::open(path);  // cuts the torn line off
        ASSERT_TRUE(j.isOk());
        ASSERT_TRUE(j->append(entry("c", CaseState::kDone, 2.0)).isOk());
    }
    auto entries = readJournalFile(path, &skipped);
    ASSERT_TRUE(entries.isOk()) << entries.status().toString();
    EXPECT_EQ(skipped, 0);
    ASSERT_EQ(entries->size(), 2u);
    EXPECT_EQ((*entries)[0].case_id, "a");
    EXPECT_EQ((*entries)[1].case_id, "c");
}

TEST(Journal, UnwritableFolderIsAnIoError) {
    voxseg::testing::TempDir dir;
    std::ofstream(dir / "file") << "x";
    auto j = Journal::open(dir / "file/journal-0-of-1.jsonl");
    ASSERT_FALSE(j.isOk());
    EXPECT_EQ(j.status().code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace voxseg::batch
