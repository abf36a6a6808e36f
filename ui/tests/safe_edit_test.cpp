// Safe editing in the viewer (issue 39 item 3), driven as a user would on the real main window:
// threshold, grow and level trace draw what a click would paint before anything is committed
// (and the click commits exactly that), the default masking protects other labels, the islands
// ops say what they removed, keys typed into a field stay there while the views' keys follow the
// mouse, a click that takes the focus back does not move the crosshair, and a range with lower
// above upper is refused.
#include "edit/edit_op.h"
#include "ui/edit_controller.h"
#include "ui/edit_toolbar.h"
#include "ui/label_table.h"
#include "ui/mpr_view.h"
#include "ui/tests/viewer_test_support.h"
#include "ui/viewer_state.h"

#include <gtest/gtest.h>

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QStatusBar>
#include <QTableWidget>

#include <set>

namespace voxseg::ui {
namespace {

using Voxel = std::array<int64_t, 3>;

class SafeEditTest : public ::testing::Test {
  protected:
    void SetUp() override {
        window_ = std::make_unique<MainWindow>();
        ASSERT_NO_FATAL_FAILURE(showActive(*window_, 1300, 760));
        const std::string folder = writeSeries(dir_);
        ASSERT_TRUE(
            runTask(*window_, [&] { window_->openPath(QString::fromStdString(folder)); }).ok);
        const std::string labels =
            writePhantomLabelMap(state()->image().geometry(), dir_ / "labels.nii.gz");
        ASSERT_TRUE(runTask(*window_, [&] {
                        window_->loadSegmentation(QString::fromStdString(labels));
                    }).ok);
        state()->setCursor({14, 18, 12});  // the dense sphere's centre slice
    }
    void TearDown() override {
        if (window_) window_->editController()->endSession(false);
    }
    ViewerState* state() { return window_->state(); }
    EditController* edit() { return window_->editController(); }
    EditToolbar* toolbar() { return window_->editToolbar(); }
    MprView* axial() { return window_->view(ViewAxis::kAxial); }
    QPoint at(const Voxel& v) {
        const auto s = state()->frame(ViewAxis::kAxial).screen(v);
        return axial()
            ->widgetPointOfPixel(static_cast<double>(s[0]), static_cast<double>(s[1]))
            .toPoint();
    }
    void hover(MprView* view, const QPoint& p) {
        QMouseEvent move(QEvent::MouseMove, p, view->mapToGlobal(p), Qt::NoButton, Qt::NoButton,
                         Qt::NoModifier);
        QApplication::sendEvent(view, &move);
    }
    void setRange(double lo, double hi) {
        toolbar()->rangeMinBox()->setValue(lo);
        toolbar()->rangeMaxBox()->setValue(hi);
        toolbar()->rangeBox()->setChecked(true);
    }
    // Voxels of axial slice k whose label is `label`.
    std::set<int64_t> labelled(int label, int64_t k) {
        std::set<int64_t> out;
        for (int64_t j = 0; j < kRows; ++j)
            for (int64_t i = 0; i < kColumns; ++i)
                if (state()->labelValue({i, j, k}) == label)
                    out.insert(i + kColumns * (j + kRows * k));
        return out;
    }
    std::set<int64_t> previewed() {
        const edit::EditPreview* p = edit()->preview();
        return p ? std::set<int64_t>(p->voxels.begin(), p->voxels.end()) : std::set<int64_t>{};
    }

    testing::TempDir dir_;
    std::unique_ptr<MainWindow> window_;
};

// Threshold shows the in-range voxels of each view's slice as the range changes; nothing is
// painted until the click, which paints exactly them; other labels are protected by default.
TEST_F(SafeEditTest, ThresholdPreviewFollowsTheRangeAndTheClickPaintsExactlyIt) {
    EXPECT_EQ(edit()->overwrite().mode, edit::Overwrite::Mode::kBackground);
    EXPECT_EQ(toolbar()->overwriteBox()->currentData().toInt(), 0);  // "Only background"
    edit()->setActiveLabel(3);
    setRange(0, 100);  // the body (40 HU), not the sphere (300) nor air
    QTest::keyClick(window_.get(), Qt::Key_5);
    ASSERT_EQ(edit()->tool(), EditTool::kThreshold);
    const int journal = edit()->journalLines();
    // The axial slice's part: body voxels that are background (the box, label 2, is protected).
    std::set<int64_t> expected;
    for (int j = 0; j < kRows; ++j)
        for (int i = 0; i < kColumns; ++i)
            if (phantomHu(i, j, 12) == 40 && state()->labelValue({i, j, 12}) == 0)
                expected.insert(i + kColumns * (j + kRows * 12));
    ASSERT_FALSE(expected.empty());
    std::set<int64_t> in_axial;
    for (int64_t v : previewed())
        if (v / (kColumns * kRows) == 12) in_axial.insert(v);
    EXPECT_EQ(in_axial, expected);
    EXPECT_EQ(axial()->previewPixels(), static_cast<int>(expected.size()));
    EXPECT_GT(window_->view(ViewAxis::kCoronal)->previewPixels(), 0);
    EXPECT_TRUE(labelled(3, 12).empty()) << "a preview paints nothing";
    EXPECT_EQ(edit()->journalLines(), journal);
    // The drawn view shows it: the pixel of a previewed voxel differs from the bare slice.
    const QPoint body = at({20, 8, 12});
    ASSERT_TRUE(expected.count(20 + kColumns * (8 + kRows * 12)));
    const QColor with = axial()->grab().toImage().pixelColor(body);
    // The range moves: 40 HU leaves it, the preview empties.
    toolbar()->rangeMaxBox()->setValue(30);
    EXPECT_EQ(edit()->preview(), nullptr);
    EXPECT_EQ(axial()->previewPixels(), 0);
    EXPECT_NE(axial()->grab().toImage().pixelColor(body), with);
    toolbar()->rangeMaxBox()->setValue(100);
    ASSERT_NE(edit()->preview(), nullptr);
    // The click paints exactly the previewed voxels of the clicked slice; labels 1 and 2 stay.
    const std::set<int64_t> sphere = labelled(1, 12), box = labelled(2, 12);
    QTest::mouseClick(axial(), Qt::LeftButton, Qt::NoModifier, body);
    EXPECT_EQ(labelled(3, 12), expected);
    EXPECT_EQ(labelled(1, 12), sphere);
    EXPECT_EQ(labelled(2, 12), box);
    EXPECT_EQ(edit()->journalLines(), journal + 1);
    // Esc cancels: the tool is dropped and nothing previewed is left.
    ASSERT_TRUE(edit()->undo().isOk());
    ASSERT_NE(edit()->preview(), nullptr);
    QTest::keyClick(window_.get(), Qt::Key_Escape);
    EXPECT_EQ(edit()->tool(), EditTool::kNone);
    EXPECT_EQ(edit()->preview(), nullptr);
    EXPECT_TRUE(labelled(3, 12).empty());
}

// Grow and level trace preview the region from the voxel under the mouse; the click commits it.
TEST_F(SafeEditTest, GrowAndLevelTracePreviewTheRegionUnderTheMouse) {
    edit()->setActiveLabel(3);
    QTest::keyClick(window_.get(), Qt::Key_4);
    ASSERT_EQ(edit()->tool(), EditTool::kGrow);
    const QPoint body = at({20, 8, 12});
    hover(axial(), body);
    // Seed 40 HU +- 100, in the slice: the body's background (not the sphere, not the box).
    std::set<int64_t> expected;
    for (int j = 0; j < kRows; ++j)
        for (int i = 0; i < kColumns; ++i)
            if (phantomHu(i, j, 12) == 40 && state()->labelValue({i, j, 12}) == 0)
                expected.insert(i + kColumns * (j + kRows * 12));
    EXPECT_EQ(previewed(), expected);
    EXPECT_EQ(axial()->previewPixels(), static_cast<int>(expected.size()));
    EXPECT_TRUE(labelled(3, 12).empty());
    QTest::mouseClick(axial(), Qt::LeftButton, Qt::NoModifier, body);
    EXPECT_EQ(labelled(3, 12), expected);
    EXPECT_EQ(edit()->preview(), nullptr) << "nothing more to paint from there";
    // Level trace over the sphere: its slice disk, previewed, then nothing once the mouse left.
    QTest::keyClick(window_.get(), Qt::Key_3);
    ASSERT_EQ(edit()->tool(), EditTool::kLevelTrace);
    edit()->setOverwrite({edit::Overwrite::Mode::kAll, 0});
    hover(axial(), at({14, 18, 12}));
    const std::set<int64_t> sphere = labelled(1, 12);
    EXPECT_EQ(previewed(), sphere);
    EXPECT_EQ(labelled(3, 12), expected) << "still only the grown voxels";
    QEvent leave(QEvent::Leave);
    QApplication::sendEvent(axial(), &leave);
    EXPECT_EQ(edit()->preview(), nullptr);
}

// Keep largest / remove small islands say what they removed: islands, voxels, mL.
TEST_F(SafeEditTest, IslandsOpsSayWhatTheyRemoved) {
    const Geometry& g = state()->image().geometry();
    auto paint = [&](const Voxel& c, double r) {
        edit::EditOp op;
        op.kind = edit::OpKind::kPaint;
        op.label = 3;
        op.radius_mm = r;
        op.points = {g.indexToPhysical(
            {static_cast<double>(c[0]), static_cast<double>(c[1]), static_cast<double>(c[2])})};
        ASSERT_TRUE(edit()->apply(op).isOk());
    };
    paint({30, 20, 6}, 4.0);  // the largest
    paint({8, 16, 3}, 1.0);
    paint({8, 16, 20}, 1.0);
    edit()->flushStatistics();
    const int64_t before = state()->labels().at(state()->rowOfLabel(3)).voxels;
    int64_t small = 0;  // the two small balls' voxels
    for (int k = 0; k < kSlices; ++k)
        for (int j = 0; j < kRows; ++j)
            for (int i = 0; i < kColumns; ++i)
                small += state()->labelValue({i, j, k}) == 3 && i < 20;
    ASSERT_GT(small, 0);
    edit()->setActiveLabel(3);
    QTest::keyClick(window_.get(), Qt::Key_7);  // keep the largest island
    const double ml = static_cast<double>(small) * 0.9 * 0.9 * 1.5 / 1000.0;
    const QString expected =
        QString("removed 2 islands, %1 voxels, %2 mL").arg(small).arg(ml, 0, 'f', 3);
    EXPECT_TRUE(edit()->lastReport().contains(expected)) << edit()->lastReport().toStdString();
    EXPECT_TRUE(edit()->lastReport().contains("Keep largest island of label 3 (3)"))
        << edit()->lastReport().toStdString();
    EXPECT_EQ(window_->statusBar()->currentMessage(), edit()->lastReport());
    edit()->flushStatistics();
    EXPECT_EQ(state()->labels().at(state()->rowOfLabel(3)).voxels, before - small);
    // Nothing left to remove: it says so.
    ASSERT_TRUE(edit()->keepLargestIsland().isOk());
    EXPECT_TRUE(edit()->lastReport().endsWith("nothing removed"))
        << edit()->lastReport().toStdString();
}

// Keys: a digit typed into a field goes to the field and a range with lower above upper is
// refused; arrows over a view scroll it, not the focused table; the click that takes the focus
// back from the table does not move the crosshair; the tool keys work with the table focused.
TEST_F(SafeEditTest, KeysGoToFieldsOrTheViewUnderTheMouseAndFocusClicksDoNotMoveTheCrosshair) {
    setRange(200, 400);
    ASSERT_TRUE(edit()->range());
    QDoubleSpinBox* upper = toolbar()->rangeMaxBox();
    window_->resize(1800, 860);  // the whole edit toolbar in view (no overflow menu)
    ASSERT_TRUE(QTest::qWaitFor([&] { return upper->isVisible(); }, 2000))
        << "toolbar " << toolbar()->width();
    QApplication::processEvents();
    upper->setFocus();
    ASSERT_TRUE(QTest::qWaitFor([&] { return upper->hasFocus(); }, 2000));
    hover(axial(), axial()->rect().center());  // the mouse rests over a view
    upper->selectAll();
    QTest::keyClick(upper, Qt::Key_5);
    EXPECT_EQ(edit()->tool(), EditTool::kNone) << "the digit went to the field, not the tools";
    QTest::keyClick(upper, Qt::Key_Return);
    EXPECT_EQ(upper->value(), 5.0);
    EXPECT_FALSE(toolbar()->rangeValid());
    EXPECT_FALSE(upper->styleSheet().isEmpty()) << "marked";
    ASSERT_TRUE(edit()->range());
    EXPECT_EQ(*edit()->range(), (std::pair<double, double>{200.0, 400.0})) << "not accepted";
    EXPECT_TRUE(window_->statusBar()->currentMessage().contains("above the upper bound"))
        << window_->statusBar()->currentMessage().toStdString();
    upper->setValue(500);
    EXPECT_TRUE(toolbar()->rangeValid());
    EXPECT_EQ(*edit()->range(), (std::pair<double, double>{200.0, 500.0}));

    // The label table has the focus, the mouse is over the axial view: arrows scroll it.
    QTableWidget* table = window_->labelTable()->table();
    table->setFocus();
    table->setCurrentCell(1, 0);
    ASSERT_TRUE(QTest::qWaitFor([&] { return table->hasFocus(); }, 2000));
    const int64_t slice = state()->slice(ViewAxis::kAxial);
    hover(axial(), axial()->rect().center());
    QTest::keyClick(table, Qt::Key_Up);
    EXPECT_EQ(state()->slice(ViewAxis::kAxial), slice + 1);
    EXPECT_EQ(table->currentRow(), 1) << "the table did not move";
    axial()->setZoom(2.0);
    QTest::keyClick(table, Qt::Key_R);  // reset zoom: the view's key, not the table's search
    EXPECT_EQ(axial()->zoom(), 1.0);
    // Tool keys work with the table focused.
    QTest::keyClick(table, Qt::Key_1);
    EXPECT_EQ(edit()->tool(), EditTool::kPaint);
    QTest::keyClick(window_.get(), Qt::Key_Escape);
    ASSERT_EQ(edit()->tool(), EditTool::kNone);

    // Clicking the view to take the focus back: the crosshair stays; the next click moves it.
    const Voxel cursor = state()->cursor();
    const QPoint elsewhere = at({30, 10, cursor[2]});
    QTest::mouseClick(axial(), Qt::LeftButton, Qt::NoModifier, elsewhere);
    EXPECT_TRUE(axial()->hasFocus());
    EXPECT_EQ(state()->cursor(), cursor);
    QTest::mouseClick(axial(), Qt::LeftButton, Qt::NoModifier, elsewhere);
    EXPECT_EQ(state()->cursor()[0], 30);
    EXPECT_EQ(state()->cursor()[1], 10);
}

}  // namespace
}  // namespace voxseg::ui
