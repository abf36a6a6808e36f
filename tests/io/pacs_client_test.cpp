// The PACS client (io/dicom_net_find.h, dicom_net_move.h, dicomweb_qido.h, dicomweb_wado.h,
// dicomweb_stow.h, dicom_net_scu.h) against a real Orthanc started by pacs_orthanc_test.sh
// (skipped when run without it): two synthetic studies are stored by C-STORE, then found by
// C-FIND and QIDO-RS (the same rows), retrieved by C-MOVE and WADO-RS (every SOP instance),
// a SEG sent back by C-STORE and by STOW-RS, found and retrieved again; a wrong AE title, a closed
// port, a wrong URL and an unknown series give errors that name the peer.
#include "io/dicom_net_find.h"
#include "io/dicom_net_move.h"
#include "io/dicom_net_scu.h"
#include "io/dicom_series.h"
#include "io/dicomweb_qido.h"
#include "io/dicomweb_stow.h"
#include "io/dicomweb_wado.h"
#include "io/seg_writer.h"
#include "tests/io/pacs_test_server.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

namespace voxseg::io {
namespace {

using voxseg::testing::PacsTestServer;
using voxseg::testing::PacsTestStudy;
using voxseg::testing::TempDir;

class PacsClientTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        server_ = voxseg::testing::pacsTestServer();
        if (!server_) return;
        dir_ = new TempDir;
        studies_ = voxseg::testing::pacsTestStudies();
        for (size_t i = 0; i < studies_.size(); ++i) {
            ASSERT_TRUE(voxseg::testing::writePacsTestStudy(studies_[i],
                                                            *dir_ / ("study" + std::to_string(i))));
            const Status s = storeFiles(server_->peer, server_->self.ae_title,
                                        voxseg::testing::filesIn(studies_[i].folder));
            ASSERT_TRUE(s.isOk()) << s.toString();
        }
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }
    void SetUp() override {
        if (!server_) GTEST_SKIP() << "no Orthanc: run through tests/io/pacs_orthanc_test.sh";
    }
    const std::string& callingAe() const { return server_->self.ae_title; }

    static std::vector<std::string> sopUids(const RetrievedSeries& r) {
        std::vector<std::string> uids;
        for (const auto& f : r.files) {
            auto ids = readDicomFileIds(f);
            EXPECT_TRUE(ids.isOk()) << ids.status().toString();
            if (ids.isOk()) uids.push_back(ids->sop_instance_uid);
        }
        std::sort(uids.begin(), uids.end());
        return uids;
    }

    // A SEG of study 0's series (a box labelled 1), written to `path`; its series UID.
    static std::string writeSeg(const std::string& path) {
        auto scan = scanDicom({studies_[0].folder});
        EXPECT_TRUE(scan.isOk() && scan->series.size() == 1);
        if (!scan.isOk() || scan->series.empty()) return {};
        const SeriesCandidate& c = scan->series[0];
        auto volume = loadSeries(c);
        EXPECT_TRUE(volume.isOk());
        if (!volume.isOk()) return {};
        Volume labels = Volume::allocate<uint8_t>(volume->geometry());
        const auto& size = volume->geometry().size;
        uint8_t* p = labels.data<uint8_t>();
        for (int64_t k = 1; k < size[2] - 1; ++k)
            for (int64_t j = 2; j < 8; ++j)
                for (int64_t i = 3; i < 9; ++i) p[(k * size[1] + j) * size[0] + i] = 1;
        SegmentDescription d;
        d.value = 1;
        d.name = "lesion";
        auto report = writeDicomSeg(labels, c, {d}, SegWriteOptions(), path);
        EXPECT_TRUE(report.isOk()) << report.status().toString();
        auto ids = readDicomFileIds(path);
        EXPECT_TRUE(ids.isOk());
        DcmFileFormat ff;
        EXPECT_TRUE(ff.loadFile(path.c_str()).good());
        OFString uid;
        ff.getDataset()->findAndGetOFString(DCM_SeriesInstanceUID, uid);
        return uid.c_str();
    }

    static inline std::optional<PacsTestServer> server_;
    static inline std::vector<PacsTestStudy> studies_;
    static inline TempDir* dir_ = nullptr;
};

TEST_F(PacsClientTest, CFindFindsTheStudyWithItsReturnKeys) {
    for (const PacsTestStudy& s : studies_) {
        PacsStudyQuery q;
        q.patient_name = s.patient_name.substr(0, s.patient_name.size() - 2);  // a prefix: *
        auto found = findStudies(server_->peer, callingAe(), q);
        ASSERT_TRUE(found.isOk()) << found.status().toString();
        ASSERT_EQ(found->size(), 1u) << s.patient_name;
        const PacsStudy& r = found->front();
        EXPECT_EQ(r.patient_name, s.patient_name);
        EXPECT_EQ(r.patient_id, s.patient_id);
        EXPECT_EQ(r.study_date, s.date);
        EXPECT_EQ(r.study_description, s.description);
        EXPECT_EQ(r.accession, s.accession);
        EXPECT_EQ(r.modalities, std::vector<std::string>{s.modality});
        EXPECT_EQ(r.study_uid, s.study_uid);
    }
    // Each search field narrows: date range, accession, modality, patient ID.
    PacsStudyQuery by_date;
    by_date.date_from = "20240301";
    by_date.date_to = "20240331";
    PacsStudyQuery by_accession;
    by_accession.accession = studies_[0].accession;
    PacsStudyQuery by_modality;
    by_modality.modality = "MR";
    PacsStudyQuery by_id;
    by_id.patient_id = studies_[0].patient_id;
    const std::pair<PacsStudyQuery, std::string> cases[] = {{by_date, studies_[1].study_uid},
                                                            {by_accession, studies_[0].study_uid},
                                                            {by_modality, studies_[1].study_uid},
                                                            {by_id, studies_[0].study_uid}};
    for (const auto& [q, uid] : cases) {
        auto found = findStudies(server_->peer, callingAe(), q);
        ASSERT_TRUE(found.isOk()) << found.status().toString();
        ASSERT_EQ(found->size(), 1u);
        EXPECT_EQ(found->front().study_uid, uid);
    }
}

TEST_F(PacsClientTest, QidoReturnsTheSameStudiesAndSeriesAsCFind) {
    auto dimse = findStudies(server_->peer, callingAe(), {});
    auto web = qidoStudies(server_->dicomweb, {});
    ASSERT_TRUE(dimse.isOk()) << dimse.status().toString();
    ASSERT_TRUE(web.isOk()) << web.status().toString();
    auto key = [](const PacsStudy& s) {
        std::string m;
        for (const auto& x : s.modalities) m += x + "/";
        return s.study_uid + "|" + s.patient_name + "|" + s.patient_id + "|" + s.study_date + "|" +
               s.study_description + "|" + s.accession + "|" + m;
    };
    std::set<std::string> a, b;
    for (const auto& s : *dimse) a.insert(key(s));
    for (const auto& s : *web) b.insert(key(s));
    EXPECT_GE(a.size(), studies_.size());
    EXPECT_EQ(a, b);
    for (const PacsTestStudy& s : studies_) {  // a name prefix with '^' (and the '*' added)
        PacsStudyQuery q;
        q.patient_name = s.patient_name.substr(0, s.patient_name.size() - 2);
        auto by_name = qidoStudies(server_->dicomweb, q);
        ASSERT_TRUE(by_name.isOk()) << by_name.status().toString();
        ASSERT_EQ(by_name->size(), 1u) << q.patient_name;
        EXPECT_EQ(by_name->front().study_uid, s.study_uid);
    }
    PacsStudyQuery by_modality;
    by_modality.modality = "CT";
    auto web_ct = qidoStudies(server_->dicomweb, by_modality);
    ASSERT_TRUE(web_ct.isOk()) << web_ct.status().toString();
    ASSERT_EQ(web_ct->size(), 1u);
    EXPECT_EQ(web_ct->front().study_uid, studies_[0].study_uid);

    for (const PacsTestStudy& s : studies_) {
        auto ds = findSeries(server_->peer, callingAe(), s.study_uid);
        auto ws = qidoSeries(server_->dicomweb, s.study_uid);
        ASSERT_TRUE(ds.isOk()) << ds.status().toString();
        ASSERT_TRUE(ws.isOk()) << ws.status().toString();
        auto image = [&s](const std::vector<PacsSeries>& list) -> const PacsSeries* {
            for (const auto& x : list)
                if (x.series_uid == s.series_uid) return &x;
            return nullptr;
        };
        for (const PacsSeries* x : {image(*ds), image(*ws)}) {
            ASSERT_NE(x, nullptr) << s.series_uid;
            EXPECT_EQ(x->modality, s.modality);
            EXPECT_EQ(x->description, s.description + " series");
            EXPECT_EQ(x->number, 1);
            EXPECT_EQ(x->instances, s.slices);
            EXPECT_EQ(x->study_uid, s.study_uid);
        }
    }
}

TEST_F(PacsClientTest, CMoveRetrievesEveryInstance) {
    for (const PacsTestStudy& s : studies_) {
        TempDir out;
        const std::string target = out / "series";
        std::vector<std::pair<int, int>> steps;
        auto r = moveSeries(server_->peer, server_->self, s.study_uid, s.series_uid, target,
                            s.slices, [&](int n, int of) { steps.emplace_back(n, of); });
        ASSERT_TRUE(r.isOk()) << r.status().toString();
        EXPECT_EQ(r->folder, target);
        EXPECT_EQ(static_cast<int>(r->files.size()), s.slices);
        EXPECT_EQ(sopUids(*r), s.sop_instance_uids);
        ASSERT_FALSE(steps.empty());
        EXPECT_EQ(steps.back(), std::make_pair(s.slices, s.slices));
        // Nothing else beside the target: the staging folder was renamed.
        int entries = 0;
        for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(out.path()))
            ++entries;
        EXPECT_EQ(entries, 1);
        // A second retrieve into the same folder is refused, naming it.
        auto again = moveSeries(server_->peer, server_->self, s.study_uid, s.series_uid, target,
                                s.slices, {});
        ASSERT_FALSE(again.isOk());
        EXPECT_NE(again.status().toString().find(target), std::string::npos);
    }
}

TEST_F(PacsClientTest, WadoRetrievesEveryInstance) {
    for (const PacsTestStudy& s : studies_) {
        TempDir out;
        const std::string target = out / "series";
        int last = 0;
        auto r = wadoRetrieveSeries(server_->dicomweb, s.study_uid, s.series_uid, target, s.slices,
                                    [&](int n, int) { last = n; });
        ASSERT_TRUE(r.isOk()) << r.status().toString();
        EXPECT_EQ(static_cast<int>(r->files.size()), s.slices);
        EXPECT_EQ(sopUids(*r), s.sop_instance_uids);
        EXPECT_EQ(last, s.slices);
        EXPECT_TRUE(std::filesystem::is_directory(target));
    }
}

TEST_F(PacsClientTest, CancelledRetrieveLeavesNothing) {
    TempDir out;
    const std::string target = out / "series";
    CancelToken cancel;
    cancel.cancel();
    auto r = wadoRetrieveSeries(server_->dicomweb, studies_[0].study_uid, studies_[0].series_uid,
                                target, 0, {}, cancel);
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
    EXPECT_TRUE(std::filesystem::is_empty(out.path()));
    auto m = moveSeries(server_->peer, server_->self, studies_[0].study_uid, studies_[0].series_uid,
                        target, 0, {}, cancel);
    ASSERT_FALSE(m.isOk());
    EXPECT_EQ(m.status().code(), StatusCode::kCancelled);
    EXPECT_TRUE(std::filesystem::is_empty(out.path()));
}

TEST_F(PacsClientTest, CancelDuringARetrieveStopsItAndLeavesNothing) {
    const PacsTestStudy& s = studies_[0];
    for (bool web : {false, true}) {
        SCOPED_TRACE(web ? "WADO-RS" : "C-MOVE");
        TempDir out;
        CancelToken cancel;
        int calls = 0;
        auto on_progress = [&](int, int) {
            ++calls;
            cancel.cancel();  // after the first instance
        };
        auto r = web ? wadoRetrieveSeries(server_->dicomweb, s.study_uid, s.series_uid,
                                          out / "series", s.slices, on_progress, cancel)
                     : moveSeries(server_->peer, server_->self, s.study_uid, s.series_uid,
                                  out / "series", s.slices, on_progress, cancel);
        ASSERT_FALSE(r.isOk());
        EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << r.status().toString();
        EXPECT_GE(calls, 1);
        EXPECT_LT(calls, s.slices);
        EXPECT_TRUE(std::filesystem::is_empty(out.path()));
    }
}

TEST_F(PacsClientTest, SegSentByCStoreAndStowIsFoundAndRetrieved) {
    TempDir out;
    const std::string by_dimse = writeSeg(out / "seg-dimse.dcm");
    const std::string by_web = writeSeg(out / "seg-web.dcm");
    ASSERT_FALSE(by_dimse.empty());
    ASSERT_NE(by_dimse, by_web);
    const Status stored = storeFiles(server_->peer, callingAe(), {out / "seg-dimse.dcm"});
    ASSERT_TRUE(stored.isOk()) << stored.toString();
    const Status stowed =
        stowFiles(server_->dicomweb, server_->dicomweb.url + "/studies", {out / "seg-web.dcm"});
    ASSERT_TRUE(stowed.isOk()) << stowed.toString();
    auto series = findSeries(server_->peer, callingAe(), studies_[0].study_uid);
    ASSERT_TRUE(series.isOk()) << series.status().toString();
    std::set<std::string> seg_series;
    for (const auto& s : *series)
        if (s.modality == "SEG") seg_series.insert(s.series_uid);
    EXPECT_TRUE(seg_series.count(by_dimse)) << "the C-STORE SEG is not in Orthanc";
    EXPECT_TRUE(seg_series.count(by_web)) << "the STOW-RS SEG is not in Orthanc";
    // Retrieved again, as the viewer opens a SEG from the PACS: C-MOVE (our SCP takes SEG
    // storage; it took images only and Orthanc's sub-operation failed) and WADO-RS.
    const std::string dimse_uid = readDicomFileIds(out / "seg-dimse.dcm")->sop_instance_uid;
    auto moved = moveSeries(server_->peer, server_->self, studies_[0].study_uid, by_dimse,
                            out / "moved", 1, {});
    ASSERT_TRUE(moved.isOk()) << moved.status().toString();
    EXPECT_EQ(sopUids(*moved), std::vector<std::string>{dimse_uid});
    auto fetched = wadoRetrieveSeries(server_->dicomweb, studies_[0].study_uid, by_dimse,
                                      out / "fetched", 1, {});
    ASSERT_TRUE(fetched.isOk()) << fetched.status().toString();
    EXPECT_EQ(sopUids(*fetched), std::vector<std::string>{dimse_uid});
}

TEST_F(PacsClientTest, WrongAeTitleClosedPortAndWrongUrlSayWhoAndWhat) {
    DicomPeer wrong_ae = server_->peer;
    wrong_ae.ae_title = "NOTORTHANC";
    wrong_ae.label = "pacs (NOTORTHANC@127.0.0.1)";
    auto a = findStudies(wrong_ae, callingAe(), {});
    ASSERT_FALSE(a.isOk());
    EXPECT_EQ(a.status().subject(), wrong_ae.label);
    EXPECT_NE(a.status().message().find("association failed"), std::string::npos)
        << a.status().toString();
    EXPECT_NE(a.status().message().find("AE title"), std::string::npos);

    DicomPeer closed = server_->peer;
    closed.port = server_->self.port;  // nothing listens there between retrieves
    closed.label = "closed (ORTHANC@127.0.0.1:" + std::to_string(closed.port) + ")";
    closed.timeout_seconds = 5;
    auto b = findStudies(closed, callingAe(), {});
    ASSERT_FALSE(b.isOk());
    EXPECT_EQ(b.status().subject(), closed.label);

    HttpEndpoint wrong_root = server_->dicomweb;
    wrong_root.url = server_->rest + "/no-dicom-web-here";
    auto c = qidoStudies(wrong_root, {});
    ASSERT_FALSE(c.isOk());
    EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
    EXPECT_NE(c.status().message().find("HTTP 404"), std::string::npos) << c.status().toString();
    EXPECT_NE(c.status().subject().find(wrong_root.url), std::string::npos);

    TempDir out;
    auto d = wadoRetrieveSeries(server_->dicomweb, studies_[0].study_uid, "1.2.3.404",
                                out / "series", 0, {});
    ASSERT_FALSE(d.isOk());
    EXPECT_NE(d.status().toString().find("1.2.3.404"), std::string::npos) << d.status().toString();
    EXPECT_TRUE(std::filesystem::is_empty(out.path()));

    // A C-MOVE destination the PACS does not know: the message names it and what to do.
    MoveDestination stranger = server_->self;
    stranger.ae_title = "STRANGER";
    auto m = moveSeries(server_->peer, stranger, studies_[0].study_uid, studies_[0].series_uid,
                        out / "moved", 0, {});
    ASSERT_FALSE(m.isOk());
    EXPECT_EQ(m.status().subject(), server_->peer.label);
    EXPECT_NE(m.status().message().find("STRANGER"), std::string::npos) << m.status().toString();
    EXPECT_FALSE(std::filesystem::exists(out / "moved"));

    HttpEndpoint refused;
    refused.url = "http://127.0.0.1:" + std::to_string(server_->self.port) + "/dicom-web";
    refused.timeout_seconds = 5;
    auto e = qidoStudies(refused, {});
    ASSERT_FALSE(e.isOk());
    EXPECT_EQ(e.status().subject().rfind(refused.url, 0), 0u) << e.status().toString();
}

}  // namespace
}  // namespace voxseg::io
