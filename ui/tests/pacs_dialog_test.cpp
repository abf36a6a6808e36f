// File > PACS... (ui/pacs_dialog.h) on the real main window against a real Orthanc started by
// tests/io/pacs_orthanc_test.sh (skipped without it): servers remembered in QSettings; for a
// DICOM server (C-FIND, C-MOVE, C-STORE) and a DICOMweb one (QIDO-RS, WADO-RS, STOW-RS):
// search by patient name, the study row's date, description, accession and modalities, expand
// the study, retrieve its series, the viewer loads it (its dimensions), a segmentation drawn on
// it is sent as SEG and Orthanc has it; a wrong AE title is reported naming the server.
#include "ui/pacs_dialog.h"
#include "io/image_io.h"
#include "io/pacs_client.h"
#include "tests/io/pacs_test_server.h"
#include "ui/main_window.h"
#include "ui/tests/viewer_test_support.h"
#include "ui/viewer_state.h"

#include <gtest/gtest.h>

#include <QAction>
#include <QComboBox>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTest>
#include <QTreeWidget>

#include <filesystem>

namespace voxseg::ui {
namespace {

using voxseg::testing::PacsTestServer;
using voxseg::testing::PacsTestStudy;

constexpr int kWaitMs = 60000;

class PacsDialogTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        server_ = voxseg::testing::pacsTestServer();
        if (!server_) return;
        dir_ = new voxseg::testing::TempDir;
        studies_ = voxseg::testing::pacsTestStudies();
        for (size_t i = 0; i < studies_.size(); ++i) {
            ASSERT_TRUE(voxseg::testing::writePacsTestStudy(studies_[i],
                                                            *dir_ / ("study" + std::to_string(i))));
            const Status s = io::storeFiles(server_->peer, server_->self.ae_title,
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

    static io::PacsServer dicomServer() {
        return voxseg::testing::pacsDicomServer(*server_, "orthanc dicom");
    }
    static io::PacsServer webServer() {
        io::PacsServer s;
        s.name = "orthanc web";
        s.protocol = io::PacsProtocol::kDicomWeb;
        s.web = server_->dicomweb;
        return s;
    }

    // Waits for `signal` of `d` after `start`; its (ok, message).
    template <typename Signal>
    static std::pair<bool, QString> waitFor(PacsDialog* d, Signal signal,
                                            const std::function<void()>& start) {
        QSignalSpy spy(d, signal);
        start();
        if (!QTest::qWaitFor([&] { return spy.count() > 0; }, kWaitMs)) return {false, "timeout"};
        return {spy.front()[0].toBool(), spy.front()[1].toString()};
    }

    static QTreeWidgetItem* findItem(QTreeWidget* tree, const QString& text, int column) {
        for (QTreeWidgetItemIterator it(tree); *it; ++it)
            if ((*it)->text(column) == text) return *it;
        return nullptr;
    }

    static inline std::optional<PacsTestServer> server_;
    static inline std::vector<PacsTestStudy> studies_;
    static inline voxseg::testing::TempDir* dir_ = nullptr;
};

TEST_F(PacsDialogTest, MenuOpensTheDialogAndServersAreRemembered) {
    {
        MainWindow w;
        w.setInteractive(false);
        QAction* pacs = nullptr;
        for (QAction* a : w.findChildren<QAction*>())
            if (a->text().startsWith("&PACS")) pacs = a;
        ASSERT_NE(pacs, nullptr) << "no File > PACS... action";
        pacs->trigger();
        PacsDialog* d = w.findChild<PacsDialog*>();
        ASSERT_NE(d, nullptr);
        EXPECT_TRUE(d->isVisible());
        EXPECT_EQ(PacsDialog::forWindow(&w), d);
        d->saveServer(dicomServer());
        d->saveServer(webServer());
        ASSERT_TRUE(d->selectServer("orthanc dicom"));
    }
    MainWindow w;
    PacsDialog* d = PacsDialog::forWindow(&w);
    auto* box = d->findChild<QComboBox*>("pacsServer");
    ASSERT_NE(box, nullptr);
    EXPECT_EQ(box->count(), 2);
    auto current = d->currentServer();
    ASSERT_TRUE(current.has_value());
    EXPECT_EQ(current->name, "orthanc dicom");
    EXPECT_EQ(current->peer.ae_title, server_->peer.ae_title);
    EXPECT_EQ(current->peer.port, server_->peer.port);
    EXPECT_EQ(current->self.ae_title, server_->self.ae_title);
    EXPECT_EQ(current->self.port, server_->self.port);
    ASSERT_TRUE(d->selectServer("orthanc web"));
    EXPECT_EQ(d->currentServer()->protocol, io::PacsProtocol::kDicomWeb);
    EXPECT_EQ(d->currentServer()->web.url, server_->dicomweb.url);
}

TEST_F(PacsDialogTest, SearchRetrieveOpenAndSendSegForBothProtocols) {
    // The DICOM server retrieves the CT study, the DICOMweb one the MR study (each gets one SEG).
    const io::PacsServer servers[] = {dicomServer(), webServer()};
    for (size_t n = 0; n < 2; ++n) {
        const io::PacsServer& server = servers[n];
        const PacsTestStudy& s = studies_[n];
        SCOPED_TRACE(server.name);
        MainWindow w;
        w.setInteractive(false);
        w.show();
        PacsDialog* d = PacsDialog::forWindow(&w);
        d->saveServer(server);
        d->findChild<QLineEdit*>("pacsPatientName")
            ->setText(QString::fromStdString(s.patient_name.substr(0, s.patient_name.size() - 2)));
        auto found = waitFor(d, &PacsDialog::searchFinished, [&] { d->search(); });
        ASSERT_TRUE(found.first) << found.second.toStdString();
        QTreeWidget* tree = d->results();
        ASSERT_EQ(tree->topLevelItemCount(), 1);
        QTreeWidgetItem* patient = tree->topLevelItem(0);
        EXPECT_TRUE(patient->text(0).contains(QString::fromStdString(s.patient_id)));
        ASSERT_EQ(patient->childCount(), 1);
        QTreeWidgetItem* study = patient->child(0);
        const std::string date =
            s.date.substr(0, 4) + "-" + s.date.substr(4, 2) + "-" + s.date.substr(6, 2);
        EXPECT_EQ(study->text(1).toStdString(), date);
        EXPECT_EQ(study->text(2).toStdString(), s.description);
        EXPECT_EQ(study->text(3).toStdString(), s.accession);
        EXPECT_EQ(study->text(4).toStdString(), s.modality);

        auto listed = waitFor(d, &PacsDialog::seriesFinished, [&] { study->setExpanded(true); });
        ASSERT_TRUE(listed.first) << listed.second.toStdString();
        QTreeWidgetItem* series =
            findItem(tree, QString::fromStdString(s.description + " series"), 2);
        ASSERT_NE(series, nullptr);
        EXPECT_EQ(series->text(5), QString::number(s.slices));
        tree->setCurrentItem(series);

        QSignalSpy loaded(&w, &MainWindow::taskFinished);
        auto retrieved = waitFor(d, &PacsDialog::retrieveFinished, [&] { d->retrieveSelected(); });
        ASSERT_TRUE(retrieved.first) << retrieved.second.toStdString();
        ASSERT_TRUE(QTest::qWaitFor([&] { return loaded.count() > 0; }, kWaitMs));
        ASSERT_TRUE(loaded.front()[0].toBool()) << loaded.front()[1].toString().toStdString();
        ASSERT_TRUE(w.state()->hasImage());
        const Geometry g = w.state()->image().geometry();
        EXPECT_EQ(g.size[0], s.columns);
        EXPECT_EQ(g.size[1], s.rows);
        EXPECT_EQ(g.size[2], s.slices);

        // A box segmented on it, sent as SEG.
        Volume labels = Volume::allocate<uint8_t>(g);
        uint8_t* p = labels.data<uint8_t>();
        for (int64_t k = 1; k < g.size[2] - 1; ++k)
            for (int64_t j = 2; j < 8; ++j)
                for (int64_t i = 3; i < 9; ++i) p[(k * g.size[1] + j) * g.size[0] + i] = 1;
        voxseg::testing::TempDir tmp;
        const std::string label_path = tmp / "labels.nii.gz";
        ASSERT_TRUE(io::writeImage(labels, label_path).isOk());
        ASSERT_TRUE(runTask(w, [&] { w.loadSegmentation(QString::fromStdString(label_path)); }).ok)
            << w.lastError().toStdString();
        auto before = io::pacsFindSeries(server, s.study_uid);
        ASSERT_TRUE(before.isOk()) << before.status().toString();
        const int instances_before = voxseg::testing::orthancInstanceCount(*server_);
        auto sent = waitFor(d, &PacsDialog::sendFinished, [&] { d->sendButton()->click(); });
        ASSERT_TRUE(sent.first) << sent.second.toStdString();
        EXPECT_EQ(voxseg::testing::orthancInstanceCount(*server_), instances_before + 1);
        auto after = io::pacsFindSeries(server, s.study_uid);
        ASSERT_TRUE(after.isOk()) << after.status().toString();
        int segs_before = 0, segs_after = 0;
        for (const auto& x : *before) segs_before += x.modality == "SEG";
        for (const auto& x : *after) segs_after += x.modality == "SEG";
        EXPECT_EQ(segs_after, segs_before + 1) << "the sent SEG is not in Orthanc";
    }
}

// A SEG series retrieved from the PACS opens onto the image shown (by WADO-RS here; C-MOVE in
// reader_session_test.cpp); with no image open it is refused, saying what to open first.
TEST_F(PacsDialogTest, SegSeriesOpensOntoTheImageShown) {
    const PacsTestStudy& s = studies_[1];
    auto retrieve = [](MainWindow& w, PacsDialog* d, QTreeWidgetItem* series) {
        d->results()->setCurrentItem(series);
        QSignalSpy loaded(&w, &MainWindow::taskFinished);
        auto r = waitFor(d, &PacsDialog::retrieveFinished, [&] { d->retrieveSelected(); });
        if (!r.first) return r;
        if (!QTest::qWaitFor([&] { return loaded.count() > 0; }, kWaitMs))
            return std::make_pair(false, QString("timeout"));
        return std::make_pair(loaded.front()[0].toBool(), loaded.front()[1].toString());
    };
    auto seriesOf = [](QTreeWidgetItem* study, const QString& modality) {
        std::vector<QTreeWidgetItem*> out;
        for (int i = 0; i < study->childCount(); ++i)
            if (study->child(i)->text(4) == modality) out.push_back(study->child(i));
        return out;
    };
    // The study's image series and a SEG of a box on it, sent.
    Volume sent;
    {
        MainWindow w;
        w.setInteractive(false);
        PacsDialog* d = PacsDialog::forWindow(&w);
        d->saveServer(webServer());
        d->findChild<QLineEdit*>("pacsPatientId")->setText(QString::fromStdString(s.patient_id));
        ASSERT_TRUE(waitFor(d, &PacsDialog::searchFinished, [&] { d->search(); }).first);
        QTreeWidgetItem* study = d->results()->topLevelItem(0)->child(0);
        ASSERT_TRUE(
            waitFor(d, &PacsDialog::seriesFinished, [&] { study->setExpanded(true); }).first);
        ASSERT_EQ(seriesOf(study, "MR").size(), 1u);
        auto opened = retrieve(w, d, seriesOf(study, "MR").front());
        ASSERT_TRUE(opened.first) << opened.second.toStdString();
        const Geometry g = w.state()->image().geometry();
        sent = Volume::allocate<uint8_t>(g);
        uint8_t* p = sent.data<uint8_t>();
        for (int64_t k = 1; k < g.size[2] - 1; ++k)
            for (int64_t j = 1; j < 6; ++j)
                for (int64_t i = 2; i < 7; ++i) p[(k * g.size[1] + j) * g.size[0] + i] = 1;
        voxseg::testing::TempDir tmp;
        ASSERT_TRUE(io::writeImage(sent, tmp / "box.nii.gz").isOk());
        ASSERT_TRUE(
            runTask(w, [&] { w.loadSegmentation(QString::fromStdString(tmp / "box.nii.gz")); }).ok);
        ASSERT_TRUE(waitFor(d, &PacsDialog::sendFinished, [&] { d->sendButton()->click(); }).first);
    }
    MainWindow w;
    w.setInteractive(false);
    PacsDialog* d = PacsDialog::forWindow(&w);
    d->findChild<QLineEdit*>("pacsPatientId")->setText(QString::fromStdString(s.patient_id));
    ASSERT_TRUE(waitFor(d, &PacsDialog::searchFinished, [&] { d->search(); }).first);
    QTreeWidgetItem* study = d->results()->topLevelItem(0)->child(0);
    ASSERT_TRUE(waitFor(d, &PacsDialog::seriesFinished, [&] { study->setExpanded(true); }).first);
    // The study may hold SEGs of other tests: the one sent here is the one that gives the box.
    const std::vector<QTreeWidgetItem*> segs = seriesOf(study, "SEG");
    ASSERT_FALSE(segs.empty());
    auto refused = retrieve(w, d, segs.front());
    EXPECT_FALSE(refused.first);
    EXPECT_TRUE(refused.second.contains("retrieve and open that series first"))
        << refused.second.toStdString();
    EXPECT_FALSE(w.state()->hasImage());
    auto image = retrieve(w, d, seriesOf(study, "MR").front());
    ASSERT_TRUE(image.first) << image.second.toStdString();
    bool found = false;
    for (QTreeWidgetItem* seg : segs) {
        auto loaded = retrieve(w, d, seg);
        ASSERT_TRUE(loaded.first) << loaded.second.toStdString();
        ASSERT_TRUE(w.state()->hasLabelMap());
        const Geometry& g = sent.geometry();
        const uint8_t* p = sent.data<uint8_t>();
        int64_t differ = 0;
        for (int64_t k = 0; k < g.size[2]; ++k)
            for (int64_t j = 0; j < g.size[1]; ++j)
                for (int64_t i = 0; i < g.size[0]; ++i)
                    differ +=
                        w.state()->labelValue({i, j, k}) != p[(k * g.size[1] + j) * g.size[0] + i];
        found = differ == 0;
        if (found) break;
    }
    EXPECT_TRUE(found) << "no SEG of the study opened as the box that was sent";
}

TEST_F(PacsDialogTest, WrongAeTitleIsReportedNamingTheServer) {
    MainWindow w;
    w.setInteractive(false);
    PacsDialog* d = PacsDialog::forWindow(&w);
    io::PacsServer wrong = dicomServer();
    wrong.name = "wrong";
    wrong.peer.ae_title = "NOTORTHANC";
    d->saveServer(wrong);
    auto r = waitFor(d, &PacsDialog::searchFinished, [&] { d->search(); });
    EXPECT_FALSE(r.first);
    EXPECT_TRUE(r.second.contains("wrong (NOTORTHANC@127.0.0.1:")) << r.second.toStdString();
    EXPECT_TRUE(r.second.contains("AE title")) << r.second.toStdString();
    EXPECT_EQ(d->statusText(), r.second);
    // Nothing selected: Retrieve says what to do.
    auto none = waitFor(d, &PacsDialog::retrieveFinished, [&] { d->retrieveSelected(); });
    EXPECT_FALSE(none.first);
    EXPECT_TRUE(none.second.contains("Pick a series"));
}

}  // namespace
}  // namespace voxseg::ui
