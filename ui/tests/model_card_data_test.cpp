// Issue 39: the hippocampus model (made for ~40 mm crops) on a real whole-head T1 of
// ../shared/data is flagged in the Run model dialog before the run, in colour, with the extent
// far outside; the brain model, made for whole heads, is not. Skips when the data is absent.
// (The run itself and its implausible volumes: tests/pipeline/model_card_data_test.cpp; the
// label table's flags: model_card_test.cpp on the tiny network.)
#include "tests/test_data.h"
#include "ui/main_window.h"
#include "ui/run_model_dialog.h"
#include "ui/tests/viewer_test_support.h"
#include "ui/viewer_state.h"

#include <gtest/gtest.h>

#include <QLabel>
#include <QTest>

#include <filesystem>

namespace voxseg::ui {
namespace {

constexpr const char* kWholeHeadT1 = "dcm_qa_xa30/5_anat-T1w_acq-tfl";  // 192x256x256 mm

QString shippedModel(const char* name) {
    return QString::fromStdString(
        (std::filesystem::path(VOXSEG_SOURCE_DIR) / "sample_data/models" / name).string());
}

TEST(ModelCardDialogData, HippocampusModelOnAWholeHeadT1IsWarnedAboutBeforeTheRun) {
    VOXSEG_REQUIRE_DATA(kWholeHeadT1);
    MainWindow window;
    window.setInteractive(false);
    window.resize(1200, 800);
    window.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
    const TaskResult r = runTask(window, [&] {
        window.openPath(QString::fromStdString(testing::sharedData(kWholeHeadT1).string()));
    });
    ASSERT_TRUE(r.ok) << r.message.toStdString();
    ASSERT_EQ(window.state()->image().info().modality, "MR");
    RunModelDialog* dialog = window.openRunModelDialog();
    dialog->setModelFolder(shippedModel("hippocampus"));
    EXPECT_FALSE(dialog->modalityBox()->isVisibleTo(dialog)) << "MR for an MR model";
    ASSERT_FALSE(dialog->inputFindings().empty());
    const QString shown = dialog->inputChecksLabel()->text();
    EXPECT_TRUE(shown.contains("expects crops of at most 90x90x90 mm")) << shown.toStdString();
    EXPECT_TRUE(shown.contains("too large"));
    EXPECT_TRUE(shown.contains("color:#b85c00"));
    dialog->setModelFolder(shippedModel("brain-extraction"));
    EXPECT_TRUE(dialog->inputFindings().empty())
        << dialog->inputChecksLabel()->text().toStdString();
    dialog->reject();
}

}  // namespace
}  // namespace voxseg::ui
