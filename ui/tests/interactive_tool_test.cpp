// The viewer's Interactive tool (issue 38 item 3), driven as a user would on the real main window
// (offscreen / Xvfb): the test package (tests/edit/data/nninteractive/model, fabricated weights)
// on its phantom; a click in a view gives exactly the mask the Qt-free InteractiveSession gives
// for the same prompt, Shift+click excludes, a second prompt given while the first runs is queued
// and both apply in order, undo/redo go through the label map's history, "Next object" writes the
// object into the label (undoable; the journal's prompt lines replay to the same map with and
// without the model),
// and the errors (no model, a model that does not load) are reported with nothing lost.
#include "ui/interactive_tool.h"
#include "edit/interactive/interactive_model.h"
#include "edit/interactive/interactive_session.h"
#include "edit/interactive/prompt_ops.h"
#include "edit/journal.h"
#include "edit/label_editor.h"
#include "engine/backend.h"
#include "io/image_io.h"
#include "tests/test_data.h"
#include "ui/edit_controller.h"
#include "ui/interactive_prompt.h"
#include "ui/interactive_toolbar.h"
#include "ui/main_window.h"
#include "ui/mpr_view.h"
#include "ui/tests/viewer_test_support.h"
#include "ui/viewer_state.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QDir>
#include <QDockWidget>
#include <QLabel>
#include <QMouseEvent>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace voxseg::ui {
namespace {

namespace ei = edit::interactive;

const std::string kData = std::string(VOXSEG_SOURCE_DIR) + "/tests/edit/data/nninteractive";
constexpr int kPromptTimeoutMs = 120000;

class InteractiveToolTest : public ::testing::Test {
  protected:
    void SetUp() override {
        window_ = std::make_unique<MainWindow>();
        ASSERT_NO_FATAL_FAILURE(showActive(*window_, 1300, 760));
        const TaskResult r = runTask(
            *window_, [&] { window_->openPath(QString::fromStdString(kData + "/image.nii.gz")); });
        ASSERT_TRUE(r.finished && r.ok) << r.message.toStdString();
    }
    void TearDown() override {
        if (window_) window_->editController()->endSession(false);
    }
    EditController* edit() { return window_->editController(); }
    InteractiveTool* tool() { return edit()->interactive(); }
    void loadModel() {
        tool()->loadModel(QString::fromStdString(kData + "/model"));
        ASSERT_TRUE(QTest::qWaitFor([&] { return !tool()->modelPending(); }, kPromptTimeoutMs));
        ASSERT_TRUE(tool()->hasModel());
        // Faster prompts: the comparison holds either way (the session gets the same setting).
        window_->interactiveToolbar()->autoZoomBox()->setChecked(false);
    }
    bool waitIdle() {
        return QTest::qWaitFor([&] { return tool()->pending() == 0; }, kPromptTimeoutMs);
    }
    // Shows voxel (z, y, x) in the axial view and clicks it there; returns the point the tool
    // was given (voxel coordinates, as the view computed it from the click).
    Point3 click(const Index3& zyx, Qt::KeyboardModifiers modifiers = Qt::NoModifier) {
        ViewerState* s = window_->state();
        s->setCursor({zyx[2], zyx[1], zyx[0]});
        MprView* view = window_->view(ViewAxis::kAxial);
        const Geometry g = s->image().geometry();
        const Vec3 mm = g.indexToPhysical({double(zyx[2]), double(zyx[1]), double(zyx[0])});
        const QPoint at = view->widgetPointOfPatient(mm).toPoint();
        const std::optional<Vec3> clicked = view->patientPointAt(at);
        EXPECT_TRUE(clicked.has_value());
        QTest::mouseClick(view, Qt::LeftButton, modifiers, at);
        const Vec3 ijk = g.physicalToIndex(*clicked);
        return {ijk[2], ijk[1], ijk[0]};
    }
    // A left drag in the axial view through voxels (z, y, x) (all on one axial slice); returns
    // the points the tool was given.
    std::vector<Point3> dragThrough(const std::vector<Index3>& voxels) {
        ViewerState* s = window_->state();
        s->setCursor({voxels[0][2], voxels[0][1], voxels[0][0]});
        MprView* view = window_->view(ViewAxis::kAxial);
        const Geometry g = s->image().geometry();
        std::vector<Point3> given;
        for (size_t i = 0; i < voxels.size(); ++i) {
            const Index3& v = voxels[i];
            const QPointF at = view->widgetPointOfPatient(
                g.indexToPhysical({double(v[2]), double(v[1]), double(v[0])}));
            const std::optional<Vec3> mm = view->patientPointAt(at);
            EXPECT_TRUE(mm.has_value());
            const Vec3 ijk = g.physicalToIndex(*mm);
            given.push_back({ijk[2], ijk[1], ijk[0]});
            if (i == 0) {
                QTest::mousePress(view, Qt::LeftButton, Qt::NoModifier, at.toPoint());
                given.back() = pointAt(view, g, at.toPoint());  // the press is at whole pixels
            } else {
                QMouseEvent move(QEvent::MouseMove, at, view->mapToGlobal(at), Qt::NoButton,
                                 Qt::LeftButton, Qt::NoModifier);
                QApplication::sendEvent(view, &move);
            }
        }
        // The drag is drawn while it lasts (box outline, scribble, lasso).
        EXPECT_NE(tool()->drawingPrompt(), nullptr);
        const QPointF last = view->widgetPointOfPatient(g.indexToPhysical(
            {double(voxels.back()[2]), double(voxels.back()[1]), double(voxels.back()[0])}));
        QTest::mouseRelease(view, Qt::LeftButton, Qt::NoModifier, last.toPoint());
        EXPECT_EQ(tool()->drawingPrompt(), nullptr);
        return given;
    }
    static Point3 pointAt(MprView* view, const Geometry& g, const QPoint& at) {
        const Vec3 ijk = g.physicalToIndex(*view->patientPointAt(at));
        return {ijk[2], ijk[1], ijk[0]};
    }
    // The Qt-free session on the same image and model, in the precision the tool loaded it in
    // (auto: bf16 on CPUs with bf16 instructions).
    void startReference() {
        if (!model_) {
            ei::InteractiveModelOptions o;
            o.device = tool()->modelDevice();  // the GPU where there is one, as the tool
            auto p = engine::parsePrecision(tool()->precisionName().toStdString());
            ASSERT_TRUE(p.isOk()) << p.status().toString();
            o.precision = *p;
            auto m = ei::InteractiveModel::load(kData + "/model", o);
            ASSERT_TRUE(m.isOk()) << m.status().toString();
            model_ = std::move(*m);
        }
        session_ = std::make_unique<ei::InteractiveSession>(model_->spec(), model_->forward());
        ASSERT_TRUE(session_->setImage(window_->state()->image()).isOk());
        session_->setAutoZoom(false);
    }
    int64_t differing() const {
        const std::vector<uint8_t>& a = session_->target();
        const std::vector<uint8_t>& b = tool_mask();
        EXPECT_EQ(a.size(), b.size());
        int64_t n = 0;
        for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += (a[i] != 0) != (b[i] != 0);
        return n;
    }
    const std::vector<uint8_t>& tool_mask() const {
        return window_->editController()->interactive()->mask();
    }
    static int64_t count(const std::vector<uint8_t>& m) {
        int64_t n = 0;
        for (uint8_t v : m) n += v != 0;
        return n;
    }

    std::unique_ptr<MainWindow> window_;
    std::unique_ptr<ei::InteractiveModel> model_;
    std::unique_ptr<ei::InteractiveSession> session_;
};

TEST_F(InteractiveToolTest, ClickGivesTheSessionsMaskShiftClickExcludesAndPromptsQueue) {
    loadModel();
    startReference();
    // P: the point prompt, which selects the Interactive tool.
    QTest::keyClick(window_.get(), Qt::Key_P);
    ASSERT_EQ(edit()->tool(), EditTool::kInteractive);
    ASSERT_EQ(tool()->kind(), PromptKind::kPoint);

    const Point3 p1 = click({28, 30, 30});
    ASSERT_TRUE(waitIdle());
    ASSERT_TRUE(session_->addPoint(p1, true).isOk());
    EXPECT_GT(count(session_->target()), 0);
    EXPECT_EQ(differing(), 0);
    EXPECT_GE(tool()->lastLatencyMs(), 0);
    EXPECT_TRUE(window_->interactiveToolbar()->latencyLabel()->text().contains("ms"));
    // The object is the preview drawn in the views.
    ASSERT_NE(edit()->preview(), nullptr);
    EXPECT_EQ(static_cast<int64_t>(edit()->preview()->voxels.size()), count(tool()->mask()));

    // Shift+click: an exclude point.
    const Point3 p2 = click({28, 36, 34}, Qt::ShiftModifier);
    ASSERT_TRUE(waitIdle());
    ASSERT_TRUE(session_->addPoint(p2, false).isOk());
    EXPECT_EQ(differing(), 0);

    // Two clicks without waiting: the second is queued behind the first; both apply, in order.
    const Point3 p3 = click({42, 50, 110});
    const Point3 p4 = click({42, 56, 116}, Qt::ShiftModifier);
    EXPECT_EQ(tool()->pending(), 2);
    EXPECT_TRUE(tool()->busy());
    ASSERT_TRUE(waitIdle());
    ASSERT_TRUE(session_->addPoint(p3, true).isOk());
    ASSERT_TRUE(session_->addPoint(p4, false).isOk());
    EXPECT_EQ(differing(), 0);

    // Ctrl+Z: the last prompt's step undone in the label map's history and reverted in the
    // session (as `voxseg edit` replays an "undo" line); twice goes two prompts back.
    ASSERT_TRUE(edit()->canUndo());
    QSignalSpy failed(edit(), &EditController::editFailed);
    QTest::keyClick(window_.get(), Qt::Key_Z, Qt::ControlModifier);
    ASSERT_TRUE(waitIdle());
    ASSERT_TRUE(session_->undo().undone);
    EXPECT_EQ(differing(), 0);
    QTest::keyClick(window_.get(), Qt::Key_Z, Qt::ControlModifier);
    ASSERT_TRUE(waitIdle());
    EXPECT_EQ(failed.count(), 0);
    startReference();  // nnInteractive's own undo is one step: the state after p1, p2 anew
    ASSERT_TRUE(session_->addPoint(p1, true).isOk());
    ASSERT_TRUE(session_->addPoint(p2, false).isOk());
    EXPECT_EQ(differing(), 0);
    // Ctrl+Y: p3 again.
    QTest::keyClick(window_.get(), Qt::Key_Y, Qt::ControlModifier);
    ASSERT_TRUE(waitIdle());
    ASSERT_TRUE(session_->addPoint(p3, true).isOk());
    EXPECT_EQ(differing(), 0);
    EXPECT_EQ(failed.count(), 0);
    // Undo while a prompt runs is refused (its step is not in the history yet).
    (void)click({42, 50, 110});
    ASSERT_TRUE(tool()->busy());
    EXPECT_FALSE(edit()->undo().isOk());
    ASSERT_EQ(failed.count(), 1);
    EXPECT_TRUE(failed.back()[0].toString().contains("still running"));
    ASSERT_TRUE(waitIdle());
}

TEST_F(InteractiveToolTest, BoxAndLassoDragsGiveTheSessionsMask) {
    loadModel();
    startReference();
    QTest::keyClick(window_.get(), Qt::Key_B);
    ASSERT_EQ(tool()->kind(), PromptKind::kBox);
    const std::vector<Point3> box = dragThrough({{28, 24, 22}, {28, 30, 30}, {28, 36, 38}});
    ASSERT_TRUE(waitIdle());
    ASSERT_TRUE(session_->addBox(boxOfDrag(box.front(), box.back(), 0), true).isOk());
    EXPECT_GT(count(session_->target()), 0);
    EXPECT_EQ(differing(), 0);

    // With AutoZoom the box zooms out and refines: the toolbar follows the network calls.
    window_->interactiveToolbar()->autoZoomBox()->setChecked(true);
    QSignalSpy progressed(tool(), &InteractiveTool::progressed);
    const std::vector<Point3> big = dragThrough({{40, 10, 10}, {40, 60, 120}, {40, 90, 150}});
    ASSERT_TRUE(waitIdle());
    ASSERT_GE(progressed.count(), 1);
    const int done = progressed.back()[0].toInt(), planned = progressed.back()[1].toInt();
    std::printf("large box with AutoZoom: %d network calls, %d planned\n", done, planned);
    EXPECT_EQ(done, progressed.count());  // one report per call
    EXPECT_GT(planned, 0);                // it zoomed out, so refinement boxes were planned
    EXPECT_EQ(done, planned);
    window_->interactiveToolbar()->autoZoomBox()->setChecked(false);
    session_->setAutoZoom(true);
    ASSERT_TRUE(session_->addBox(boxOfDrag(big.front(), big.back(), 0), true).isOk());
    session_->setAutoZoom(false);

    QTest::keyClick(window_.get(), Qt::Key_L);
    ASSERT_EQ(tool()->kind(), PromptKind::kLasso);
    const std::vector<Point3> lasso =
        dragThrough({{42, 44, 104}, {42, 44, 116}, {42, 56, 116}, {42, 56, 104}});
    ASSERT_TRUE(waitIdle());
    ASSERT_TRUE(session_->addLasso(closedLasso(onFirstSlice(lasso, 0)), true).isOk());
    EXPECT_EQ(differing(), 0);
}

// docs/interactive-tool.png: the tool at work on the phantom (test package): a box, an include
// point and an exclude point given and applied (the object is the preview in the views, the
// toolbar shows the latency), then a second box being dragged (its outline drawn). Written to a
// temporary folder (checked to be a real image); with VOXSEG_DOC_SCREENSHOTS=<folder> also there.
TEST_F(InteractiveToolTest, ScreenshotOfTheToolAtWork) {
    loadModel();
    // The views only (no series, labels or log docks): the phantom's objects are small.
    for (QDockWidget* dock : window_->findChildren<QDockWidget*>()) dock->hide();
    window_->resize(1300, 760);
    QTest::qWait(100);
    QTest::keyClick(window_.get(), Qt::Key_B);
    ASSERT_EQ(tool()->kind(), PromptKind::kBox);
    (void)dragThrough({{28, 24, 22}, {28, 30, 30}, {28, 36, 38}});
    ASSERT_TRUE(waitIdle());
    QTest::keyClick(window_.get(), Qt::Key_P);
    ASSERT_EQ(tool()->kind(), PromptKind::kPoint);
    (void)click({28, 30, 30});
    (void)click({28, 36, 34}, Qt::ShiftModifier);
    ASSERT_TRUE(waitIdle());
    ASSERT_NE(edit()->preview(), nullptr);
    EXPECT_GT(count(tool()->mask()), 0);
    EXPECT_TRUE(window_->interactiveToolbar()->latencyLabel()->text().contains("ms"));

    // A second box, the mouse still down: its outline is drawn in the view.
    QTest::keyClick(window_.get(), Qt::Key_B);
    MprView* view = window_->view(ViewAxis::kAxial);
    const Geometry g = window_->state()->image().geometry();
    const auto at = [&](double z, double y, double x) {
        return view->widgetPointOfPatient(g.indexToPhysical({x, y, z}));
    };
    QTest::mousePress(view, Qt::LeftButton, Qt::NoModifier, at(28, 20, 18).toPoint());
    const QPointF end = at(28, 40, 42);
    QMouseEvent move(QEvent::MouseMove, end, view->mapToGlobal(end), Qt::NoButton, Qt::LeftButton,
                     Qt::NoModifier);
    QApplication::sendEvent(view, &move);
    EXPECT_NE(tool()->drawingPrompt(), nullptr);
    QTest::qWait(50);
    const QImage img = window_->grabViews(true);
    QTest::mouseRelease(view, Qt::LeftButton, Qt::NoModifier, end.toPoint());
    ASSERT_TRUE(waitIdle());

    ASSERT_FALSE(img.isNull());
    EXPECT_GT(img.width(), 300);
    QTemporaryDir dir;
    ASSERT_TRUE(dir.isValid());
    ASSERT_TRUE(img.save(dir.filePath("interactive-tool.png")));
    if (const char* out = std::getenv("VOXSEG_DOC_SCREENSHOTS"))
        ASSERT_TRUE(img.save(QDir(out).filePath("interactive-tool.png")));
}

// The label map replayed from the recovery journal: by the library alone (the recorded
// objects, as crash recovery and `voxseg edit` without a model replay it), or rerunning every
// prompt with the model through InteractiveEditor (as `voxseg edit --interactive-model`).
Volume replayedLabelMap(const std::string& journal, const Volume& image,
                        ei::InteractiveModel* model, std::vector<int64_t>* recorded_differs) {
    auto base = io::readImage(std::filesystem::path(journal).parent_path() / "base.nrrd");
    EXPECT_TRUE(base.isOk()) << base.status().toString();
    auto editor = edit::LabelEditor::create(image, *base);
    EXPECT_TRUE(editor.isOk()) << editor.status().toString();
    if (!model) {
        EXPECT_TRUE(edit::replayJournal(journal, *editor).isOk());
        return editor->labelMap();
    }
    ei::InteractiveSession session(model->spec(), model->forward());
    EXPECT_TRUE(session.setImage(image).isOk());
    ei::InteractiveEditor interactive(*editor, session);
    auto lines = edit::readJournal(journal);
    EXPECT_TRUE(lines.isOk()) << lines.status().toString();
    for (const edit::JournalLine& l : *lines) {
        auto r = interactive.apply(l.op);
        EXPECT_TRUE(r.isOk()) << "line " << l.line << ": " << r.status().toString();
        if (r.isOk() && r->recorded_differs) recorded_differs->push_back(*r->recorded_differs);
    }
    return editor->labelMap();
}

TEST_F(InteractiveToolTest, NextObjectWritesTheObjectAsAnUndoableJournalledPromptStep) {
    loadModel();
    QTest::keyClick(window_.get(), Qt::Key_P);
    (void)click({28, 30, 30});
    (void)click({28, 36, 34}, Qt::ShiftModifier);
    // Next object while the prompts still run: queued after them.
    const int label = edit()->activeLabel();
    QTest::keyClick(window_.get(), Qt::Key_E);
    std::vector<uint8_t> object;
    Index3 shape{};
    QObject::connect(tool(), &InteractiveTool::objectAccepted,
                     [&](const std::vector<uint8_t>& m, Index3 s) {
                         object = m;
                         shape = s;
                     });
    ASSERT_TRUE(waitIdle());
    ASSERT_GT(count(object), 0);
    ViewerState* s = window_->state();
    ASSERT_TRUE(s->hasLabelMap());
    const auto labelMapDiffers = [&](const Volume& other) {
        int64_t n = 0;
        for (int64_t z = 0; z < shape[0]; ++z)
            for (int64_t y = 0; y < shape[1]; ++y)
                for (int64_t x = 0; x < shape[2]; ++x) {
                    const int64_t i = (z * shape[1] + y) * shape[2] + x;
                    const int r = visitPixels(other, [&](const auto* p) { return int(p[i]); });
                    n += r != s->labelValue({x, y, z});
                }
        return n;
    };
    int64_t wrong = 0, painted = 0;
    for (int64_t z = 0; z < shape[0]; ++z)
        for (int64_t y = 0; y < shape[1]; ++y)
            for (int64_t x = 0; x < shape[2]; ++x) {
                const bool in = object[(z * shape[1] + y) * shape[2] + x] != 0;
                const int v = s->labelValue({x, y, z});
                wrong += (v == label) != in;
                painted += v == label;
            }
    EXPECT_EQ(wrong, 0);
    EXPECT_EQ(painted, count(object));
    // A new object in a new label; the tool's object is cleared.
    EXPECT_EQ(edit()->activeLabel(), label + 1);
    EXPECT_EQ(count(tool()->mask()), 0);

    // The journal holds the session's settings, the prompts and the accept with its object.
    const std::string journal = edit()->journalPath().toStdString();
    auto lines = edit::readJournal(journal);
    ASSERT_TRUE(lines.isOk()) << lines.status().toString();
    std::vector<std::string> ops;
    for (const edit::JournalLine& l : *lines) ops.push_back(edit::opName(l.op.kind));
    ASSERT_EQ(ops, (std::vector<std::string>{"prompt_session", "prompt_point", "prompt_point",
                                             "prompt_accept"}));
    const edit::EditOp& settings = (*lines)[0].op;
    EXPECT_EQ(settings.precision, tool()->precisionName().toStdString());
    EXPECT_FALSE(settings.autozoom);  // loadModel() turns it off
    EXPECT_TRUE(settings.restart);    // the model's first session
    EXPECT_EQ(settings.network_sha256.size(), 64u);
    EXPECT_FALSE((*lines)[2].op.include);
    EXPECT_EQ((*lines)[3].op.label, label);
    ASSERT_TRUE((*lines)[3].op.object.has_value());

    // Replayed from the recorded object, and rerun with the model: the same map.
    EXPECT_EQ(labelMapDiffers(replayedLabelMap(journal, s->image(), nullptr, nullptr)), 0);
    startReference();
    std::vector<int64_t> recorded_differs;
    EXPECT_EQ(
        labelMapDiffers(replayedLabelMap(journal, s->image(), model_.get(), &recorded_differs)), 0);
    EXPECT_EQ(recorded_differs, std::vector<int64_t>{0});

    // Undo takes the object out of the label and gives it back to the session; two more undo
    // the prompts.
    ASSERT_TRUE(edit()->undo().isOk());
    ASSERT_TRUE(waitIdle());
    EXPECT_EQ(s->labelValue({30, 30, 28}), 0);
    EXPECT_EQ(tool()->mask(), object);
    while (edit()->canUndo()) {
        ASSERT_TRUE(edit()->undo().isOk());
        ASSERT_TRUE(waitIdle());
    }
    EXPECT_EQ(count(tool()->mask()), 0);

    // Ending the edit session (closing, discarding, another label map) ends the interactive
    // one too: an open object is cleared, and the next journal starts with a restart line, so
    // its replay starts from the same empty object.
    (void)click({28, 30, 30});
    ASSERT_TRUE(waitIdle());
    ASSERT_GT(count(tool()->mask()), 0);
    (void)click({28, 36, 34});  // still running when the session ends: journalled nowhere
    ASSERT_TRUE(tool()->busy());
    edit()->endSession(false);
    ASSERT_TRUE(waitIdle());
    EXPECT_EQ(count(tool()->mask()), 0);
    EXPECT_FALSE(edit()->hasSession());  // the late prompt did not start a journal
    const Point3 p = click({42, 50, 110});
    ASSERT_TRUE(waitIdle());
    auto again = edit::readJournal(edit()->journalPath().toStdString());
    ASSERT_TRUE(again.isOk()) << again.status().toString();
    ASSERT_EQ(again->size(), 2u);
    EXPECT_EQ((*again)[0].op.kind, edit::OpKind::kPromptSession);
    EXPECT_TRUE((*again)[0].op.restart);
    EXPECT_EQ((*again)[1].op.kind, edit::OpKind::kPromptPoint);
    startReference();
    ASSERT_TRUE(session_->addPoint(p, true).isOk());
    EXPECT_EQ(differing(), 0);  // the object of the new point alone
}

// A crash while an object is open: the restored journal gives the object back once the model is
// loaded, with its prompts undoable, and a prompt after it goes on as in one session.
TEST_F(InteractiveToolTest, ARestoredJournalGivesTheOpenObjectBack) {
    loadModel();
    startReference();
    QTest::keyClick(window_.get(), Qt::Key_P);
    const Point3 p1 = click({28, 30, 30});
    const Point3 p2 = click({28, 36, 34}, Qt::ShiftModifier);
    ASSERT_TRUE(waitIdle());
    const std::vector<uint8_t> open = tool()->mask();
    ASSERT_GT(count(open), 0);
    // The viewer stops: its edit session ends with the recovery folder kept, the tool's session
    // is lost.
    edit()->endSession(true);
    ASSERT_TRUE(waitIdle());
    ASSERT_EQ(count(tool()->mask()), 0);
    const auto info = edit()->pendingRecovery();
    ASSERT_TRUE(info.has_value());
    ASSERT_TRUE(edit()->restore(*info).isOk());
    ASSERT_TRUE(waitIdle());
    EXPECT_EQ(tool()->mask(), open);  // the model was loaded: rebuilt at once
    // Its prompts undo one by one, as before the crash.
    ASSERT_TRUE(edit()->undo().isOk());
    ASSERT_TRUE(waitIdle());
    ASSERT_TRUE(session_->addPoint(p1, true).isOk());
    EXPECT_EQ(differing(), 0);
    ASSERT_TRUE(edit()->redo().isOk());
    ASSERT_TRUE(waitIdle());
    ASSERT_TRUE(session_->addPoint(p2, false).isOk());
    EXPECT_EQ(differing(), 0);
    // A prompt after the restore continues the object (no restart line).
    const Point3 p3 = click({42, 50, 110});
    ASSERT_TRUE(waitIdle());
    ASSERT_TRUE(session_->addPoint(p3, true).isOk());
    EXPECT_EQ(differing(), 0);
    auto lines = edit::readJournal(edit()->journalPath().toStdString());
    ASSERT_TRUE(lines.isOk());
    int restarts = 0;
    for (const auto& l : *lines)
        restarts += l.op.kind == edit::OpKind::kPromptSession && l.op.restart;
    EXPECT_EQ(restarts, 1);  // the first line only

    // Restored while the model is still loading: rebuilt once the load finishes, from the
    // journal as it is then (the third point included).
    const std::vector<uint8_t> three = tool()->mask();
    edit()->endSession(true);
    ASSERT_TRUE(waitIdle());
    tool()->loadModel(QString::fromStdString(kData + "/model"));
    ASSERT_TRUE(tool()->modelPending());
    const auto again = edit()->pendingRecovery();
    ASSERT_TRUE(again.has_value());
    ASSERT_TRUE(edit()->restore(*again).isOk());
    ASSERT_TRUE(waitIdle());
    EXPECT_EQ(tool()->mask(), three);
}

TEST_F(InteractiveToolTest, ErrorsAreReportedAndLoseNothing) {
    QSignalSpy failed(edit(), &EditController::editFailed);
    QTest::keyClick(window_.get(), Qt::Key_P);
    (void)click({28, 30, 30});
    ASSERT_GE(failed.count(), 1);
    EXPECT_TRUE(failed.back()[0].toString().contains("no interactive model"))
        << failed.back()[0].toString().toStdString();
    EXPECT_EQ(tool()->pending(), 0);

    tool()->loadModel("/nonexistent/interactive-model");
    ASSERT_TRUE(QTest::qWaitFor([&] { return !tool()->modelPending(); }, kPromptTimeoutMs));
    EXPECT_FALSE(tool()->hasModel());
    EXPECT_TRUE(failed.back()[0].toString().contains("/nonexistent/interactive-model"))
        << failed.back()[0].toString().toStdString();

    // A prompt outside the image (the session refuses it); the object so far stays.
    loadModel();
    (void)click({28, 30, 30});
    ASSERT_TRUE(waitIdle());
    const std::vector<uint8_t> before = tool()->mask();
    ASSERT_GT(count(before), 0);
    Prompt outside;
    outside.points = {{-5.0, 30.0, 30.0}};
    ASSERT_TRUE(tool()->submit(outside).isOk());
    ASSERT_TRUE(waitIdle());
    EXPECT_TRUE(failed.back()[0].toString().contains("point prompt"))
        << failed.back()[0].toString().toStdString();
    EXPECT_EQ(tool()->mask(), before);
}

// A package made for coarser images than the one shown: the toolbar says so before the first
// prompt (the findings in its tooltip), prompts still run, and a package without
// intended_input shows nothing.
TEST_F(InteractiveToolTest, AnImageOutsideTheModelsIntendedInputIsShownAsAWarning) {
    loadModel();
    InteractiveToolbar* bar = window_->interactiveToolbar();
    EXPECT_FALSE(bar->inputWarningShown());
    EXPECT_TRUE(tool()->inputFindings().isEmpty());

    QTemporaryDir dir;
    ASSERT_TRUE(dir.isValid());
    const std::filesystem::path copy = dir.filePath("model").toStdString();
    std::filesystem::copy(kData + "/model", copy);
    nlohmann::json model = nlohmann::json::parse(std::ifstream(copy / "model.json"));
    const Vec3 sp = window_->state()->image().geometry().spacing;
    const double finest = std::min({sp[0], sp[1], sp[2]});
    model["intended_input"] = {{"spacing_mm", {finest * 2, finest * 10}}};
    std::ofstream(copy / "model.json") << model.dump(2);
    QSignalSpy changed(tool(), &InteractiveTool::inputFindingsChanged);
    tool()->loadModel(QString::fromStdString(copy.string()));
    ASSERT_TRUE(QTest::qWaitFor([&] { return !tool()->modelPending(); }, kPromptTimeoutMs));
    ASSERT_TRUE(tool()->hasModel());
    EXPECT_GE(changed.count(), 1);
    ASSERT_EQ(tool()->inputFindings().size(), 1);
    EXPECT_TRUE(bar->inputWarningShown());
    EXPECT_TRUE(bar->inputWarning()->toolTip().contains("input spacing"))
        << bar->inputWarning()->toolTip().toStdString();
    QTest::keyClick(window_.get(), Qt::Key_P);
    (void)click({28, 30, 30});
    ASSERT_TRUE(waitIdle());
    EXPECT_GT(count(tool()->mask()), 0);

    loadModel();  // the package without intended_input again
    EXPECT_FALSE(bar->inputWarningShown());
}

TEST(InteractivePrompt, BoxOfDragIsOneVoxelThickOnTheSlice) {
    const ei::BoxRequest b = boxOfDrag({10.2, 5.6, 9.0}, {10.4, 2.2, 3.0}, 0);
    EXPECT_EQ(b.lo, (std::array<double, 3>{10, 2, 3}));
    EXPECT_EQ(b.hi, (std::array<double, 3>{11, 7, 10}));
    const auto l = closedLasso({{1, 1, 1}, {1, 4, 1}, {1, 4, 4}});
    ASSERT_EQ(l.size(), 4u);
    EXPECT_EQ(l.back(), l.front());
    EXPECT_EQ(onFirstSlice({{2.4, 1, 1}, {3.1, 2, 2}}, 0)[1][0], 2.0);
}

}  // namespace
}  // namespace voxseg::ui
