// Several series open at once (issue 39 item 5) on the real main window: a current and a
// "prior" phantom series on different grids (0.9 x 0.9 x 1.5 mm LPS, and 0.7 x 0.7 x 3 mm stored
// right-to-left and feet-first, shifted), opened side by side; linked crosshairs move the other
// series to the same patient point (voxel indices worked out by hand from the written IPP, IOP
// and spacing), clamped and marked outside beyond it; unlinked (K) the other stays; "Make
// active" moves the label table to the other series and back; closing one keeps the other; the
// series browser's "Open beside" and Ctrl+double-click. A screenshot of two series side by side
// for docs/viewer-series.md (VOXSEG_DOC_SCREENSHOTS).
#include "ui/edit_controller.h"
#include "ui/label_table.h"
#include "ui/measure_tool.h"
#include "ui/mpr_view.h"
#include "ui/series_area.h"
#include "ui/series_browser.h"
#include "ui/series_link.h"
#include "ui/series_pane.h"
#include "ui/surface_view.h"
#include "ui/tests/viewer_test_support.h"
#include "ui/viewer_state.h"

#include <gtest/gtest.h>

#include <QAction>
#include <QApplication>
#include <QDir>
#include <QLabel>
#include <QPushButton>
#include <QSlider>
#include <QSplitter>
#include <QTableWidget>
#include <QTreeWidget>

#include <climits>
#include <cmath>
#include <filesystem>

namespace voxseg::ui {
namespace {

namespace fs = std::filesystem;

// The prior: IOP (-1, 0, 0, 0, 1, 0), so columns run to the patient's right and the slice
// normal points to the feet; 0.7 mm pixels, 3 mm slices, first IPP (30, 5, 40).
void priorGrid(io::SynthSeriesSpec& spec) {
    spec.row_dir = {-1, 0, 0};
    spec.col_dir = {0, 1, 0};
    spec.column_spacing = 0.7;
    spec.row_spacing = 0.7;
    spec.slice_spacing = 3.0;
    spec.origin = {30, 5, 40};
    spec.description = "prior";
    spec.series_number = 7;
    // The same phantom where it lies in the patient: the current series' voxel nearest to this
    // voxel's centre (air beyond it), as a prior of the same patient on another grid shows it.
    spec.value = [](int i, int j, int k) {
        const double x = 30 - 0.7 * i, y = 5 + 0.7 * j, z = 40 - 3.0 * k;
        const long ci = std::lround(x / 0.9), cj = std::lround(y / 0.9), ck = std::lround(z / 1.5);
        if (ci < 0 || cj < 0 || ck < 0 || ci >= kColumns || cj >= kRows || ck >= kSlices)
            return -1000 + 1024;
        return phantomHu(int(ci), int(cj), int(ck)) + 1024;
    };
}

// The patient point (LPS mm) of a voxel of the current series (IPP (0, 0, 0), 0.9 x 0.9 x 1.5).
Vec3 currentPoint(const VoxelIndex& v) { return {v[0] * 0.9, v[1] * 0.9, v[2] * 1.5}; }

// The prior's voxel nearest to an LPS point, and whether it lies inside: x = 30 - 0.7 i,
// y = 5 + 0.7 j, z = 40 - 3 k, whichever way the loader stores the slices (its geometry says).
struct PriorVoxel {
    VoxelIndex voxel;
    bool inside;
};
PriorVoxel priorVoxel(const Vec3& p, const Geometry& loaded) {
    double k = (40 - p[2]) / 3.0;
    if (loaded.direction[8] > 0) k = (kSlices - 1) - k;  // stored head-first
    const double c[3] = {(30 - p[0]) / 0.7, (p[1] - 5) / 0.7, k};
    const int64_t size[3] = {kColumns, kRows, kSlices};
    PriorVoxel out{{0, 0, 0}, true};
    for (int a = 0; a < 3; ++a) {
        out.inside = out.inside && c[a] >= -0.5 && c[a] <= size[a] - 0.5;
        out.voxel[a] = std::clamp<int64_t>(std::llround(c[a]), 0, size[a] - 1);
    }
    return out;
}

class SeriesTest : public ::testing::Test {
  protected:
    void SetUp() override {
        window_ = std::make_unique<MainWindow>();
        ASSERT_NO_FATAL_FAILURE(showActive(*window_, 1400, 860));
        window_->setLayoutMode(MainWindow::Layout::k1x3);
        current_ = writeSeries(dir_, "current");
        prior_ = writeSeries(dir_, "prior", priorGrid);
    }
    void open(const std::string& path, MainWindow::Open how) {
        const TaskResult r =
            runTask(*window_, [&] { window_->openPath(QString::fromStdString(path), how); });
        ASSERT_TRUE(r.finished && r.ok) << r.message.toStdString();
    }
    // The current series (active, with the phantom's two labels) and the prior beside it.
    void openBoth() {
        ASSERT_NO_FATAL_FAILURE(open(current_, MainWindow::Open::kReplace));
        const std::string labels =
            writePhantomLabelMap(window_->state()->image().geometry(), dir_ / "labels.nii.gz");
        ASSERT_TRUE(runTask(*window_, [&] {
                        window_->loadSegmentation(QString::fromStdString(labels));
                    }).ok);
        ASSERT_NO_FATAL_FAILURE(open(prior_, MainWindow::Open::kBeside));
        QTest::qWait(50);
    }
    SeriesArea* area() { return window_->seriesArea(); }
    ViewerState* prior() { return area()->pane(1)->state(); }

    testing::TempDir dir_;
    std::string current_, prior_;
    std::unique_ptr<MainWindow> window_;
};

TEST_F(SeriesTest, TwoSeriesOpenSideBySide) {
    ASSERT_NO_FATAL_FAILURE(openBoth());
    ASSERT_EQ(area()->paneCount(), 2);
    EXPECT_EQ(area()->seriesCount(), 2);
    EXPECT_EQ(area()->activeIndex(), 0);
    // The active series is the one opened first; the prior has its own image and views.
    EXPECT_EQ(window_->state()->source().toStdString(), current_);
    ASSERT_TRUE(prior()->hasImage());
    EXPECT_EQ(prior()->image().geometry().size, (std::array<int64_t, 3>{kColumns, kRows, kSlices}));
    EXPECT_NEAR(prior()->image().geometry().spacing[2], 3.0, 1e-6);
    for (SeriesPane* pane : {area()->pane(0), area()->pane(1)}) {
        EXPECT_TRUE(pane->isVisible());
        EXPECT_TRUE(pane->titleLabel()->isVisible());  // the headers, with several series
        EXPECT_GT(pane->height(), 150);
    }
    EXPECT_TRUE(area()->pane(1)->titleLabel()->text().contains("prior"));
    EXPECT_TRUE(area()->pane(0)->titleLabel()->text().contains("active"));
    // Both drawn: the prior's axial view shows its phantom (body pixels are not black).
    MprView* prior_axial = area()->pane(1)->view(ViewAxis::kAxial);
    ASSERT_TRUE(prior_axial->isVisible());
    const QImage slice = prior_axial->sliceImage();
    ASSERT_FALSE(slice.isNull());
    EXPECT_NE(slice.pixel(slice.width() / 2, slice.height() / 2), qRgb(0, 0, 0));
    // The label table is the active series': the phantom's two labels.
    EXPECT_EQ(window_->labelTable()->table()->rowCount(), 2);
    EXPECT_FALSE(prior()->hasLabelMap());
}

TEST_F(SeriesTest, LinkedCrosshairMovesTheOtherSeriesToTheSamePatientPoint) {
    ASSERT_NO_FATAL_FAILURE(openBoth());
    ASSERT_TRUE(window_->linkAction()->isChecked());  // linked by default
    const Geometry prior_grid = prior()->image().geometry();
    // Stored as written: columns to the patient's right (the slices' order is read below).
    ASSERT_NEAR(prior_grid.direction[0], -1, 1e-6);
    ASSERT_NEAR(prior_grid.direction[4], 1, 1e-6);
    // A click in the current series' axial view.
    MprView* axial = window_->view(ViewAxis::kAxial);
    const VoxelIndex target{10, 8, window_->state()->cursor()[2]};
    const auto s = window_->state()->frame(ViewAxis::kAxial).screen(target);
    QTest::mouseClick(axial, Qt::LeftButton, Qt::NoModifier,
                      axial->widgetPointOfPixel(double(s[0]), double(s[1])).toPoint());
    ASSERT_EQ(window_->state()->cursor(), target);
    PriorVoxel expect = priorVoxel(currentPoint(target), prior_grid);
    ASSERT_TRUE(expect.inside);
    EXPECT_EQ(prior()->cursor(), expect.voxel);
    EXPECT_FALSE(prior()->cursorOutside());

    // Scrolling the prior (a key in its axial view) moves the current series' slice to the
    // prior's new slice position; its in-plane position stays.
    MprView* prior_axial = area()->pane(1)->view(ViewAxis::kAxial);
    prior_axial->setFocus();
    const int64_t before = prior()->cursor()[2];
    QTest::keyClick(prior_axial, Qt::Key_Up);
    const int64_t k = prior()->cursor()[2];
    ASSERT_NE(k, before);
    const double z = prior_grid.direction[8] > 0 ? 40 - 3.0 * (kSlices - 1 - k) : 40 - 3.0 * k;
    EXPECT_EQ(window_->state()->cursor(),
              (VoxelIndex{10, 8, std::clamp<int64_t>(std::llround(z / 1.5), 0, kSlices - 1)}));

    // A point beyond the prior (x = 0 mm is 42.9 columns from its first): clamped, outside.
    window_->state()->setCursor({0, 8, 12});
    expect = priorVoxel(currentPoint({0, 8, 12}), prior_grid);
    EXPECT_FALSE(expect.inside);
    EXPECT_EQ(prior()->cursor(), expect.voxel);
    EXPECT_EQ(prior()->cursor()[0], kColumns - 1);
    EXPECT_TRUE(prior()->cursorOutside());
    EXPECT_FALSE(window_->state()->cursorOutside());
}

TEST_F(SeriesTest, UnlinkedTheOtherSeriesStays) {
    ASSERT_NO_FATAL_FAILURE(openBoth());
    window_->activateWindow();
    ASSERT_TRUE(QTest::qWaitForWindowActive(window_.get()));
    window_->view(ViewAxis::kAxial)->setFocus();
    QTest::keyClick(window_->view(ViewAxis::kAxial), Qt::Key_K);
    ASSERT_FALSE(window_->linkAction()->isChecked());
    ASSERT_FALSE(area()->link()->linked());
    const VoxelIndex prior_before = prior()->cursor();
    window_->state()->setCursor({12, 10, 3});
    window_->state()->setSlice(ViewAxis::kAxial, 20);
    EXPECT_EQ(prior()->cursor(), prior_before);
    prior()->setCursor({5, 5, 5});
    EXPECT_EQ(window_->state()->cursor(), (VoxelIndex{12, 10, 20}));
    // Linked again: the other series goes to the active one's point.
    QTest::keyClick(window_->view(ViewAxis::kAxial), Qt::Key_K);
    ASSERT_TRUE(area()->link()->linked());
    EXPECT_EQ(prior()->cursor(),
              priorVoxel(currentPoint({12, 10, 20}), prior()->image().geometry()).voxel);
}

TEST_F(SeriesTest, MakeActiveMovesTheLabelTableAndClosingOneKeepsTheOther) {
    ASSERT_NO_FATAL_FAILURE(openBoth());
    const QTableWidget* table = window_->labelTable()->table();
    ASSERT_EQ(table->rowCount(), 2);
    prior()->setWindow({1500, -600});
    // The prior becomes active: the table is its (none), the current series keeps its labels
    // in its pane, and each series stays where it was on screen.
    area()->pane(1)->activateButton()->click();
    QTest::qWait(20);
    EXPECT_EQ(area()->activeIndex(), 1);
    EXPECT_EQ(window_->state()->source().toStdString(), prior_);
    EXPECT_EQ(window_->state()->window().width, 1500);  // its window came with it
    EXPECT_EQ(table->rowCount(), 0);
    ViewerState* left = area()->pane(0)->state();
    EXPECT_EQ(left->source().toStdString(), current_);
    EXPECT_TRUE(left->hasLabelMap());
    EXPECT_TRUE(area()->pane(1)->titleLabel()->text().contains("active"));
    // And back.
    ASSERT_TRUE(window_->makeSeriesActive(0));
    EXPECT_EQ(window_->state()->source().toStdString(), current_);
    EXPECT_EQ(table->rowCount(), 2);
    // Closing the prior keeps the current series and its labels.
    area()->pane(1)->closeButton()->click();
    QTest::qWait(20);
    EXPECT_EQ(area()->paneCount(), 1);
    EXPECT_EQ(window_->state()->source().toStdString(), current_);
    EXPECT_EQ(table->rowCount(), 2);
    EXPECT_FALSE(area()->pane(0)->titleLabel()->isVisible());  // one series: no header
    // Closing the active series: the other one becomes active.
    ASSERT_NO_FATAL_FAILURE(open(prior_, MainWindow::Open::kBeside));
    ASSERT_TRUE(window_->closeSeries(area()->activeIndex()));
    EXPECT_EQ(area()->paneCount(), 1);
    EXPECT_EQ(window_->state()->source().toStdString(), prior_);
    EXPECT_EQ(table->rowCount(), 0);
}

TEST_F(SeriesTest, SeriesBrowserOpensBeside) {
    // One folder with both series: the browser lists them; Load opens one, "Open beside" and
    // Ctrl+double-click the others beside it.
    const std::string study = dir_ / "study";
    fs::create_directories(study);
    fs::copy(current_, fs::path(study) / "a", fs::copy_options::recursive);
    fs::copy(prior_, fs::path(study) / "b", fs::copy_options::recursive);
    ASSERT_NO_FATAL_FAILURE(open(study, MainWindow::Open::kReplace));
    SeriesBrowser* browser = window_->seriesBrowser();
    ASSERT_EQ(browser->seriesCount(), 2);
    QTreeWidgetItem* first = nullptr;
    QTreeWidgetItem* second = nullptr;
    for (QTreeWidgetItemIterator it(browser->tree()); *it; ++it)
        if ((*it)->text(0).startsWith('#')) (first ? second : first) = *it;
    ASSERT_TRUE(first && second);
    browser->tree()->setCurrentItem(first);
    ASSERT_TRUE(runTask(*window_, [&] { emit browser->tree()->itemActivated(first, 0); }).ok);
    EXPECT_EQ(area()->paneCount(), 1);
    browser->tree()->setCurrentItem(second);
    ASSERT_TRUE(runTask(*window_, [&] { browser->besideButton()->click(); }).ok);
    EXPECT_EQ(area()->paneCount(), 2);
    // Ctrl+double-click on a series row: a third pane.
    browser->tree()->scrollToItem(second);
    // Near the row's left end: its columns run past the dock's width.
    const QRect row = browser->tree()->visualItemRect(second);
    const QPoint at(row.left() + 20, row.center().y());
    ASSERT_TRUE(runTask(
                    *window_,
                    [&] {
                        // Through the window, as a real double-click arrives (press, release,
                        // press, double-click).
                        QTest::mouseDClick(window_->windowHandle(), Qt::LeftButton,
                                           Qt::ControlModifier,
                                           browser->tree()->viewport()->mapTo(window_.get(), at));
                    },
                    10000)
                    .ok);
    ASSERT_EQ(area()->paneCount(), 3);
    EXPECT_TRUE(area()->pane(2)->state()->hasImage());
    EXPECT_EQ(area()->activeIndex(), 0);
}

// The mouse moved over `view` at `p`: the other views get their leave event first, as they would
// from the platform (under Xvfb the server's pointer may have entered one when the window was
// shown), then the view its move.
void hover(SeriesArea* area, MprView* view, const QPoint& p) {
    for (MprView* v : area->allViews()) {
        QEvent leave(QEvent::Leave);
        if (v != view) QApplication::sendEvent(v, &leave);
    }
    QMouseEvent move(QEvent::MouseMove, p, view->mapToGlobal(p), Qt::NoButton, Qt::NoButton,
                     Qt::NoModifier);
    QApplication::sendEvent(view, &move);
}
void leave(MprView* view) {
    QEvent e(QEvent::Leave);
    QApplication::sendEvent(view, &e);
}

TEST_F(SeriesTest, SeriesCountIsTheOpenSeriesNotTheSplittersWidgets) {
    // Before any image the splitter holds the (empty) active pane: one widget, no series.
    EXPECT_EQ(static_cast<QSplitter*>(area())->count(), 1);
    EXPECT_EQ(area()->seriesCount(), 0);
    ASSERT_NO_FATAL_FAILURE(open(current_, MainWindow::Open::kReplace));
    EXPECT_EQ(area()->seriesCount(), 1);
    ASSERT_NO_FATAL_FAILURE(open(prior_, MainWindow::Open::kBeside));
    EXPECT_EQ(area()->seriesCount(), 2);
    EXPECT_EQ(static_cast<QSplitter*>(area())->count(), 2);
}

// The status bar reads out the voxel under the mouse of whichever series it is over, the
// series named while several are open; leaving a view shows the active crosshair again.
TEST_F(SeriesTest, HoveringASeriesBesideShowsItsValue) {
    ASSERT_NO_FATAL_FAILURE(openBoth());
    // The active crosshair in air: its read-out says -1000 HU.
    window_->state()->setCursor({0, 0, 12});
    const QString active_text = window_->cursorInfo()->text();
    ASSERT_TRUE(active_text.contains("value -1000 HU")) << active_text.toStdString();
    MprView* prior_axial = area()->pane(1)->view(ViewAxis::kAxial);
    const QPoint p = prior_axial->rect().center();
    const auto voxel = prior_axial->voxelAt(p);
    ASSERT_TRUE(voxel.has_value());
    const double value = prior()->imageValue(*voxel);
    ASSERT_NE(value, -1000);  // in the body, not the active crosshair's air
    hover(area(), prior_axial, p);
    const QString text = window_->cursorInfo()->text();
    EXPECT_TRUE(text.startsWith(prior()->title() + ":")) << text.toStdString();
    EXPECT_TRUE(text.contains(
        QString("voxel (%1, %2, %3)").arg((*voxel)[0]).arg((*voxel)[1]).arg((*voxel)[2])))
        << text.toStdString();
    EXPECT_TRUE(text.contains(QString("value %1 HU").arg(value, 0, 'g', 6))) << text.toStdString();
    EXPECT_FALSE(text.contains("label"));  // the prior has no label map
    // Over the active series: its voxel, under its own title and with its label.
    MprView* axial = window_->view(ViewAxis::kAxial);
    const auto s = window_->state()->frame(ViewAxis::kAxial).screen({14, 18, 12});
    window_->state()->setCursor({14, 18, 12});
    hover(area(), axial, axial->widgetPointOfPixel(double(s[0]), double(s[1])).toPoint());
    EXPECT_TRUE(window_->cursorInfo()->text().startsWith(window_->state()->title() + ":"));
    EXPECT_TRUE(window_->cursorInfo()->text().contains("value 300 HU"));
    EXPECT_TRUE(window_->cursorInfo()->text().contains("label"));
    // The mouse leaves the prior's view: the active crosshair's read-out.
    hover(area(), prior_axial, p);
    leave(prior_axial);
    EXPECT_TRUE(window_->cursorInfo()->text().contains("voxel (14, 18, 12)"))
        << window_->cursorInfo()->text().toStdString();
}

// F maximises the view under the mouse in a series beside too (its own views area), and the
// view keys and tool keys work over, or with the focus in, a series beside.
TEST_F(SeriesTest, ViewKeysWorkOverEverySeries) {
    ASSERT_NO_FATAL_FAILURE(openBoth());
    SeriesPane* beside = area()->pane(1);
    MprView* prior_coronal = beside->view(ViewAxis::kCoronal);
    hover(area(), prior_coronal, prior_coronal->rect().center());
    QTest::keyClick(window_.get(), Qt::Key_F);
    EXPECT_EQ(beside->grid()->maximized(), prior_coronal->parentWidget());
    EXPECT_TRUE(prior_coronal->isVisible());
    EXPECT_FALSE(beside->view(ViewAxis::kAxial)->isVisible());
    EXPECT_FALSE(beside->view(ViewAxis::kSagittal)->isVisible());
    // The active series' views stay as they were.
    EXPECT_EQ(window_->maximizedView(), nullptr);
    EXPECT_TRUE(window_->view(ViewAxis::kAxial)->isVisible());
    QTest::keyClick(window_.get(), Qt::Key_F);
    EXPECT_EQ(beside->grid()->maximized(), nullptr);
    EXPECT_TRUE(beside->view(ViewAxis::kAxial)->isVisible());

    // A slice key with the focus in the label table goes to the series under the mouse.
    leave(prior_coronal);
    MprView* prior_axial = beside->view(ViewAxis::kAxial);
    hover(area(), prior_axial, prior_axial->rect().center());
    window_->labelTable()->table()->setFocus();
    const int64_t k = prior()->cursor()[2];
    QTest::keyClick(window_->labelTable()->table(), Qt::Key_PageUp);
    EXPECT_NE(prior()->cursor()[2], k);
    // Tool keys with the focus in a view beside: the tools of the active series.
    prior_axial->setFocus();
    QTest::keyClick(prior_axial, Qt::Key_M);
    EXPECT_EQ(window_->measureTool()->tool(), MeasureKind::kRuler);
    QTest::keyClick(prior_axial, Qt::Key_1);
    EXPECT_EQ(window_->editController()->tool(), EditTool::kPaint);
    EXPECT_EQ(window_->measureTool()->tool(), MeasureKind::kNone);
    QTest::keyClick(prior_axial, Qt::Key_Escape);
    EXPECT_EQ(window_->editController()->tool(), EditTool::kNone);
}

// The panes share the views area equally in 2x2 (columns) and 1x3 (rows): after opening beside,
// Make active, a layout change and closing one of three; the prior's long header note (another
// frame of reference) does not widen its pane.
TEST_F(SeriesTest, PanesShareTheAreaEqually) {
    window_->setLayoutMode(MainWindow::Layout::k2x2);
    ASSERT_NO_FATAL_FAILURE(openBoth());
    ASSERT_FALSE(area()->pane(1)->titleLabel()->text().isEmpty());
    auto expectEqual = [&](const char* when) {
        QTest::qWait(30);  // the splitter's sizes once laid out
        const bool columns = area()->orientation() == Qt::Horizontal;
        int lo = INT_MAX, hi = 0;
        for (int i = 0; i < area()->paneCount(); ++i) {
            const QSize size = area()->pane(i)->size();
            lo = std::min(lo, columns ? size.width() : size.height());
            hi = std::max(hi, columns ? size.width() : size.height());
        }
        EXPECT_LE(hi - lo, 3) << when << ": " << lo << " to " << hi << " px";
        EXPECT_GT(lo, 100) << when;
    };
    ASSERT_EQ(area()->orientation(), Qt::Horizontal);
    expectEqual("2x2, opened beside");
    ASSERT_TRUE(window_->makeSeriesActive(1));
    expectEqual("2x2, the prior made active");
    ASSERT_TRUE(window_->makeSeriesActive(0));
    expectEqual("2x2, the current made active again");
    window_->setLayoutMode(MainWindow::Layout::k1x3);
    ASSERT_EQ(area()->orientation(), Qt::Vertical);
    expectEqual("1x3");
    window_->setLayoutMode(MainWindow::Layout::k2x2);
    expectEqual("2x2 again");
    ASSERT_NO_FATAL_FAILURE(open(prior_, MainWindow::Open::kBeside));
    ASSERT_EQ(area()->paneCount(), 3);
    expectEqual("2x2, three series");
    // A handle dragged, then one closed: the two left share the area again.
    area()->setSizes({500, 200, 200});
    ASSERT_TRUE(window_->closeSeries(1));
    expectEqual("2x2, one of three closed");
}

// The panel helper both the window's views and a series beside are made with: the slider sets
// its series' slice and takes no focus, a double-click maximises the panel in its grid.
TEST_F(SeriesTest, ASeriesBesideHasTheWindowsViewPanels) {
    ASSERT_NO_FATAL_FAILURE(openBoth());
    SeriesPane* beside = area()->pane(1);
    for (int a = 0; a < 3; ++a) {
        const auto axis = static_cast<ViewAxis>(a);
        MprView* view = beside->view(axis);
        EXPECT_EQ(view->objectName(), QString("mpr_beside_") + viewAxisName(axis));
        QWidget* panel = view->parentWidget();
        ASSERT_EQ(panel->parentWidget(), beside->grid());
        const QList<QSlider*> sliders = panel->findChildren<QSlider*>();
        ASSERT_EQ(sliders.size(), 1);
        QSlider* slider = sliders.front();
        EXPECT_EQ(slider->orientation(), Qt::Vertical);
        EXPECT_EQ(slider->focusPolicy(), Qt::NoFocus);
        EXPECT_EQ(slider->toolTip(), QString("%1 slice").arg(viewAxisName(axis)));
        EXPECT_GT(slider->maximum(), 0);
        // Right of the view, as in the window's panels.
        EXPECT_GE(slider->geometry().left(), view->geometry().right());
        slider->setValue(slider->maximum() - 1);
        EXPECT_EQ(prior()->slice(axis), slider->maximum() - 1);
        emit view->maximizeRequested();
        EXPECT_EQ(beside->grid()->maximized(), panel);
        emit view->maximizeRequested();
        EXPECT_EQ(beside->grid()->maximized(), nullptr);
    }
    // The window's own panels: the same helper, the sliders named for the tests.
    for (int a = 0; a < 3; ++a) {
        const auto axis = static_cast<ViewAxis>(a);
        QSlider* slider = window_->slider(axis);
        EXPECT_EQ(slider->objectName(), QString("slider_") + viewAxisName(axis));
        EXPECT_EQ(slider->parentWidget(), window_->view(axis)->parentWidget());
        EXPECT_EQ(slider->focusPolicy(), Qt::NoFocus);
        const int v = slider->value() == 2 ? 3 : 2;
        slider->setValue(v);
        EXPECT_EQ(window_->state()->slice(axis), v);
    }
}

// Two series side by side for docs/viewer-series.md: the current phantom with its labels
// (active) and the prior on its other grid, linked on the dense sphere's centre, in 2x2.
// (TotalSegmentator's example_ct_sm.nii.gz and example_ct.nii.gz, the pair ../shared/data has on
// one patient, carry the same affine for different anatomy: linked, they show a liver beside a
// pelvis.)
TEST_F(SeriesTest, ScreenshotOfTwoSeries) {
    window_->resize(1500, 930);
    window_->setLayoutMode(MainWindow::Layout::k2x2);
    QTest::qWait(50);
    ASSERT_NO_FATAL_FAILURE(openBoth());
    window_->state()->setCursor({14, 18, 12});
    ASSERT_EQ(area()->paneCount(), 2);
    if (auto* surface = qobject_cast<SurfaceView*>(window_->surfaceView()))
        EXPECT_TRUE(QTest::qWaitFor([&] { return !surface->building(); }, 120000));
    QTest::qWait(100);
    const QImage img = window_->grabViews(true);
    ASSERT_FALSE(img.isNull());
    const QString path = QString::fromStdString(dir_ / "viewer-series.png");
    ASSERT_TRUE(img.save(path));
    if (const char* out = std::getenv("VOXSEG_DOC_SCREENSHOTS"))
        ASSERT_TRUE(img.save(QDir(out).filePath("viewer-series.png")));
}

}  // namespace
}  // namespace voxseg::ui
