// Editing in the viewer (issue 18), driven as a user would (QTest events on the real main
// window, offscreen platform): tools picked by their keys, strokes painted with synthesized
// mouse events land on exactly the voxels whose centres lie within the brush radius of the
// stroke in patient mm (axial, oblique and sagittal series), undo/redo by Ctrl+Z / Ctrl+Y,
// fill between slices, the label table (add, rename, status filter, codes, delete), saving
// (SEG read back by voxseg and highdicom, label map + sidecar), the journal replayed by the
// library reproduces the viewer's map, and crash recovery after kill -9 of a child viewer.
#include "edit/journal.h"
#include "edit/segment_codes.h"
#include "edit/segment_meta.h"
#include "io/acquired_labels.h"
#include "io/dicom_series.h"
#include "io/image_io.h"
#include "io/seg_reader.h"
#include "tests/io/dicom_tools.h"
#include "ui/code_picker.h"
#include "ui/edit_controller.h"
#include "ui/edit_toolbar.h"
#include "ui/label_table.h"
#include "ui/mpr_view.h"
#include "ui/surface_view.h"
#include "ui/tests/viewer_test_support.h"
#include "ui/viewer_state.h"

#include <gtest/gtest.h>

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDir>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QListWidget>
#include <QMessageBox>
#include <QProcess>
#include <QPushButton>
#include <QTableWidget>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

namespace voxseg::ui {
namespace {

namespace fs = std::filesystem;
using Voxel = std::array<int64_t, 3>;

int labelOf(const Volume& v, const Voxel& x) {
    const auto s = v.geometry().size;
    const int64_t idx = x[0] + s[0] * (x[1] + s[1] * x[2]);
    return visitPixels(v, [&](const auto* p) { return static_cast<int>(p[idx]); });
}

double dist2ToSegments(const Vec3& p, const std::vector<Vec3>& line) {
    double best = 1e300;
    for (size_t s = 0; s + 1 < line.size(); ++s) {
        Vec3 ab{}, ap{};
        for (int c = 0; c < 3; ++c) {
            ab[c] = line[s + 1][c] - line[s][c];
            ap[c] = p[c] - line[s][c];
        }
        const double len2 = dot(ab, ab);
        const double t = len2 > 0 ? std::clamp(dot(ap, ab) / len2, 0.0, 1.0) : 0.0;
        double d2 = 0;
        for (int c = 0; c < 3; ++c) {
            const double d = p[c] - (line[s][c] + t * ab[c]);
            d2 += d * d;
        }
        best = std::min(best, d2);
    }
    return best;
}

// A left-button drag through the centres of `pixels` (column, row) of `view`.
void drag(MprView* view, const std::vector<std::pair<int, int>>& pixels, bool release = true) {
    auto at = [&](size_t i) { return view->widgetPointOfPixel(pixels[i].first, pixels[i].second); };
    QTest::mousePress(view, Qt::LeftButton, Qt::NoModifier, at(0).toPoint());
    for (size_t i = 1; i < pixels.size(); ++i) {
        const QPointF p = at(i);
        QMouseEvent move(QEvent::MouseMove, p, view->mapToGlobal(p), Qt::NoButton, Qt::LeftButton,
                         Qt::NoModifier);
        QApplication::sendEvent(view, &move);
    }
    if (release)
        QTest::mouseRelease(view, Qt::LeftButton, Qt::NoModifier, at(pixels.size() - 1).toPoint());
}

class EditTest : public ::testing::Test {
  protected:
    void SetUp() override { window_ = makeWindow(); }
    void TearDown() override {
        // Non-interactive windows keep unsaved edits for recovery: remove the tests' own.
        if (window_) window_->editController()->endSession(false);
    }
    static std::unique_ptr<MainWindow> makeWindow() {
        auto w = std::make_unique<MainWindow>();
        w->setInteractive(false);
        w->resize(1300, 760);
        w->show();
        EXPECT_TRUE(QTest::qWaitForWindowExposed(w.get()));
        // Shortcuts (the tool keys) need the active window; Xvfb has no window manager.
        w->activateWindow();
        EXPECT_TRUE(QTest::qWaitForWindowActive(w.get()));
        return w;
    }
    void open(MainWindow& w, const std::string& folder) {
        const TaskResult r = runTask(w, [&] { w.openPath(QString::fromStdString(folder)); });
        ASSERT_TRUE(r.finished && r.ok) << r.message.toStdString();
    }
    // Label 1 = the dense sphere, label 2 = a box in the body (as the viewer tests load).
    std::string writeLabelMap() {
        return writePhantomLabelMap(window_->state()->image().geometry(), dir_ / "labels.nii.gz");
    }
    void loadLabels() {
        ASSERT_TRUE(runTask(*window_, [&] {
                        window_->loadSegmentation(QString::fromStdString(writeLabelMap()));
                    }).ok);
    }
    EditController* edit() { return window_->editController(); }

    testing::TempDir dir_;
    std::unique_ptr<MainWindow> window_;
};

// One stroke per series orientation, in the view showing the stored slices.
struct OrientationCase {
    const char* name;
    ViewAxis view;
    std::function<void(io::SynthSeriesSpec&)> adjust;
};

std::vector<OrientationCase> orientationCases() {
    return {
        {"axial", ViewAxis::kAxial, {}},
        {"oblique", ViewAxis::kAxial,
         [](io::SynthSeriesSpec& s) {
             const double a = 20 * M_PI / 180, b = 12 * M_PI / 180;
             s.row_dir = {std::cos(a), std::sin(a), 0};
             s.col_dir = {-std::sin(a) * std::cos(b), std::cos(a) * std::cos(b), std::sin(b)};
             s.origin = {-15, -12, 4};
         }},
        {"sagittal", ViewAxis::kSagittal,
         [](io::SynthSeriesSpec& s) {
             s.row_dir = {0, 1, 0};
             s.col_dir = {0, 0, -1};
             s.origin = {-10, -14, 12};
             s.image_type = "ORIGINAL\\PRIMARY\\OTHER";
         }},
    };
}

TEST_F(EditTest, StrokesAtScreenPositionsPaintExactlyTheVoxelsWithinTheRadiusInPatientMm) {
    for (const OrientationCase& oc : orientationCases()) {
        SCOPED_TRACE(oc.name);
        if (window_) window_->editController()->endSession(false);
        window_ = makeWindow();
        open(*window_, writeSeries(dir_, std::string("series_") + oc.name, oc.adjust));
        ViewerState* s = window_->state();
        ASSERT_FALSE(s->hasLabelMap());
        // Paint by its key, a 2.3 mm disk.
        QTest::keyClick(window_.get(), Qt::Key_1);
        ASSERT_EQ(edit()->tool(), EditTool::kPaint);
        EXPECT_TRUE(window_->editToolbar()->toolAction(int(EditTool::kPaint))->isChecked());
        window_->editToolbar()->radiusBox()->setValue(2.3);
        EXPECT_DOUBLE_EQ(edit()->radiusMm(), 2.3);
        MprView* view = window_->view(oc.view);
        const SliceFrame& f = s->frame(oc.view);
        const int64_t slice = s->slice(oc.view);
        const std::vector<std::pair<int, int>> pixels = {{8, 9}, {12, 11}, {17, 12}, {21, 16}};
        const QRgb before = view->sliceImage().pixel(pixels[1].first, pixels[1].second);
        const int repaints = view->labelRepaints();
        drag(view, pixels);
        ASSERT_TRUE(s->hasLabelMap());
        // Expected: voxels of the view's slice whose centre lies within 2.3 mm of the polyline
        // through the pixel centres, computed here in LPS mm from the grid geometry.
        const Geometry g = s->image().geometry();
        std::vector<Vec3> line;
        for (const auto& [c, r] : pixels) {
            const Voxel v = f.voxel(c, r, slice);
            line.push_back(g.indexToPhysical({double(v[0]), double(v[1]), double(v[2])}));
        }
        int64_t expected = 0, wrong = 0;
        for (int64_t k = 0; k < g.size[2]; ++k)
            for (int64_t j = 0; j < g.size[1]; ++j)
                for (int64_t i = 0; i < g.size[0]; ++i) {
                    const Voxel v{i, j, k};
                    const bool in_slice = v[f.axis_n] == slice;
                    const Vec3 p = g.indexToPhysical({double(i), double(j), double(k)});
                    const bool inside = in_slice && dist2ToSegments(p, line) <= 2.3 * 2.3;
                    expected += inside;
                    wrong += (labelOf(s->labelMap(), v) == 1) != inside;
                }
        EXPECT_GT(expected, 40);
        EXPECT_EQ(wrong, 0) << expected << " voxels expected";
        // The stroke is one journal line and one undo step.
        EXPECT_EQ(edit()->journalLines(), 1);
        auto lines = edit::readJournal(edit()->journalPath().toStdString());
        ASSERT_TRUE(lines.isOk()) << lines.status().toString();
        ASSERT_EQ(lines->size(), 1u);
        EXPECT_EQ(lines->front().op.points.size(), pixels.size());
        // The view shows it at once: the painted pixel now blends label 1's colour, after one
        // label repaint per stroke step.
        const QRgb after = view->sliceImage().pixel(pixels[1].first, pixels[1].second);
        EXPECT_NE(before, after);
        EXPECT_EQ(view->labelRepaints() - repaints, static_cast<int>(pixels.size()));
        // Ctrl+Z takes the whole stroke back, Ctrl+Y redoes it.
        QTest::keyClick(window_.get(), Qt::Key_Z, Qt::ControlModifier);
        int64_t left = 0;
        for (int64_t n = 0; n < g.voxelCount(); ++n)
            left += labelOf(s->labelMap(), {n % g.size[0], (n / g.size[0]) % g.size[1],
                                            n / (g.size[0] * g.size[1])}) != 0;
        EXPECT_EQ(left, 0);
        EXPECT_FALSE(window_->editToolbar()->undoAction()->isEnabled());
        QTest::keyClick(window_.get(), Qt::Key_Y, Qt::ControlModifier);
        int64_t back = 0;
        for (int64_t n = 0; n < g.voxelCount(); ++n)
            back += labelOf(s->labelMap(), {n % g.size[0], (n / g.size[0]) % g.size[1],
                                            n / (g.size[0] * g.size[1])}) == 1;
        EXPECT_EQ(back, expected);
        EXPECT_EQ(edit()->journalLines(), 3);
    }
}

TEST_F(EditTest, BrushOutlineUnderTheCursorInEveryViewAndRadiusByShiftWheel) {
    open(*window_, writeSeries(dir_));
    ViewerState* s = window_->state();
    MprView* axial = window_->view(ViewAxis::kAxial);
    QTest::keyClick(window_.get(), Qt::Key_1);
    window_->editToolbar()->sphereBox()->setChecked(true);
    window_->editToolbar()->radiusBox()->setValue(4.0);
    // Hover the crosshair's voxel so every view's slice passes through the brush centre.
    const auto sc = s->frame(ViewAxis::kAxial).screen(s->cursor());
    const QPointF at = axial->widgetPointOfPixel(double(sc[0]), double(sc[1]));
    QMouseEvent hover(QEvent::MouseMove, at, axial->mapToGlobal(at), Qt::NoButton, Qt::NoButton,
                      Qt::NoModifier);
    QApplication::sendEvent(axial, &hover);
    ASSERT_TRUE(edit()->showsBrush());
    auto outlinePixels = [](MprView* v) {
        const QImage img = v->grab().toImage();
        int64_t n = 0;
        for (int y = 0; y < img.height(); ++y)
            for (int x = 0; x < img.width(); ++x) {
                const QRgb p = img.pixel(x, y);
                n += qRed(p) >= 245 && qGreen(p) > 190 && qGreen(p) < 240 && qBlue(p) < 100;
            }
        return n;
    };
    // Against the same views without a tool (the orientation letters share the colour).
    std::map<ViewAxis, int64_t> with, without;
    for (ViewAxis a : {ViewAxis::kAxial, ViewAxis::kCoronal, ViewAxis::kSagittal})
        with[a] = outlinePixels(window_->view(a));
    edit()->setTool(EditTool::kNone);
    for (ViewAxis a : {ViewAxis::kAxial, ViewAxis::kCoronal, ViewAxis::kSagittal})
        without[a] = outlinePixels(window_->view(a));
    for (ViewAxis a : {ViewAxis::kAxial, ViewAxis::kCoronal, ViewAxis::kSagittal})
        EXPECT_GT(with[a], without[a] + 20) << viewAxisName(a);
    // A disk is outlined in the hovered view only.
    QTest::keyClick(window_.get(), Qt::Key_1);
    window_->editToolbar()->sphereBox()->setChecked(false);
    EXPECT_GT(outlinePixels(axial), without[ViewAxis::kAxial] + 20);
    EXPECT_EQ(outlinePixels(window_->view(ViewAxis::kCoronal)), without[ViewAxis::kCoronal]);
    // Shift+wheel sizes the brush, the spin box follows.
    QWheelEvent wheel(at, axial->mapToGlobal(at), {}, {0, 120}, Qt::NoButton, Qt::ShiftModifier,
                      Qt::NoScrollPhase, false);
    QApplication::sendEvent(axial, &wheel);
    EXPECT_NEAR(edit()->radiusMm(), 4.4, 1e-9);
    EXPECT_NEAR(window_->editToolbar()->radiusBox()->value(), 4.4, 0.05);
    // Esc drops the tool: left click moves the crosshair again.
    QTest::keyClick(window_.get(), Qt::Key_Escape);
    EXPECT_EQ(edit()->tool(), EditTool::kNone);
}

TEST_F(EditTest, MaskingAndClickToolsFromTheToolbar) {
    open(*window_, writeSeries(dir_));
    loadLabels();
    ViewerState* s = window_->state();
    MprView* axial = window_->view(ViewAxis::kAxial);
    s->setCursor({14, 18, 12});  // the dense sphere's centre slice
    // Overwrite "only background": painting label 2 over the sphere (label 1) leaves it.
    auto* tb = window_->editToolbar();
    QTest::keyClick(window_.get(), Qt::Key_1);
    tb->radiusBox()->setValue(8.0);
    tb->labelBox()->setCurrentIndex(tb->labelBox()->findData(2));
    emit tb->labelBox()->activated(tb->labelBox()->currentIndex());
    ASSERT_EQ(edit()->activeLabel(), 2);
    tb->overwriteBox()->setCurrentIndex(tb->overwriteBox()->findData(0));
    emit tb->overwriteBox()->activated(tb->overwriteBox()->currentIndex());
    ASSERT_EQ(edit()->overwrite().mode, edit::Overwrite::Mode::kBackground);
    drag(axial, {{14, 18}, {15, 18}});
    EXPECT_EQ(s->labelValue({14, 18, 12}), 1);  // kept
    EXPECT_EQ(s->labelValue({14, 25, 12}), 2);  // background 7 pixels away: painted
    // Intensity range 200..400: grow from the sphere's centre fills exactly the 300 HU voxels
    // of the slice (label 3, a new one).
    tb->overwriteBox()->setCurrentIndex(0);
    emit tb->overwriteBox()->activated(0);
    tb->rangeMinBox()->setValue(200);
    tb->rangeMaxBox()->setValue(400);
    tb->rangeBox()->setChecked(true);
    ASSERT_TRUE(edit()->range());
    edit()->setActiveLabel(3);
    QTest::keyClick(window_.get(), Qt::Key_4);
    ASSERT_EQ(edit()->tool(), EditTool::kGrow);
    QTest::mouseClick(axial, Qt::LeftButton, Qt::NoModifier,
                      axial
                          ->widgetPointOfPixel(s->frame(ViewAxis::kAxial).screen({14, 18, 12})[0],
                                               s->frame(ViewAxis::kAxial).screen({14, 18, 12})[1])
                          .toPoint());
    int64_t grown = 0, dense = 0;
    for (int j = 0; j < kRows; ++j)
        for (int i = 0; i < kColumns; ++i) {
            grown += s->labelValue({i, j, 12}) == 3;
            dense += phantomHu(i, j, 12) == 300;
        }
    EXPECT_EQ(grown, dense);
    EXPECT_GE(s->rowOfLabel(3), 0) << "the new label gets a table row";
    // Undo twice: back to the loaded map.
    ASSERT_TRUE(edit()->undo().isOk());
    ASSERT_TRUE(edit()->undo().isOk());
    EXPECT_EQ(s->labelValue({14, 25, 12}), 0);
    // Statistics follow the edits (debounced; saves flush them).
    edit()->flushStatistics();
    EXPECT_EQ(s->labels().at(static_cast<size_t>(s->rowOfLabel(2))).voxels, 6 * 6 * 16);
}

// A sphere drawn on every 5th axial slice and filled between them (key 6 in the axial view).
TEST_F(EditTest, FillBetweenSlicesOfASphereDrawnOnEveryFifthSlice) {
    open(*window_, writeSeries(dir_, "big", [](io::SynthSeriesSpec& s) {
        s.columns = 64;
        s.rows = 64;
        s.slices = 56;
        s.column_spacing = s.row_spacing = 0.8;
        s.slice_spacing = 1.0;
    }));
    ViewerState* s = window_->state();
    const Geometry g = s->image().geometry();
    const Vec3 centre = g.indexToPhysical({31.3, 32.2, 27.6});
    const double radius = 18.0;
    for (int k = 10; k <= 46; k += 5) {
        const Vec3 c = g.indexToPhysical({31.3, 32.2, double(k)});
        const double dz = c[2] - centre[2];
        if (std::abs(dz) >= radius) continue;
        edit::EditOp op;
        op.kind = edit::OpKind::kPaint;
        op.shape = edit::Shape::kDisk;
        op.plane = edit::Plane::kAxial;
        op.points = {c};
        op.radius_mm = std::sqrt(radius * radius - dz * dz);
        op.label = 1;
        ASSERT_TRUE(edit()->apply(op).isOk());
    }
    // Hover the axial view (the plane fill-between acts in), then key 6.
    MprView* axial = window_->view(ViewAxis::kAxial);
    const QPointF p = axial->rect().center();
    QMouseEvent hover(QEvent::MouseMove, p, axial->mapToGlobal(p), Qt::NoButton, Qt::NoButton,
                      Qt::NoModifier);
    QApplication::sendEvent(axial, &hover);
    QTest::keyClick(window_.get(), Qt::Key_6);
    int64_t both = 0, painted = 0, sphere = 0;
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i) {
                const Vec3 x = g.indexToPhysical({double(i), double(j), double(k)});
                const bool in =
                    std::hypot(x[0] - centre[0], x[1] - centre[1], x[2] - centre[2]) <= radius;
                const bool l = s->labelValue({i, j, k}) == 1;
                both += in && l;
                painted += l;
                sphere += in;
            }
    const double dice = 2.0 * double(both) / double(painted + sphere);
    std::printf("fill between slices (every 5th slice of a %.0f mm sphere): Dice %.4f\n", radius,
                dice);
    EXPECT_GE(dice, 0.95);
}

TEST_F(EditTest, LabelTableAddsRenamesFiltersCodesAndDeletes) {
    open(*window_, writeSeries(dir_));
    loadLabels();
    ViewerState* s = window_->state();
    LabelTable* table = window_->labelTable();
    QTableWidget* t = table->table();
    ASSERT_EQ(t->rowCount(), 2);
    // Add: value 3, active in the toolbar.
    QTest::mouseClick(table->addButton(), Qt::LeftButton);
    QTest::qWait(0);
    ASSERT_EQ(s->labels().size(), 3u);
    EXPECT_EQ(s->labels()[2].value, 3);
    EXPECT_EQ(edit()->activeLabel(), 3);
    // Rename through the name cell.
    t->item(2, LabelTable::kName)->setText("lesion");
    QTest::qWait(0);
    EXPECT_EQ(s->labels()[2].name, "lesion");
    // Review status and its filter.
    s->setLabelStatus(0, edit::ReviewStatus::kAccepted);
    QTest::qWait(0);
    auto* status = qobject_cast<QComboBox*>(t->cellWidget(0, LabelTable::kStatus));
    ASSERT_NE(status, nullptr);
    EXPECT_EQ(status->currentText(), "accepted");
    table->statusFilter()->setCurrentIndex(
        table->statusFilter()->findData(int(edit::ReviewStatus::kAccepted)));
    EXPECT_FALSE(t->isRowHidden(0));
    EXPECT_TRUE(t->isRowHidden(1));
    EXPECT_TRUE(t->isRowHidden(2));
    table->statusFilter()->setCurrentIndex(0);
    EXPECT_FALSE(t->isRowHidden(1));
    // Codes: search "liver", pick SCT 10200004.
    CodePicker* picker = table->editCodes(0);
    ASSERT_NE(picker, nullptr);
    QTest::keyClicks(picker->searchField(), "liver");
    ASSERT_GT(picker->typeList()->count(), 0);
    EXPECT_TRUE(picker->typeList()->item(0)->text().startsWith("Liver"));
    for (int i = 0; i < picker->typeList()->count(); ++i)
        if (picker->typeList()->item(i)->text().contains("10200004"))
            picker->typeList()->setCurrentRow(i);
    picker->categoryList()->setCurrentRow(0);
    picker->accept();
    EXPECT_EQ(s->labels()[0].type.code, "10200004");
    EXPECT_EQ(s->labels()[0].type.meaning, "Liver");
    EXPECT_EQ(s->labels()[0].category.meaning,
              edit::segmentationCodes(edit::CodeGroup::kCategory).front().meaning);
    // Recolour (the dialog's result) reaches overlay colours.
    s->setLabelColor(1, {1, 2, 3});
    EXPECT_EQ(s->labelColors().colors.at(2) & 0xFFFFFF, 0x010203u);
    // Delete label 2: its voxels are cleared (undoable), the row goes.
    EXPECT_EQ(s->labelValue({26, 12, 10}), 2);
    t->selectRow(1);
    QTest::mouseClick(table->deleteButton(), Qt::LeftButton);
    QTest::qWait(0);
    EXPECT_EQ(s->labelValue({26, 12, 10}), 0);
    EXPECT_EQ(s->rowOfLabel(2), -1);
    ASSERT_TRUE(edit()->undo().isOk());
    EXPECT_EQ(s->labelValue({26, 12, 10}), 2);
    EXPECT_GE(s->rowOfLabel(2), 0) << "an undo bringing voxels back brings the row back";
}

// Edit, save as SEG and label map, read back by voxseg and highdicom, reopen; the viewer's own
// journal replayed by the library gives the same voxels.
TEST_F(EditTest, SavedSegAndLabelMapReadBackAndTheJournalReplaysToTheSameMap) {
    const std::string folder = writeSeries(dir_);
    open(*window_, folder);
    loadLabels();
    ViewerState* s = window_->state();
    MprView* axial = window_->view(ViewAxis::kAxial);
    s->setCursor({20, 16, 12});
    QTest::keyClick(window_.get(), Qt::Key_1);
    window_->editToolbar()->radiusBox()->setValue(2.0);
    drag(axial, {{14, 22}, {18, 23}});  // label 1 grows: SEMIAUTOMATIC
    edit()->setActiveLabel(3);
    drag(axial, {{30, 20}, {33, 22}});  // a new label 3: MANUAL
    s->setLabelStatus(static_cast<size_t>(s->rowOfLabel(1)), edit::ReviewStatus::kCorrected);
    s->setLabelStatus(static_cast<size_t>(s->rowOfLabel(2)), edit::ReviewStatus::kAccepted);
    ASSERT_TRUE(edit()->dirty());
    const Volume shown = cloneVolume(s->labelMap());
    const std::string seg = dir_ / "edited.dcm", nii = dir_ / "edited.nii.gz";
    ASSERT_TRUE(window_->saveDicomSeg(QString::fromStdString(seg)).isOk())
        << window_->lastError().toStdString();
    EXPECT_FALSE(edit()->dirty());
    ASSERT_TRUE(window_->saveLabelMap(QString::fromStdString(nii)).isOk());
    const Geometry g = s->image().geometry();

    // voxseg's SEG reader: same voxels, algorithm types, the review status in the description.
    io::SegReadOptions options;
    options.grid = g;
    auto back = io::readDicomSeg(seg, options);
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    int64_t differ = 0;
    for (int64_t n = 0; n < g.voxelCount(); ++n) {
        const Voxel v{n % g.size[0], (n / g.size[0]) % g.size[1], n / (g.size[0] * g.size[1])};
        differ += labelOf(back->label_map, v) != labelOf(shown, v);
    }
    EXPECT_EQ(differ, 0);
    std::map<int, io::SegmentDescription> by_value;
    for (const auto& d : back->segments) by_value[d.value] = d;
    ASSERT_EQ(by_value.size(), 3u);
    EXPECT_EQ(by_value[1].algorithm_type, "SEMIAUTOMATIC");
    EXPECT_EQ(by_value[2].algorithm_type, "AUTOMATIC");
    EXPECT_EQ(by_value[3].algorithm_type, "MANUAL");
    EXPECT_NE(by_value[1].description.find("review: corrected"), std::string::npos)
        << by_value[1].description;
    EXPECT_NE(by_value[2].description.find("review: accepted"), std::string::npos);
    // The sidecars.
    auto seg_meta = edit::readSegmentsFile(dir_ / "edited.review.json");
    ASSERT_TRUE(seg_meta.isOk()) << seg_meta.status().toString();
    ASSERT_EQ(seg_meta->size(), 3u);
    EXPECT_EQ((*seg_meta)[0].status, edit::ReviewStatus::kCorrected);
    EXPECT_EQ((*seg_meta)[2].algorithm_type, "MANUAL");
    auto nii_meta = edit::readSegmentsFile(dir_ / "edited.json");
    ASSERT_TRUE(nii_meta.isOk()) << nii_meta.status().toString();
    EXPECT_EQ((*nii_meta)[1].status, edit::ReviewStatus::kAccepted);

    // highdicom reads the SEG per source image: the same labels.
    auto scan = io::scanDicom({folder});
    ASSERT_TRUE(scan.isOk());
    auto acquired = io::labelsOnAcquiredImages(shown, scan->series.front());
    ASSERT_TRUE(acquired.isOk()) << acquired.status().toString();
    voxseg::testing::highdicomAgrees(seg, folder, *acquired, dir_ / "expected");

    // The journal (base.nrrd + edits.jsonl) replayed by the library = what the viewer shows;
    // `voxseg edit` runs this replay (and is run below).
    const std::string journal = edit()->journalPath().toStdString();
    auto base = io::readImage(fs::path(journal).parent_path() / "base.nrrd");
    ASSERT_TRUE(base.isOk()) << base.status().toString();
    auto replay = edit::LabelEditor::create(s->image(), *base);
    ASSERT_TRUE(replay.isOk()) << replay.status().toString();
    ASSERT_TRUE(edit::replayJournal(journal, *replay).isOk());
    differ = 0;
    for (int64_t n = 0; n < g.voxelCount(); ++n) {
        const Voxel v{n % g.size[0], (n / g.size[0]) % g.size[1], n / (g.size[0] * g.size[1])};
        differ += labelOf(replay->labelMap(), v) != labelOf(shown, v);
    }
    EXPECT_EQ(differ, 0);

    // `voxseg edit` of the same base + journal, as a separate process: the same voxels too.
    {
        ASSERT_TRUE(fs::exists(VOXSEG_BIN)) << VOXSEG_BIN << " not built";
        const std::string out = dir_ / "cli.nrrd";
        int rc = -1;
        const std::string log = voxseg::testing::runCommand(
            std::string(VOXSEG_BIN) + " edit '" + folder + "' --labels '" +
                (fs::path(journal).parent_path() / "base.nrrd").string() + "' --ops '" + journal +
                "' -o '" + out + "'",
            &rc);
        ASSERT_EQ(rc, 0) << log;
        auto cli = io::readImage(out);
        ASSERT_TRUE(cli.isOk()) << cli.status().toString();
        differ = 0;
        for (int64_t n = 0; n < g.voxelCount(); ++n) {
            const Voxel v{n % g.size[0], (n / g.size[0]) % g.size[1], n / (g.size[0] * g.size[1])};
            differ += labelOf(*cli, v) != labelOf(shown, v);
        }
        EXPECT_EQ(differ, 0);
    }

    // Reopen in a new window: the saved SEG and label map load onto the series.
    window_->editController()->endSession(false);
    window_ = makeWindow();
    open(*window_, folder);
    EXPECT_FALSE(window_->hasRecoverableEdits()) << "saved edits are not offered again";
    for (const std::string& path : {seg, nii}) {
        ASSERT_TRUE(
            runTask(*window_, [&] { window_->loadSegmentation(QString::fromStdString(path)); }).ok)
            << window_->lastError().toStdString();
        differ = 0;
        for (int64_t n = 0; n < g.voxelCount(); ++n) {
            const Voxel v{n % g.size[0], (n / g.size[0]) % g.size[1], n / (g.size[0] * g.size[1])};
            differ += window_->state()->labelValue(v) != labelOf(shown, v);
        }
        EXPECT_EQ(differ, 0) << path;
    }
}

// Issue 39 item 1: what a reader set in the label table (names, colour, codes, review status)
// is there again after saving, closing (the series opened anew) and loading the SEG, the
// RTSTRUCT or the label map: in the state and in the table's status column.
TEST_F(EditTest, ReviewStatusNamesColoursAndCodesComeBackWhenASavedSegmentationIsReopened) {
    const std::string folder = writeSeries(dir_);
    open(*window_, folder);
    loadLabels();
    ViewerState* s = window_->state();
    const auto liver = static_cast<size_t>(s->rowOfLabel(1));
    const auto spleen = static_cast<size_t>(s->rowOfLabel(2));
    s->renameLabel(liver, "Liver");
    s->renameLabel(spleen, "Spleen");
    s->setLabelColor(liver, {221, 130, 101});
    s->setLabelColor(spleen, {157, 108, 162});
    s->setLabelCodes(liver, {"123037004", "SCT", "Anatomical Structure"},
                     {"10200004", "SCT", "Liver"});
    s->setLabelCodes(spleen, {"123037004", "SCT", "Anatomical Structure"},
                     {"78961009", "SCT", "Spleen"});
    s->setLabelStatus(liver, edit::ReviewStatus::kCorrected);
    s->setLabelStatus(spleen, edit::ReviewStatus::kAccepted);
    const std::vector<edit::SegmentMeta> want = s->segmentMetas();
    ASSERT_EQ(want.size(), 2u);
    const std::string seg = dir_ / "reviewed.dcm", rt = dir_ / "structures.dcm",
                      nii = dir_ / "reviewed.nii.gz";
    ASSERT_TRUE(window_->saveDicomSeg(QString::fromStdString(seg)).isOk())
        << window_->lastError().toStdString();
    ASSERT_TRUE(window_->saveRtStruct(QString::fromStdString(rt)).isOk())
        << window_->lastError().toStdString();
    ASSERT_TRUE(window_->saveLabelMap(QString::fromStdString(nii)).isOk())
        << window_->lastError().toStdString();

    for (const std::string& path : {seg, rt, nii}) {
        SCOPED_TRACE(path);
        open(*window_, folder);  // closes the segmentation
        ASSERT_FALSE(s->hasLabelMap());
        const TaskResult r =
            runTask(*window_, [&] { window_->loadSegmentation(QString::fromStdString(path)); });
        ASSERT_TRUE(r.finished && r.ok) << r.message.toStdString();
        const std::vector<edit::SegmentMeta> got = s->segmentMetas();
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i) {
            EXPECT_EQ(got[i].value, want[i].value);
            EXPECT_EQ(got[i].name, want[i].name);
            EXPECT_EQ(got[i].color, want[i].color);
            EXPECT_EQ(got[i].category, want[i].category);
            EXPECT_EQ(got[i].type, want[i].type);
            EXPECT_EQ(got[i].status, want[i].status) << edit::reviewStatusName(got[i].status);
        }
        // The table shows it (rebuilt through a queued signal): the status column of Liver.
        QTest::qWait(0);
        QTableWidget* table = window_->labelTable()->table();
        auto* status =
            qobject_cast<QComboBox*>(table->cellWidget(s->rowOfLabel(1), LabelTable::kStatus));
        ASSERT_NE(status, nullptr);
        EXPECT_EQ(status->currentText().toStdString(), "corrected");
        EXPECT_EQ(table->item(s->rowOfLabel(2), LabelTable::kName)->text().toStdString(), "Spleen");
    }
}

TEST_F(EditTest, UnsavedEditsAreAskedAboutOnClose) {
    open(*window_, writeSeries(dir_));
    QTest::keyClick(window_.get(), Qt::Key_1);
    drag(window_->view(ViewAxis::kAxial), {{10, 10}, {12, 12}});
    ASSERT_TRUE(edit()->dirty());
    const fs::path folder = fs::path(edit()->journalPath().toStdString()).parent_path();
    ASSERT_TRUE(fs::exists(folder));
    int asked = 0;
    window_->setUnsavedEditsPrompt([&] {
        ++asked;
        return int(QMessageBox::Cancel);
    });
    EXPECT_FALSE(window_->close());
    EXPECT_EQ(asked, 1);
    EXPECT_TRUE(window_->isVisible());
    window_->setUnsavedEditsPrompt([&] {
        ++asked;
        return int(QMessageBox::Discard);
    });
    EXPECT_TRUE(window_->close());
    EXPECT_EQ(asked, 2);
    EXPECT_FALSE(fs::exists(folder)) << "discarded edits are not offered for recovery";
}

// Loading another segmentation (or series, or running a model) over unsaved edits asks first,
// as closing does: Cancel keeps the edits and the map, Discard loads and drops the journal.
TEST_F(EditTest, UnsavedEditsAreAskedAboutBeforeAnotherSegmentationReplacesThem) {
    open(*window_, writeSeries(dir_));
    loadLabels();
    const std::string other = writeLabelMap();
    const Volume loaded = window_->state()->labelMap().castTo(PixelType::kUInt16);
    QTest::keyClick(window_.get(), Qt::Key_1);
    edit()->setActiveLabel(3);
    drag(window_->view(ViewAxis::kAxial), {{10, 10}, {12, 12}});
    ASSERT_TRUE(edit()->dirty());
    auto painted = [&] {
        const Volume now = window_->state()->labelMap().castTo(PixelType::kUInt16);
        int64_t n = 0;
        for (int64_t i = 0; i < now.geometry().voxelCount(); ++i)
            n += now.data<uint16_t>()[i] == 3 && loaded.data<uint16_t>()[i] != 3;
        return n;
    };
    const int64_t stroke = painted();
    ASSERT_GT(stroke, 0);
    const fs::path folder = fs::path(edit()->journalPath().toStdString()).parent_path();
    std::vector<QString> asked;
    window_->setUnsavedEditsPrompt([&] {
        asked.push_back("segmentation");
        return int(QMessageBox::Cancel);
    });
    TaskResult r =
        runTask(*window_, [&] { window_->loadSegmentation(QString::fromStdString(other)); });
    ASSERT_TRUE(r.finished);
    EXPECT_FALSE(r.ok);
    EXPECT_TRUE(r.message.contains("unsaved edits")) << r.message.toStdString();
    EXPECT_EQ(asked.size(), 1u);
    EXPECT_EQ(painted(), stroke) << "cancelled: the edited map stays";
    EXPECT_TRUE(edit()->dirty());
    r = runTask(*window_, [&] { window_->runModel("/nonexistent-model", {}, {}); });
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(asked.size(), 2u) << "running a model over unsaved edits asks too";
    EXPECT_EQ(painted(), stroke);
    window_->setUnsavedEditsPrompt([&] {
        asked.push_back("discard");
        return int(QMessageBox::Discard);
    });
    r = runTask(*window_, [&] { window_->loadSegmentation(QString::fromStdString(other)); });
    ASSERT_TRUE(r.ok) << r.message.toStdString();
    EXPECT_EQ(asked.size(), 3u);
    EXPECT_EQ(painted(), 0) << "discarded: the file's map is shown";
    EXPECT_FALSE(edit()->dirty());
    EXPECT_FALSE(fs::exists(folder)) << "discarded edits are not offered for recovery";
}

// The child side of the crash test: a viewer that paints 10 strokes, starts an 11th, says so
// and waits to be killed. Runs only when the parent test starts it.
TEST(EditCrashChild, PaintsTenStrokesAndWaits) {
    const char* dir = std::getenv("VOXSEG_EDIT_CRASH_CHILD");
    if (!dir) GTEST_SKIP() << "started by EditTest.KillNineAfterTenStrokesRestoresThem only";
    MainWindow w;
    w.setInteractive(false);
    w.resize(1300, 760);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    w.activateWindow();
    ASSERT_TRUE(QTest::qWaitForWindowActive(&w));
    const std::string folder = std::string(dir) + "/series";
    ASSERT_TRUE(runTask(w, [&] { w.openPath(QString::fromStdString(folder)); }).ok);
    QTest::keyClick(&w, Qt::Key_1);
    w.editController()->setRadiusMm(1.6);
    MprView* axial = w.view(ViewAxis::kAxial);
    for (int stroke = 0; stroke < 10; ++stroke) {
        w.editController()->setActiveLabel(1 + stroke % 3);
        drag(axial, {{4 + 3 * stroke, 5 + stroke},
                     {6 + 3 * stroke, 9 + stroke},
                     {7 + 3 * stroke, 12 + stroke}});
    }
    ASSERT_EQ(w.editController()->journalLines(), 10);
    ASSERT_TRUE(io::writeImage(w.state()->labelMap(), std::string(dir) + "/expected.nrrd").isOk());
    drag(axial, {{5, 25}, {30, 26}}, false);  // the 11th stroke, still being drawn
    std::ofstream(std::string(dir) + "/ready") << "10\n";
    for (;;) QTest::qWait(100);  // until SIGKILL
}

TEST_F(EditTest, KillNineAfterTenStrokesRestoresThem) {
    const std::string folder = writeSeries(dir_);
    QProcess child;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("VOXSEG_EDIT_CRASH_CHILD", QString::fromStdString(dir_.path().string()));
    child.setProcessEnvironment(env);
    child.setProcessChannelMode(QProcess::ForwardedChannels);
    child.start(QCoreApplication::applicationFilePath(),
                {"--gtest_filter=EditCrashChild.PaintsTenStrokesAndWaits"});
    ASSERT_TRUE(child.waitForStarted(10000));
    const fs::path ready = dir_.path() / "ready";
    ASSERT_TRUE(QTest::qWaitFor([&] { return fs::exists(ready); }, 120000))
        << "the child viewer did not paint its strokes";
    ::kill(static_cast<pid_t>(child.processId()), SIGKILL);
    ASSERT_TRUE(child.waitForFinished(10000));
    EXPECT_EQ(child.exitStatus(), QProcess::CrashExit);

    QSignalSpy offered(window_.get(), &MainWindow::recoveryAvailable);
    open(*window_, folder);
    ASSERT_EQ(offered.count(), 1);
    EXPECT_EQ(offered.front()[0].toInt(), 10);
    ASSERT_TRUE(window_->hasRecoverableEdits());
    ASSERT_TRUE(window_->restoreEdits().isOk()) << window_->lastError().toStdString();
    auto expected = io::readImage(dir_ / "expected.nrrd");
    ASSERT_TRUE(expected.isOk());
    const Geometry g = window_->state()->image().geometry();
    int64_t differ = 0, painted = 0;
    for (int64_t n = 0; n < g.voxelCount(); ++n) {
        const Voxel v{n % g.size[0], (n / g.size[0]) % g.size[1], n / (g.size[0] * g.size[1])};
        differ += window_->state()->labelValue(v) != labelOf(*expected, v);
        painted += labelOf(*expected, v) != 0;
    }
    EXPECT_GT(painted, 100);
    EXPECT_EQ(differ, 0);
    EXPECT_TRUE(edit()->dirty());
    EXPECT_EQ(edit()->journalLines(), 10);
    EXPECT_EQ(window_->state()->labels().size(), 3u);
    // The restored history undoes stroke by stroke.
    EXPECT_TRUE(edit()->canUndo());
}

}  // namespace
}  // namespace voxseg::ui

namespace voxseg::ui {
namespace {

// The pictures of docs/viewer-editing.md and docs/viewer.md: a stroke being painted with the brush
// outline in the views, and the label table with the code picker. Written to a temporary folder
// (checked to be real images); with VOXSEG_DOC_SCREENSHOTS=<folder> also there. Uses the
// TotalSegmentator example CT and its segmentation from ../shared/data when present (`data` would
// skip nothing here: the phantom stands in).
TEST_F(EditTest, ScreenshotsOfEditing) {
    const std::string ct = testing::sharedData("totalsegmentator-tests/example_ct_dicom");
    const std::string seg = testing::sharedData("totalsegmentator-tests/example_seg_dicom.nii.gz");
    const bool real = fs::exists(ct) && fs::exists(seg);
    window_->resize(1500, 930);
    QTest::qWait(100);  // the new size laid out before screen positions are computed
    open(*window_, real ? ct : writeSeries(dir_));
    if (real)
        ASSERT_TRUE(
            runTask(*window_, [&] { window_->loadSegmentation(QString::fromStdString(seg)); }).ok);
    ViewerState* s = window_->state();
    if (real) s->setCursor({300, 250, 10});
    window_->setLayoutMode(MainWindow::Layout::k2x2);
    if (auto* surface = qobject_cast<SurfaceView*>(window_->surfaceView()))
        EXPECT_TRUE(QTest::qWaitFor([&] { return !surface->building(); }, 120000));
    MprView* axial = window_->view(ViewAxis::kAxial);
    axial->setZoom(real ? 2.0 : 1.0);
    QTest::qWait(100);
    QTest::keyClick(window_.get(), Qt::Key_1);
    ASSERT_EQ(edit()->tool(), EditTool::kPaint);
    window_->editToolbar()->sphereBox()->setChecked(true);
    window_->editToolbar()->radiusBox()->setValue(real ? 12.0 : 3.0);
    const SliceFrame& f = s->frame(ViewAxis::kAxial);
    const auto c = f.screen(s->cursor());
    std::vector<std::pair<int, int>> stroke;
    for (int i = 0; i < 8; ++i)
        stroke.push_back({int(c[0]) - 30 * real - 4 + (real ? 6 : 1) * i,
                          int(c[1]) + (real ? 25 : 3) + (i % 2)});
    const int64_t before = edit()->journalLines();
    drag(axial, stroke, false);  // the mouse still down: the outline shows where it is
    EXPECT_TRUE(edit()->stroking());
    EXPECT_TRUE(edit()->showsBrush());
    EXPECT_EQ(edit()->journalLines(), before);
    const std::vector<std::pair<QString, std::function<QImage()>>> shots = {
        {"viewer-edit.png", [&] { return window_->grabViews(true); }},
        {"viewer-codes.png",
         [&] {
             QTest::mouseRelease(
                 axial, Qt::LeftButton, Qt::NoModifier,
                 axial->widgetPointOfPixel(stroke.back().first, stroke.back().second).toPoint());
             s->setLabelStatus(0, edit::ReviewStatus::kAccepted);
             s->setLabelStatus(1, edit::ReviewStatus::kCorrected);
             CodePicker* picker = window_->labelTable()->editCodes(0);
             QTest::keyClicks(picker->searchField(), "kidney");
             QTest::qWait(50);
             QImage img = picker->grab().toImage();
             picker->reject();
             return img;
         }},
        {"viewer-preview.png",
         [&] {
             // Threshold's preview: the in-range voxels of each slice that a click would paint
             // (background only: labelled voxels are left out).
             window_->activateWindow();  // back from the code picker
             EXPECT_TRUE(QTest::qWaitForWindowActive(window_.get()));
             QTest::keyClick(window_.get(), Qt::Key_5);
             EXPECT_EQ(edit()->tool(), EditTool::kThreshold);
             window_->editToolbar()->rangeMinBox()->setValue(real ? -190 : 200);  // fat
             window_->editToolbar()->rangeMaxBox()->setValue(real ? -30 : 400);
             window_->editToolbar()->rangeBox()->setChecked(true);
             edit()->setActiveLabel(real ? 2 : 1);
             EXPECT_NE(edit()->preview(), nullptr);
             EXPECT_GT(axial->previewPixels(), 0);
             QTest::qWait(50);
             return window_->grabViews(true);
         }},
    };
    const char* out = std::getenv("VOXSEG_DOC_SCREENSHOTS");
    for (const auto& [name, grab] : shots) {
        const QImage img = grab();
        ASSERT_FALSE(img.isNull()) << name.toStdString();
        EXPECT_GT(img.width(), 300);
        const QString path = QString::fromStdString(dir_ / name.toStdString());
        ASSERT_TRUE(img.save(path)) << path.toStdString();
        if (out) ASSERT_TRUE(img.save(QDir(out).filePath(name)));
    }
}

}  // namespace
}  // namespace voxseg::ui
