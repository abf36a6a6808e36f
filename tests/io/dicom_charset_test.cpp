// DICOM character sets to UTF-8 (io/dicom_charset, issue 35 item 1): the converter against
// expected UTF-8 for every set voxseg handles (the PS3.5 Annex H-K examples among them), invalid
// bytes replaced and never thrown, sequence items overriding the data set's set, and the corpus
// of tools/make_charset_corpus.py read through io's header accessor and scanDicom() (what
// `voxseg info` and the viewer's series browser show).
#include "io/dicom_charset.h"
#include "io/dicom_series.h"
#include "io/dicom_tags.h"
#include "tests/io/dicom_tools.h"
#include "tests/test_data.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

namespace voxseg::io {
namespace {

using charset::isValidUtf8;
using charset::toUtf8;

struct Case {
    const char* name;
    const char* declared;
    std::string bytes;
    const char* expected;
    bool person_name;
};

// Bytes as the standard and Python's codecs encode them; expected UTF-8 as written by hand.
const Case kCases[] = {
    {"ISO_IR 100", "ISO_IR 100", "Sch\344del nativ", "Schädel nativ", false},
    {"ISO_IR 101", "ISO_IR 101", "Dvo\xf8\xe1k^\xa3ukasz", "Dvořák^Łukasz", true},
    {"ISO_IR 109", "ISO_IR 109", "\305aruana^\xd5or\xf5", "Ċaruana^Ġorġ", true},
    {"ISO_IR 110", "ISO_IR 110", "\xd3\xbani\xf1\xb9^\253irts", "Ķēniņš^Ģirts", true},
    {"ISO_IR 126", "ISO_IR 126", "\xc4\xe9\xef\xed\xf5\xf3\xe9\xef\xf2", "Διονυσιος", true},
    {"ISO_IR 127", "ISO_IR 127", "\xe2\xc8\xc7\xe6\xea^\xe4\xe6\xd2\xc7\xd1", "قباني^لنزار", true},
    {"ISO_IR 138", "ISO_IR 138", "\xf9\xf8\xe5\xef^\xe3\xe1\xe5\xf8\xe4", "שרון^דבורה", true},
    {"ISO_IR 144", "ISO_IR 144", "\xb8\xd2\xd0\xdd\xde\xd2^\xb8\xd2\xd0\xdd", "Иванов^Иван", true},
    {"ISO_IR 148", "ISO_IR 148", "\307avu\xfeo\xf0lu^\xd6mer", "Çavuşoğlu^Ömer", true},
    {"ISO_IR 166", "ISO_IR 166", "\xca\xc1\xaa\xd2\xc2", "สมชาย", true},
    {"ISO_IR 13", "ISO_IR 13", "\xd4\xcf\xc0\xde^\xc0\xdb\xb3", "ﾔﾏﾀﾞ^ﾀﾛｳ", true},
    {"ISO_IR 192", "ISO_IR 192",
     "Wang^XiaoDong=\xe7\x8e\x8b^\xe5\xb0\x8f\xe6\x9d\xb1=", "Wang^XiaoDong=王^小東=", true},
    // PS3.5 H.3.1
    {"ISO 2022 IR 87 (H.3.1)", "\\ISO 2022 IR 87",
     "Yamada^Tarou=\x1b$B;3ED\x1b(B^\x1b$BB@O:\x1b(B=\x1b$B$d$^$@\x1b(B^\x1b$B$?$m$&\x1b(B",
     "Yamada^Tarou=山田^太郎=やまだ^たろう", true},
    // PS3.5 H.3.2
    {"ISO 2022 IR 13 + 87 (H.3.2)", "ISO 2022 IR 13\\ISO 2022 IR 87",
     "\xd4\xcf\xc0\xde^\xc0\xdb\xb3=\x1b$B;3ED\x1b(J^\x1b$BB@O:\x1b(J=\x1b$B$d$^$@\x1b(J^"
     "\x1b$B$?$m$&\x1b(J",
     "ﾔﾏﾀﾞ^ﾀﾛｳ=山田^太郎=やまだ^たろう", true},
    {"ISO 2022 IR 159", "\\ISO 2022 IR 87\\ISO 2022 IR 159", "\x1b$(D0!\x1b$B;3\x1b(B CT",
     "丂山 CT", false},
    // PS3.5 I.2
    {"ISO 2022 IR 149 (I.2)", "\\ISO 2022 IR 149",
     "Hong^Gildong=\x1b$)C\xfb\xf3^\x1b$)C\xd1\xce\xd4\xd7=\x1b$)C\xc8\xab^\x1b$)C\xb1\xe6\xb5\xbf",
     "Hong^Gildong=洪^吉洞=홍^길동", true},
    // PS3.5 K.2
    {"ISO 2022 IR 58 (K.2)", "\\ISO 2022 IR 58",
     "Wang^XiaoDong=\x1b$)A\xcd\xf5^\x1b$)A\xd0\xa1\xb6\xab=", "Wang^XiaoDong=王^小东=", true},
    // PS3.5 J.3, and a 4-byte GB18030 character
    {"GB18030 (J.3)", "GB18030",
     "Wang^XiaoDong=\xcd\xf5^\xd0\xa1\xb6\xab=", "Wang^XiaoDong=王^小东=", true},
    {"GB18030 4-byte", "GB18030", "\x95\x32\x82\x36 \x81\x30\x87\x32", "𠀀 Ä", false},
    {"GBK", "GBK", "Zhang^XiaoDong=\xd5\xc5^\xd0\xa1\xb6\xab=", "Zhang^XiaoDong=张^小东=", true},
    {"ISO 2022 IR 100 escape", "ISO 2022 IR 6\\ISO 2022 IR 100", "Sch\x1b-A\344del", "Schädel",
     false},
    {"one-valued ISO 2022 IR 144", "ISO 2022 IR 144", "\xb8\xd2\xd0\xdd\xde\xd2", "Иванов", false},
    {"padded declaration", " ISO_IR 100 ", "Sch\344del", "Schädel", false},
    // Undeclared: valid UTF-8 kept, else Latin-1.
    {"undeclared Latin-1", "", "Sch\344del", "Schädel", false},
    {"undeclared UTF-8", "", "Sch\xc3\244del", "Schädel", false},
    {"ISO_IR 6 with Latin-1", "ISO_IR 6", "Sch\344del", "Schädel", false},
    // Wrong declarations: replacement characters, never a failure.
    {"UTF-8 declared, Latin-1 bytes", "ISO_IR 192", "Sch\344del", "Sch\xef\xbf\275del", false},
    {"unknown defined term", "LATIN1", "Sch\344del", "Schädel", false},
    {"Greek declared, unassigned bytes", "ISO_IR 126", "\xd2\xae nativ",
     "\xef\xbf\xbd\xef\xbf\xbd nativ", false},
    {"GB18030 cut", "GB18030", "\xcd\xf5\xd0", "王\xef\xbf\xbd", false},
    {"JIS X 0208 unassigned pair", "\\ISO 2022 IR 87", "\x1b$B;3ED\"/\x1b(B", "山田\xef\xbf\xbd",
     false},
    {"JIS X 0208 odd byte", "\\ISO 2022 IR 87", "\x1b$B;3E\x1b(B", "山\xef\xbf\xbd", false},
    {"unknown escape sequence", "\\ISO 2022 IR 87", "A\x1b$)ZB", "A\xef\xbf\275B", false},
    {"escape at the end", "\\ISO 2022 IR 87", "A\x1b", "A\xef\xbf\xbd", false},
    {"G1 byte without G1 set", "\\ISO 2022 IR 87", "A\xe4", "A\xef\xbf\xbd", false},
    {"Latin-1 bytes, ISO 2022 IR 149 declared", "\\ISO 2022 IR 149", "Sch\344del",
     "Sch\xef\xbf\275del", false},
    {"unknown first value", "ISO 2022 IR 999\\ISO 2022 IR 87", "Sch\344del", "Schädel", false},
};

TEST(DicomCharset, EachSetConvertsToTheExpectedUtf8) {
    for (const Case& c : kCases) {
        const std::string out = toUtf8(c.bytes, c.declared, c.person_name);
        EXPECT_EQ(out, c.expected) << c.name << " [" << c.declared << "]";
        EXPECT_TRUE(isValidUtf8(out)) << c.name;
    }
}

TEST(DicomCharset, AsciiIsReturnedUnchangedWhateverTheDeclaration) {
    for (const char* declared : {"", "ISO_IR 100", "\\ISO 2022 IR 87", "GB18030", "NONSENSE"})
        EXPECT_EQ(toUtf8("Doe^John=", declared, true), "Doe^John=") << declared;
}

// Every byte value after every declaration: valid UTF-8 out, no exception, nothing dropped
// entirely (a value never comes back empty).
TEST(DicomCharset, NoByteSequenceFailsTheConversion) {
    const char* declarations[] = {"",
                                  "ISO_IR 100",
                                  "ISO_IR 126",
                                  "ISO_IR 166",
                                  "ISO_IR 13",
                                  "ISO_IR 192",
                                  "GB18030",
                                  "GBK",
                                  "\\ISO 2022 IR 87\\ISO 2022 IR 159",
                                  "ISO 2022 IR 13\\ISO 2022 IR 87",
                                  "\\ISO 2022 IR 149",
                                  "\\ISO 2022 IR 58"};
    uint32_t seed = 12345;
    for (const char* declared : declarations) {
        for (int trial = 0; trial < 300; ++trial) {
            std::string bytes;
            const int length = 1 + static_cast<int>(seed % 24);
            for (int i = 0; i < length; ++i) {
                seed = seed * 1664525u + 1013904223u;
                bytes.push_back(static_cast<char>(seed >> 24));
            }
            std::string out;
            EXPECT_NO_THROW(out = toUtf8(bytes, declared, trial % 2 == 0));
            EXPECT_TRUE(isValidUtf8(out)) << declared;
            EXPECT_FALSE(out.empty()) << declared;
        }
    }
}

TEST(DicomCharset, SanitizeReplacesEveryInvalidByte) {
    EXPECT_EQ(charset::sanitizeUtf8("a\xc3\xa4z"), "a\xc3\xa4z");
    EXPECT_EQ(charset::sanitizeUtf8("a\xe4z"), "a\xef\xbf\xbdz");
    EXPECT_EQ(charset::sanitizeUtf8("\xc0\xaf"), "\xef\xbf\xbd\xef\xbf\xbd");  // over-long
    EXPECT_EQ(charset::sanitizeUtf8("\xed\xa0\x80"),                           // surrogate
              "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    EXPECT_EQ(charset::sanitizeUtf8("\xf4\x90\x80\x80").size(), 12u);  // past U+10FFFF
    EXPECT_FALSE(isValidUtf8("\xe4"));
    EXPECT_TRUE(isValidUtf8("\xf0\x9f\xab\x81"));
}

TEST(DicomCharset, TruncateNeverCutsACharacter) {
    EXPECT_EQ(charset::truncateUtf8("Schädel", 4), "Sch");
    EXPECT_EQ(charset::truncateUtf8("Schädel", 5), "Schä");
    EXPECT_EQ(charset::truncateUtf8("山田", 5), "山");
    EXPECT_EQ(charset::truncateUtf8("abc", 64), "abc");
}

// A sequence item's own (0008,0005) overrides the data set's; without one it inherits.
TEST(DicomCharset, SequenceItemsOverrideOrInheritTheSet) {
    DcmFileFormat file;
    DcmDataset* ds = file.getDataset();
    ASSERT_TRUE(ds->putAndInsertString(DCM_SpecificCharacterSet, "ISO_IR 100").good());
    ASSERT_TRUE(ds->putAndInsertString(DCM_SeriesDescription, "Sch\344del").good());
    DcmItem* inherit = nullptr;
    DcmItem* own = nullptr;
    ASSERT_TRUE(ds->findOrCreateSequenceItem(DCM_ReferencedStudySequence, inherit, -2).good());
    ASSERT_TRUE(ds->findOrCreateSequenceItem(DCM_ReferencedStudySequence, own, -2).good());
    inherit->putAndInsertString(DCM_StudyDescription, "\xe4");
    own->putAndInsertString(DCM_SpecificCharacterSet, "ISO_IR 144");
    own->putAndInsertString(DCM_StudyDescription, "\xb8\xd2\xd0\xdd");
    EXPECT_EQ(tags::getString(ds, DCM_SeriesDescription), "Schädel");
    EXPECT_EQ(tags::getString(inherit, DCM_StudyDescription), "ä");
    EXPECT_EQ(tags::getString(own, DCM_StudyDescription), "Иван");
    EXPECT_EQ(charset::characterSetOf(own), "ISO_IR 144");

    // Rewritten for a writer: all UTF-8, declared once at the root.
    charset::convertItemToUtf8(*ds);
    OFString v;
    ds->findAndGetOFStringArray(DCM_SpecificCharacterSet, v);
    EXPECT_EQ(std::string(v.c_str()), "ISO_IR 192");
    ds->findAndGetOFString(DCM_SeriesDescription, v);
    EXPECT_EQ(std::string(v.c_str()), "Schädel");
    own->findAndGetOFString(DCM_StudyDescription, v);
    EXPECT_EQ(std::string(v.c_str()), "Иван");
    EXPECT_FALSE(own->tagExists(DCM_SpecificCharacterSet));
    EXPECT_EQ(tags::getString(inherit, DCM_StudyDescription), "ä");
}

// The node converts on several association threads at once: the per-thread converters give
// the same answers in parallel.
TEST(DicomCharset, ConvertsFromManyThreadsAtOnce) {
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&wrong] {
            for (int i = 0; i < 200; ++i)
                for (const Case& c : kCases)
                    if (toUtf8(c.bytes, c.declared, c.person_name) != c.expected) ++wrong;
        });
    for (auto& t : threads) t.join();
    EXPECT_EQ(wrong.load(), 0);
}

#ifdef VOXSEG_PYTHON3
// The checked-in corpus script's series read back: each field as the manifest expects, through
// the header accessor (every reader of io/) and through scanDicom (info, the viewer's browser).
TEST(DicomCharset, CorpusSeriesShowTheirStringsInUtf8) {
    testing::TempDir dir;
    const std::string corpus = dir / "corpus";
    int rc = 0;
    const std::string out =
        voxseg::testing::runCommand(std::string(VOXSEG_PYTHON3) + " " + VOXSEG_SOURCE_DIR +
                                        "/tools/make_charset_corpus.py " + corpus,
                                    &rc);
    ASSERT_EQ(rc, 0) << out;
    std::ifstream in(corpus + "/manifest.json");
    const nlohmann::json manifest = nlohmann::json::parse(in);
    ASSERT_GE(manifest["cases"].size(), 28u);
    const std::map<std::string, DcmTagKey> fields = {{"PatientName", DCM_PatientName},
                                                     {"StudyDescription", DCM_StudyDescription},
                                                     {"SeriesDescription", DCM_SeriesDescription}};
    for (const auto& c : manifest["cases"]) {
        const std::string name = c["name"];
        const std::string folder = corpus + "/" + name;
        DcmFileFormat file;
        ASSERT_TRUE(file.loadFile((folder + "/IM1.dcm").c_str()).good()) << name;
        for (const auto& [field, tag] : fields)
            EXPECT_EQ(tags::getString(file.getDataset(), tag), c[field].get<std::string>())
                << name << " " << field;

        auto scan = scanDicom({folder});
        ASSERT_TRUE(scan.isOk()) << name << ": " << scan.status().toString();
        ASSERT_EQ(scan.value().series.size(), 1u) << name;
        const SeriesCandidate& series = scan.value().series[0];
        EXPECT_EQ(series.description, c["SeriesDescription"].get<std::string>()) << name;
        EXPECT_EQ(series.patient.name, c["PatientName"].get<std::string>()) << name;
        EXPECT_EQ(series.slices.size(), 4u) << name;
    }
}
#endif

}  // namespace
}  // namespace voxseg::io
