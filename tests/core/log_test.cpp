#include "core/log.h"

#include <gtest/gtest.h>

#include <vector>

namespace voxseg {
namespace {

class CaptureSink : public log::Sink {
  public:
    void write(const log::Record& r) override { records.push_back(r); }
    std::vector<log::Record> records;
};

TEST(Log, SinkReceivesFormattedRecordsAboveMinLevel) {
    auto sink = std::make_shared<CaptureSink>();
    auto previous = log::setSink(sink);
    log::setMinLevel(log::Level::kInfo);
    log::debug("test", "hidden {}", 1);
    log::warning("io.dicom", "series {}: {} slices missing", "1.2.3", 2);
    log::setSink(previous);
    ASSERT_EQ(sink->records.size(), 1u);
    EXPECT_EQ(sink->records[0].level, log::Level::kWarning);
    EXPECT_EQ(sink->records[0].component, "io.dicom");
    EXPECT_EQ(sink->records[0].message, "series 1.2.3: 2 slices missing");
}

TEST(Log, RegisteredPatientIdentifiersNeverReachTheSink) {
    auto sink = std::make_shared<CaptureSink>();
    auto previous = log::setSink(sink);
    log::registerIdentifier("DOE^JANE  ");  // DICOM padding is trimmed
    log::registerIdentifier("PAT-998877");
    log::registerIdentifier("X");  // too short to redact safely: ignored
    log::info("io", "loaded DOE^JANE (PAT-998877) from X-ray folder");
    log::setSink(previous);
    ASSERT_EQ(sink->records.size(), 1u);
    EXPECT_EQ(sink->records[0].message, "loaded [PHI] ([PHI]) from X-ray folder");
    EXPECT_EQ(log::scrub("PAT-998877PAT-998877"), "[PHI][PHI]");
}

}  // namespace
}  // namespace voxseg
