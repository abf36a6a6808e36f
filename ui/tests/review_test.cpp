// Review at speed in the viewer (issue 39 item 4), on the real main window at 1600 px wide with
// a label map of 31 labels (as TotalSegmentator's abdomen): the label table's review and type
// columns are in view, a status change keeps the scroll position, "accept and next" (A, the
// button) walks the labels not reviewed with the crosshair, the count says how many are
// reviewed, and labels without colours get distinct ones (standard colours for known codes).
#include "core/label_colors.h"
#include "edit/segment_codes.h"
#include "ui/label_table.h"
#include "ui/tests/viewer_test_support.h"
#include "ui/viewer_state.h"

#include <gtest/gtest.h>

#include <QComboBox>
#include <QDockWidget>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QScrollBar>
#include <QStatusBar>
#include <QTableWidget>

namespace voxseg::ui {
namespace {

constexpr int kLabels = 31;

class ReviewTest : public ::testing::Test {
  protected:
    void SetUp() override {
        window_ = std::make_unique<MainWindow>();
        ASSERT_NO_FATAL_FAILURE(showActive(*window_, 1600, 900));
        const std::string folder = writeSeries(dir_);
        ASSERT_TRUE(
            runTask(*window_, [&] { window_->openPath(QString::fromStdString(folder)); }).ok);
        // Label v: a 5 x 8 voxel column through every slice, 8 per row of blocks.
        Volume labels = Volume::allocate<uint8_t>(state()->image().geometry());
        uint8_t* p = labels.data<uint8_t>();
        for (int k = 0; k < kSlices; ++k)
            for (int j = 0; j < kRows; ++j)
                for (int i = 0; i < kColumns; ++i) {
                    const int v = 1 + i / 5 + 8 * (j / 8);
                    p[(k * kRows + j) * kColumns + i] = static_cast<uint8_t>(v <= kLabels ? v : 0);
                }
        const std::string path = dir_ / "labels.nii.gz";
        ASSERT_TRUE(io::writeImage(labels, path).isOk());
        ASSERT_TRUE(
            runTask(*window_, [&] { window_->loadSegmentation(QString::fromStdString(path)); }).ok);
        ASSERT_EQ(state()->labels().size(), static_cast<size_t>(kLabels));
        QTest::qWait(50);  // laid out
    }
    ViewerState* state() { return window_->state(); }
    LabelTable* labelTable() { return window_->labelTable(); }
    QTableWidget* table() { return labelTable()->table(); }
    // Whether column c lies wholly inside the table's viewport as it is scrolled now.
    bool inView(int c) {
        const int x = table()->columnViewportPosition(c);
        return !table()->isColumnHidden(c) && x >= 0 &&
               x + table()->columnWidth(c) <= table()->viewport()->width();
    }

    testing::TempDir dir_;
    std::unique_ptr<MainWindow> window_;
};

TEST_F(ReviewTest, TableFitsItsDockAt1600PxAndKeepsItsScrollPositionAfterAChange) {
    EXPECT_TRUE(inView(LabelTable::kName));
    EXPECT_TRUE(inView(LabelTable::kStatus)) << "review column off the dock";
    EXPECT_TRUE(inView(LabelTable::kCodes)) << "category / type column off the dock";
    EXPECT_TRUE(inView(LabelTable::kVolume));
    EXPECT_GE(table()->columnWidth(LabelTable::kName), 70) << "names stay readable";
    // With every column shown (the header's menu) in a dock made narrow, the table scrolls
    // sideways too. Scrolled down and right, a status change leaves the table where it was.
    table()->setColumnHidden(LabelTable::kVoxels, false);
    table()->setColumnHidden(LabelTable::kOpacity, false);
    auto* dock = window_->findChild<QDockWidget*>("labels_dock");
    ASSERT_NE(dock, nullptr);
    window_->resizeDocks({dock}, {200}, Qt::Horizontal);
    QTest::qWait(50);
    QScrollBar* v = table()->verticalScrollBar();
    QScrollBar* h = table()->horizontalScrollBar();
    ASSERT_GT(v->maximum(), 0) << "31 rows do not fit: the test needs a scrolled table";
    ASSERT_GT(h->maximum(), 0) << "all columns do not fit: the test needs a sideways scroll";
    // The row in the middle is the current one (selecting it scrolls it into view), then the
    // table is scrolled right.
    v->setValue(v->maximum() / 2);
    const int row = table()->rowAt(table()->viewport()->height() / 2);
    ASSERT_GE(row, 0);
    table()->setCurrentCell(row, LabelTable::kStatus);
    h->setValue(h->maximum());
    const int vpos = v->value(), hpos = h->value();
    ASSERT_GT(hpos, 0);
    auto* status = qobject_cast<QComboBox*>(table()->cellWidget(row, LabelTable::kStatus));
    ASSERT_NE(status, nullptr);
    const int accepted = status->findData(static_cast<int>(edit::ReviewStatus::kAccepted));
    status->setCurrentIndex(accepted);
    emit status->activated(accepted);
    QTest::qWait(50);  // the table follows the state through a queued signal
    EXPECT_EQ(state()->labels()[static_cast<size_t>(row)].status, edit::ReviewStatus::kAccepted);
    EXPECT_EQ(v->value(), vpos);
    EXPECT_EQ(h->value(), hpos);
    EXPECT_EQ(table()->currentRow(), row);
    EXPECT_EQ(table()->cellWidget(row, LabelTable::kStatus), status) << "updated in place";
    // Statistics after an edit update the rows in place too.
    state()->refreshStatistics();
    QTest::qWait(50);
    EXPECT_EQ(v->value(), vpos);
    EXPECT_EQ(h->value(), hpos);
}

TEST_F(ReviewTest, AcceptAndNextWalksTheLabelsNotReviewedAndCountsProgress) {
    QLabel* progress = labelTable()->progressLabel();
    EXPECT_EQ(progress->text(), "0 of 31 reviewed");
    table()->setCurrentCell(0, LabelTable::kName);
    QTest::keyClick(window_.get(), Qt::Key_A);  // accept label 1, on to label 2
    EXPECT_EQ(state()->labels()[0].status, edit::ReviewStatus::kAccepted);
    EXPECT_EQ(table()->currentRow(), 1);
    // The crosshair is on label 2 (a column at i 5..9, j 0..7).
    EXPECT_EQ(state()->labelValue(state()->cursor()), 2);
    QTest::qWait(0);
    EXPECT_EQ(progress->text(), "1 of 31 reviewed");
    state()->setLabelStatus(3, edit::ReviewStatus::kCorrected);  // label 4 done elsewhere
    QTest::keyClick(window_.get(), Qt::Key_X);                   // reject label 2
    EXPECT_EQ(state()->labels()[1].status, edit::ReviewStatus::kRejected);
    EXPECT_EQ(table()->currentRow(), 2);
    QTest::mouseClick(labelTable()->acceptNextButton(), Qt::LeftButton);  // accept label 3
    EXPECT_EQ(state()->labels()[2].status, edit::ReviewStatus::kAccepted);
    EXPECT_EQ(table()->currentRow(), 4) << "label 4 is reviewed already: skipped";
    EXPECT_EQ(state()->labelValue(state()->cursor()), 5);
    QTest::keyClick(window_.get(), Qt::Key_N);  // next without a status
    EXPECT_EQ(state()->labels()[4].status, edit::ReviewStatus::kNotReviewed);
    EXPECT_EQ(table()->currentRow(), 5);
    QTest::keyClick(window_.get(), Qt::Key_C);
    EXPECT_EQ(state()->labels()[5].status, edit::ReviewStatus::kCorrected);
    QTest::qWait(0);
    EXPECT_EQ(progress->text(), "5 of 31 reviewed");
    // To the end: the last accept says every label is reviewed.
    int presses = 0;
    while (labelTable()->reviewAndNext(edit::ReviewStatus::kAccepted) && presses < 100) ++presses;
    QTest::qWait(0);
    EXPECT_EQ(progress->text(), "31 of 31 reviewed");
    EXPECT_EQ(state()->labels()[4].status, edit::ReviewStatus::kAccepted) << "wrapped around";
    EXPECT_TRUE(window_->statusBar()->currentMessage().contains("every label is reviewed"))
        << window_->statusBar()->currentMessage().toStdString();
}

TEST_F(ReviewTest, LabelsWithoutColoursGetDistinctOnesAndKnownCodesTheirStandardColour) {
    // Every pair of the 31 labels' colours apart by more than Delta E 20 (CIELAB); the 8-colour
    // palette before gave labels 5, 13, 21 and 29 one salmon.
    double closest = 1e9;
    const auto& labels = state()->labels();
    for (size_t a = 0; a < labels.size(); ++a)
        for (size_t b = a + 1; b < labels.size(); ++b)
            closest = std::min(closest, colorDifference(labels[a].color, labels[b].color));
    EXPECT_GT(closest, 20.0);
    EXPECT_EQ(labels[0].color, labelPalette()[0]);
    // A code with a standard colour recolours a label whose colour the viewer chose ...
    const CodedConcept* liver =
        edit::findSegmentationCode(edit::CodeGroup::kType, "SCT", "10200004");
    ASSERT_NE(liver, nullptr);
    const CodedConcept category = edit::segmentationCodes(edit::CodeGroup::kCategory).front();
    state()->setLabelCodes(0, category, *liver);
    const auto standard = standardColor(*liver);
    ASSERT_TRUE(standard);
    EXPECT_EQ(state()->labels()[0].color, *standard);
    EXPECT_EQ(state()->labelColors().colors.at(1) & 0xFFFFFF,
              uint32_t((*standard)[0]) << 16 | uint32_t((*standard)[1]) << 8 | (*standard)[2]);
    // ... not one the reader picked.
    state()->setLabelColor(1, {1, 2, 3});
    state()->setLabelCodes(1, category, *liver);
    EXPECT_EQ(state()->labels()[1].color, (Rgb{1, 2, 3}));
    // Left and right kidney differ (SNOMED CT 7771000 / 24028007 modifiers).
    const CodedConcept kidney{"64033007", "SCT", "Kidney"};
    const auto left = standardColor(kidney, CodedConcept{"7771000", "SCT", "Left"});
    const auto right = standardColor(kidney, CodedConcept{"24028007", "SCT", "Right"});
    ASSERT_TRUE(left && right);
    EXPECT_GT(colorDifference(*left, *right), 10.0);
}

}  // namespace
}  // namespace voxseg::ui
