// Issue 39's "done when", as one scripted reader session on the real main window against a real
// Orthanc started by tests/io/pacs_orthanc_test.sh (skipped without it): a CT phantom (voxseg
// phantom's DICOM writer) is stored in Orthanc; File > PACS... finds the study, retrieves and
// opens it by C-MOVE; the shipped CT phantom model runs through the Run model dialog (its card
// shown); five labels are reviewed with the review keys (accepted, corrected, rejected), one is
// corrected with a threshold that is previewed before the click commits it; Send SEG saves and
// sends it; the window closes with nothing left to recover. A new window retrieves the study's
// CT and then its SEG series from Orthanc (the SEG opens onto the image, without the sidecar
// the first window wrote beside it) and shows the same names, colours and review states, and
// exactly the voxels that were saved.
#include "io/ct_phantom.h"
#include "io/pacs_client.h"
#include "tests/io/pacs_test_server.h"
#include "ui/edit_controller.h"
#include "ui/edit_toolbar.h"
#include "ui/label_table.h"
#include "ui/main_window.h"
#include "ui/mpr_view.h"
#include "ui/pacs_dialog.h"
#include "ui/run_model_dialog.h"
#include "ui/tests/viewer_test_support.h"
#include "ui/viewer_state.h"

#include <gtest/gtest.h>

#include <QCheckBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTest>
#include <QTreeWidget>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>

namespace voxseg::ui {
namespace {

using voxseg::testing::PacsTestServer;

constexpr int kWaitMs = 120000;
constexpr const char* kPatientId = "READER-0039";
// A SEG stores colours as CIELab: the sRGB colour read back may differ by rounding.
constexpr int kColorTolerance = 2;

struct LabelState {
    int value = 0;
    std::string name;
    std::array<uint8_t, 3> color{};
    edit::ReviewStatus status = edit::ReviewStatus::kNotReviewed;
};

std::vector<LabelState> labelStates(const ViewerState& s) {
    std::vector<LabelState> out;
    for (const auto& e : s.labels()) out.push_back({e.value, e.name, e.color, e.status});
    return out;
}

std::vector<int> voxels(const Volume& labels) {
    std::vector<int> out(static_cast<size_t>(labels.geometry().voxelCount()));
    visitPixels(labels, [&](const auto* p) {
        for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int>(p[i]);
    });
    return out;
}

int subfolders(const QString& root) {
    return static_cast<int>(QDir(root).entryList(QDir::Dirs | QDir::NoDotAndDotDot).size());
}

class ReaderSessionTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        server_ = voxseg::testing::pacsTestServer();
        if (!server_) return;
        dir_ = new voxseg::testing::TempDir;
        // 128x128x48 at 3 mm (the model's grid: no resampling; 18 patches, about 1 s on 2 cores).
        io::CtPhantomSpec spec;
        spec.seed = 39;
        spec.size = {128, 128, 48};
        spec.spacing = {3.0, 3.0, 3.0};
        spec.noise_hu = 10;
        auto phantom = io::makeCtPhantom(spec);
        ASSERT_TRUE(phantom.isOk()) << phantom.status().toString();
        spleen_hu_ = phantom->tissues.spleen;
        io::PhantomWriteOptions options;
        options.labels_nifti = false;
        options.description = false;
        options.patient_id = kPatientId;
        auto written = io::writeCtPhantomStudy(*phantom, spec, *dir_ / "phantom", options);
        ASSERT_TRUE(written.isOk()) << written.status().toString();
        const std::vector<std::string> files = voxseg::testing::filesIn(*dir_ / "phantom/dicom");
        ASSERT_EQ(files.size(), 48u);
        const Status s = io::storeFiles(server_->peer, server_->self.ae_title, files);
        ASSERT_TRUE(s.isOk()) << s.toString();
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }
    void SetUp() override {
        if (!server_) GTEST_SKIP() << "no Orthanc: run through tests/io/pacs_orthanc_test.sh";
    }

    static io::PacsServer dicomServer() {
        return voxseg::testing::pacsDicomServer(*server_, "orthanc");
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

    // Searches the patient, expands the study; its series items by modality.
    static std::map<QString, QTreeWidgetItem*> findSeries(PacsDialog* d) {
        d->findChild<QLineEdit*>("pacsPatientId")->setText(kPatientId);
        auto found = waitFor(d, &PacsDialog::searchFinished, [&] { d->search(); });
        EXPECT_TRUE(found.first) << found.second.toStdString();
        QTreeWidget* tree = d->results();
        if (tree->topLevelItemCount() != 1 || tree->topLevelItem(0)->childCount() != 1) {
            ADD_FAILURE() << "the phantom study is not listed once";
            return {};
        }
        QTreeWidgetItem* study = tree->topLevelItem(0)->child(0);
        auto listed = waitFor(d, &PacsDialog::seriesFinished, [&] { study->setExpanded(true); });
        EXPECT_TRUE(listed.first) << listed.second.toStdString();
        std::map<QString, QTreeWidgetItem*> out;
        for (int i = 0; i < study->childCount(); ++i)
            out[study->child(i)->text(4)] = study->child(i);
        return out;
    }

    // Retrieve and open (the dialog's button) of `series`: the retrieve, then the window's task.
    static void retrieve(MainWindow& w, PacsDialog* d, QTreeWidgetItem* series) {
        ASSERT_NE(series, nullptr);
        d->results()->setCurrentItem(series);
        QSignalSpy opened(&w, &MainWindow::taskFinished);
        auto r = waitFor(d, &PacsDialog::retrieveFinished, [&] { d->retrieveSelected(); });
        ASSERT_TRUE(r.first) << r.second.toStdString();
        ASSERT_TRUE(QTest::qWaitFor([&] { return opened.count() > 0; }, kWaitMs));
        ASSERT_TRUE(opened.front()[0].toBool()) << opened.front()[1].toString().toStdString();
    }

    static inline std::optional<PacsTestServer> server_;
    static inline voxseg::testing::TempDir* dir_ = nullptr;
    static inline double spleen_hu_ = 0;
};

TEST_F(ReaderSessionTest, ReviewedAndCorrectedSegSurvivesARoundTripThroughThePacs) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<LabelState> saved_states;
    std::vector<int> saved_voxels;
    QString recovery_root;
    {
        MainWindow w;
        ASSERT_NO_FATAL_FAILURE(showActive(w, 1400, 860));
        ViewerState* state = w.state();
        EditController* edit = w.editController();
        LabelTable* table = w.labelTable();
        recovery_root = edit->recoveryRoot();
        ASSERT_FALSE(recovery_root.isEmpty());

        // 1. Open the study from Orthanc (C-FIND, C-MOVE).
        PacsDialog* d = PacsDialog::forWindow(&w);
        d->saveServer(dicomServer());
        auto series = findSeries(d);
        ASSERT_EQ(series.size(), 1u);
        ASSERT_NO_FATAL_FAILURE(retrieve(w, d, series["CT"]));
        ASSERT_TRUE(state->hasImage());
        EXPECT_EQ(state->image().geometry().size, (std::array<int64_t, 3>{128, 128, 48}));

        // 2. Run the shipped CT phantom model through the Run model dialog, its card shown.
        RunModelDialog* dialog = w.openRunModelDialog();
        dialog->setModelFolder(QString(VOXSEG_SOURCE_DIR) + "/sample_data/models/ct-phantom");
        EXPECT_TRUE(dialog->cardLabel()->text().contains("not a clinical model"))
            << dialog->cardLabel()->text().toStdString();
        EXPECT_TRUE(dialog->refusal().isEmpty()) << dialog->refusal().toStdString();
        const TaskResult run = runTask(
            w, [&] { dialog->accept(); }, kWaitMs);
        ASSERT_TRUE(run.ok) << run.message.toStdString() << " " << w.lastError().toStdString();
        ASSERT_EQ(state->labels().size(), 8u);
        // Every label has voxels: a binary SEG numbers the segments it writes 1..N, so the
        // values read back are the model's only when none is empty.
        for (const auto& e : state->labels()) ASSERT_GT(e.voxels, 0) << e.name;
        EXPECT_EQ(state->labels()[0].name, "Liver");
        EXPECT_EQ(state->labels()[1].name, "Spleen");

        // 3. Review: Liver accepted (A, and on to Spleen, the crosshair on it).
        QTableWidget* rows = table->table();
        rows->setCurrentCell(0, LabelTable::kName);
        QTest::keyClick(&w, Qt::Key_A);
        ASSERT_EQ(rows->currentRow(), 1);
        ASSERT_EQ(state->labelValue(state->cursor()), 2) << "the crosshair is not on Spleen";

        // 4. Spleen corrected with a threshold around its HU: previewed first, nothing painted,
        // then the click in the axial view paints exactly what was previewed on that slice;
        // the other labels are protected (only background is painted).
        const int64_t k = state->slice(ViewAxis::kAxial);
        const auto& g = state->image().geometry();
        const int64_t plane = g.size[0] * g.size[1];
        auto labelled = [&](int label) {
            std::set<int64_t> out;
            for (int64_t j = 0; j < g.size[1]; ++j)
                for (int64_t i = 0; i < g.size[0]; ++i)
                    if (state->labelValue({i, j, k}) == label)
                        out.insert(i + g.size[0] * j + plane * k);
            return out;
        };
        const std::vector<int> before_correction = voxels(state->labelMap());
        const std::set<int64_t> spleen_before = labelled(2);
        edit->setActiveLabel(2);
        w.editToolbar()->rangeMinBox()->setValue(spleen_hu_ - 30);
        w.editToolbar()->rangeMaxBox()->setValue(spleen_hu_ + 30);
        w.editToolbar()->rangeBox()->setChecked(true);
        // The axial view has the focus (a click that takes it from the table only focuses).
        w.view(ViewAxis::kAxial)->setFocus();
        QTest::keyClick(&w, Qt::Key_5);
        ASSERT_EQ(edit->tool(), EditTool::kThreshold);
        ASSERT_NE(edit->preview(), nullptr) << "no threshold preview";
        std::set<int64_t> previewed;
        for (int64_t v : edit->preview()->voxels)
            if (v / plane == k) previewed.insert(v);
        ASSERT_FALSE(previewed.empty());
        EXPECT_GT(w.view(ViewAxis::kAxial)->previewPixels(), 0) << "the preview is not drawn";
        EXPECT_EQ(voxels(state->labelMap()), before_correction) << "the preview painted";
        const int64_t target = *previewed.begin();
        const auto s = state->frame(ViewAxis::kAxial)
                           .screen({target % g.size[0], (target / g.size[0]) % g.size[1], k});
        const QPoint click =
            w.view(ViewAxis::kAxial)
                ->widgetPointOfPixel(static_cast<double>(s[0]), static_cast<double>(s[1]))
                .toPoint();
        QTest::mouseClick(w.view(ViewAxis::kAxial), Qt::LeftButton, Qt::NoModifier, click);
        std::set<int64_t> expected = spleen_before;
        expected.insert(previewed.begin(), previewed.end());
        EXPECT_EQ(labelled(2), expected);
        {
            const std::vector<int> after = voxels(state->labelMap());
            int64_t changed = 0, outside = 0;
            for (size_t i = 0; i < after.size(); ++i) {
                if (after[i] == before_correction[i]) continue;
                ++changed;
                outside += !previewed.count(static_cast<int64_t>(i)) || before_correction[i] != 0;
            }
            EXPECT_EQ(changed, static_cast<int64_t>(previewed.size()));
            EXPECT_EQ(outside, 0) << "painted beyond the preview or over another label";
        }
        QTest::keyClick(&w, Qt::Key_Escape);
        EXPECT_EQ(edit->tool(), EditTool::kNone);
        // Spleen corrected (C), Left kidney rejected (X), Right kidney and Left lung accepted.
        rows->setCurrentCell(1, LabelTable::kName);
        QTest::keyClick(&w, Qt::Key_C);
        QTest::keyClick(&w, Qt::Key_X);
        QTest::keyClick(&w, Qt::Key_A);
        QTest::keyClick(&w, Qt::Key_A);
        using RS = edit::ReviewStatus;
        const std::vector<RS> statuses = {RS::kAccepted,    RS::kCorrected,  RS::kRejected,
                                          RS::kAccepted,    RS::kAccepted,   RS::kNotReviewed,
                                          RS::kNotReviewed, RS::kNotReviewed};
        for (size_t i = 0; i < statuses.size(); ++i)
            EXPECT_EQ(state->labels()[i].status, statuses[i]) << state->labels()[i].name;
        QTest::qWait(0);
        EXPECT_EQ(table->progressLabel()->text().toStdString(), "5 of 8 reviewed");

        // 5. Save the SEG and send it (Send SEG): the edits count as saved.
        ASSERT_TRUE(edit->dirty());
        ASSERT_GE(subfolders(recovery_root), 1) << "the edits were not journalled";
        auto sent = waitFor(d, &PacsDialog::sendFinished, [&] { d->sendButton()->click(); });
        ASSERT_TRUE(sent.first) << sent.second.toStdString();
        EXPECT_FALSE(edit->dirty());
        saved_states = labelStates(*state);
        saved_voxels = voxels(state->labelMap());

        // 6. Close: nothing left to recover.
        EXPECT_TRUE(w.close());
    }
    EXPECT_EQ(subfolders(recovery_root), 0) << "a recovery journal was left behind";

    // 7. A new window retrieves the study again: the CT, then the SEG, which opens onto it.
    MainWindow w;
    ASSERT_NO_FATAL_FAILURE(showActive(w, 1400, 860));
    QSignalSpy recovery(&w, &MainWindow::recoveryAvailable);
    PacsDialog* d = PacsDialog::forWindow(&w);
    ASSERT_TRUE(d->currentServer().has_value()) << "the server was not remembered";
    EXPECT_EQ(d->currentServer()->name, "orthanc");
    auto series = findSeries(d);
    ASSERT_EQ(series.size(), 2u) << "expected the CT and the SEG series";
    ASSERT_NO_FATAL_FAILURE(retrieve(w, d, series["CT"]));
    EXPECT_FALSE(w.hasRecoverableEdits());
    ASSERT_NO_FATAL_FAILURE(retrieve(w, d, series["SEG"]));
    EXPECT_EQ(recovery.count(), 0);

    // 8. The same labels, review states and voxels.
    const std::vector<LabelState> back = labelStates(*w.state());
    ASSERT_EQ(back.size(), saved_states.size());
    for (size_t i = 0; i < back.size(); ++i) {
        SCOPED_TRACE(saved_states[i].name);
        EXPECT_EQ(back[i].value, saved_states[i].value);
        EXPECT_EQ(back[i].name, saved_states[i].name);
        EXPECT_STREQ(edit::reviewStatusName(back[i].status),
                     edit::reviewStatusName(saved_states[i].status));
        for (int c = 0; c < 3; ++c)
            EXPECT_NEAR(back[i].color[c], saved_states[i].color[c], kColorTolerance);
    }
    QTest::qWait(0);  // the table follows the state through a queued signal
    EXPECT_EQ(w.labelTable()->progressLabel()->text().toStdString(), "5 of 8 reviewed");
    const std::vector<int> back_voxels = voxels(w.state()->labelMap());
    ASSERT_EQ(back_voxels.size(), saved_voxels.size());
    int64_t differ = 0, spleen = 0;
    for (size_t i = 0; i < back_voxels.size(); ++i) {
        differ += back_voxels[i] != saved_voxels[i];
        spleen += saved_voxels[i] == 2;
    }
    EXPECT_EQ(differ, 0) << "of " << spleen << " corrected Spleen voxels and the rest";
    std::printf("reader session: %.1f s\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace
}  // namespace voxseg::ui
