// Measurements in the viewer (issue 39 item 6), driven with the mouse and keys on the real main
// window over a synthetic CT whose grid is anisotropic (0.7 x 1.3 x 2.5 mm) and tilted (18 degrees
// about an oblique axis), so only patient geometry gives the right millimetres: a ruler dragged
// between two pixels measures their distance in mm, an ellipse or sphere ROI gives the mean, SD,
// min, max, area / volume and voxel count of a brute-force count over the pixels inside it, a
// ruler is drawn only on its slice and Delete removes the selected one, and the label table's
// mean column is the brute-force mean of the image inside each label, also after an edit.
#include "tests/edit/edit_test_grids.h"
#include "ui/edit_controller.h"
#include "ui/edit_toolbar.h"
#include "ui/label_table.h"
#include "ui/measure_overlay.h"
#include "ui/measure_tool.h"
#include "ui/measure_toolbar.h"
#include "ui/mpr_view.h"
#include "ui/tests/viewer_test_support.h"
#include "ui/viewer_state.h"

#include <gtest/gtest.h>

#include <QAction>
#include <QApplication>
#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>

#include <cmath>
#include <limits>

namespace voxseg::ui {
namespace {

constexpr int kI = 40, kJ = 36, kK = 12;

int16_t hu(int64_t i, int64_t j, int64_t k) { return static_cast<int16_t>(10 * i + 3 * j - 7 * k); }

Volume syntheticCt() {
    Geometry g;
    g.size = {kI, kJ, kK};
    g.spacing = {0.7, 1.3, 2.5};
    g.origin = {-14.0, -20.0, 30.0};
    g.direction = edit::testing::rotation({0.3, 0.2, 1.0}, 18.0);
    VolumeInfo info;
    info.modality = "CT";
    Volume v = Volume::allocate<int16_t>(g, info);
    int16_t* d = v.data<int16_t>();
    for (int64_t k = 0; k < kK; ++k)
        for (int64_t j = 0; j < kJ; ++j)
            for (int64_t i = 0; i < kI; ++i) d[(k * kJ + j) * kI + i] = hu(i, j, k);
    return v;
}

struct Brute {
    int64_t n = 0;
    double mean = 0, sd = 0;
    double min = std::numeric_limits<double>::infinity();
    double max = -std::numeric_limits<double>::infinity();
    double sum = 0, sum2 = 0;
    void add(double x) {
        ++n;
        sum += x;
        sum2 += x * x;
        min = std::min(min, x);
        max = std::max(max, x);
        mean = sum / static_cast<double>(n);
        sd = std::sqrt(std::max(0.0, sum2 / static_cast<double>(n) - mean * mean));
    }
};

class MeasureTest : public ::testing::Test {
  protected:
    void SetUp() override {
        window_ = std::make_unique<MainWindow>();
        ASSERT_NO_FATAL_FAILURE(showActive(*window_, 1300, 800));
        pipeline::StudyInput study;
        study.volume = syntheticCt();
        state()->setStudy(study, "synthetic");
        QTest::qWait(20);
        axial()->setFocus();
    }
    void TearDown() override {
        if (window_) window_->editController()->endSession(false);
    }
    ViewerState* state() { return window_->state(); }
    MeasureTool* measure() { return window_->measureTool(); }
    MprView* axial() { return window_->view(ViewAxis::kAxial); }
    const SliceFrame& frame() { return state()->frame(ViewAxis::kAxial); }
    QPointF at(double column, double row) { return axial()->widgetPointOfPixel(column, row); }
    void mouse(QEvent::Type type, const QPointF& p, Qt::MouseButtons buttons) {
        QMouseEvent e(type, p, axial()->mapToGlobal(p), Qt::LeftButton, buttons, Qt::NoModifier);
        QApplication::sendEvent(axial(), &e);
    }
    void dragOnAxial(const QPointF& a, const QPointF& b) {
        mouse(QEvent::MouseButtonPress, a, Qt::LeftButton);
        mouse(QEvent::MouseMove, (a + b) / 2, Qt::LeftButton);
        mouse(QEvent::MouseMove, b, Qt::LeftButton);
        mouse(QEvent::MouseButtonRelease, b, Qt::NoButton);
    }
    QString reading() { return window_->measureToolbar()->reading()->text(); }
    double image(const std::array<int64_t, 3>& v) { return hu(v[0], v[1], v[2]); }

    testing::TempDir dir_;
    std::unique_ptr<MainWindow> window_;
};

TEST_F(MeasureTest, RulerDragGivesTheDistanceInMmOnATiltedAnisotropicGrid) {
    QTest::keyClick(window_.get(), Qt::Key_M);
    ASSERT_EQ(measure()->tool(), MeasureKind::kRuler);
    EXPECT_EQ(window_->editController()->tool(), EditTool::kNone);
    dragOnAxial(at(5, 7), at(31, 25));
    ASSERT_EQ(measure()->measurements().size(), 1u);
    // Pixel (5, 7) to (31, 25): 26 columns of spacing_x and 18 rows of spacing_y, at right
    // angles in mm whatever the tilt (0.7 and 1.3 mm here).
    const double want = std::hypot(26 * frame().spacing_x, 18 * frame().spacing_y);
    EXPECT_NEAR(measure()->measurements()[0].length_mm, want, 0.1);
    EXPECT_NEAR(measure()->measurements()[0].length_mm, want, 1e-6);
    EXPECT_TRUE(reading().contains(QString::number(want, 'f', 1) + " mm"))
        << reading().toStdString();

    // A second ruler in the same view; the crosshair did not move.
    const auto cursor = state()->cursor();
    dragOnAxial(at(3, 30), at(3, 10));
    ASSERT_EQ(measure()->measurements().size(), 2u);
    EXPECT_NEAR(measure()->measurements()[1].length_mm, 20 * frame().spacing_y, 1e-6);
    EXPECT_EQ(state()->cursor(), cursor);

    // Drawn on its slice only: the view with and without the rulers differs there, not on the
    // next slice.
    const QImage with_rulers = axial()->grab().toImage();
    EXPECT_EQ(measurementAt(*axial(), *measure(), at(18, 16)).index, 0);
    state()->moveSlice(ViewAxis::kAxial, 1);
    const QImage next_with = axial()->grab().toImage();
    EXPECT_EQ(measurementAt(*axial(), *measure(), at(18, 16)).index, -1);

    // Delete removes the selected (the last drawn) ruler, then the other.
    QTest::keyClick(window_.get(), Qt::Key_Delete);
    ASSERT_EQ(measure()->measurements().size(), 1u);
    EXPECT_NEAR(measure()->measurements()[0].length_mm, want, 1e-6);
    QTest::keyClick(window_.get(), Qt::Key_Delete);
    EXPECT_TRUE(measure()->measurements().empty());
    EXPECT_EQ(axial()->grab().toImage(), next_with) << "a ruler drawn on another slice";
    state()->moveSlice(ViewAxis::kAxial, -1);
    EXPECT_NE(axial()->grab().toImage(), with_rulers) << "the rulers were not drawn";
}

TEST_F(MeasureTest, ClickingARulerEndSelectsAndMovesIt) {
    QTest::keyClick(window_.get(), Qt::Key_M);
    dragOnAxial(at(5, 7), at(31, 25));
    dragOnAxial(at(5, 30), at(20, 30));
    ASSERT_EQ(measure()->selected(), 1);
    // Dragging the first ruler's far end from (31, 25) to (31, 7): 26 columns.
    dragOnAxial(at(31, 25), at(31, 7));
    ASSERT_EQ(measure()->measurements().size(), 2u);
    EXPECT_EQ(measure()->selected(), 0);
    EXPECT_NEAR(measure()->measurements()[0].length_mm, 26 * frame().spacing_x, 1e-6);
}

TEST_F(MeasureTest, EllipseRoiGivesTheStatisticsOfThePixelsInside) {
    QTest::keyClick(window_.get(), Qt::Key_I);
    ASSERT_EQ(measure()->tool(), MeasureKind::kEllipse);
    dragOnAxial(at(8, 10), at(27, 21));
    ASSERT_EQ(measure()->measurements().size(), 1u);
    const Measurement& m = measure()->measurements()[0];
    ASSERT_TRUE(m.has_stats);
    // The ellipse spans pixel centres 8..27 and 10..21: centre (17.5, 15.5), semi-axes 9.5 and
    // 5.5 pixels.
    Brute b;
    const int64_t slice = state()->slice(ViewAxis::kAxial);
    for (int64_t r = 0; r < frame().height; ++r)
        for (int64_t c = 0; c < frame().width; ++c) {
            const double x = (c - 17.5) / 9.5, y = (r - 15.5) / 5.5;
            if (x * x + y * y <= 1) b.add(image(frame().voxel(c, r, slice)));
        }
    ASSERT_GT(b.n, 100);
    EXPECT_EQ(m.stats.voxels, b.n);
    EXPECT_NEAR(m.stats.mean, b.mean, 1e-9);
    EXPECT_NEAR(m.stats.sd, b.sd, 1e-6);
    EXPECT_EQ(m.stats.min, b.min);
    EXPECT_EQ(m.stats.max, b.max);
    const double area = M_PI * 9.5 * frame().spacing_x * 5.5 * frame().spacing_y;
    EXPECT_NEAR(m.stats.area_mm2, area, 1e-6);
    const QString text = reading();
    const int decimals = std::abs(m.stats.mean) >= 100 ? 0 : 1;
    EXPECT_TRUE(text.contains(QString("mean %1 HU").arg(m.stats.mean, 0, 'f', decimals)))
        << text.toStdString();
    EXPECT_TRUE(text.contains(QString("area %1 mm²").arg(area, 0, 'f', 1))) << text.toStdString();
    EXPECT_TRUE(text.contains(QString("%1 voxels").arg(b.n))) << text.toStdString();
}

TEST_F(MeasureTest, SphereRoiGivesTheStatisticsOfTheVoxelsWithinTheRadius) {
    QTest::keyClick(window_.get(), Qt::Key_I, Qt::ShiftModifier);
    ASSERT_EQ(measure()->tool(), MeasureKind::kSphere);
    dragOnAxial(at(20, 18), at(26.3, 18.2));
    ASSERT_EQ(measure()->measurements().size(), 1u);
    const Measurement& m = measure()->measurements()[0];
    ASSERT_TRUE(m.has_stats);
    const double r = std::hypot(6.3 * frame().spacing_x, 0.2 * frame().spacing_y);
    EXPECT_NEAR(m.sphere.radius_mm, r, 1e-6);
    // Every voxel within r of the centre voxel, in index offsets times spacing.
    const auto c = frame().voxel(20, 18, state()->slice(ViewAxis::kAxial));
    const Vec3 sp = state()->image().geometry().spacing;
    Brute b;
    for (int64_t k = 0; k < kK; ++k)
        for (int64_t j = 0; j < kJ; ++j)
            for (int64_t i = 0; i < kI; ++i)
                if (std::hypot((i - c[0]) * sp[0], (j - c[1]) * sp[1], (k - c[2]) * sp[2]) <= r)
                    b.add(hu(i, j, k));
    ASSERT_GT(b.n, 50);
    EXPECT_EQ(m.stats.voxels, b.n);
    EXPECT_NEAR(m.stats.mean, b.mean, 1e-9);
    EXPECT_NEAR(m.stats.sd, b.sd, 1e-6);
    EXPECT_EQ(m.stats.min, b.min);
    EXPECT_EQ(m.stats.max, b.max);
    EXPECT_NEAR(m.stats.volume_ml, 4.0 / 3.0 * M_PI * r * r * r / 1000.0, 1e-9);
    // On the next slice its cut, a circle of sqrt(r^2 - d^2), is drawn (and can be picked).
    state()->moveSlice(ViewAxis::kAxial, 1);
    const double d = frame().spacing_n;
    const double px_per_mm = (at(1, 0) - at(0, 0)).x() / frame().spacing_x;
    const QPointF centre = at(20, 18);
    const double cut = std::sqrt(r * r - d * d) * px_per_mm;
    EXPECT_EQ(measurementAt(*axial(), *measure(), centre + QPointF(cut, 0)).index, 0);
    EXPECT_EQ(measurementAt(*axial(), *measure(), centre + QPointF(0, cut)).index, 0);
    EXPECT_EQ(measurementAt(*axial(), *measure(), centre + QPointF(cut + 12, 0)).index, -1);
}

TEST_F(MeasureTest, ToolsAndEditToolsExcludeEachOtherAndEscDropsThem) {
    QTest::keyClick(window_.get(), Qt::Key_M);
    ASSERT_EQ(measure()->tool(), MeasureKind::kRuler);
    QTest::keyClick(window_.get(), Qt::Key_1);  // paint
    EXPECT_EQ(window_->editController()->tool(), EditTool::kPaint);
    EXPECT_EQ(measure()->tool(), MeasureKind::kNone);
    EXPECT_FALSE(window_->measureToolbar()->toolAction(MeasureKind::kRuler)->isChecked());
    QTest::keyClick(window_.get(), Qt::Key_I);
    EXPECT_EQ(measure()->tool(), MeasureKind::kEllipse);
    EXPECT_EQ(window_->editController()->tool(), EditTool::kNone);
    QTest::keyClick(window_.get(), Qt::Key_Escape);
    EXPECT_EQ(measure()->tool(), MeasureKind::kNone);
    // Without a tool a drag moves the crosshair again and measures nothing.
    dragOnAxial(at(5, 7), at(9, 9));
    EXPECT_TRUE(measure()->measurements().empty());
    EXPECT_EQ(state()->cursor()[frame().axis_x], frame().voxel(9, 9, 0)[frame().axis_x]);
}

TEST_F(MeasureTest, LabelTableMeanIsTheBruteForceMeanInsideEachLabelAlsoAfterAnEdit) {
    const Geometry g = state()->image().geometry();
    Volume labels = Volume::allocate<uint8_t>(g);
    uint8_t* p = labels.data<uint8_t>();
    for (int64_t k = 0; k < kK; ++k)
        for (int64_t j = 0; j < kJ; ++j)
            for (int64_t i = 0; i < kI; ++i) {
                uint8_t v = 0;
                if (i >= 4 && i < 15 && j >= 5 && j < 20 && k >= 2 && k < 9) v = 1;
                if (i >= 25 && i < 33 && j >= 22 && j < 30) v = 2;
                p[(k * kJ + j) * kI + i] = v;
            }
    ASSERT_TRUE(state()->setLabelMap(labels, {}).isOk());
    QTest::qWait(20);
    QTableWidget* table = window_->labelTable()->table();
    EXPECT_EQ(table->horizontalHeaderItem(LabelTable::kMean)->text(), "HU");
    EXPECT_FALSE(table->isColumnHidden(LabelTable::kMean));
    auto expectMeans = [&] {
        const Volume& map = state()->labelMap();
        for (int value : {1, 2}) {
            SCOPED_TRACE(value);
            Brute b;
            int64_t idx = 0;
            for (int64_t k = 0; k < kK; ++k)
                for (int64_t j = 0; j < kJ; ++j)
                    for (int64_t i = 0; i < kI; ++i, ++idx)
                        if (map.data<uint8_t>()[idx] == value) b.add(hu(i, j, k));
            const int row = state()->rowOfLabel(value);
            ASSERT_GE(row, 0);
            QTableWidgetItem* cell = table->item(row, LabelTable::kMean);
            ASSERT_NE(cell, nullptr);
            EXPECT_NEAR(cell->data(Qt::UserRole).toDouble(), b.mean, 1e-6);
            EXPECT_NEAR(cell->data(Qt::UserRole + 1).toDouble(), b.sd, 1e-6);
            const QString mean = QString::number(b.mean, 'f', std::abs(b.mean) >= 100 ? 0 : 1);
            EXPECT_TRUE(cell->text().startsWith(mean + " ± ")) << cell->text().toStdString();
        }
    };
    expectMeans();
    // Paint label 1 over a ball in the background: its mean moves; the table follows once the
    // background statistics are in.
    edit::EditOp op;
    op.kind = edit::OpKind::kPaint;
    op.points = {g.indexToPhysical({30, 10, 6})};
    op.radius_mm = 6.0;
    op.label = 1;
    ASSERT_TRUE(window_->editController()->apply(op).isOk());
    ASSERT_TRUE(
        QTest::qWaitFor([&] { return !window_->editController()->statisticsPending(); }, 10000));
    QTest::qWait(20);  // the table's queued rebuild
    expectMeans();
}

}  // namespace
}  // namespace voxseg::ui
