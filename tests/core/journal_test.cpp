// core/journal.h: records written whole and read back, the torn-line policy (a torn last line
// dropped with a warning naming file and line, a bad middle line refused with its number),
// appends after a torn line starting on a line of their own, concurrent appends not interleaving.
#include "core/journal.h"

#include "core/log.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace voxseg {
namespace {

class CaptureSink : public log::Sink {
  public:
    void write(const log::Record& r) override { records.push_back(r); }
    std::vector<log::Record> records;
};

// Collects the lines the parser took; a line that does not start with '{' and end with '}' is
// refused, as a record parser refuses a line cut short.
struct Collected {
    std::vector<std::string> lines;
    std::vector<int> numbers;
    JournalLineParser parser() {
        return [this](std::string_view line, int number) -> Status {
            if (line.empty() || line.front() != '{' || line.back() != '}')
                return corruptData("not a record: " + std::string(line));
            lines.emplace_back(line);
            numbers.push_back(number);
            return Status::ok();
        };
    }
};

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void writeText(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
}

TEST(JournalFile, AppendedRecordsReadBackInOrderWithTheirLineNumbers) {
    testing::TempDir dir;
    const std::string path = dir / "sub/j.jsonl";
    {
        auto f = JournalFile::open(path, {.create_folders = true});
        ASSERT_TRUE(f.isOk()) << f.status().toString();
        ASSERT_TRUE(f->append(R"({"a":1})").isOk());
        ASSERT_TRUE(f->append(R"({"a":2})").isOk());
    }
    EXPECT_EQ(slurp(path), "{\"a\":1}\n{\"a\":2}\n");
    Collected c;
    auto report = readJournalLines(path, "the test journal", c.parser());
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_EQ(report->records, 2);
    EXPECT_EQ(report->torn_line, 0);
    EXPECT_EQ(c.numbers, (std::vector<int>{1, 2}));
}

TEST(JournalFile, TornLastLineIsDroppedWithAWarningNamingFileAndLine) {
    testing::TempDir dir;
    const std::string path = dir / "j.jsonl";
    writeText(path, "{\"a\":1}\n\n{\"a\":2}\n{\"a\":3,\"b\"");
    auto sink = std::make_shared<CaptureSink>();
    auto previous = log::setSink(sink);
    Collected c;
    auto report = readJournalLines(path, "the test journal", c.parser());
    log::setSink(previous);
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_EQ(report->records, 2);
    EXPECT_EQ(report->torn_line, 4);  // the blank line 2 counts
    EXPECT_EQ(c.lines, (std::vector<std::string>{"{\"a\":1}", "{\"a\":2}"}));
    ASSERT_EQ(sink->records.size(), 1u);
    EXPECT_EQ(sink->records[0].level, log::Level::kWarning);
    EXPECT_NE(sink->records[0].message.find(path + ": line 4"), std::string::npos)
        << sink->records[0].message;

    // Bytes that never reached the disk (zeros) followed by the newline: torn as well.
    writeText(path, std::string("{\"a\":1}\n{\"a\":") + std::string(5, '\0') + "\n\n");
    Collected z;
    previous = log::setSink(nullptr);
    report = readJournalLines(path, "the test journal", z.parser());
    log::setSink(previous);
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_EQ(report->torn_line, 2);
    EXPECT_EQ(z.lines.size(), 1u);
}

TEST(JournalFile, TornLineInTheMiddleIsRefusedWithItsNumber) {
    testing::TempDir dir;
    const std::string path = dir / "j.jsonl";
    writeText(path, "{\"a\":1}\n{\"a\":2,\"b\"\n{\"a\":3}\n");
    Collected c;
    auto report = readJournalLines(path, "the test journal", c.parser());
    ASSERT_FALSE(report.isOk());
    EXPECT_EQ(report.status().code(), StatusCode::kCorruptData);
    EXPECT_EQ(report.status().subject(), path);
    EXPECT_EQ(report.status().message().rfind("line 2: ", 0), 0u) << report.status().toString();
}

TEST(JournalFile, LastLineThatIsJsonButNotARecordIsAnErrorNotATornWrite) {
    testing::TempDir dir;
    const std::string path = dir / "j.jsonl";
    writeText(path, "{\"a\":1}\n[1, 2]\n");
    Collected c;
    auto report = readJournalLines(path, "the test journal", c.parser());
    ASSERT_FALSE(report.isOk());
    EXPECT_EQ(report.status().message().rfind("line 2: ", 0), 0u) << report.status().toString();
}

TEST(JournalFile, CompleteLastLineWithoutNewlineIsARecord) {
    testing::TempDir dir;
    const std::string path = dir / "j.jsonl";
    writeText(path, "{\"a\":1}\n{\"a\":2}");
    Collected c;
    auto report = readJournalLines(path, "the test journal", c.parser());
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_EQ(report->records, 2);
    {
        auto f = JournalFile::open(path);  // gets its newline, the next record a line of its own
        ASSERT_TRUE(f.isOk()) << f.status().toString();
        ASSERT_TRUE(f->append(R"({"a":3})").isOk());
    }
    EXPECT_EQ(slurp(path), "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n");
}

TEST(JournalFile, AppendAfterATornLineStartsOnAFreshLine) {
    testing::TempDir dir;
    const std::string path = dir / "j.jsonl";
    writeText(path, "{\"a\":1}\n{\"a\":2,\"b\":[1,");
    auto sink = std::make_shared<CaptureSink>();
    auto previous = log::setSink(sink);
    {
        auto f = JournalFile::open(path);
        ASSERT_TRUE(f.isOk()) << f.status().toString();
        ASSERT_TRUE(f->append(R"({"a":3})").isOk());
    }
    log::setSink(previous);
    EXPECT_EQ(slurp(path), "{\"a\":1}\n{\"a\":3}\n");
    ASSERT_EQ(sink->records.size(), 1u);
    EXPECT_NE(sink->records[0].message.find(path + ": line 2"), std::string::npos)
        << sink->records[0].message;
    Collected c;
    auto report = readJournalLines(path, "the test journal", c.parser());
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_EQ(report->torn_line, 0);
    EXPECT_EQ(c.lines, (std::vector<std::string>{"{\"a\":1}", "{\"a\":3}"}));
}

TEST(JournalFile, TruncateEmptiesTheFileFirst) {
    testing::TempDir dir;
    const std::string path = dir / "j.jsonl";
    writeText(path, "{\"old\":1}\n");
    auto f = JournalFile::open(path, {.truncate = true});
    ASSERT_TRUE(f.isOk());
    ASSERT_TRUE(f->append(R"({"new":1})").isOk());
    EXPECT_EQ(slurp(path), "{\"new\":1}\n");
}

TEST(JournalFile, ConcurrentAppendsFromTwoThreadsDoNotInterleaveWithinALine) {
    testing::TempDir dir;
    const std::string path = dir / "j.jsonl";
    auto f = JournalFile::open(path, {.sync = JournalSync::kFdatasync});
    ASSERT_TRUE(f.isOk());
    constexpr int kPerThread = 300;
    // Long lines (more than a page) so that a split write would show.
    auto writer = [&](char fill) {
        for (int i = 0; i < kPerThread; ++i) {
            const std::string record =
                "{\"t\":\"" + std::string(5000 + i, fill) + "\",\"i\":" + std::to_string(i) + "}";
            ASSERT_TRUE(f->append(record).isOk());
        }
    };
    std::thread a(writer, 'a');
    std::thread b(writer, 'b');
    a.join();
    b.join();
    Collected c;
    auto report = readJournalLines(path, "the test journal", c.parser());
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    ASSERT_EQ(report->records, 2 * kPerThread);
    int seen_a = 0;
    int seen_b = 0;
    for (const std::string& line : c.lines) {
        const bool is_a = line.find('a', 7) != std::string::npos;
        const bool is_b = line.find('b', 7) != std::string::npos;
        ASSERT_NE(is_a, is_b) << "a line mixes both writers";
        (is_a ? seen_a : seen_b) += 1;
    }
    EXPECT_EQ(seen_a, kPerThread);
    EXPECT_EQ(seen_b, kPerThread);
}

TEST(JournalFile, AppendToAClosedJournalIsRefused) {
    JournalFile f;
    EXPECT_EQ(f.append("{}").code(), StatusCode::kFailedPrecondition);
}

TEST(JournalFile, MissingFileIsNotFoundAndUnopenableFolderAnIoError) {
    testing::TempDir dir;
    Collected c;
    EXPECT_EQ(readJournalLines(dir / "none.jsonl", "the test journal", c.parser()).status().code(),
              StatusCode::kNotFound);
    writeText(dir / "file", "x");
    EXPECT_EQ(JournalFile::open(dir / "file/j.jsonl").status().code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace voxseg
