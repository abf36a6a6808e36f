// The spool's series.json with strings that are not UTF-8 (issue 35 item 1): a Latin-1
// SeriesDescription as the receiver handed it over before io/dicom_charset made it UTF-8 took
// the node down (nlohmann's dump() threw type_error 316 inside beginInstance, on C-STORE). The
// dump now replaces such bytes with U+FFFD; UTF-8 strings come back unchanged.
#include "node/spool.h"

#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <thread>

namespace voxseg::node {
namespace {

SeriesInfo series(const std::string& uid, const std::string& description) {
    SeriesInfo s;
    s.study_uid = "1.2.3";
    s.series_uid = uid;
    s.modality = "CT";
    s.calling_ae = "PACS";
    s.series_description = description;
    return s;
}

TEST(NodeSpoolCharset, InvalidUtf8InSeriesJsonIsReplacedNotThrown) {
    testing::TempDir dir;
    auto spool = Spool::open(dir / "spool");
    ASSERT_TRUE(spool.isOk());
    Spool& sp = **spool;
    const SeriesInfo latin1 = series("1.2.3.4",
                                     "Sch\xe4"
                                     "del nativ");
    Result<std::string> path = Status::ok();
    ASSERT_NO_THROW(path = sp.beginInstance(latin1, "1.2.3.4.1"));
    ASSERT_TRUE(path.isOk()) << path.status().toString();
    std::ofstream(*path) << "x";
    sp.endInstance(latin1.series_uid);

    const SeriesInfo utf8 = series("1.2.3.5", "Schädel 頭部");
    auto second = sp.beginInstance(utf8, "1.2.3.5.1");
    ASSERT_TRUE(second.isOk());
    std::ofstream(*second) << "x";
    sp.endInstance(utf8.series_uid);

    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    auto jobs = sp.takeCompleteSeries(0.3);
    ASSERT_EQ(jobs.size(), 2u);
    std::map<std::string, std::string> descriptions;
    for (const std::string& job : jobs) {
        auto info = Spool::readSeries(sp.jobDir("queue", job));
        ASSERT_TRUE(info.isOk()) << info.status().toString();
        descriptions[info->series_uid] = info->series_description;
    }
    EXPECT_EQ(descriptions["1.2.3.4"],
              "Sch\xef\xbf\xbd"
              "del nativ");
    EXPECT_EQ(descriptions["1.2.3.5"], "Schädel 頭部");
}

}  // namespace
}  // namespace voxseg::node
