#include "ui/main_window.h"

#include "core/atomic_file.h"
#include "core/log.h"
#include "edit/save.h"
#include "edit/segment_meta.h"
#include "edit/segmentation_load.h"
#include "io/image_io.h"
#include "pipeline/input_checks.h"
#include "pipeline/model_labels.h"
#include "pipeline/segment.h"
#include "pipeline/segment_options_schema.h"
#include "pipeline/segmentation_files.h"
#include "pipeline/statistics.h"
#include "ui/background_task.h"
#include "ui/edit_controller.h"
#include "ui/edit_toolbar.h"
#include "ui/interactive_toolbar.h"
#include "ui/label_table.h"
#include "ui/log_panel.h"
#include "ui/measure_tool.h"
#include "ui/measure_toolbar.h"
#include "ui/mpr_view.h"
#include "ui/pacs_dialog.h"
#include "ui/run_model_dialog.h"
#include "ui/segmentation_comparison.h"
#include "ui/series_area.h"
#include "ui/series_browser.h"
#include "ui/series_link.h"
#include "ui/series_pane.h"
#include "ui/surface_view.h"
#include "ui/task_progress_bar.h"
#include "ui/view_panel.h"
#include "ui/viewer_state.h"
#include "ui/window_settings.h"

#include <QAbstractSpinBox>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDateTime>
#include <QDir>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QSettings>
#include <QSlider>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTextEdit>
#include <QToolBar>

#include <atomic>
#include <chrono>
#include <mutex>

namespace voxseg::ui {
namespace {

constexpr const char* kComponent = "viewer";
constexpr int kMaxRecent = 10;

QString qstr(const std::string& s) { return QString::fromStdString(s); }

// "*.nii.gz *.nii *.nrrd *.nhdr *.mha *.mhd": the image files io/ reads, for file dialogs.
QString imageFilePatterns() {
    QStringList patterns;
    for (const std::string& ext : io::imageExtensions()) patterns << "*" + qstr(ext);
    return patterns.join(' ');
}
std::string sstr(const QString& s) { return s.toStdString(); }

using window_settings::Folder;

// Where an open dialog starts: the folder opened from last ("" if none).
QString openDialogDir() { return window_settings::folder(Folder::kOpen); }

// Where a save dialog starts: `name` in the folder saved to last.
QString saveDialogPath(const QString& name) {
    const QString dir = window_settings::folder(Folder::kSave);
    return dir.isEmpty() ? name : QDir(dir).filePath(name);
}

// Whether a task's result is a cancellation (Status kCancelled): not an error.
template <typename R>
bool wasCancelled(const R& result) {
    if constexpr (requires { result.status().code(); })
        return !result.isOk() && result.status().code() == StatusCode::kCancelled;
    else
        return false;
}

// What a model run hands back to the GUI thread.
struct ModelRun {
    PreparedLabelMap labels;
    std::string model_name, model_version;
    double seconds = 0;
    std::vector<std::string> written;
    pipeline::StatisticsReport findings;  // warnings, implausible labels, measurements
};

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent), state_(new ViewerState(this)) {
    setObjectName("voxseg_viewer");
    setWindowTitle("voxseg-viewer");
    setAcceptDrops(true);
    buildViews();
    buildDocks();
    buildMenus();
    buildEditing();

    cursor_info_ = new QLabel(this);
    cursor_info_->setObjectName("cursor_info");
    cursor_info_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    progress_ = new TaskProgressBar(this);
    progress_->hide();
    cancel_ = new QPushButton("Cancel", this);
    cancel_->setToolTip("Cancel the running task (Esc)");
    cancel_->hide();
    connect(cancel_, &QPushButton::clicked, this, &MainWindow::cancelTask);
    statusBar()->addWidget(cursor_info_, 1);
    statusBar()->addPermanentWidget(progress_);
    statusBar()->addPermanentWidget(cancel_);

    connect(state_, &ViewerState::imageChanged, this, [this] {
        updateSliders();
        updateActions();
    });
    connect(state_, &ViewerState::labelMapChanged, this, &MainWindow::updateActions);
    connect(state_, &ViewerState::cursorChanged, this, [this] {
        updateSliders();
        updateCursorInfo(state_, state_->cursor());
    });
    connect(state_, &ViewerState::labelDisplayChanged, this, [this] {
        if (outline_action_)
            outline_action_->setChecked(state_->overlayMode() == OverlayMode::kOutline);
    });
    updateActions();
    resize(1400, 860);
    last_model_folder_ = window_settings::modelFolder();
    qApp->installEventFilter(this);
}

MainWindow::~MainWindow() {
    token_.cancel();
    for (auto& t : threads_)
        if (t) t->wait();
}

// ---------------------------------------------------------------------------------------------
// Layout

void MainWindow::buildViews() {
    // The 3D view is made on first use (an OpenGL context and surface building cost nothing in
    // 1x3).
    grid_ =
        new ViewGrid([this](QWidget* parent) { return createSurfaceView(state_, parent); }, this);
    for (int a = 0; a < 3; ++a) {
        const auto axis = static_cast<ViewAxis>(a);
        const ViewPanel p = makeViewPanel(state_, axis, grid_);
        p.slider->setObjectName(QString("slider_") + viewAxisName(axis));
        views_[a] = p.view;
        sliders_[a] = p.slider;
        panels_[a] = p.panel;
    }
    grid_->setPanels(panels_);
    // Several series open side by side; the first (active) pane holds these views.
    series_ = new SeriesArea(state_, grid_, views_, this);
    setCentralWidget(series_);
    connect(series_, &SeriesArea::activateRequested, this,
            [this](int i) { (void)makeSeriesActive(i); });
    connect(series_, &SeriesArea::closeRequested, this, [this](int i) { (void)closeSeries(i); });
    connect(series_, &SeriesArea::viewHovered, this, &MainWindow::updateCursorInfo);
}

void MainWindow::setLayoutMode(Layout layout) {
    grid_->setLayoutMode(layout);
    series_->setLayoutMode(layout);
    surface_ = grid_->surface();
}

void MainWindow::toggleMaximizedView() {
    // The pane under the mouse, in any series; else the focused view's; else every series'
    // layout back. A view's panel (the view and its slider) is its parent in its grid.
    auto toggle = [this](const std::function<bool(const MprView*)>& pick) {
        for (int i = 0; i < series_->paneCount(); ++i)
            for (MprView* v : series_->pane(i)->views())
                if (v->isVisible() && pick(v)) {
                    series_->pane(i)->grid()->toggleMaximized(v->parentWidget());
                    return true;
                }
        return false;
    };
    if (toggle([](const MprView* v) { return v->mouseOver(); })) return;
    if (surface_ && surface_->isVisible() && surface_->underMouse()) {
        grid_->toggleMaximized(surface_);
        return;
    }
    if (toggle([](const MprView* v) { return v->hasFocus(); })) return;
    for (int i = 0; i < series_->paneCount(); ++i)
        series_->pane(i)->grid()->toggleMaximized(nullptr);
}

void MainWindow::showAsLastTime() {
    setLayoutMode(window_settings::layout("2x2") == "1x3" ? Layout::k1x3 : Layout::k2x2);
    if (window_settings::restoreWindow(*this))
        show();
    else
        showMaximized();
}

QProgressBar* MainWindow::progressBar() const { return progress_; }

void MainWindow::buildDocks() {
    series_browser_ = new SeriesBrowser(this);
    series_dock_ = new QDockWidget("Series", this);
    series_dock_->setObjectName("series_dock");
    series_dock_->setWidget(series_browser_);
    addDockWidget(Qt::LeftDockWidgetArea, series_dock_);
    connect(series_browser_, &SeriesBrowser::seriesActivated, this,
            [this](int index) { loadSeries(index); });
    connect(series_browser_, &SeriesBrowser::seriesActivatedBeside, this,
            [this](int index) { loadSeries(index, Open::kBeside); });

    label_table_ = new LabelTable(state_, this);
    auto* labels_dock = new QDockWidget("Labels", this);
    labels_dock->setObjectName("labels_dock");
    labels_dock->setWidget(label_table_);
    addDockWidget(Qt::RightDockWidgetArea, labels_dock);

    log_panel_ = new LogPanel(this);
    auto* log_dock = new QDockWidget("Log", this);
    log_dock->setObjectName("log_dock");
    log_dock->setWidget(log_panel_);
    addDockWidget(Qt::BottomDockWidgetArea, log_dock);
    // The label table's review and type columns fit beside the name (issue 39: they were off
    // the dock at 1600 px).
    resizeDocks({series_dock_, labels_dock}, {280, 430}, Qt::Horizontal);
    resizeDocks({log_dock}, {110}, Qt::Vertical);
}

void MainWindow::buildMenus() {
    buildFileMenu();
    buildSegmentationMenu();
    QComboBox* presets = buildViewMenu();
    QToolBar* tools = addToolBar("Tools");
    tools->setObjectName("tools");
    tools->addWidget(presets);
    tools->addAction("1x3", this, [this] { setLayoutMode(Layout::k1x3); });
    tools->addAction("2x2", this, [this] { setLayoutMode(Layout::k2x2); });
    tools->addAction(link_action_);
    buildHelpMenu();
}

void MainWindow::buildFileMenu() {
    QMenu* file = menuBar()->addMenu("&File");
    file->addAction("Open DICOM &folder...", QKeySequence::Open, this, [this] {
        const QString dir =
            QFileDialog::getExistingDirectory(this, "Open DICOM folder", openDialogDir());
        if (!dir.isEmpty()) openPath(dir);
    });
    file->addAction(
        "Open &image file...", QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O), this, [this] {
            const QString f =
                QFileDialog::getOpenFileName(this, "Open image", openDialogDir(),
                                             "Images (" + imageFilePatterns() + ");;DICOM (*)");
            if (!f.isEmpty()) openPath(f);
        });
    buildSeriesActions(file);
    file->addAction("&PACS (query, retrieve, send)...", this, [this] {
        PacsDialog* d = PacsDialog::forWindow(this);
        d->show();
        d->raise();
    });
    recent_menu_ = file->addMenu("&Recent");
    rebuildRecentMenu();
    file->addSeparator();
    image_actions_ << file->addAction(
        "&Load segmentation...", QKeySequence(Qt::CTRL | Qt::Key_L), this, [this] {
            const QString f =
                QFileDialog::getOpenFileName(this, "Load segmentation", openDialogDir(),
                                             "Label maps, DICOM SEG and RTSTRUCT (" +
                                                 imageFilePatterns() + " *.dcm);;All files (*)");
            if (!f.isEmpty()) loadSegmentation(f);
        });
    image_actions_ << file->addAction("&Compare with segmentation...", this, [this] {
        const QString f =
            QFileDialog::getOpenFileName(this, "Compare with segmentation", openDialogDir(),
                                         "Label maps, DICOM SEG and RTSTRUCT (" +
                                             imageFilePatterns() + " *.dcm);;All files (*)");
        if (!f.isEmpty()) (void)compareWithSegmentation(f);
    });
    label_actions_ << file->addAction("&Save label map...", QKeySequence::Save, this, [this] {
        const QString f = QFileDialog::getSaveFileName(this, "Save label map",
                                                       saveDialogPath("segmentation.nii.gz"),
                                                       "Label maps (*.nii.gz *.nii *.nrrd *.mha)");
        if (!f.isEmpty()) (void)saveLabelMap(f);
    });
    dicom_actions_ << file->addAction(
        "Save DICOM &SEG...", QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_S), this, [this] {
            const QString f = QFileDialog::getSaveFileName(
                this, "Save DICOM SEG", saveDialogPath("segmentation.dcm"), "DICOM (*.dcm)");
            if (!f.isEmpty()) (void)saveDicomSeg(f);
        });
    dicom_actions_ << file->addAction(
        "Save &RTSTRUCT...", QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_R), this, [this] {
            const QString f = QFileDialog::getSaveFileName(
                this, "Save RT Structure Set", saveDialogPath("rtstruct.dcm"), "DICOM (*.dcm)");
            if (!f.isEmpty()) (void)saveRtStruct(f);
        });
    dicom_actions_ << file->addAction("Send segmentation to PA&CS...", this, [this] {
        PacsDialog* d = PacsDialog::forWindow(this);
        d->show();
        d->raise();
        d->sendButton()->setFocus();
    });
    label_actions_ << dicom_actions_;
    label_actions_ << file->addAction(
        "Save s&tatistics...", QKeySequence(Qt::CTRL | Qt::Key_E), this, [this] {
            const QString f = QFileDialog::getSaveFileName(this, "Save statistics",
                                                           saveDialogPath("statistics.csv"),
                                                           "CSV (*.csv);;JSON (*.json)");
            if (!f.isEmpty()) (void)saveStatistics(f);
        });
    image_actions_ << file->addAction(
        "Export screens&hot...", QKeySequence(Qt::Key_F12), this, [this] {
            const QString f = QFileDialog::getSaveFileName(
                this, "Export screenshot", saveDialogPath("voxseg-viewer.png"), "PNG (*.png)");
            if (!f.isEmpty()) (void)saveScreenshot(f);
        });
    file->addSeparator();
    file->addAction("&Quit", QKeySequence::Quit, this, &QWidget::close);
}

void MainWindow::buildSegmentationMenu() {
    QMenu* seg = menuBar()->addMenu("&Segmentation");
    image_actions_ << seg->addAction("&Run model...", QKeySequence(Qt::CTRL | Qt::Key_R), this,
                                     [this] { openRunModelDialog(); });
    // Esc: cancel the running task; without one, drop the edit tool.
    seg->addAction("&Cancel task / no edit tool", QKeySequence(Qt::Key_Escape), this, [this] {
        if (busy_)
            cancelTask();
        else if (edit_) {
            edit_->cancelPreview();  // nothing previewed is committed
            edit_->setTool(EditTool::kNone);
        }
        if (!busy_ && measure_) measure_->setTool(MeasureKind::kNone);
    });
    seg->addSeparator();
    outline_action_ =
        seg->addAction("&Outline overlay", QKeySequence(Qt::Key_O), this, [this](bool on) {
            state_->setOverlayMode(on ? OverlayMode::kOutline : OverlayMode::kFill);
        });
    outline_action_->setCheckable(true);
    label_actions_ << outline_action_;
    label_actions_ << seg->addAction("Show/&hide labels", QKeySequence(Qt::Key_H), this, [this] {
        bool any_visible = false;
        for (const auto& e : state_->labels()) any_visible |= e.visible;
        state_->setAllLabelsVisible(!any_visible);
    });
    label_actions_ << seg->addAction("Clear label map", this, [this] { state_->clearLabelMap(); });
}

// The View menu, and the window-preset box the tool bar shows (kept in step with the window).
QComboBox* MainWindow::buildViewMenu() {
    QMenu* view = menuBar()->addMenu("&View");
    view->addAction(link_action_);
    view->addAction("Layout &1x3", QKeySequence(Qt::CTRL | Qt::Key_1), this,
                    [this] { setLayoutMode(Layout::k1x3); });
    view->addAction("Layout &2x2 (with 3D)", QKeySequence(Qt::CTRL | Qt::Key_2), this,
                    [this] { setLayoutMode(Layout::k2x2); });
    view->addAction("&Maximise the view under the mouse / restore (or double-click)",
                    QKeySequence(Qt::Key_F), this, &MainWindow::toggleMaximizedView);
    image_actions_ << view->addAction("&Reset zoom and pan", QKeySequence(Qt::CTRL | Qt::Key_0),
                                      this, [this] {
                                          for (auto* v : views_) v->resetView();
                                      });
    view->addSeparator();
    QMenu* window = view->addMenu("&Window");
    auto* presets = new QComboBox(this);
    presets->setObjectName("window_presets");
    presets->addItem("MR auto");
    image_actions_ << window->addAction("&Auto (percentiles)", QKeySequence(Qt::ALT | Qt::Key_0),
                                        this, [this] { applyWindowPreset("auto"); });
    int key = Qt::Key_1;
    for (const auto& p : ctWindowPresets()) {
        const QString name = p.name;
        image_actions_ << window->addAction(name, QKeySequence(Qt::ALT | key++), this,
                                            [this, name] { applyWindowPreset(name); });
        presets->addItem(name);
    }
    presets->addItem("Window: custom");
    connect(presets, &QComboBox::activated, this, [this, presets](int i) {
        if (i == presets->count() - 1) return;
        applyWindowPreset(i == 0 ? QString("auto") : presets->itemText(i));
    });
    connect(state_, &ViewerState::imageChanged, this, [this] { auto_window_image_ = nullptr; });
    // The box names the preset the current window matches.
    connect(state_, &ViewerState::windowChanged, presets, [this, presets] {
        const WindowLevel w = state_->window();
        int index = presets->count() - 1;
        const auto& list = ctWindowPresets();
        for (size_t i = 0; i < list.size(); ++i)
            if (list[i].window.width == w.width && list[i].window.level == w.level)
                index = static_cast<int>(i) + 1;
        if (index == presets->count() - 1 && state_->hasImage()) {
            // The automatic (percentile) window, computed once per image.
            if (auto_window_image_ != state_->image().base()) {
                auto_window_ = autoWindow(state_->image());
                auto_window_image_ = state_->image().base();
            }
            if (auto_window_.width == w.width && auto_window_.level == w.level) index = 0;
        }
        presets->setCurrentIndex(index);
    });
    for (QDockWidget* d : findChildren<QDockWidget*>()) view->addAction(d->toggleViewAction());
    return presets;
}

void MainWindow::buildHelpMenu() {
    QMenu* help = menuBar()->addMenu("&Help");
    help->addAction("&Keys", this, [this] {
        QMessageBox::information(
            this, "Keys",
            "Views: left = crosshair, right drag = window/level, middle or Shift+left drag = "
            "pan, wheel = slice, Ctrl+wheel = zoom\n"
            "Up/Down, PageUp/PageDown, Home/End: slice   +/-: zoom   R: reset view\n"
            "Ctrl+O folder, Ctrl+Shift+O image, Ctrl+L segmentation, Ctrl+R run model, Esc "
            "cancel\n"
            "Ctrl+S label map, Ctrl+Shift+S DICOM SEG, Ctrl+E statistics, F12 screenshot\n"
            "O outline, H show/hide labels, Alt+0 auto window, Alt+1..4 CT brain/lung/abdomen/"
            "bone, Ctrl+1/Ctrl+2 layouts, F or double-click: maximise the view under the mouse "
            "/ restore\n"
            "Edit: 1 paint, 2 erase, 3 level trace, 4 grow, 5 threshold, Esc no tool, 6 fill "
            "between slices, 7 keep largest island, Shift+wheel brush radius, Ctrl+Z undo, "
            "Ctrl+Y redo\n"
            "Series: File > Open beside (series browser: Ctrl+double-click or right click), K "
            "link crosshairs and slices across series on/off");
    });
}

void MainWindow::updateActions() {
    const bool image = state_->hasImage(), labels = state_->hasLabelMap();
    for (QAction* a : image_actions_) a->setEnabled(image);
    for (QAction* a : label_actions_) a->setEnabled(labels);
    for (QAction* a : dicom_actions_) a->setEnabled(labels && state_->study().series.has_value());
}

void MainWindow::updateSliders() {
    for (int a = 0; a < 3; ++a) {
        QSlider* s = sliders_[a];
        const QSignalBlocker block(s);
        if (!state_->hasImage()) {
            s->setRange(0, 0);
            continue;
        }
        const auto axis = static_cast<ViewAxis>(a);
        s->setRange(0, static_cast<int>(state_->frame(axis).depth - 1));
        s->setValue(static_cast<int>(state_->slice(axis)));
    }
}

void MainWindow::updateCursorInfo(const ViewerState* doc,
                                  std::optional<std::array<int64_t, 3>> voxel) {
    if (!voxel || !doc) {
        doc = state_;
        voxel = state_->cursor();
    }
    if (!doc->hasImage() || !doc->inside(*voxel)) {
        cursor_info_->clear();
        return;
    }
    const auto& v = *voxel;
    const Vec3 p = doc->image().geometry().indexToPhysical(
        {static_cast<double>(v[0]), static_cast<double>(v[1]), static_cast<double>(v[2])});
    const bool ct = doc->image().info().modality == "CT";
    // With several series open, which one the figures are of.
    QString text = series_->seriesCount() > 1 ? doc->title() + ":   " : QString();
    text += QString("voxel (%1, %2, %3)   LPS (%4, %5, %6) mm   value %7%8")
                .arg(v[0])
                .arg(v[1])
                .arg(v[2])
                .arg(p[0], 0, 'f', 1)
                .arg(p[1], 0, 'f', 1)
                .arg(p[2], 0, 'f', 1)
                .arg(doc->imageValue(v), 0, 'g', 6)
                .arg(ct ? " HU" : "");
    if (doc->hasLabelMap()) {
        const int l = doc->labelValue(v);
        text += l == 0 ? QString("   label -")
                       : QString("   label %1 (%2)").arg(qstr(doc->labelName(l))).arg(l);
    }
    cursor_info_->setText(text);
}

bool MainWindow::applyWindowPreset(const QString& name) {
    if (!state_->hasImage()) return false;
    if (name.compare("auto", Qt::CaseInsensitive) == 0) {
        state_->setWindow(autoWindow(state_->image()));
        return true;
    }
    for (const auto& p : ctWindowPresets())
        if (name.compare(p.name, Qt::CaseInsensitive) == 0) {
            state_->setWindow(p.window);
            return true;
        }
    return false;
}

// ---------------------------------------------------------------------------------------------
// Tasks

template <typename R>
bool MainWindow::startTask(const QString& name, std::function<R(const Progress&)> work,
                           std::function<void(R&)> done) {
    if (busy_) {
        reportError("cannot start " + name,
                    Status(StatusCode::kFailedPrecondition,
                           sstr(task_name_) + " is still running; wait or cancel it (Esc)"));
        return false;
    }
    busy_ = true;
    task_name_ = name;
    token_ = CancelToken();
    progress_->start(name);  // "43 % - about 12 s left" as it goes (core/eta.h)
    progress_->show();
    cancel_->show();
    cancel_->setEnabled(true);
    auto last = std::make_shared<std::atomic<int>>(-1);
    const auto t0 = std::chrono::steady_clock::now();
    Progress progress(
        [this, last, t0](double fraction, std::string_view stage) {
            const int permille = static_cast<int>(fraction * 1000);
            if (last->exchange(permille) == permille) return;
            const QString s = QString::fromUtf8(stage.data(), static_cast<int>(stage.size()));
            const double elapsed =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            QMetaObject::invokeMethod(
                this,
                [this, permille, s, elapsed] { progress_->report(permille / 1000.0, s, elapsed); },
                Qt::QueuedConnection);
        },
        token_);
    QThread* t = runInBackground<R>(
        this, [work = std::move(work), progress] { return work(progress); },
        [this, name, done = std::move(done)](R& result) {
            busy_ = false;
            progress_->hide();
            cancel_->hide();
            if (wasCancelled(result)) {
                // The user's choice, not an error: an info line, no message box.
                log::info(kComponent, "{} cancelled", sstr(name));
                return finishTask(false, name + " cancelled");
            }
            done(result);
        });
    threads_.removeAll(nullptr);
    threads_ << QPointer<QThread>(t);
    return true;
}

void MainWindow::finishTask(bool ok, const QString& message) {
    statusBar()->showMessage(message, 8000);
    emit taskFinished(ok, message);
}

void MainWindow::cancelTask() {
    if (!busy_) return;
    token_.cancel();
    cancel_->setEnabled(false);
    progress_->cancelling();
    log::info(kComponent, "cancel requested");
}

void MainWindow::reportError(const QString& what, const Status& status) {
    const QString text = what + ": " + qstr(status.toString());
    last_error_ = text;
    log::error(kComponent, "{}", sstr(text));
    if (interactive_ && status.code() != StatusCode::kCancelled) {
        auto* box =
            new QMessageBox(QMessageBox::Warning, "voxseg-viewer", text, QMessageBox::Ok, this);
        box->setAttribute(Qt::WA_DeleteOnClose);
        box->open();  // not exec(): the window keeps running
    }
}

void MainWindow::openPath(const QString& path, Open how) {
    const QFileInfo fi(path);
    if (!fi.exists()) {
        reportError("cannot open " + path, notFound("no such file or folder", sstr(path)));
        emit taskFinished(false, last_error_);
        return;
    }
    window_settings::rememberFolder(Folder::kOpen, path);
    if (!state_->hasImage()) how = Open::kReplace;
    if (fi.isFile() && io::isImageFile(sstr(path)))
        loadImageFile(path, how);
    else
        scanFolder(path, how);
}

void MainWindow::loadImageFile(const QString& path, Open how) {
    if (how == Open::kReplace &&
        !keepOrSaveEditsBeforeTask("opening " + QFileInfo(path).fileName()))
        return;
    const std::string p = sstr(path);
    startTask<Result<pipeline::StudyInput>>(
        "loading",
        [p](const Progress& progress) { return pipeline::loadStudy(p, "", {}, progress); },
        [this, path, how](Result<pipeline::StudyInput>& r) {
            if (!r.isOk()) {
                reportError("cannot open " + path, r.status());
                return finishTask(false, last_error_);
            }
            const Geometry g = r->volume.geometry();
            log::info(kComponent, "opened {}: {}x{}x{} {} in {:.2f} s", sstr(path), g.size[0],
                      g.size[1], g.size[2], g.orientationCode(), r->load_seconds);
            if (how == Open::kBeside && state_->hasImage()) {
                addRecent(path);
                return openBeside(std::move(r.value()), path);
            }
            state_->setStudy(std::move(r.value()), path);
            series_browser_->clear();
            scan_.reset();
            setWindowTitle("voxseg-viewer - " + QFileInfo(path).fileName());
            addRecent(path);
            offerRecovery();
            finishTask(true, "opened " + path);
        });
}

void MainWindow::scanFolder(const QString& path, Open how) {
    const std::string p = sstr(path);
    startTask<Result<io::DicomScanResult>>(
        "scanning DICOM",
        [p](const Progress& progress) { return io::scanDicom({p}, {}, progress); },
        [this, path, how](Result<io::DicomScanResult>& r) {
            if (!r.isOk()) {
                reportError("cannot open " + path, r.status());
                return finishTask(false, last_error_);
            }
            scan_ = std::move(r.value());
            scan_path_ = path;
            series_browser_->setScan(*scan_, path);
            series_dock_->show();
            series_dock_->raise();
            log::info(kComponent, "{}: {} series, {} files skipped", sstr(path),
                      scan_->series.size(), scan_->skipped.size());
            addRecent(path);
            if (scan_->series.size() == 1) {
                // One series: load it at once (the browser still shows what was found).
                QMetaObject::invokeMethod(
                    this, [this, how] { loadSeries(0, how); }, Qt::QueuedConnection);
                return;
            }
            finishTask(true, QString("%1 series found: pick one in the series browser")
                                 .arg(scan_->series.size()));
        });
}

void MainWindow::loadSeries(int candidate_index, Open how) {
    if (!scan_ || candidate_index < 0 ||
        static_cast<size_t>(candidate_index) >= scan_->series.size()) {
        reportError("cannot load series", invalidArgument("no such series in the last scan"));
        return finishTask(false, last_error_);
    }
    if (!state_->hasImage()) how = Open::kReplace;
    if (how == Open::kReplace && !keepOrSaveEditsBeforeTask("loading another series")) return;
    const io::SeriesCandidate candidate = scan_->series[static_cast<size_t>(candidate_index)];
    const QString source = scan_path_;
    startTask<Result<pipeline::StudyInput>>(
        "loading series",
        [candidate](const Progress& progress) -> Result<pipeline::StudyInput> {
            const auto t0 = std::chrono::steady_clock::now();
            VOXSEG_ASSIGN_OR_RETURN(Volume v, io::loadSeries(candidate, {}, progress));
            pipeline::StudyInput in;
            in.volume = std::move(v);
            in.series = candidate;
            in.load_seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            return in;
        },
        [this, source, candidate, how](Result<pipeline::StudyInput>& r) {
            if (!r.isOk()) {
                reportError("cannot load series " + qstr(candidate.series_uid), r.status());
                return finishTask(false, last_error_);
            }
            const Geometry g = r->volume.geometry();
            log::info(kComponent, "series {} ({}): {}x{}x{} loaded in {:.2f} s",
                      candidate.series_uid, candidate.modality, g.size[0], g.size[1], g.size[2],
                      r->load_seconds);
            for (const auto& w : r->volume.info().warnings) log::warning(kComponent, "{}", w);
            if (how == Open::kBeside && state_->hasImage())
                return openBeside(std::move(r.value()), source);
            state_->setStudy(std::move(r.value()), source);
            // The window title may show the description; patient data stays out of logs.
            setWindowTitle("voxseg-viewer - " + qstr(candidate.modality) + " " +
                           qstr(candidate.description));
            offerRecovery();
            finishTask(true, "loaded series " + qstr(candidate.series_uid));
        });
}

void MainWindow::loadSegmentation(const QString& path) {
    if (!state_->hasImage()) {
        reportError("cannot load " + path,
                    Status(StatusCode::kFailedPrecondition, "open the image it belongs to first"));
        return finishTask(false, last_error_);
    }
    if (!keepOrSaveEditsBeforeTask("loading " + QFileInfo(path).fileName())) return;
    const std::string p = sstr(path);
    const Volume image = state_->image();
    std::optional<io::SeriesCandidate> series = state_->study().series;
    // The voxels and, per label, name, colour, codes, review status and provenance as saved
    // (edit/segmentation_load.h: the file's own fields and the sidecar beside it).
    struct Loaded {
        PreparedLabelMap prepared;
        std::vector<edit::SegmentMeta> segments;
    };
    startTask<Result<Loaded>>(
        "loading segmentation",
        [p, image, series](const Progress& progress) -> Result<Loaded> {
            VOXSEG_ASSIGN_OR_RETURN(
                edit::LoadedSegmentation file,
                edit::loadSegmentation(p, image.geometry(), series ? &*series : nullptr, progress));
            for (const std::string& w : file.warnings) log::warning(kComponent, "{}: {}", p, w);
            if (file.overlapping_voxels > 0)
                log::warning(kComponent, "{}: {} voxels belong to several segments (higher wins)",
                             p, file.overlapping_voxels);
            if (!file.sidecar.empty())
                log::info(kComponent, "{}: labels and review status also from {}", p, file.sidecar);
            std::vector<LabelInfo> infos(file.segments.begin(), file.segments.end());
            VOXSEG_ASSIGN_OR_RETURN(
                PreparedLabelMap prepared,
                prepareLabelMap(image, std::move(file.label_map), std::move(infos),
                                std::move(file.descriptions)));
            return Loaded{std::move(prepared), std::move(file.segments)};
        },
        [this, path, image](Result<Loaded>& r) {
            if (!r.isOk()) {
                reportError("cannot load segmentation " + path, r.status());
                return finishTask(false, last_error_);
            }
            if (state_->image().base() != image.base()) {
                reportError("segmentation " + path + " not shown",
                            Status(StatusCode::kFailedPrecondition,
                                   "the image changed while it was loading"));
                return finishTask(false, last_error_);
            }
            state_->applyLabelMap(std::move(r->prepared));
            // Review status, and labels saved without voxels.
            if (!r->segments.empty()) state_->applySegmentMetas(r->segments);
            algorithm_name_ = "voxseg-viewer";
            algorithm_version_ = "0";
            finishTask(true, "loaded segmentation " + path);
        });
}

// The last imported model, shared with the worker thread that runs it (one run at a time).
struct MainWindow::SegmenterCache {
    std::mutex mutex;
    std::string key;  // package folder + model.json's modification time + options
    std::shared_ptr<pipeline::Segmenter> segmenter;
    int imports = 0;
};

int MainWindow::modelImports() const {
    if (!segmenter_cache_) return 0;
    std::lock_guard lock(segmenter_cache_->mutex);
    return segmenter_cache_->imports;
}

QString MainWindow::lastRunFolder() const { return run_dir_ ? run_dir_->path() : QString(); }

RunModelDialog* MainWindow::openRunModelDialog() {
    auto* dialog = new RunModelDialog(last_model_folder_, this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    // The options changed last time (window_settings.h), as the CLI would take them.
    for (const auto& [flag, text] : window_settings::modelOptions()) dialog->setValue(flag, text);
    if (state_->hasImage()) dialog->setInput(state_->study());  // its input checks
    connect(dialog, &QDialog::accepted, this, [this, dialog] {
        auto options = dialog->options();  // checked before the dialog accepts
        last_model_folder_ = dialog->modelFolder();
        if (options.isOk()) window_settings::rememberModel(last_model_folder_, *options);
        if (options.isOk()) runModel(dialog->modelFolder(), {}, std::move(options.value()));
    });
    dialog->open();
    return dialog;
}

void MainWindow::runModel(const QString& model_folder, const QString& out_dir,
                          pipeline::SegmentOptions options) {
    if (!state_->hasImage()) {
        reportError("cannot run " + model_folder,
                    Status(StatusCode::kFailedPrecondition, "open an image first"));
        return finishTask(false, last_error_);
    }
    if (busy_) {
        // Checked before the run folder is replaced: the running task may be writing into it.
        reportError("cannot run " + model_folder,
                    Status(StatusCode::kFailedPrecondition,
                           sstr(task_name_) + " is still running; wait or cancel it (Esc)"));
        return;
    }
    if (!keepOrSaveEditsBeforeTask("running the model")) return;
    QString out = out_dir;
    if (out.isEmpty()) {
        // Replacing the previous run's folder removes it (no task is running).
        auto run_dir =
            std::make_shared<QTemporaryDir>(QDir::temp().filePath("voxseg-viewer-XXXXXX"));
        if (!run_dir->isValid()) {
            reportError("cannot run " + model_folder,
                        Status(StatusCode::kIoError,
                               "no temporary folder: " + sstr(run_dir->errorString()) +
                                   "; check free space in " + sstr(QDir::tempPath())));
            return finishTask(false, last_error_);
        }
        run_dir_ = run_dir;
        out = run_dir->path();
    }
    if (!segmenter_cache_) segmenter_cache_ = std::make_shared<SegmenterCache>();
    options.outputs.preview = false;
    options.outputs.dicom_seg = false;
    // The imported model is reused while the package and the options stay the same.
    std::string key = sstr(QFileInfo(model_folder).canonicalFilePath()) + "|" +
                      sstr(QFileInfo(QDir(model_folder).filePath("model.json"))
                               .lastModified()
                               .toString(Qt::ISODateWithMs)) +
                      "|preview=0,seg=0";
    for (const auto& spec : pipeline::segmentOptionSchema())
        key += "|" + spec.flag + "=" + spec.current(options);
    const auto cache = segmenter_cache_;
    const pipeline::StudyInput study = state_->study();
    const std::string model = sstr(model_folder), out_path = sstr(out),
                      source = sstr(state_->source());
    log::info(kComponent, "running model {} (outputs in {})", model, out_path);
    startTask<Result<ModelRun>>(
        "segmenting",
        [study, model, out_path, source, cache, key,
         options](const Progress& progress) -> Result<ModelRun> {
            const auto t0 = std::chrono::steady_clock::now();
            std::shared_ptr<pipeline::Segmenter> segmenter;
            {
                std::lock_guard lock(cache->mutex);
                if (cache->key == key) segmenter = cache->segmenter;
            }
            if (!segmenter) {
                // A device fallback (auto -> cpu) is logged by the engine itself.
                VOXSEG_ASSIGN_OR_RETURN(auto created, pipeline::Segmenter::create(model, options));
                segmenter = std::make_shared<pipeline::Segmenter>(std::move(created));
                std::lock_guard lock(cache->mutex);
                cache->key = key;
                cache->segmenter = segmenter;
                ++cache->imports;
            } else {
                log::info(kComponent, "model {} already imported", model);
            }
            VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());
            // The override is the dialog's checkbox here, not segment's flag.
            for (const auto& mm :
                 pipeline::modalityMismatches(segmenter->model(), study.modalities()))
                if (!options.ignore_modality)
                    return pipeline::modalityRefusal(segmenter->model(), mm, kIgnoreModalityHint,
                                                     source);
            VOXSEG_ASSIGN_OR_RETURN(auto report, segmenter->run(study, source, out_path, progress));
            ModelRun run;
            const auto& m = segmenter->model();
            run.model_name = m.name;
            run.model_version = m.version;
            run.written = report.written;
            run.findings = report.statistics;
            VOXSEG_ASSIGN_OR_RETURN(
                run.labels, prepareLabelMap(study.volume, std::move(report.label_map), m.labels,
                                            pipeline::modelSegmentDescriptions(m)));
            run.seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            return run;
        },
        [this, model_folder, study](Result<ModelRun>& r) {
            if (!r.isOk()) {
                reportError("segmentation with " + model_folder + " failed", r.status());
                return finishTask(false, last_error_);
            }
            if (state_->image().base() != study.volume.base()) {
                reportError("segmentation not shown", Status(StatusCode::kFailedPrecondition,
                                                             "the image changed while it ran"));
                return finishTask(false, last_error_);
            }
            algorithm_name_ = r->model_name;
            algorithm_version_ = r->model_version;
            log::info(kComponent, "model {} {} done in {:.1f} s", r->model_name, r->model_version,
                      r->seconds);
            state_->applyLabelMap(std::move(r->labels));
            label_table_->setModelFindings(r->findings);
            finishTask(true, QString("segmentation done in %1 s").arg(r->seconds, 0, 'f', 1));
        });
}

// ---------------------------------------------------------------------------------------------
// Outputs

Status MainWindow::saveLabelMap(const QString& path) {
    edit_->flushStatistics();
    Status s = state_->hasLabelMap()
                   ? io::writeImage(state_->labelMap(), sstr(path))
                   : Status(StatusCode::kFailedPrecondition, "no label map to save", sstr(path));
    if (s.isOk()) s = writeSidecar(path, {});
    onSaved(path, s, "label map");
    return s;
}

Status MainWindow::writeSidecar(const QString& path,
                                const std::vector<edit::LabelChange>& changes) {
    std::vector<edit::SegmentMeta> metas = state_->segmentMetas();
    for (auto& m : metas)
        for (const auto& c : changes)
            if (c.label == m.value) m.algorithm_type = c.algorithmTypeAfter(m.algorithm_type);
    return edit::writeSegmentsFile(metas, edit::sidecarPath(sstr(path)));
}

void MainWindow::onSaved(const QString& path, const Status& s, const char* what) {
    if (!s.isOk()) {
        reportError(QString("cannot save ") + what, s);
        return;
    }
    log::info(kComponent, "{} saved to {} (labels: {})", what, sstr(path),
              edit::sidecarPath(sstr(path)));
    window_settings::rememberFolder(Folder::kSave, path);
    edit_->markSaved();
}

Status MainWindow::saveDicomObject(bool rtstruct, const QString& path) {
    const auto k = rtstruct ? pipeline::DicomSegmentationKind::kRtStruct
                            : pipeline::DicomSegmentationKind::kSeg;
    const char* what = k == pipeline::DicomSegmentationKind::kSeg ? "DICOM SEG" : "RTSTRUCT";
    edit_->flushStatistics();
    Status s;
    std::vector<edit::LabelChange> changes;
    if (!state_->hasLabelMap()) {
        s = Status(StatusCode::kFailedPrecondition, "no label map to save", sstr(path));
    } else if (!state_->study().series) {
        s = invalidArgument(std::string(what) +
                                " needs a DICOM source series; this image came from a file: save "
                                "a label map instead",
                            sstr(path));
    } else if (!rtstruct && edit_->hasSession()) {
        // Edited: a new series saying so, each segment's SegmentAlgorithmType from what the
        // edits did to it (edit/save.h).
        auto compared = edit::compareLabelMaps(edit_->baseLabels(), state_->labelMap());
        s = compared.status();
        if (s.isOk()) {
            changes = std::move(compared.value());
            edit::SaveOptions options;
            options.algorithm_name = algorithm_name_;
            options.algorithm_version = algorithm_version_;
            options.changes = changes;
            s = edit::saveEditedSegmentation(state_->labelMap(), sstr(path),
                                             &*state_->study().series,
                                             state_->segmentDescriptions(), options);
        }
    } else {
        pipeline::DicomSegmentationOptions options;
        options.algorithm_name = algorithm_name_;
        options.algorithm_version = algorithm_version_;
        s = pipeline::writeDicomSegmentation(k, state_->labelMap(), *state_->study().series,
                                             state_->segmentDescriptions(), options, sstr(path));
    }
    if (s.isOk()) s = writeSidecar(path, changes);
    onSaved(path, s, what);
    return s;
}

Status MainWindow::saveDicomSeg(const QString& path) { return saveDicomObject(false, path); }

Status MainWindow::saveRtStruct(const QString& path) { return saveDicomObject(true, path); }

Status MainWindow::saveStatistics(const QString& path) {
    edit_->flushStatistics();
    Status s;
    if (!state_->hasLabelMap())
        s = Status(StatusCode::kFailedPrecondition, "no label map: nothing to measure", sstr(path));
    else if (path.endsWith(".json", Qt::CaseInsensitive))
        s = pipeline::writeStatisticsJson(state_->statistics(), sstr(path));
    else
        s = pipeline::writeStatisticsCsv(state_->statistics(), sstr(path));
    if (!s.isOk())
        reportError("cannot save statistics", s);
    else
        log::info(kComponent, "statistics saved to {}", sstr(path));
    if (s.isOk()) window_settings::rememberFolder(Folder::kSave, path);
    return s;
}

QImage MainWindow::grabViews(bool whole_window) {
    QWidget* views = series_->paneCount() > 1 ? static_cast<QWidget*>(series_) : grid_;
    return (whole_window ? grab() : views->grab()).toImage();
}

Status MainWindow::saveScreenshot(const QString& path, bool whole_window) {
    const QImage image = grabViews(whole_window);
    AtomicFile out(sstr(path));
    Status s = out.checkWritable();
    if (s.isOk() && !image.save(QString::fromStdString(out.tempPath()), "PNG"))
        s = ioError("could not write the PNG", sstr(path));
    if (s.isOk()) s = out.commit();
    if (!s.isOk())
        reportError("cannot save the screenshot", s);
    else
        log::info(kComponent, "screenshot saved to {}", sstr(path));
    return s;
}

// ---------------------------------------------------------------------------------------------
// Recent files, drag and drop

QStringList MainWindow::recentFiles() const { return QSettings().value("recent").toStringList(); }

void MainWindow::addRecent(const QString& path) {
    QStringList list = recentFiles();
    const QString abs = QFileInfo(path).absoluteFilePath();
    list.removeAll(abs);
    list.prepend(abs);
    while (list.size() > kMaxRecent) list.removeLast();
    QSettings().setValue("recent", list);
    rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
    if (!recent_menu_) return;
    recent_menu_->clear();
    const QStringList list = recentFiles();
    for (int i = 0; i < list.size(); ++i) {
        const QString path = list[i];
        QAction* a = recent_menu_->addAction(QString("&%1 %2").arg((i + 1) % 10).arg(path), this,
                                             [this, path] { openPath(path); });
        a->setToolTip(path);
    }
    recent_menu_->setEnabled(!list.isEmpty());
    if (!recent_beside_menu_) return;
    recent_beside_menu_->clear();
    for (int i = 0; i < list.size(); ++i) {
        const QString path = list[i];
        recent_beside_menu_->addAction(QString("&%1 %2").arg((i + 1) % 10).arg(path), this,
                                       [this, path] { openPath(path, Open::kBeside); });
    }
    recent_beside_menu_->setEnabled(!list.isEmpty());
}

bool MainWindow::saveBeforeClose() {
    const bool dicom = state_->study().series.has_value();
    const QString f =
        dicom ? QFileDialog::getSaveFileName(this, "Save DICOM SEG", "segmentation-edited.dcm",
                                             "DICOM (*.dcm)")
              : QFileDialog::getSaveFileName(this, "Save label map", "segmentation-edited.nii.gz",
                                             "Label maps (*.nii.gz *.nii *.nrrd *.mha)");
    if (f.isEmpty()) return false;
    return (dicom ? saveDicomSeg(f) : saveLabelMap(f)).isOk();
}

// ---------------------------------------------------------------------------------------------
// Editing

void MainWindow::buildEditing() {
    edit_ = new EditController(state_, this);
    const QString data = QStandardPaths::writableLocation(QStandardPaths::AppLocalDataLocation);
    if (!data.isEmpty()) edit_->setRecoveryRoot(QDir(data).filePath("recovery"));
    for (MprView* v : views_) v->setEditController(edit_);
    // Plane-bound one-shot ops act in the view the mouse was last over.
    edit_toolbar_ = new EditToolbar(
        edit_, state_, [this] { return edit_->brushView(); }, this);
    addToolBarBreak();
    addToolBar(Qt::TopToolBarArea, edit_toolbar_);
    interactive_toolbar_ = new InteractiveToolbar(edit_, this);
    addToolBarBreak();
    addToolBar(Qt::TopToolBarArea, interactive_toolbar_);
    connect(edit_, &EditController::editFailed, this, [this](const QString& message) {
        last_error_ = message;
        statusBar()->showMessage(message, 8000);
    });
    connect(edit_, &EditController::reported, this,
            [this](const QString& message) { statusBar()->showMessage(message, 15000); });
    connect(edit_, &EditController::historyChanged, this, [this] {
        setWindowTitle(windowTitle().remove(QRegularExpression("^\\* ")));
        if (edit_->dirty()) setWindowTitle("* " + windowTitle());
    });
    label_table_->setClearLabel([this](int value) { return edit_->clearLabel(value); });
    connect(label_table_, &LabelTable::reviewFinished, this, [this] {
        statusBar()->showMessage("every label is reviewed: " + label_table_->progressText(), 8000);
    });
    connect(label_table_, &LabelTable::labelActivated, edit_, &EditController::setActiveLabel);

    measure_ = new MeasureTool(state_, this);
    for (MprView* v : views_) v->setMeasureTool(measure_);
    measure_toolbar_ = new MeasureToolbar(measure_, this);
    addToolBar(Qt::TopToolBarArea, measure_toolbar_);
    connect(measure_, &MeasureTool::toolChanged, this, [this] {
        if (measure_->tool() != MeasureKind::kNone) edit_->setTool(EditTool::kNone);
    });
    connect(edit_, &EditController::toolChanged, this, [this] {
        if (edit_->tool() != EditTool::kNone) measure_->setTool(MeasureKind::kNone);
    });

    comparison_ = new SegmentationComparison(state_, this);
    for (MprView* v : views_) v->setComparison(comparison_);
    comparison_dock_ = new QDockWidget("Comparison", this);
    comparison_dock_->setObjectName("comparison_dock");
    comparison_dock_->setWidget(new ComparisonPanel(comparison_, state_, this));
    addDockWidget(Qt::RightDockWidgetArea, comparison_dock_);
    comparison_dock_->hide();
}

Status MainWindow::compareWithSegmentation(const QString& path) {
    Status s = comparison_->load(path);
    if (!s.isOk()) {
        reportError("cannot compare with " + path, s);
        return s;
    }
    comparison_dock_->show();
    comparison_dock_->raise();
    return s;
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event) {
    if (event->type() != QEvent::KeyPress) return QMainWindow::eventFilter(watched, event);
    auto* w = qobject_cast<QWidget*>(watched);
    if (!w || w->window() != this || qobject_cast<MprView*>(w)) return false;
    // A text field keeps every key typed into it.
    if (qobject_cast<QLineEdit*>(w) || qobject_cast<QAbstractSpinBox*>(w) ||
        qobject_cast<QTextEdit*>(w) || qobject_cast<QPlainTextEdit*>(w))
        return false;
    if (auto* combo = qobject_cast<QComboBox*>(w); combo && combo->isEditable()) return false;
    auto* key = static_cast<QKeyEvent*>(event);
    // "+" is Shift+= on many keyboards.
    const Qt::KeyboardModifiers allowed =
        Qt::KeypadModifier | (key->key() == Qt::Key_Plus ? Qt::ShiftModifier : Qt::NoModifier);
    if (key->modifiers() & ~allowed) return false;
    switch (key->key()) {
        case Qt::Key_Up:
        case Qt::Key_Down:
        case Qt::Key_Left:
        case Qt::Key_Right:
        case Qt::Key_PageUp:
        case Qt::Key_PageDown:
        case Qt::Key_Home:
        case Qt::Key_End:
        case Qt::Key_Plus:
        case Qt::Key_Minus:
        case Qt::Key_Equal:
        case Qt::Key_R:
            break;
        default:
            return false;
    }
    if (routing_key_) return false;  // a view that ignored it: its parents' turn, not again
    for (MprView* v : series_->allViews()) {
        if (!v->isVisible() || !v->mouseOver()) continue;
        QKeyEvent copy(key->type(), key->key(), key->modifiers(), key->text());
        routing_key_ = true;
        QApplication::sendEvent(v, &copy);
        routing_key_ = false;
        return true;
    }
    return false;
}

// ---------------------------------------------------------------------------------------------
// Several series open (ui/series_area.h)

void MainWindow::buildSeriesActions(QMenu* file) {
    QMenu* beside = file->addMenu("Open &beside");
    beside->setToolTip("Open a series beside the open ones (a prior study, another sequence)");
    beside->addAction("DICOM &folder...", this, [this] {
        const QString dir =
            QFileDialog::getExistingDirectory(this, "Open DICOM folder beside", openDialogDir());
        if (!dir.isEmpty()) openPath(dir, Open::kBeside);
    });
    beside->addAction("&Image file...", this, [this] {
        const QString f =
            QFileDialog::getOpenFileName(this, "Open image beside", openDialogDir(),
                                         "Images (" + imageFilePatterns() + ");;DICOM (*)");
        if (!f.isEmpty()) openPath(f, Open::kBeside);
    });
    recent_beside_menu_ = beside->addMenu("&Recent");
    QAction* close_series = file->addAction("Close &series", this,
                                            [this] { (void)closeSeries(series_->activeIndex()); });
    close_series->setToolTip("Close the active series; another open series becomes active");
    close_series->setEnabled(false);
    // K: "linK". On by default, as radiologists compare a prior with synchronised scrolling.
    link_action_ = new QAction("&Link series (crosshair, slices)", this);
    link_action_->setObjectName("link_series");
    link_action_->setIconText("Link");
    link_action_->setShortcut(QKeySequence(Qt::Key_K));
    link_action_->setCheckable(true);
    link_action_->setChecked(series_->link()->linked());
    link_action_->setToolTip(
        "Link (K): moving the crosshair or scrolling in one series moves the others to the same "
        "patient position");
    connect(link_action_, &QAction::toggled, this,
            [this](bool on) { series_->link()->setLinked(on, state_); });
    connect(series_, &SeriesArea::seriesChanged, this,
            [this, close_series] { close_series->setEnabled(series_->paneCount() > 1); });
}

void MainWindow::openBeside(pipeline::StudyInput study, const QString& source) {
    SeriesPane* pane = series_->addSeries(std::move(study), source);
    const QString title = pane->state()->title();
    log::info(kComponent, "opened beside: {} series open", series_->paneCount());
    finishTask(true, "opened beside: " + title);
}

bool MainWindow::makeSeriesActive(int pane_index) {
    if (pane_index < 0 || pane_index >= series_->paneCount()) return false;
    if (pane_index == series_->activeIndex()) return true;
    if (busy_) {
        reportError("cannot switch the active series",
                    Status(StatusCode::kFailedPrecondition,
                           sstr(task_name_) + " is still running; wait or cancel it (Esc)"));
        return false;
    }
    if (!keepOrSaveEdits("switching to another series")) return false;
    series_->makeActive(pane_index);
    setWindowTitle("voxseg-viewer - " + state_->title());
    statusBar()->showMessage("active series: " + state_->title(), 5000);
    return true;
}

bool MainWindow::closeSeries(int pane_index) {
    if (pane_index < 0 || pane_index >= series_->paneCount() || series_->paneCount() < 2)
        return false;
    if (pane_index == series_->activeIndex()) {
        if (busy_) {
            reportError("cannot close the active series",
                        Status(StatusCode::kFailedPrecondition,
                               sstr(task_name_) + " is still running; wait or cancel it (Esc)"));
            return false;
        }
        if (!keepOrSaveEdits("closing the series")) return false;
    }
    const bool closed = series_->closeSeries(pane_index);
    if (closed) setWindowTitle("voxseg-viewer - " + state_->title());
    return closed;
}

bool MainWindow::hasRecoverableEdits() const { return pending_recovery_.has_value(); }

void MainWindow::offerRecovery() {
    // Called once a study is shown: the keys (edit tools, slices) go to the views from here.
    views_[0]->setFocus();
    pending_recovery_ = edit_->pendingRecovery();
    if (!pending_recovery_) return;
    const int lines = pending_recovery_->journal_lines;
    log::info(kComponent, "{} unsaved edits from {} can be restored ({})", lines,
              pending_recovery_->started, pending_recovery_->folder);
    emit recoveryAvailable(lines);
    if (!interactive_) return;
    auto* box = new QMessageBox(
        QMessageBox::Question, "voxseg-viewer",
        QString("This series has %1 unsaved edits from a session started %2 that did not "
                "close (the viewer was stopped). Restore them?")
            .arg(lines)
            .arg(qstr(pending_recovery_->started)),
        QMessageBox::Yes | QMessageBox::Discard | QMessageBox::Ignore, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    connect(box, &QMessageBox::finished, this, [this, box](int) {
        const auto button = box->standardButton(box->clickedButton());
        if (button == QMessageBox::Yes)
            (void)restoreEdits();
        else if (button == QMessageBox::Discard)
            discardRecoverableEdits();
    });
    box->open();
}

Status MainWindow::restoreEdits() {
    if (!pending_recovery_)
        return Status(StatusCode::kFailedPrecondition, "no unsaved edits to restore");
    const edit::RecoveryInfo info = *pending_recovery_;
    pending_recovery_.reset();
    Status s = edit_->restore(info);
    if (!s.isOk())
        reportError("cannot restore the unsaved edits", s);
    else
        statusBar()->showMessage(QString("restored %1 edits").arg(info.journal_lines), 8000);
    return s;
}

void MainWindow::discardRecoverableEdits() {
    if (!pending_recovery_) return;
    Status s = edit::removeRecovery(*pending_recovery_);
    if (!s.isOk()) log::warning(kComponent, "{}", s.toString());
    pending_recovery_.reset();
}

bool MainWindow::looksLikeLabelMap(const QString& path) const {
    // A dropped image on the open image's grid with integer voxels is a segmentation of it.
    if (!state_->hasImage() || !io::isImageFile(sstr(path))) return false;
    auto header = io::readImageHeader(sstr(path));
    if (!header.isOk()) return false;
    const PixelType t = header->pixel_type;
    if (t == PixelType::kFloat32 || t == PixelType::kFloat64) return false;
    return header->geometry.size == state_->image().geometry().size &&
           header->geometry.approxEqual(state_->image().geometry(), 1e-3, 1e-4, 1e-4);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
    if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* e) {
    const auto urls = e->mimeData()->urls();
    if (urls.isEmpty() || !urls.front().isLocalFile()) return;
    const QString path = urls.front().toLocalFile();
    e->acceptProposedAction();
    if (looksLikeLabelMap(path))
        loadSegmentation(path);
    else
        openPath(path);
}

bool MainWindow::keepOrSaveEdits(const QString& action) {
    if (!edit_->dirty()) return true;
    // Save / Discard / Cancel. Non-interactive windows keep the journal, as after a crash: the
    // edits are offered again when the series is reopened.
    const int answer =
        unsaved_prompt_ ? unsaved_prompt_()
        : interactive_
            ? QMessageBox::question(
                  this, "voxseg-viewer",
                  "The segmentation has unsaved edits. Save them before " + action + "?",
                  QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel, QMessageBox::Save)
            : static_cast<int>(QMessageBox::Ignore);
    if (answer == QMessageBox::Cancel || (answer == QMessageBox::Save && !saveBeforeClose())) {
        log::info(kComponent, "{} cancelled: the unsaved edits stay", sstr(action));
        return false;
    }
    if (answer == QMessageBox::Discard) edit_->endSession(false);
    return true;
}

bool MainWindow::keepOrSaveEditsBeforeTask(const QString& action) {
    if (keepOrSaveEdits(action)) return true;
    last_error_ = action + " cancelled: the segmentation has unsaved edits";
    finishTask(false, last_error_);
    return false;
}

void MainWindow::closeEvent(QCloseEvent* e) {
    if (!keepOrSaveEdits("closing")) {
        e->ignore();
        return;
    }
    if (!edit_->dirty()) edit_->endSession(false);  // saved: nothing to recover
    if (busy_) {
        token_.cancel();
        log::info(kComponent, "closing: waiting for {} to stop", sstr(task_name_));
    }
    window_settings::saveWindow(*this, layoutMode() == Layout::k1x3 ? "1x3" : "2x2");
    QMainWindow::closeEvent(e);
}

}  // namespace voxseg::ui
