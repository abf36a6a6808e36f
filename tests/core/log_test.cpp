#include "core/log.h"

#include "core/free_text.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
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

// A digits-only ID (dcm_qa_xa30's PatientID is "999") stays out of logs wherever it stands on
// its own, and numbers that merely contain its digits keep them.
TEST(Log, DigitIdentifiersMatchWholeRunsOfDigits) {
    log::registerIdentifier("19700101");
    log::registerIdentifier("4242");
    EXPECT_EQ(log::scrub("id 4242, MRN4242, 4242_t1/4242"), "id [PHI], MRN[PHI], [PHI]_t1/[PHI]");
    EXPECT_EQ(log::scrub("born 19700101."), "born [PHI].");
    EXPECT_EQ(log::scrub("voxel agreement 0.424242, 14242 voxels, 42420 mL"),
              "voxel agreement 0.424242, 14242 voxels, 42420 mL");
}

// Issue 35 item 6: a name typed into free text differs in form from the registered PN value.
// Logs replace the name in any order, case and separator; free text also every name word.
TEST(Log, NamesAreScrubbedInAnyFormAndFreeTextLosesEveryNameWord) {
    log::registerIdentifier("ZZLOGFAMILY^ZZLOGGIVEN^MIDDLE");
    for (const char* form :
         {"ZZLOGFAMILY^ZZLOGGIVEN", "zzloggiven zzlogfamily", "Zzlogfamily, Zzloggiven",
          "ZZLOGFAMILY  ZZLOGGIVEN", "zzlogfamily_zzloggiven", "Zzloggiven.Zzlogfamily"})
        EXPECT_EQ(log::scrub(std::string(form) + " abdomen"), "[PHI] abdomen") << form;
    // One name alone is left to logs (a word of a path or a model name may equal it) ...
    EXPECT_EQ(log::scrub("Zzlogfamily abdomen"), "Zzlogfamily abdomen");
    // ... but never to free text; only whole words go ("Middleton" stays).
    EXPECT_EQ(log::scrubFreeText("Zzlogfamily abdomen, middle slab, Middleton"),
              "[PHI] abdomen, [PHI] slab, Middleton");
    EXPECT_EQ(log::displayFreeText("Zzloggiven head", false), "[PHI] head");
    EXPECT_EQ(log::displayFreeText("Zzloggiven head", true), "Zzloggiven head");
    // Identifiers that are no names (IDs, dates) are replaced in any case, names of two letters
    // are not words of their own, and the other component groups of a PN count too.
    log::registerIdentifier("zzid-4471");
    EXPECT_EQ(log::scrub("case ZZID-4471"), "case [PHI]");
    log::registerIdentifier("ZZYAMADA^LI=ZZ\xe5\xb1\xb1\xe7\x94\xb0^\xe5\xa4\xaa\xe9\x83\x8e");
    EXPECT_EQ(log::scrubFreeText("Li Zzyamada li"), "[PHI] li");
    EXPECT_EQ(log::scrubFreeText("ZZ\xe5\xb1\xb1\xe7\x94\xb0 CT"), "[PHI] CT");
}

// A node registers every patient it receives, for months: registering sorted the whole list each
// time (30,000 identifiers: 59 s) and each message was searched once per identifier (1 ms).
TEST(Log, ScrubbingCostDoesNotGrowWithThePatientsSeen) {
    // Names that start differently, as real ones do: "aaazzbulk^gaaaiven", "baazzbulk^gbaaiven".
    const auto letters = [](int i) {
        return std::string{char('a' + i % 26), char('a' + i / 26 % 26), char('a' + i / 676 % 26)};
    };
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 10000; ++i) {
        log::registerIdentifier(letters(i) + "zzbulk^g" + letters(i) + "iven");
        log::registerIdentifier(fmt::format("BULKID{}", i * 7919));
    }
    const double registering =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string message =
        "series 1.2.840.113619.2.55.3.604688119.969.1268071029.320 [0]: resampled (missing "
        "slices) from 9 slices to a regular 40x36x10 grid, Gzcaiven ZCAZZBULK";
    const auto t = std::chrono::steady_clock::now();
    std::string scrubbed;
    for (int k = 0; k < 1000; ++k) scrubbed = log::scrub(message);
    const double scrubbing =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    EXPECT_EQ(scrubbed.substr(scrubbed.size() - 11), "grid, [PHI]") << scrubbed;
    EXPECT_LT(registering, 5.0) << "s to register 20,000 identifiers";
    EXPECT_LT(scrubbing, 0.2) << "s for 1,000 messages";
    std::printf("20,000 identifiers registered in %.3f s; %.1f us per message\n", registering,
                scrubbing * 1e3);
}

}  // namespace
}  // namespace voxseg
