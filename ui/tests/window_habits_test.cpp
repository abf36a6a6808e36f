// Issue 39 item 6, the screen and the habits: a first start maximised in 2x2; window, docks,
// layout, folders, model folder and options remembered (ui/window_settings.h); a view maximised
// by a double-click or F, the crosshair left where it was; the progress bar's percentage and
// time left; cancel is no error; no GPU is one info line.
#include "backends/registry.h"
#include "core/log.h"
#include "pipeline/segment_options_schema.h"
#include "tests/pipeline/test_model_package.h"
#include "ui/main_window.h"
#include "ui/mpr_view.h"
#include "ui/run_model_dialog.h"
#include "ui/task_progress_bar.h"
#include "ui/tests/viewer_test_support.h"
#include "ui/viewer_state.h"
#include "ui/window_settings.h"

#include <gtest/gtest.h>

#include <QApplication>
#include <QCoreApplication>
#include <QDockWidget>
#include <QMessageBox>
#include <QProcess>
#include <QProcessEnvironment>
#include <QScreen>
#include <QSignalSpy>
#include <QTest>

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

namespace voxseg::ui {
namespace {

using Voxel = std::array<int64_t, 3>;

// Log records while it lives (they still reach the sink before it: the log panel, stderr).
class CapturedLog : public log::Sink {
  public:
    static std::shared_ptr<CapturedLog> install() {
        auto captured = std::make_shared<CapturedLog>();
        captured->previous_ = log::setSink(captured);
        return captured;
    }
    void uninstall() { log::setSink(previous_); }
    void write(const log::Record& r) override {
        {
            std::lock_guard lock(mutex_);
            records_.push_back(r);
        }
        if (previous_) previous_->write(r);
    }
    std::vector<log::Record> records() {
        std::lock_guard lock(mutex_);
        return records_;
    }

  private:
    std::mutex mutex_;
    std::vector<log::Record> records_;
    std::shared_ptr<log::Sink> previous_;
};

std::string openSeries(MainWindow& w, const testing::TempDir& dir) {
    const std::string folder = writeSeries(dir);
    const TaskResult r = runTask(w, [&] { w.openPath(QString::fromStdString(folder)); });
    EXPECT_TRUE(r.finished && r.ok) << r.message.toStdString();
    return folder;
}

TEST(WindowHabits, AFirstStartIsMaximisedIn2x2) {
    MainWindow w;
    w.setInteractive(false);
    w.showAsLastTime();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    EXPECT_TRUE(w.windowState() & Qt::WindowMaximized);
    EXPECT_EQ(w.layoutMode(), MainWindow::Layout::k2x2);
    ASSERT_NE(w.surfaceView(), nullptr);
    EXPECT_TRUE(w.surfaceView()->isVisible());
    // Maximised: the window covers the screen's available area (the offscreen platform and
    // Xvfb without a window manager report it differently; neither is 1400x860's 1x3).
    const QRect screen = w.screen()->availableGeometry();
    if (QGuiApplication::platformName() == "offscreen")
        EXPECT_EQ(w.frameGeometry().size(), screen.size());
}

TEST(WindowHabits, LayoutGeometryDocksFoldersAndModelOptionsComeBackInANewWindow) {
    testing::TempDir dir;
    const QString model = QString::fromStdString(testing::makeTinyModelPackage(dir, "CT"));
    const QString saved = QString::fromStdString(dir / "out/labels.nii.gz");
    std::filesystem::create_directories(dir / "out");
    {
        MainWindow w;
        w.setInteractive(false);
        w.showAsLastTime();
        ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
        w.showNormal();
        w.resize(1000, 720);
        w.setLayoutMode(MainWindow::Layout::k1x3);
        w.findChild<QDockWidget*>("log_dock")->hide();
        openSeries(w, dir);
        RunModelDialog* dialog = w.openRunModelDialog();
        dialog->setModelFolder(model);
        dialog->setValue("--overlap", "0.3");
        dialog->setValue("--fill-holes", "true");
        ASSERT_TRUE(dialog->options().isOk()) << dialog->options().status().toString();
        const TaskResult r = runTask(w, [&] { dialog->accept(); });
        ASSERT_TRUE(r.ok) << r.message.toStdString();
        ASSERT_TRUE(w.saveLabelMap(saved).isOk());
        QTest::qWait(50);  // the resize reaches the window
        ASSERT_EQ(w.size(), QSize(1000, 720));
        ASSERT_TRUE(w.close());
    }
    MainWindow w;
    w.setInteractive(false);
    w.showAsLastTime();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    EXPECT_FALSE(w.windowState() & Qt::WindowMaximized);
    EXPECT_EQ(w.size(), QSize(1000, 720));
    EXPECT_EQ(w.layoutMode(), MainWindow::Layout::k1x3);
    EXPECT_FALSE(w.findChild<QDockWidget*>("log_dock")->isVisible());
    EXPECT_TRUE(w.findChild<QDockWidget*>("labels_dock")->isVisible());
    ASSERT_FALSE(w.recentFiles().isEmpty());
    EXPECT_TRUE(w.recentFiles().front().endsWith("series"));
    // The folder above the opened DICOM folder; the folder saved to.
    EXPECT_EQ(window_settings::folder(window_settings::Folder::kOpen),
              QString::fromStdString(dir.path().string()));
    EXPECT_EQ(window_settings::folder(window_settings::Folder::kSave),
              QString::fromStdString(dir / "out"));
    RunModelDialog* dialog = w.openRunModelDialog();
    EXPECT_EQ(dialog->modelFolder(), model);
    auto options = dialog->options();
    ASSERT_TRUE(options.isOk()) << options.status().toString();
    ASSERT_TRUE(options->overlap);
    EXPECT_DOUBLE_EQ(*options->overlap, 0.3);
    EXPECT_EQ(pipeline::segmentOptionSpec("--fill-holes").current(*options), "true");
    // Options left at their defaults are not stored (a changed default reaches the user).
    for (const auto& [flag, text] : window_settings::modelOptions())
        EXPECT_TRUE(flag == "--overlap" || flag == "--fill-holes") << flag.toStdString();
    dialog->close();
}

class MaximiseTest : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_NO_FATAL_FAILURE(showActive(w_, 1400, 860));
        openSeries(w_, dir_);
        ASSERT_TRUE(w_.state()->hasImage());
        w_.state()->setCursor({20, 16, 12});
    }
    MprView* view(ViewAxis a) { return w_.view(a); }
    // A widget point of `view` over voxel `v` of its slice.
    QPoint at(ViewAxis a, const Voxel& v) {
        const auto s = w_.state()->frame(a).screen(v);
        return view(a)
            ->widgetPointOfPixel(static_cast<double>(s[0]), static_cast<double>(s[1]))
            .toPoint();
    }
    // A double-click as the platform delivers it: press, release, press, double-click,
    // release (QTest's window overload goes through QGuiApplication, which makes the
    // double-click out of two presses).
    void doubleClick(MprView* v, const QPoint& p) {
        QTest::mouseDClick(w_.windowHandle(), Qt::LeftButton, Qt::NoModifier, v->mapTo(&w_, p));
        QApplication::processEvents();
    }
    void hover(MprView* v, const QPoint& p) {
        QMouseEvent move(QEvent::MouseMove, p, v->mapToGlobal(p), Qt::NoButton, Qt::NoButton,
                         Qt::NoModifier);
        QApplication::sendEvent(v, &move);
    }

    testing::TempDir dir_;
    MainWindow w_;
};

TEST_F(MaximiseTest, DoubleClickMaximisesTheViewAndAgainRestoresTheCrosshairStays) {
    const Voxel cursor = w_.state()->cursor();
    MprView* coronal = view(ViewAxis::kCoronal);
    const QPoint p = at(ViewAxis::kCoronal, {30, cursor[1], 5});
    const int narrow = coronal->width();
    QSignalSpy moved(w_.state(), &ViewerState::cursorChanged);
    doubleClick(coronal, p);
    // The first press moved it (as a click does), the double-click put it back.
    EXPECT_GE(moved.count(), 2);
    ASSERT_NE(w_.maximizedView(), nullptr);
    EXPECT_TRUE(coronal->isVisible());
    EXPECT_FALSE(view(ViewAxis::kAxial)->isVisible());
    EXPECT_FALSE(view(ViewAxis::kSagittal)->isVisible());
    QTest::qWait(20);
    EXPECT_GT(coronal->width(), 2 * narrow);
    EXPECT_EQ(w_.state()->cursor(), cursor) << "the double-click moved the crosshair";
    // Again: the layout is back, the crosshair still where it was.
    doubleClick(coronal, coronal->rect().center());
    EXPECT_EQ(w_.maximizedView(), nullptr);
    EXPECT_TRUE(view(ViewAxis::kAxial)->isVisible());
    EXPECT_TRUE(view(ViewAxis::kSagittal)->isVisible());
    EXPECT_EQ(w_.state()->cursor(), cursor);
    // A single click still moves it.
    QTest::qWait(QApplication::doubleClickInterval() + 50);
    QTest::mouseClick(coronal, Qt::LeftButton, Qt::NoModifier, p);
    EXPECT_EQ(w_.state()->cursor()[0], 30);
}

TEST_F(MaximiseTest, FMaximisesTheViewUnderTheMouseAndRestores) {
    const Voxel cursor = w_.state()->cursor();
    MprView* sagittal = view(ViewAxis::kSagittal);
    hover(sagittal, sagittal->rect().center());
    QTest::keyClick(&w_, Qt::Key_F);
    ASSERT_NE(w_.maximizedView(), nullptr);
    EXPECT_TRUE(sagittal->isVisible());
    EXPECT_FALSE(view(ViewAxis::kAxial)->isVisible());
    EXPECT_FALSE(view(ViewAxis::kCoronal)->isVisible());
    QTest::keyClick(&w_, Qt::Key_F);
    EXPECT_EQ(w_.maximizedView(), nullptr);
    EXPECT_TRUE(view(ViewAxis::kAxial)->isVisible());
    EXPECT_TRUE(view(ViewAxis::kCoronal)->isVisible());
    // The other layout: the 3D view stays in its place after a round trip.
    w_.setLayoutMode(MainWindow::Layout::k2x2);
    hover(view(ViewAxis::kAxial), view(ViewAxis::kAxial)->rect().center());
    QTest::keyClick(&w_, Qt::Key_F);
    EXPECT_FALSE(w_.surfaceView()->isVisible());
    QTest::keyClick(&w_, Qt::Key_F);
    EXPECT_TRUE(w_.surfaceView()->isVisible());
    EXPECT_EQ(w_.state()->cursor(), cursor);
}

// What the status bar's progress bar says along a model run's reports (fractions and seconds as
// a run would send them).
TEST(WindowHabits, ProgressSaysThePercentageAndTheTimeLeft) {
    TaskProgressBar bar;
    bar.start("segmenting");
    EXPECT_EQ(bar.text(), "segmenting  0 %");
    bar.report(0.10, "importing the model", 0.4);  // too early to tell
    EXPECT_EQ(bar.text(), "segmenting: importing the model  10 %");
    bar.report(0.25, "sliding window", 3.0);
    EXPECT_EQ(bar.text(), "segmenting: sliding window  25 % - about 9 s left");
    bar.report(0.43, "sliding window", 9.0);
    EXPECT_EQ(bar.text(), "segmenting: sliding window  43 % - about 12 s left");
    EXPECT_EQ(bar.value(), 430);
    bar.report(0.8, "sliding window", 240.0);
    EXPECT_EQ(bar.text(), "segmenting: sliding window  80 % - about 1 min left");
    bar.cancelling();
    EXPECT_EQ(bar.text(), "segmenting: cancelling...");
    // A new task starts without the old one's estimate.
    bar.start("loading");
    bar.report(0.5, "", 0.5);
    EXPECT_EQ(bar.text(), "loading  50 %");
    // The main window's bar is this one.
    MainWindow w;
    EXPECT_NE(qobject_cast<TaskProgressBar*>(w.progressBar()), nullptr);
}

TEST(WindowHabits, CancelIsAnInfoLineNotAnError) {
    testing::TempDir dir;
    MainWindow w;
    ASSERT_NO_FATAL_FAILURE(showActive(w, 1200, 700));
    openSeries(w, dir);
    w.setInteractive(true);  // errors would open a message box
    const std::string model = testing::makeTinyModelPackage(dir, "CT");
    auto log = CapturedLog::install();
    const TaskResult r = runTask(w, [&] {
        w.runModel(QString::fromStdString(model), QString::fromStdString(dir / "run"));
        w.cancelTask();
    });
    QTest::qWait(50);  // a message box would be open by now
    log->uninstall();
    ASSERT_TRUE(r.finished);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.message, "segmenting cancelled");
    EXPECT_TRUE(w.lastError().isEmpty()) << w.lastError().toStdString();
    EXPECT_TRUE(w.findChildren<QMessageBox*>().isEmpty());
    bool info = false;
    for (const log::Record& rec : log->records()) {
        EXPECT_LT(rec.level, log::Level::kWarning) << rec.message;
        info |= rec.level == log::Level::kInfo && rec.message == "segmenting cancelled";
    }
    EXPECT_TRUE(info) << "no info line says the run was cancelled";
    EXPECT_FALSE(w.state()->hasLabelMap());
}

// The child process of the test below: two model runs on device auto, each importing the model
// (other options), in a fresh process (the registry says "no GPU" once per process).
TEST(WindowHabitsChild, RunsAModelTwiceOnDeviceAuto) {
    const QString dir = qEnvironmentVariable("VOXSEG_UI_CUDA_CHILD");
    if (dir.isEmpty()) GTEST_SKIP() << "started by WindowHabits.NoGpuIsOneInfoLine only";
    testing::TempDir tmp;
    MainWindow w;
    ASSERT_NO_FATAL_FAILURE(showActive(w, 1000, 700));
    openSeries(w, tmp);
    const QString model = QString::fromStdString(testing::makeTinyModelPackage(tmp, "CT"));
    pipeline::SegmentOptions options;
    ASSERT_TRUE(runTask(w, [&] { w.runModel(model, {}, options); }).ok);
    options.overlap = 0.3;
    ASSERT_TRUE(runTask(w, [&] { w.runModel(model, {}, options); }).ok);
    EXPECT_EQ(w.modelImports(), 2);
}

TEST(WindowHabits, NoGpuIsOneInfoLine) {
    const auto names = engine::availableBackends();
    if (std::find(names.begin(), names.end(), "cuda") == names.end())
        GTEST_SKIP() << "built without CUDA: auto never considers a GPU";
    if (engine::createBackend("cuda").isOk()) GTEST_SKIP() << "a GPU is here: no fallback";
    QProcess child;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("VOXSEG_UI_CUDA_CHILD", "1");
    child.setProcessEnvironment(env);
    child.setProcessChannelMode(QProcess::MergedChannels);
    child.start(QCoreApplication::applicationFilePath(),
                {"--gtest_filter=WindowHabitsChild.RunsAModelTwiceOnDeviceAuto"});
    ASSERT_TRUE(child.waitForFinished(kTaskTimeoutMs));
    const QString out = QString::fromUtf8(child.readAll());
    ASSERT_EQ(child.exitCode(), 0) << out.toStdString();
    ASSERT_TRUE(out.contains("[  PASSED  ] 1 test")) << out.toStdString();
    EXPECT_EQ(out.count("info [engine] no CUDA device: running on the CPU"), 1)
        << out.toStdString();
    for (const QString& line : out.split('\n'))
        EXPECT_FALSE(line.startsWith("warning") && line.contains("cuda", Qt::CaseInsensitive))
            << line.toStdString();
}

}  // namespace
}  // namespace voxseg::ui
