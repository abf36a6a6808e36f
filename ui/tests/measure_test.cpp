// Measurements in the viewer (issue 39 item 6), driven with the mouse and keys on the real main
// window over a synthetic CT whose grid is anisotropic (0.7 x 1.3 x 2.5 mm) and tilted (18 degrees
// about an oblique axis), so only patient geometry gives the right millimetres: a ruler dragged
// between two pixels measures their distance in mm, an ellipse or sphere ROI gives the mean, SD,
// min, max, area / volume and voxel count of a brute-force count over the pixels inside it, a
// ruler is drawn only on its slice and Delete removes the selected one, and the label table's
// mean column is the brute-force mean of the image inside each label, also after an edit.
#include "core/label_colors.h"
#include "io/ct_phantom.h"
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
#include <QDir>
#include <QDockWidget>
#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numbers>
#include <string>

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

// Every measurement's reading, for failure messages.
std::string describeAll(const MeasureTool& tool) {
    std::string out;
    for (size_t i = 0; i < tool.measurements().size(); ++i)
        out += tool.describe(static_cast<int>(i)).toStdString() + "\n";
    return out;
}

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

// The figure of docs/measurements.md: on an axial slice of the CT phantom (io/ct_phantom.h, what
// `voxseg phantom --seed 3 --size 256x256x60 --spacing 1.5x1.5x5` draws), a ruler across the
// left kidney, an ellipse ROI in the liver and a sphere ROI in the spleen, with the phantom's
// labels as outlines and the label table's HU column; the axial view maximised (F). The ROIs'
// means are the organs' drawn HU (the phantom's record) within the noise. Written to
// $VOXSEG_DOC_SCREENSHOTS/measurements.png when that is set.
TEST_F(MeasureTest, ScreenshotOfARulerAndRoisOnAPhantomCt) {
    constexpr auto kLiver = static_cast<uint8_t>(io::PhantomLabel::kLiver);
    constexpr auto kSpleen = static_cast<uint8_t>(io::PhantomLabel::kSpleen);
    constexpr auto kKidney = static_cast<uint8_t>(io::PhantomLabel::kKidneyLeft);
    io::CtPhantomSpec spec;
    spec.seed = 3;
    spec.size = {256, 256, 60};
    spec.spacing = {1.5, 1.5, 5.0};
    auto phantom = io::makeCtPhantom(spec);
    ASSERT_TRUE(phantom.isOk()) << phantom.status().toString();
    const Volume& labels = phantom->labels;
    // Plain variables, not a structured binding: clang 14 (build-fuzz) cannot capture those.
    const int64_t ni = spec.size[0], nj = spec.size[1], nk = spec.size[2];
    const uint8_t* l = labels.data<uint8_t>();
    auto label = [&](int64_t i, int64_t j, int64_t k) { return l[(k * nj + j) * ni + i]; };
    // Where a ROI fits best: the organ's pixel farthest from every pixel outside it (the
    // centre of the largest circle inside it) on a slice, and that distance in pixels.
    auto deepest = [&](uint8_t value, int64_t slice, int64_t* depth) {
        constexpr int64_t kReach = 30;
        std::array<int64_t, 2> best_at{0, 0};
        int64_t best_d2 = -1;
        for (int64_t j = 0; j < nj; ++j)
            for (int64_t i = 0; i < ni; ++i) {
                if (label(i, j, slice) != value) continue;
                int64_t d2 = kReach * kReach;
                for (int64_t dj = -kReach; dj <= kReach; ++dj)
                    for (int64_t di = -kReach; di <= kReach; ++di) {
                        const int64_t x = i + di, y = j + dj;
                        if (di * di + dj * dj < d2 &&
                            (x < 0 || y < 0 || x >= ni || y >= nj || label(x, y, slice) != value))
                            d2 = di * di + dj * dj;
                    }
                if (d2 > best_d2) {
                    best_d2 = d2;
                    best_at = {i, j};
                }
            }
        *depth = static_cast<int64_t>(std::sqrt(double(best_d2)));
        return best_at;
    };
    // The slice where the spleen is thickest among those showing the liver, the spleen and the
    // left kidney well.
    int64_t slice = -1, spleen_best = -1;
    for (int64_t k = 0; k < nk; ++k) {
        int64_t area[9] = {};
        for (int64_t j = 0; j < nj; ++j)
            for (int64_t i = 0; i < ni; ++i) ++area[label(i, j, k)];
        if (std::min({area[kLiver], area[kSpleen], area[kKidney]}) < 300) continue;
        int64_t depth = 0;
        (void)deepest(kSpleen, k, &depth);
        if (depth > spleen_best) {
            spleen_best = depth;
            slice = k;
        }
    }
    ASSERT_GE(slice, 0);
    int64_t liver_depth = 0, spleen_depth = 0;
    const auto liver = deepest(kLiver, slice, &liver_depth);
    const auto spleen = deepest(kSpleen, slice, &spleen_depth);
    ASSERT_GT(liver_depth, 11);  // the 30 x 20 mm ellipse (10 pixels across its half) inside
    // The sphere's radius: up to 9 mm (6 pixels), inside the spleen on this slice.
    const int64_t sphere_px = std::min<int64_t>(6, spleen_depth - 1);
    ASSERT_GE(sphere_px, 3);
    // The ruler: the left kidney's longest extent on the slice (its two farthest pixels).
    std::vector<std::array<int64_t, 2>> kidney;
    for (int64_t j = 0; j < nj; ++j)
        for (int64_t i = 0; i < ni; ++i)
            if (label(i, j, slice) == kKidney) kidney.push_back({i, j});
    std::array<int64_t, 2> k0{}, k1{};
    int64_t longest = -1;
    for (size_t a = 0; a < kidney.size(); ++a)
        for (size_t b = a + 1; b < kidney.size(); ++b) {
            const int64_t di = kidney[a][0] - kidney[b][0], dj = kidney[a][1] - kidney[b][1];
            if (di * di + dj * dj > longest) {
                longest = di * di + dj * dj;
                k0 = kidney[a];
                k1 = kidney[b];
            }
        }
    ASSERT_GT(longest, 20 * 20);

    window_->resize(1400, 860);
    pipeline::StudyInput study;
    study.volume = phantom->hu;
    state()->setStudy(study, "CT phantom (voxseg phantom --seed 3)");
    std::vector<LabelInfo> infos;
    for (int value = 1; value <= io::kPhantomLabelCount; ++value) {
        LabelInfo info;
        info.value = value;
        info.name = io::phantomLabelName(value);
        info.color = labelPalette()[static_cast<size_t>(value - 1) % labelPalette().size()];
        infos.push_back(info);
    }
    auto prepared = prepareLabelMap(state()->image(), labels, infos);
    ASSERT_TRUE(prepared.isOk()) << prepared.status().toString();
    state()->applyLabelMap(std::move(*prepared));
    state()->setOverlayMode(OverlayMode::kOutline);
    ASSERT_TRUE(window_->applyWindowPreset("CT abdomen"));
    // The crosshair on the spine, clear of the measurements.
    int64_t spine_depth = 0;
    const auto spine = deepest(static_cast<uint8_t>(io::PhantomLabel::kSpine), slice, &spine_depth);
    state()->setCursor({spine[0], spine[1], slice});
    // The measurements and the label table, wide enough for the names: the series browser and
    // the log closed.
    for (const char* dock : {"series_dock", "log_dock"})
        if (auto* d = window_->findChild<QDockWidget*>(dock)) d->hide();
    if (auto* d = window_->findChild<QDockWidget*>("labels_dock"))
        window_->resizeDocks({d}, {480}, Qt::Horizontal);
    // F over the axial view: it fills the views area.
    const QPoint middle = axial()->rect().center();
    QMouseEvent move(QEvent::MouseMove, middle, axial()->mapToGlobal(middle), Qt::NoButton,
                     Qt::NoButton, Qt::NoModifier);
    QApplication::sendEvent(axial(), &move);
    QTest::keyClick(window_.get(), Qt::Key_F);
    ASSERT_EQ(window_->maximizedView(), axial()->parentWidget());
    axial()->setZoom(1.5);
    QTest::qWait(50);

    const Geometry& g = state()->image().geometry();
    auto mm = [&](double i, double j) { return g.indexToPhysical({i, j, double(slice)}); };
    measure()->add(MeasureKind::kRuler, ViewAxis::kAxial, mm(double(k0[0]), double(k0[1])),
                   mm(double(k1[0]), double(k1[1])));
    // 30 x 20 mm in the liver; the sphere in the spleen (selected: the toolbar reads it out).
    const double li = double(liver[0]), lj = double(liver[1]);
    measure()->add(MeasureKind::kEllipse, ViewAxis::kAxial, mm(li - 10, lj - 20 / 3.0),
                   mm(li + 10, lj + 20 / 3.0));
    measure()->add(MeasureKind::kSphere, ViewAxis::kAxial, mm(double(spleen[0]), double(spleen[1])),
                   mm(double(spleen[0] + sphere_px), double(spleen[1])));
    const auto& m = measure()->measurements();
    ASSERT_EQ(m.size(), 3u);
    EXPECT_NEAR(m[0].length_mm, std::sqrt(double(longest)) * 1.5, 1e-6);
    ASSERT_TRUE(m[1].has_stats && m[2].has_stats);
    EXPECT_NEAR(m[1].stats.mean, phantom->tissues.liver, 10) << describeAll(*measure());
    EXPECT_NEAR(m[2].stats.mean, phantom->tissues.spleen, 10) << describeAll(*measure());
    const double r_mm = 1.5 * double(sphere_px);
    EXPECT_NEAR(m[2].stats.volume_ml, 4.0 / 3.0 * std::numbers::pi * r_mm * r_mm * r_mm / 1000,
                1e-6);
    EXPECT_EQ(measure()->selected(), 2);
    EXPECT_TRUE(reading().contains("mL")) << reading().toStdString();
    QTest::qWait(100);

    const QImage img = window_->grabViews(true);
    ASSERT_FALSE(img.isNull());
    // Quality 0: the PNG's strongest compression (the figure stays small in the repository).
    ASSERT_TRUE(img.save(QString::fromStdString(dir_ / "measurements.png"), "PNG", 0));
    if (const char* out = std::getenv("VOXSEG_DOC_SCREENSHOTS"))
        ASSERT_TRUE(img.save(QDir(out).filePath("measurements.png"), "PNG", 0));
}

}  // namespace
}  // namespace voxseg::ui
