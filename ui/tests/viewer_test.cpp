// The viewer's main window driven as a user would (QTest events, offscreen platform): open a
// generated DICOM series, scroll, window/level, crosshair, label maps with overlay pixels, a real
// model run in the background, outputs saved and read back, bad files.
#include "core/label_colors.h"
#include "io/dicom_synth.h"
#include "io/image_io.h"
#include "io/rtstruct_reader.h"
#include "io/seg_reader.h"
#include "pipeline/labels.h"
#include "pipeline/segment_options_schema.h"
#include "tests/pipeline/test_model_package.h"
#include "tests/pipeline/test_volumes.h"
#include "tests/test_data.h"
#include "ui/bench/redraw_bench.h"
#include "ui/label_table.h"
#include "ui/log_panel.h"
#include "ui/main_window.h"
#include "ui/mpr_view.h"
#include "ui/run_model_dialog.h"
#include "ui/series_browser.h"
#include "ui/tests/viewer_test_support.h"
#include "ui/viewer_state.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <QComboBox>
#include <QLabel>
#include <QMimeData>
#include <QSignalSpy>
#include <QSlider>
#include <QTableWidget>
#include <QTest>
#include <QTimer>
#include <QTreeWidget>
#include <QUrl>

#include <cmath>
#include <fstream>

namespace voxseg::ui {
namespace {

namespace fs = std::filesystem;

uint32_t pixel(MprView* view, int64_t column, int64_t row) {
    return view->sliceImage().pixel(static_cast<int>(column), static_cast<int>(row)) | 0xFF000000u;
}

uint32_t expectedBlend(uint8_t grey, std::array<uint8_t, 3> c, double opacity) {
    const uint32_t a = static_cast<uint32_t>(std::lround(opacity * 255));
    uint32_t out = 0xFF000000u;
    for (int ch = 0; ch < 3; ++ch)
        out |= ((grey * (255 - a) + c[ch] * a + 127) / 255) << (16 - 8 * ch);
    return out;
}

class ViewerTest : public ::testing::Test {
  protected:
    void SetUp() override {
        window_ = std::make_unique<MainWindow>();
        window_->setInteractive(false);
        window_->resize(1200, 700);
        window_->show();
        ASSERT_TRUE(QTest::qWaitForWindowExposed(window_.get()));
    }
    void openSeries() {
        const std::string folder = writeSeries(dir_);
        const TaskResult r =
            runTask(*window_, [&] { window_->openPath(QString::fromStdString(folder)); });
        ASSERT_TRUE(r.finished);
        ASSERT_TRUE(r.ok) << r.message.toStdString();
        ASSERT_TRUE(window_->state()->hasImage());
    }
    // A label map on the image grid: label 1 = the sphere, label 2 = a box in the body.
    std::string writeLabelMap() {
        return writePhantomLabelMap(window_->state()->image().geometry(), dir_ / "labels.nii.gz");
    }

    testing::TempDir dir_;
    std::unique_ptr<MainWindow> window_;
};

// Issue 35: the series browser shows a Latin-1 series' strings in UTF-8 (io/dicom_charset.h).
// Before, the bytes reached QString::fromStdString as they were: 0xE4 is no UTF-8, and the row
// read "Sch\uFFFDdel nativ".
TEST_F(ViewerTest, SeriesBrowserShowsALatin1SeriesInUtf8) {
    const std::string folder = writeSeries(dir_, "latin1", [](io::SynthSeriesSpec& spec) {
        spec.ct_image_iod = true;  // declares SpecificCharacterSet ISO_IR 100
        spec.description =
            "Sch\xe4"
            "del nativ";
        spec.patient_name = "M\xfcller^J\xfcrgen";
    });
    const TaskResult r =
        runTask(*window_, [&] { window_->openPath(QString::fromStdString(folder)); });
    ASSERT_TRUE(r.finished);
    ASSERT_TRUE(r.ok) << r.message.toStdString();
    QTreeWidgetItem* patient = window_->seriesBrowser()->tree()->topLevelItem(0);
    ASSERT_NE(patient, nullptr);
    EXPECT_TRUE(patient->text(0).contains(QString::fromUtf8("M\u00fcller")))
        << patient->text(0).toStdString();
    ASSERT_GT(patient->childCount(), 0);
    QTreeWidgetItem* study = patient->child(0);
    ASSERT_GT(study->childCount(), 0);
    EXPECT_EQ(study->child(0)->text(2), QString::fromUtf8("Sch\u00e4del nativ"));
}

TEST_F(ViewerTest, OpensAGeneratedSeriesIntoThreeLinkedViews) {
    openSeries();
    ViewerState* s = window_->state();
    EXPECT_EQ(window_->seriesBrowser()->seriesCount(), 1);
    EXPECT_EQ(s->image().geometry().size, (std::array<int64_t, 3>{kColumns, kRows, kSlices}));
    EXPECT_EQ(s->cursor(), (std::array<int64_t, 3>{kColumns / 2, kRows / 2, kSlices / 2}));
    EXPECT_DOUBLE_EQ(s->window().width, 400);  // CT: abdomen window
    EXPECT_DOUBLE_EQ(s->imageValue({14, 18, 12}), 300);
    // The axial slice shows the phantom: air black, body grey at the abdomen window.
    MprView* axial = window_->view(ViewAxis::kAxial);
    EXPECT_EQ(axial->sliceImage().width(), kColumns);
    EXPECT_EQ(pixel(axial, 0, 0), 0xFF000000u);
    const uint8_t body = windowGrey(40, s->window());
    EXPECT_EQ(pixel(axial, 30, 16), 0xFF000000u | body << 16 | body << 8 | body);
    EXPECT_EQ(window_->slider(ViewAxis::kAxial)->maximum(), kSlices - 1);
    // The patient name is shown in the browser but never logged.
    const QString tree_text = window_->seriesBrowser()->tree()->topLevelItem(0)->text(0);
    EXPECT_TRUE(tree_text.contains("ANONYMOUS TEST")) << tree_text.toStdString();
    // Log records reach the panel through queued calls: wait for them rather than a fixed time.
    EXPECT_TRUE(QTest::qWaitFor([&] { return window_->logPanel()->lineCount() > 1; }, 10000));
    EXPECT_FALSE(window_->logPanel()->toPlainText().contains("ANONYMOUS"));
    EXPECT_FALSE(window_->logPanel()->toPlainText().contains("SYNTH-0001"));
}

TEST_F(ViewerTest, ScrollsByWheelKeysAndSlider) {
    openSeries();
    ViewerState* s = window_->state();
    MprView* axial = window_->view(ViewAxis::kAxial);
    const int64_t start = s->slice(ViewAxis::kAxial);
    const QPoint centre = axial->rect().center();
    QWheelEvent up(centre, axial->mapToGlobal(centre), {}, {0, 120}, Qt::NoButton, Qt::NoModifier,
                   Qt::NoScrollPhase, false);
    QApplication::sendEvent(axial, &up);
    EXPECT_EQ(s->slice(ViewAxis::kAxial), start + 1);
    QTest::keyClick(axial, Qt::Key_Down);
    QTest::keyClick(axial, Qt::Key_Down);
    EXPECT_EQ(s->slice(ViewAxis::kAxial), start - 1);
    QTest::keyClick(axial, Qt::Key_End);
    EXPECT_EQ(s->slice(ViewAxis::kAxial), kSlices - 1);
    EXPECT_EQ(window_->slider(ViewAxis::kAxial)->value(), kSlices - 1);
    window_->slider(ViewAxis::kSagittal)->setValue(3);
    EXPECT_EQ(s->slice(ViewAxis::kSagittal), 3);
    EXPECT_EQ(s->cursor()[0], 3);  // sagittal slices walk i
    // Ctrl+wheel zooms instead of scrolling.
    QWheelEvent zoom(centre, axial->mapToGlobal(centre), {}, {0, 120}, Qt::NoButton,
                     Qt::ControlModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(axial, &zoom);
    EXPECT_GT(axial->zoom(), 1.0);
    EXPECT_EQ(s->slice(ViewAxis::kAxial), kSlices - 1);
}

TEST_F(ViewerTest, WindowLevelByDragAndPresets) {
    openSeries();
    ViewerState* s = window_->state();
    MprView* coronal = window_->view(ViewAxis::kCoronal);
    const WindowLevel before = s->window();
    const QPoint c = coronal->rect().center();
    QTest::mousePress(coronal, Qt::RightButton, Qt::NoModifier, c);
    QMouseEvent move(QEvent::MouseMove, c + QPoint(40, 20),
                     coronal->mapToGlobal(c + QPoint(40, 20)), Qt::NoButton, Qt::RightButton,
                     Qt::NoModifier);
    QApplication::sendEvent(coronal, &move);
    QTest::mouseRelease(coronal, Qt::RightButton, Qt::NoModifier, c + QPoint(40, 20));
    EXPECT_GT(s->window().width, before.width);  // drag right widens
    EXPECT_LT(s->window().level, before.level);  // drag down lowers the level
    ASSERT_TRUE(window_->applyWindowPreset("CT lung"));
    EXPECT_DOUBLE_EQ(s->window().width, 1500);
    EXPECT_DOUBLE_EQ(s->window().level, -600);
    // The rendered pixels follow: the body (40 HU) under the lung window.
    const SliceFrame& f = s->frame(ViewAxis::kAxial);
    const auto scr = f.screen({30, 16, s->cursor()[2]});
    const uint8_t g = windowGrey(40, {1500, -600});
    EXPECT_EQ(pixel(window_->view(ViewAxis::kAxial), scr[0], scr[1]),
              0xFF000000u | g << 16 | g << 8 | g);
    auto* box = window_->findChild<QComboBox*>("window_presets");
    ASSERT_NE(box, nullptr);
    EXPECT_EQ(box->currentText(), "CT lung");
    EXPECT_TRUE(window_->applyWindowPreset("auto"));
    EXPECT_EQ(box->currentText(), "MR auto");  // the percentile window is named, not "custom"
    s->setWindow({s->window().width + 7, s->window().level});
    EXPECT_EQ(box->currentText(), "Window: custom");
    EXPECT_FALSE(window_->applyWindowPreset("no such preset"));
}

TEST_F(ViewerTest, ClickingMovesTheCrosshairAndTheOtherViewsFollow) {
    openSeries();
    ViewerState* s = window_->state();
    MprView* axial = window_->view(ViewAxis::kAxial);
    const QImage coronal_before = window_->view(ViewAxis::kCoronal)->sliceImage().copy();
    // Click on the pixel of voxel (14, 21) of the current axial slice.
    const SliceFrame& f = s->frame(ViewAxis::kAxial);
    const auto scr = f.screen({14, 21, s->cursor()[2]});
    const QPoint at =
        axial->widgetPointOfPixel(static_cast<double>(scr[0]), static_cast<double>(scr[1]))
            .toPoint();
    QTest::mouseClick(axial, Qt::LeftButton, Qt::NoModifier, at);
    EXPECT_EQ(s->cursor()[0], 14);
    EXPECT_EQ(s->cursor()[1], 21);
    EXPECT_EQ(s->cursor()[2], kSlices / 2);  // the axial slice did not change
    EXPECT_EQ(s->slice(ViewAxis::kCoronal), 21);
    EXPECT_EQ(s->slice(ViewAxis::kSagittal), 14);
    EXPECT_EQ(window_->slider(ViewAxis::kCoronal)->value(), 21);
    // Coronal slice 21 cuts the sphere smaller than slice 16 did.
    EXPECT_NE(window_->view(ViewAxis::kCoronal)->sliceImage(), coronal_before);
    // The status bar shows the value under the cursor.
    QMouseEvent hover(QEvent::MouseMove, at, axial->mapToGlobal(at), Qt::NoButton, Qt::NoButton,
                      Qt::NoModifier);
    QApplication::sendEvent(axial, &hover);
    EXPECT_TRUE(window_->cursorInfo()->text().contains("value 300 HU"))
        << window_->cursorInfo()->text().toStdString();
}

TEST_F(ViewerTest, LabelMapOverlayPixelsToggleAndOutline) {
    openSeries();
    ViewerState* s = window_->state();
    const TaskResult r = runTask(
        *window_, [&] { window_->loadSegmentation(QString::fromStdString(writeLabelMap())); });
    ASSERT_TRUE(r.finished && r.ok) << r.message.toStdString();
    ASSERT_EQ(s->labels().size(), 2u);
    EXPECT_EQ(s->labels()[1].voxels, 6 * 6 * 16);
    EXPECT_NEAR(s->labels()[1].volume_ml, 6 * 6 * 16 * 0.9 * 0.9 * 1.5 / 1000.0, 1e-6);
    EXPECT_EQ(window_->labelTable()->table()->rowCount(), 2);

    s->setCursor({14, 18, 12});  // centre of the sphere (label 1)
    MprView* axial = window_->view(ViewAxis::kAxial);
    const SliceFrame& f = s->frame(ViewAxis::kAxial);
    const auto centre = f.screen({14, 18, 12});
    const auto colour = labelPalette()[0];  // a plain label map: the viewer's palette
    const uint8_t grey = windowGrey(300, s->window());
    EXPECT_EQ(pixel(axial, centre[0], centre[1]), expectedBlend(grey, colour, 0.5));
    EXPECT_TRUE(window_->cursorInfo()->text().contains("label 1"))
        << window_->cursorInfo()->text().toStdString();

    // Unchecking label 1 in the table hides it.
    QTableWidgetItem* item = window_->labelTable()->table()->item(0, 0);
    item->setCheckState(Qt::Unchecked);
    EXPECT_FALSE(s->labels()[0].visible);
    EXPECT_EQ(pixel(axial, centre[0], centre[1]), 0xFF000000u | grey << 16 | grey << 8 | grey);
    item->setCheckState(Qt::Checked);

    // A new colour reaches the overlay and the table's swatch.
    const std::array<uint8_t, 3> teal{0, 128, 128};
    s->setLabelColor(0, teal);
    EXPECT_EQ(pixel(axial, centre[0], centre[1]), expectedBlend(grey, teal, 0.5));
    EXPECT_EQ(item->icon().pixmap(14, 14).toImage().pixel(7, 7), qRgb(0, 128, 128));
    EXPECT_EQ(s->labelInfos()[0].color, teal);
    s->setLabelColor(0, colour);

    // Outline: the sphere's centre is plain grey, its rim opaque.
    s->setOverlayMode(OverlayMode::kOutline);
    EXPECT_EQ(pixel(axial, centre[0], centre[1]), 0xFF000000u | grey << 16 | grey << 8 | grey);
    int64_t rim = centre[0];
    while (s->labelValue(f.voxel(rim + 1, centre[1], 12)) == 1) ++rim;
    const uint32_t opaque = 0xFF000000u | colour[0] << 16 | colour[1] << 8 | colour[2];
    EXPECT_EQ(pixel(axial, rim, centre[1]), opaque);
}

TEST_F(ViewerTest, SavesLabelMapSegAndStatisticsThatReadBack) {
    openSeries();
    ViewerState* s = window_->state();
    ASSERT_TRUE(runTask(*window_, [&] {
                    window_->loadSegmentation(QString::fromStdString(writeLabelMap()));
                }).ok);
    const std::string nii = dir_ / "out/saved.nrrd", seg = dir_ / "out/saved.dcm",
                      csv = dir_ / "out/stats.csv", png = dir_ / "out/shot.png";
    fs::create_directories(dir_.path() / "out");
    ASSERT_TRUE(window_->saveLabelMap(QString::fromStdString(nii)).isOk());
    ASSERT_TRUE(window_->saveDicomSeg(QString::fromStdString(seg)).isOk())
        << window_->lastError().toStdString();
    ASSERT_TRUE(window_->saveStatistics(QString::fromStdString(csv)).isOk());
    ASSERT_TRUE(window_->saveScreenshot(QString::fromStdString(png)).isOk());

    auto back = io::readImage(nii);
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    const int64_t n = back->geometry().voxelCount();
    int64_t differ = 0;
    visitPixels(*back, [&](const auto* p) {
        for (int64_t i = 0; i < n; ++i)
            differ += s->labelValue({i % kColumns, (i / kColumns) % kRows,
                                     i / (kColumns * kRows)}) != static_cast<int>(p[i]);
    });
    EXPECT_EQ(differ, 0);

    io::SegReadOptions options;
    options.grid = s->image().geometry();
    auto seg_back = io::readDicomSeg(seg, options);
    ASSERT_TRUE(seg_back.isOk()) << seg_back.status().toString();
    ASSERT_EQ(seg_back->segments.size(), 2u);
    int64_t seg_differ = 0;
    visitPixels(seg_back->label_map, [&](const auto* p) {
        for (int64_t i = 0; i < n; ++i)
            seg_differ += s->labelValue({i % kColumns, (i / kColumns) % kRows,
                                         i / (kColumns * kRows)}) != static_cast<int>(p[i]);
    });
    EXPECT_EQ(seg_differ, 0);

    std::ifstream f(csv);
    std::string all((std::istreambuf_iterator<char>(f)), {});
    EXPECT_NE(all.find("label 2"), std::string::npos) << all;
    EXPECT_NE(all.find(std::to_string(6 * 6 * 16)), std::string::npos) << all;
    QImage shot(QString::fromStdString(png));
    EXPECT_FALSE(shot.isNull());
    EXPECT_GE(shot.width(), 300);

    // The SEG itself loads back onto the image as a segmentation.
    ASSERT_TRUE(
        runTask(*window_, [&] { window_->loadSegmentation(QString::fromStdString(seg)); }).ok)
        << window_->lastError().toStdString();
    EXPECT_EQ(s->labels()[1].voxels, 6 * 6 * 16);
}

// RTSTRUCT (issue 16): saved from the viewer, read back by the io reader onto the image grid
// voxel for voxel, then loaded in the viewer like a SEG, with the ROI names.
TEST_F(ViewerTest, SavesAndLoadsAnRtStruct) {
    openSeries();
    ViewerState* s = window_->state();
    ASSERT_TRUE(runTask(*window_, [&] {
                    window_->loadSegmentation(QString::fromStdString(writeLabelMap()));
                }).ok);
    const std::string rt = dir_ / "rtstruct.dcm";
    ASSERT_TRUE(window_->saveRtStruct(QString::fromStdString(rt)).isOk())
        << window_->lastError().toStdString();
    const Geometry g = s->image().geometry();
    const int64_t n = g.voxelCount();
    std::vector<int> shown(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        shown[static_cast<size_t>(i)] =
            s->labelValue({i % kColumns, (i / kColumns) % kRows, i / (kColumns * kRows)});

    io::RtStructReadOptions options;
    options.grid = g;
    auto back = io::readRtStruct(rt, *s->study().series, options);
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    ASSERT_EQ(back->rois.size(), 2u);
    int64_t differ = 0;
    visitPixels(*back->grid_labels, [&](const auto* p) {
        for (int64_t i = 0; i < n; ++i)
            differ += shown[static_cast<size_t>(i)] != static_cast<int>(p[i]);
    });
    EXPECT_EQ(differ, 0);

    window_->state()->clearLabelMap();
    ASSERT_TRUE(
        runTask(*window_, [&] { window_->loadSegmentation(QString::fromStdString(rt)); }).ok)
        << window_->lastError().toStdString();
    ASSERT_EQ(s->labels().size(), 2u);
    EXPECT_EQ(s->labels()[1].voxels, 6 * 6 * 16);
    EXPECT_EQ(s->labels()[1].name, back->rois[1].description.name);
}

TEST_F(ViewerTest, RunsATinyModelInTheBackgroundAndShowsTheOverlay) {
    openSeries();
    ViewerState* s = window_->state();
    const std::string model = testing::makeTinyModelPackage(dir_, "CT");
    // The GUI thread keeps processing events while the model runs.
    int ticks = 0;
    QTimer timer;
    QObject::connect(&timer, &QTimer::timeout, [&] { ++ticks; });
    timer.start(5);
    const TaskResult r = runTask(*window_, [&] {
        window_->runModel(QString::fromStdString(model), QString::fromStdString(dir_ / "run"));
        EXPECT_TRUE(window_->busy());
    });
    ASSERT_TRUE(r.finished);
    ASSERT_TRUE(r.ok) << r.message.toStdString();
    EXPECT_GT(ticks, 0);
    ASSERT_TRUE(s->hasLabelMap());
    ASSERT_GE(s->labels().size(), 2u);
    EXPECT_EQ(s->labels()[0].name, "one");
    EXPECT_EQ(s->labels()[1].name, "two");
    EXPECT_EQ(s->labels()[1].color, (std::array<uint8_t, 3>{0, 255, 0}));
    EXPECT_TRUE(fs::exists(dir_.path() / "run/segmentation.nii.gz"));
    // The overlay is drawn: some axial pixel of a labelled voxel is not grey.
    int64_t labelled = 0;
    for (const auto& e : s->labels()) labelled += e.voxels;
    ASSERT_GT(labelled, 0);
    bool coloured = false;
    for (int64_t k = 0; k < kSlices && !coloured; ++k) {
        s->setSlice(ViewAxis::kAxial, k);
        const QImage& img = window_->view(ViewAxis::kAxial)->sliceImage();
        for (int y = 0; y < img.height() && !coloured; ++y)
            for (int x = 0; x < img.width() && !coloured; ++x) {
                const QRgb p = img.pixel(x, y);
                coloured = qRed(p) != qGreen(p) || qGreen(p) != qBlue(p);
            }
    }
    EXPECT_TRUE(coloured);
}

// The model is imported once per package while the window is open; runs without an output
// folder write into a temporary folder that the next run and closing the window remove.
TEST_F(ViewerTest, ModelImportedOnceAndRunFoldersCleanedUp) {
    openSeries();
    const std::string model = testing::makeTinyModelPackage(dir_, "CT");
    TaskResult r = runTask(*window_, [&] { window_->runModel(QString::fromStdString(model)); });
    ASSERT_TRUE(r.ok) << r.message.toStdString();
    const QString first = window_->lastRunFolder();
    ASSERT_FALSE(first.isEmpty());
    EXPECT_TRUE(QDir(first).exists());
    EXPECT_EQ(window_->modelImports(), 1);
    const int64_t voxels = window_->state()->labels().at(0).voxels;
    r = runTask(*window_, [&] { window_->runModel(QString::fromStdString(model)); });
    ASSERT_TRUE(r.ok) << r.message.toStdString();
    EXPECT_EQ(window_->modelImports(), 1);  // not imported again
    EXPECT_EQ(window_->state()->labels().at(0).voxels, voxels);
    const QString second = window_->lastRunFolder();
    EXPECT_NE(second, first);
    EXPECT_FALSE(QDir(first).exists());  // replaced: removed
    EXPECT_TRUE(QDir(second).exists());
    window_.reset();
    EXPECT_FALSE(QDir(second).exists());  // window closed: removed
}

// Segmentation > Run model: the dialog's form is segment's option schema; a bad value is
// refused naming the option, the chosen options reach the run (run.json), and other options
// import the model again.
TEST_F(ViewerTest, RunModelDialogTakesSegmentsOptionsFromTheSchema) {
    openSeries();
    const std::string model = testing::makeTinyModelPackage(dir_, "CT");
    RunModelDialog* dialog = window_->openRunModelDialog();
    ASSERT_NE(dialog, nullptr);
    for (const auto& spec : pipeline::segmentOptionSchema())
        if (spec.in_dialog)
            EXPECT_NE(dialog->field(QString::fromStdString(spec.flag)), nullptr) << spec.flag;
    dialog->setValue("--overlap", "0.99");
    auto bad = dialog->options();
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(bad.status().message().find("--overlap"), std::string::npos);
    dialog->setValue("--overlap", "0.25");
    dialog->setValue("--device", "cpu");
    dialog->setValue("--fill-holes", "true");
    dialog->setModelFolder(QString::fromStdString(model));
    auto good = dialog->options();
    ASSERT_TRUE(good.isOk()) << good.status().toString();
    ASSERT_TRUE(good->overlap);
    EXPECT_DOUBLE_EQ(*good->overlap, 0.25);
    const TaskResult r = runTask(*window_, [&] { dialog->accept(); });
    ASSERT_TRUE(r.ok) << r.message.toStdString();
    std::ifstream run(QDir(window_->lastRunFolder()).filePath("run.json").toStdString());
    const auto json = nlohmann::json::parse(run);
    EXPECT_DOUBLE_EQ(json.at("inference").at("overlap").get<double>(), 0.25) << json.dump(1);
    EXPECT_EQ(window_->modelImports(), 1);
    // Other options: imported again (the cached model was made for the first ones).
    pipeline::SegmentOptions other = *good;
    other.overlap = 0.5;
    ASSERT_TRUE(
        runTask(*window_, [&] { window_->runModel(QString::fromStdString(model), {}, other); }).ok);
    EXPECT_EQ(window_->modelImports(), 2);
}

// voxseg-viewer --bench: the report has the first image and a row per layout, view and the
// crosshair, with positive times; the study ends up shown.
TEST_F(ViewerTest, RedrawBenchReportsEveryViewAndLayout) {
    openSeries();
    pipeline::StudyInput study = window_->state()->study();
    const std::string report = runRedrawBench(*window_, study, "generated series", 3);
    EXPECT_NE(report.find("first image (3 views)"), std::string::npos) << report;
    for (const char* row :
         {"| 1x3 axial scroll", "| 1x3 coronal scroll", "| 1x3 sagittal scroll",
          "| 2x2 axial scroll", "| 2x2 sagittal scroll", "| 2x2 crosshair drag (three views)"})
        EXPECT_NE(report.find(row), std::string::npos) << row << "\n" << report;
    EXPECT_TRUE(window_->state()->hasImage());
    EXPECT_EQ(window_->layoutMode(), MainWindow::Layout::k1x3);
}

TEST_F(ViewerTest, CancelStopsAModelRunWithoutAnOverlay) {
    openSeries();
    const std::string model = testing::makeTinyModelPackage(dir_, "CT");
    const TaskResult r = runTask(*window_, [&] {
        window_->runModel(QString::fromStdString(model), QString::fromStdString(dir_ / "run"));
        window_->cancelTask();
    });
    ASSERT_TRUE(r.finished);
    EXPECT_FALSE(r.ok);
    // Cancelled is no error (issue 39): said in the status, not kept as one.
    EXPECT_EQ(r.message, "segmenting cancelled");
    EXPECT_TRUE(window_->lastError().isEmpty()) << window_->lastError().toStdString();
    EXPECT_FALSE(window_->state()->hasLabelMap());
    EXPECT_FALSE(window_->busy());
}

TEST_F(ViewerTest, BadFilesGiveMessagesNotCrashes) {
    const std::string bad = dir_ / "broken.nii.gz";
    std::ofstream(bad) << "this is not a NIfTI file";
    TaskResult r = runTask(*window_, [&] { window_->openPath(QString::fromStdString(bad)); });
    ASSERT_TRUE(r.finished);
    EXPECT_FALSE(r.ok);
    EXPECT_TRUE(window_->lastError().contains("broken.nii.gz"))
        << window_->lastError().toStdString();
    EXPECT_FALSE(window_->state()->hasImage());
    r = runTask(*window_, [&] { window_->openPath(QString::fromStdString(dir_ / "missing")); });
    EXPECT_FALSE(r.ok);
    // A label map on another grid is refused with a message; the image stays.
    openSeries();
    Volume other = Volume::allocate<uint8_t>(testing::makeGeometry({5, 5, 5}, {1, 1, 1}));
    ASSERT_TRUE(io::writeImage(other, dir_ / "other.nii.gz").isOk());
    r = runTask(*window_,
                [&] { window_->loadSegmentation(QString::fromStdString(dir_ / "other.nii.gz")); });
    EXPECT_FALSE(r.ok);
    EXPECT_TRUE(window_->lastError().contains("grid")) << window_->lastError().toStdString();
    EXPECT_TRUE(window_->state()->hasImage());
    EXPECT_FALSE(window_->state()->hasLabelMap());
    // A model folder without model.json.
    r = runTask(*window_, [&] {
        window_->runModel(QString::fromStdString(dir_ / "series"),
                          QString::fromStdString(dir_ / "run"));
    });
    EXPECT_FALSE(r.ok);
    EXPECT_FALSE(window_->busy());
}

TEST_F(ViewerTest, DropOpensFoldersAndLoadsLabelMapsOnTheImageGrid) {
    const std::string folder = writeSeries(dir_);
    auto drop = [&](const std::string& path) {
        QMimeData mime;
        mime.setUrls({QUrl::fromLocalFile(QString::fromStdString(path))});
        // Into the views area, as a file manager drop would land.
        QWidget* target = window_->view(ViewAxis::kAxial);
        const QPoint at = target->rect().center();
        QDragEnterEvent enter(at, Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(target, &enter);
        QDropEvent event(at, Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(target, &event);
    };
    TaskResult r = runTask(*window_, [&] { drop(folder); });
    ASSERT_TRUE(r.finished && r.ok) << r.message.toStdString();
    ASSERT_TRUE(window_->state()->hasImage());
    r = runTask(*window_, [&] { drop(writeLabelMap()); });
    ASSERT_TRUE(r.finished && r.ok) << r.message.toStdString();
    EXPECT_TRUE(window_->state()->hasLabelMap());
    EXPECT_EQ(window_->state()->labels().size(), 2u);
}

TEST_F(ViewerTest, KeyboardShortcutsToggleOverlayAndLabels) {
    openSeries();
    ASSERT_TRUE(runTask(*window_, [&] {
                    window_->loadSegmentation(QString::fromStdString(writeLabelMap()));
                }).ok);
    window_->activateWindow();
    ASSERT_TRUE(QTest::qWaitForWindowActive(window_.get()));
    ViewerState* s = window_->state();
    QTest::keyClick(window_.get(), Qt::Key_O);
    EXPECT_EQ(s->overlayMode(), OverlayMode::kOutline);
    QTest::keyClick(window_.get(), Qt::Key_H);
    EXPECT_FALSE(s->labels()[0].visible);
    EXPECT_FALSE(s->labels()[1].visible);
    QTest::keyClick(window_.get(), Qt::Key_H);
    EXPECT_TRUE(s->labels()[0].visible);
    QTest::keyClick(window_.get(), Qt::Key_2, Qt::AltModifier);  // CT lung
    EXPECT_DOUBLE_EQ(s->window().level, -600);
    QTest::keyClick(window_.get(), Qt::Key_2, Qt::ControlModifier);  // 2x2 layout
    EXPECT_EQ(window_->layoutMode(), MainWindow::Layout::k2x2);
}

TEST_F(ViewerTest, LayoutsAndRecentFiles) {
    openSeries();
    window_->setLayoutMode(MainWindow::Layout::k2x2);
    QTest::qWait(20);
    EXPECT_TRUE(window_->surfaceView()->isVisible());
    window_->setLayoutMode(MainWindow::Layout::k1x3);
    QTest::qWait(20);
    EXPECT_FALSE(window_->surfaceView()->isVisible());
    const int axial_x = window_->view(ViewAxis::kAxial)->mapTo(window_.get(), QPoint(0, 0)).x();
    const int sagittal_x =
        window_->view(ViewAxis::kSagittal)->mapTo(window_.get(), QPoint(0, 0)).x();
    EXPECT_LT(axial_x, sagittal_x);
    ASSERT_FALSE(window_->recentFiles().isEmpty());
    EXPECT_TRUE(window_->recentFiles().front().endsWith("series"));
}

}  // namespace
}  // namespace voxseg::ui
