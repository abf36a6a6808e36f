// Issue 39 items 2 and 6 in the viewer: the Run model dialog shows the model's card and the input
// checks against the loaded image before the run, offers the modality override as a checkbox
// with its reason (the viewer's refusal names no CLI flag), folds the expert options into a
// collapsed "Advanced" section; after a run the label table flags implausible volumes and shows
// the run's warnings and the model's measurements. Small synthetic images and the tiny test
// network (a run takes a second); the real whole-head T1: model_card_data_test.cpp.
#include "io/image_io.h"
#include "tests/pipeline/test_model_package.h"
#include "tests/test_data.h"
#include "ui/label_table.h"
#include "ui/main_window.h"
#include "ui/run_model_dialog.h"
#include "ui/tests/viewer_test_support.h"
#include "ui/viewer_state.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <QCheckBox>
#include <QDir>
#include <QLabel>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QToolButton>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace voxseg::ui {
namespace {

namespace fs = std::filesystem;

QString shippedModel(const char* name) {
    return QString::fromStdString(
        (fs::path(VOXSEG_SOURCE_DIR) / "sample_data/models" / name).string());
}

class ModelCardTest : public ::testing::Test {
  protected:
    void SetUp() override {
        window_ = std::make_unique<MainWindow>();
        window_->setInteractive(false);
        window_->resize(1200, 800);
        window_->show();
        ASSERT_TRUE(QTest::qWaitForWindowExposed(window_.get()));
    }
    void open(const std::string& path) {
        const TaskResult r =
            runTask(*window_, [&] { window_->openPath(QString::fromStdString(path)); });
        ASSERT_TRUE(r.ok) << r.message.toStdString();
        ASSERT_TRUE(window_->state()->hasImage());
    }
    // A head-sized image (48x48x40 voxels of 5 mm: 240x240x200 mm) as NIfTI (no modality).
    std::string writeLargeImage() {
        Geometry g;
        g.size = {48, 48, 40};
        g.spacing = {5, 5, 5};
        Volume v = Volume::allocate<int16_t>(g);
        int16_t* p = v.data<int16_t>();
        for (int64_t i = 0; i < g.voxelCount(); ++i) p[i] = static_cast<int16_t>(i % 200);
        const std::string path = dir_ / "head.nii.gz";
        EXPECT_TRUE(io::writeImage(v, path).isOk());
        return path;
    }
    // The tiny network's package with a model card: made for 1..10 mm inputs, label "one"
    // plausible only between 1000 and 2000 mL (the phantom is 37 mL in all).
    std::string writeCardedTinyModel() {
        const std::string folder = testing::makeTinyModelPackage(dir_, "CT");
        nlohmann::json j;
        std::ifstream(fs::path(folder) / "model.json") >> j;
        j["intended_input"] = {{"modality", {"CT"}}, {"extent_mm", {1.0, 10.0}}};
        j["labels"][0]["plausible_volume_ml"] = {1000.0, 2000.0};
        j["disclaimer"] = "a test network, not a clinical model";
        std::ofstream(fs::path(folder) / "model.json") << j.dump(2);
        return folder;
    }

    testing::TempDir dir_;
    std::unique_ptr<MainWindow> window_;
};

TEST_F(ModelCardTest, DialogShowsTheShippedHippocampusModelsCard) {
    RunModelDialog* dialog = window_->openRunModelDialog();
    dialog->setModelFolder(shippedModel("hippocampus"));
    const QString card = dialog->cardLabel()->text();
    for (const char* part :
         {"hippocampus-demo 1.0.0", "Anterior and posterior hippocampus on T1 MR crops",
          "CC BY-SA 4.0", "not a clinical model", "extent 15..90 mm on every axis",
          "crops around the structure, not a whole image", "Anterior hippocampus 0.5..4 mL"})
        EXPECT_TRUE(card.contains(part)) << part << "\n" << card.toStdString();
    EXPECT_TRUE(dialog->inputChecksLabel()->text().contains("No image loaded"));
    // The brain model's card declares its measurement (total intracranial volume).
    dialog->setModelFolder(shippedModel("brain-extraction"));
    EXPECT_TRUE(dialog->cardLabel()->text().contains("tiv_ml: volume of Brain in mL"))
        << dialog->cardLabel()->text().toStdString();
    // Not a package: said, and Run refused.
    dialog->setModelFolder(QString::fromStdString(dir_.path().string()));
    EXPECT_TRUE(dialog->refusal().contains("no model.json")) << dialog->refusal().toStdString();
    dialog->reject();
}

TEST_F(ModelCardTest, WholeHeadSizedImageIsWarnedAboutBeforeTheRun) {
    ASSERT_NO_FATAL_FAILURE(open(writeLargeImage()));
    RunModelDialog* dialog = window_->openRunModelDialog();
    dialog->setModelFolder(shippedModel("hippocampus"));
    ASSERT_EQ(dialog->inputFindings().size(), 2u);  // extent and spacing
    const QString shown = dialog->inputChecksLabel()->text();
    EXPECT_TRUE(shown.contains("input extent 240x240x200 mm")) << shown.toStdString();
    EXPECT_TRUE(shown.contains("expects crops of at most 90x90x90 mm"));
    EXPECT_TRUE(shown.contains("input spacing 5x5x5 mm"));
    EXPECT_TRUE(shown.contains("color:#b85c00")) << "in colour";
    EXPECT_FALSE(dialog->modalityBox()->isVisibleTo(dialog)) << "NIfTI: modality unknown";
    EXPECT_TRUE(dialog->refusal().isEmpty()) << "a warning, not a refusal";
    // "Refuse unsuitable input" ticked: the dialog says the run will be refused.
    dialog->setValue("--strict-input", "true");
    EXPECT_TRUE(dialog->inputChecksLabel()->text().contains("this run will be refused"));
    // A model made for whole heads: no finding.
    dialog->setModelFolder(shippedModel("brain-extraction"));
    EXPECT_TRUE(dialog->inputFindings().empty());
    EXPECT_TRUE(dialog->inputChecksLabel()->text().contains("fits the model's intended input"));
    dialog->reject();
}

// The dialog with the hippocampus model's card and the extent warning on a head-sized image,
// Advanced open: written to a temporary folder (checked to be a real image); with
// VOXSEG_DOC_SCREENSHOTS=<folder> also there (docs/run-model-dialog.png).
TEST_F(ModelCardTest, ScreenshotOfTheDialogWithTheCard) {
    ASSERT_NO_FATAL_FAILURE(open(writeLargeImage()));
    RunModelDialog* dialog = window_->openRunModelDialog();
    dialog->setModelFolder(shippedModel("hippocampus"));
    dialog->advancedToggle()->click();
    dialog->resize(760, dialog->sizeHint().height());
    ASSERT_TRUE(QTest::qWaitForWindowExposed(dialog));
    QTest::qWait(50);
    const QImage img = dialog->grab().toImage();
    ASSERT_FALSE(img.isNull());
    EXPECT_GT(img.height(), 400);
    QTemporaryDir tmp;
    ASSERT_TRUE(tmp.isValid());
    ASSERT_TRUE(img.save(tmp.filePath("run-model-dialog.png")));
    if (const char* out = std::getenv("VOXSEG_DOC_SCREENSHOTS"))
        ASSERT_TRUE(img.save(QDir(out).filePath("run-model-dialog.png")));
    dialog->reject();
}

TEST_F(ModelCardTest, ModalityMismatchOffersTheOverrideAsACheckbox) {
    ASSERT_NO_FATAL_FAILURE(open(writeSeries(dir_)));  // a CT series
    const std::string mr_model = testing::makeTinyModelPackage(dir_, "MR");
    RunModelDialog* dialog = window_->openRunModelDialog();
    dialog->setModelFolder(QString::fromStdString(mr_model));
    ASSERT_TRUE(dialog->modalityBox()->isVisibleTo(dialog));
    EXPECT_TRUE(dialog->modalityBox()->findChild<QLabel*>()->text().contains(
        "input is CT but model test-net expects MR"));
    EXPECT_EQ(dialog->ignoreModalityBox()->text(), "Run anyway (ignore modality)");
    EXPECT_TRUE(dialog->refusal().contains("tick \"Run anyway (ignore modality)\""))
        << dialog->refusal().toStdString();
    EXPECT_FALSE(dialog->refusal().contains("--"));
    auto before = dialog->options();
    ASSERT_TRUE(before.isOk());
    EXPECT_FALSE(before->ignore_modality);
    QTest::mouseClick(dialog->ignoreModalityBox(), Qt::LeftButton);
    auto after = dialog->options();
    ASSERT_TRUE(after.isOk());
    EXPECT_TRUE(after->ignore_modality);
    EXPECT_TRUE(dialog->refusal().isEmpty());
    dialog->reject();
    // A run without the override (from code, past the dialog) is refused in the viewer's words.
    const TaskResult r =
        runTask(*window_, [&] { window_->runModel(QString::fromStdString(mr_model)); });
    ASSERT_TRUE(r.finished);
    EXPECT_FALSE(r.ok);
    const std::string error = window_->lastError().toStdString();
    EXPECT_NE(error.find("Run anyway (ignore modality)"), std::string::npos) << error;
    EXPECT_EQ(error.find("--ignore-modality"), std::string::npos) << error;
}

TEST_F(ModelCardTest, AdvancedIsCollapsedAndHoldsDeviceAndPrecision) {
    RunModelDialog* dialog = window_->openRunModelDialog();
    QWidget* advanced = dialog->advancedSection();
    EXPECT_FALSE(advanced->isVisibleTo(dialog));
    for (const char* flag : {"--device", "--precision", "--accumulator", "--batch"}) {
        ASSERT_NE(dialog->field(flag), nullptr) << flag;
        EXPECT_TRUE(advanced->isAncestorOf(dialog->field(flag))) << flag;
    }
    for (const char* flag : {"--overlap", "--tta", "--fill-holes", "--strict-input"}) {
        EXPECT_FALSE(advanced->isAncestorOf(dialog->field(flag))) << flag;
        EXPECT_TRUE(dialog->field(flag)->isVisibleTo(dialog)) << flag;
    }
    QTest::mouseClick(dialog->advancedToggle(), Qt::LeftButton);
    EXPECT_TRUE(advanced->isVisibleTo(dialog));
    EXPECT_TRUE(dialog->field("--device")->isVisibleTo(dialog));
    dialog->reject();
}

TEST_F(ModelCardTest, ImplausibleResultIsFlaggedInTheLabelTable) {
    ASSERT_NO_FATAL_FAILURE(open(writeSeries(dir_)));
    const std::string model = writeCardedTinyModel();
    RunModelDialog* dialog = window_->openRunModelDialog();
    dialog->setModelFolder(QString::fromStdString(model));
    EXPECT_TRUE(dialog->cardLabel()->text().contains("a test network, not a clinical model"));
    ASSERT_EQ(dialog->inputFindings().size(), 1u) << "36 mm is more than 10 mm";
    const TaskResult r = runTask(*window_, [&] { dialog->accept(); });
    ASSERT_TRUE(r.ok) << r.message.toStdString();
    LabelTable* table = window_->findChild<LabelTable*>();
    ASSERT_NE(table, nullptr);
    const auto& labels = window_->state()->labels();
    ASSERT_GE(labels.size(), 2u);
    ASSERT_EQ(labels[0].value, 1);
    EXPECT_TRUE(table->labelFlag(1).contains("implausible")) << table->labelFlag(1).toStdString();
    EXPECT_TRUE(table->labelFlag(2).isEmpty()) << "no range for label 2";
    QTableWidgetItem* volume = table->table()->item(0, LabelTable::kVolume);
    EXPECT_FALSE(volume->icon().isNull());
    EXPECT_TRUE(volume->toolTip().contains("outside the model's plausible 1000..2000 mL"))
        << volume->toolTip().toStdString();
    EXPECT_TRUE(table->table()->item(1, LabelTable::kVolume)->icon().isNull());
    const QString line = table->findingsLabel()->text();
    EXPECT_TRUE(table->findingsLabel()->isVisibleTo(table));
    EXPECT_TRUE(line.contains("implausible result: one")) << line.toStdString();
    EXPECT_TRUE(line.contains("input extent")) << "the input check's warning too";
    EXPECT_FALSE(line.contains("--strict-input")) << "no CLI flag in the viewer";
    // Another label map: the run's findings go.
    const std::string other =
        writePhantomLabelMap(window_->state()->image().geometry(), dir_ / "labels.nii.gz");
    ASSERT_TRUE(
        runTask(*window_, [&] { window_->loadSegmentation(QString::fromStdString(other)); }).ok);
    EXPECT_TRUE(table->labelFlag(1).isEmpty());
    EXPECT_FALSE(table->findingsLabel()->isVisibleTo(table));
    // A model's declared measurement (the brain model's TIV) is shown above the table.
    pipeline::StatisticsReport run;
    run.measurements.push_back({"tiv_ml", 1452.3, "mL", "total intracranial volume"});
    table->setModelFindings(run);
    EXPECT_TRUE(
        table->findingsLabel()->text().contains("tiv_ml 1452.3 mL (total intracranial volume)"));
}

}  // namespace
}  // namespace voxseg::ui
