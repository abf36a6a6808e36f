// io/pacs_query.h and the QIDO-RS JSON of io/dicomweb_qido.h: search fields become DICOM
// matching keys (or a clear refusal), DICOM JSON rows become studies and series.
#include "io/pacs_query.h"
#include "io/dicomweb_qido.h"

#include <gtest/gtest.h>

namespace voxseg::io {
namespace {

TEST(PacsMatchKeys, NamesGetAWildcardAndDatesARange) {
    PacsStudyQuery q;
    q.patient_name = "DOE";
    q.date_from = "20240101";
    auto k = pacsMatchKeys(q);
    ASSERT_TRUE(k.isOk());
    EXPECT_EQ(k->patient_name, "DOE*");
    EXPECT_EQ(k->study_date, "20240101-");
    q.patient_name = "DO?^J*";
    q.date_to = "20240101";
    k = pacsMatchKeys(q);
    ASSERT_TRUE(k.isOk());
    EXPECT_EQ(k->patient_name, "DO?^J*");
    EXPECT_EQ(k->study_date, "20240101");
    q.date_from.clear();
    EXPECT_EQ(pacsMatchKeys(q)->study_date, "-20240101");
}

TEST(PacsMatchKeys, RefusesBadDatesAndBackslashes) {
    PacsStudyQuery q;
    q.date_from = "2024-01-01";
    auto k = pacsMatchKeys(q);
    ASSERT_FALSE(k.isOk());
    EXPECT_NE(k.status().message().find("YYYYMMDD"), std::string::npos);
    q.date_from = "20240201";
    q.date_to = "20240101";
    EXPECT_FALSE(pacsMatchKeys(q).isOk());
    PacsStudyQuery b;
    b.accession = "A\\B";
    EXPECT_FALSE(pacsMatchKeys(b).isOk());
}

TEST(QidoJson, ParsesStudiesAndSeries) {
    const std::string studies = R"([{
        "00100010": {"vr": "PN", "Value": [{"Alphabetic": "DOE^JANE"}]},
        "00100020": {"vr": "LO", "Value": ["ID1"]},
        "00080020": {"vr": "DA", "Value": ["20240115"]},
        "00081030": {"vr": "LO", "Value": ["Abdomen"]},
        "00080050": {"vr": "SH"},
        "00080061": {"vr": "CS", "Value": ["CT", "SEG"]},
        "0020000D": {"vr": "UI", "Value": ["1.2.3"]}},
        {"00100010": {"vr": "PN"}}])";
    auto s = parseQidoStudies(studies, "u");
    ASSERT_TRUE(s.isOk()) << s.status().toString();
    ASSERT_EQ(s->size(), 1u);  // the row without a StudyInstanceUID is left out
    EXPECT_EQ((*s)[0].patient_name, "DOE^JANE");
    EXPECT_EQ((*s)[0].accession, "");
    EXPECT_EQ((*s)[0].modalities, (std::vector<std::string>{"CT", "SEG"}));
    const std::string series = R"([{"0020000E": {"vr": "UI", "Value": ["1.2.3.4"]},
        "00200011": {"vr": "IS", "Value": [3]}, "00201209": {"vr": "IS", "Value": ["12"]},
        "00080060": {"vr": "CS", "Value": ["MR"]}}])";
    auto r = parseQidoSeries(series, "u");
    ASSERT_TRUE(r.isOk());
    ASSERT_EQ(r->size(), 1u);
    EXPECT_EQ((*r)[0].number, 3);
    EXPECT_EQ((*r)[0].instances, 12);
    EXPECT_EQ((*r)[0].modality, "MR");
    EXPECT_TRUE(parseQidoStudies("", "u")->empty());  // 204: nothing matched
    auto bad = parseQidoStudies("{\"error\": 1}", "http://x");
    ASSERT_FALSE(bad.isOk());
    EXPECT_EQ(bad.status().subject(), "http://x");
}

}  // namespace
}  // namespace voxseg::io
