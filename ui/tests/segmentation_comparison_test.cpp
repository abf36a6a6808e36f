// "Compare with segmentation..." (issue 39 item 5) on the real main window: a second label map
// of the shown image, written to a file and loaded, gives the per-label Dice and volumes of known
// overlaps in the Comparison dock, its contours are drawn over the views (magenta, on the box's
// edge; gone when hidden), and a map of another grid is refused with a message.
#include "ui/segmentation_comparison.h"
#include "edit/segmentation_compare.h"
#include "io/image_io.h"
#include "ui/mpr_view.h"
#include "ui/tests/viewer_test_support.h"
#include "ui/viewer_state.h"

#include <gtest/gtest.h>

#include <QCheckBox>
#include <QDockWidget>
#include <QTableWidget>

namespace voxseg::ui {
namespace {

constexpr int kI = 36, kJ = 32, kK = 10;

Geometry grid() {
    Geometry g;
    g.size = {kI, kJ, kK};
    g.spacing = {0.8, 1.1, 3.0};
    g.origin = {-10, -12, 5};
    return g;
}

void box(Volume& v, int value, std::array<int64_t, 3> lo, std::array<int64_t, 3> hi) {
    uint8_t* p = v.data<uint8_t>();
    for (int64_t k = lo[2]; k < hi[2]; ++k)
        for (int64_t j = lo[1]; j < hi[1]; ++j)
            for (int64_t i = lo[0]; i < hi[0]; ++i)
                p[(k * kJ + j) * kI + i] = static_cast<uint8_t>(value);
}

class ComparisonTest : public ::testing::Test {
  protected:
    void SetUp() override {
        window_ = std::make_unique<MainWindow>();
        ASSERT_NO_FATAL_FAILURE(showActive(*window_, 1300, 800));
        pipeline::StudyInput study;
        study.volume = Volume::allocate<int16_t>(grid());
        window_->state()->setStudy(study, "synthetic");
        Volume a = Volume::allocate<uint8_t>(grid());
        box(a, 1, {4, 4, 2}, {14, 14, 7});  // 500 voxels
        box(a, 2, {20, 20, 0}, {24, 24, 2});
        ASSERT_TRUE(window_->state()->setLabelMap(a, {{1, "Liver"}, {2, "Spleen"}}).isOk());
    }
    testing::TempDir dir_;
    std::unique_ptr<MainWindow> window_;
};

TEST_F(ComparisonTest, DiceVolumesAndContoursOfASecondSegmentation) {
    Volume b = Volume::allocate<uint8_t>(grid());
    box(b, 1, {6, 4, 2}, {16, 14, 7});  // shifted 2 voxels along i: 400 shared, Dice 0.8
    box(b, 3, {26, 4, 4}, {30, 8, 6});  // only in b
    const std::string path = dir_ / "other.nii.gz";
    ASSERT_TRUE(io::writeImage(b, path).isOk());
    ASSERT_TRUE(window_->compareWithSegmentation(QString::fromStdString(path)).isOk())
        << window_->lastError().toStdString();
    QTest::qWait(20);
    auto* dock = window_->findChild<QDockWidget*>("comparison_dock");
    ASSERT_NE(dock, nullptr);
    EXPECT_TRUE(dock->isVisible());

    const auto& rows = window_->comparison()->agreement();
    ASSERT_EQ(rows.size(), 3u);
    EXPECT_EQ(rows[0].label, 1);
    EXPECT_DOUBLE_EQ(rows[0].dice, 0.8);
    EXPECT_EQ(rows[1].label, 2);
    EXPECT_EQ(rows[1].dice, 0.0);
    EXPECT_EQ(rows[2].label, 3);
    EXPECT_NEAR(rows[2].volume_b_ml, 4 * 4 * 2 * 0.8 * 1.1 * 3.0 / 1000, 1e-9);
    auto* table = dock->findChild<QTableWidget*>();
    ASSERT_NE(table, nullptr);
    ASSERT_EQ(table->rowCount(), 3);
    EXPECT_EQ(table->item(0, 0)->text(), "Liver");
    EXPECT_EQ(table->item(0, 1)->text(), "0.800");
    EXPECT_EQ(table->item(1, 5)->text(), "-100.0");

    // The loaded box's edge is drawn in magenta on the axial slice through it (k = 4), over the
    // shown label's fill; away from the crosshair and the view's text: column 6 (its left
    // edge), row 10.
    ViewerState* s = window_->state();
    s->setCursor({30, 28, 4});
    MprView* axial = window_->view(ViewAxis::kAxial);
    const auto px = s->frame(ViewAxis::kAxial).screen({6, 10, 4});
    const QPoint at = axial->widgetPointOfPixel(px[0], px[1]).toPoint();
    auto colourAt = [&] {
        return axial->grab().toImage().pixelColor(at * axial->devicePixelRatioF());
    };
    EXPECT_EQ(colourAt(), QColor::fromRgb(SegmentationComparison::kContourColor));
    dock->findChild<QCheckBox*>("comparison_contours")->setChecked(false);
    QTest::qWait(10);
    EXPECT_NE(colourAt(), QColor::fromRgb(SegmentationComparison::kContourColor));
}

TEST_F(ComparisonTest, ASegmentationOfAnotherGridIsRefused) {
    Geometry g = grid();
    g.size[2] = kK + 2;
    const std::string path = dir_ / "bigger.nii.gz";
    ASSERT_TRUE(io::writeImage(Volume::allocate<uint8_t>(g), path).isOk());
    window_->setInteractive(false);
    EXPECT_FALSE(window_->compareWithSegmentation(QString::fromStdString(path)).isOk());
    EXPECT_FALSE(window_->lastError().isEmpty());
    EXPECT_FALSE(window_->comparison()->active());
}

}  // namespace
}  // namespace voxseg::ui
