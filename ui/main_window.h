// voxseg-viewer's main window: MPR views (1x3, or 2x2 with the 3D view), series browser, label
// table and log panel docks, menus with shortcuts, drag and drop, recent files (QSettings), and
// the background tasks (scan, load, segmentation load, model run) with a progress bar and
// cancel. Single-key shortcuts never type into a field: a text field with the focus keeps its
// keys, and the views' keys follow the mouse (eventFilter). Every operation goes through the same
// libraries as the CLI: pipeline::loadStudy, io::scanDicom/loadSeries, io::readImage/writeImage,
// io::readDicomSeg/writeDicomSeg, pipeline::Segmenter, pipeline::computeStatistics. Errors go to a
// (non-blocking) message box and the log; the window never blocks on I/O or inference. GUI thread
// only.
#pragma once

#include "core/progress.h"
#include "core/status.h"
#include "edit/label_editor.h"
#include "edit/session.h"
#include "io/dicom_series.h"
#include "pipeline/segment.h"
#include "ui/mpr_slice.h"
#include "ui/view_grid.h"

#include <QList>
#include <QMainWindow>
#include <QPointer>
#include <QTemporaryDir>
#include <QThread>

#include <array>
#include <functional>
#include <memory>
#include <optional>

class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSlider;
class QGridLayout;
class QMenu;
class QAction;
class QDockWidget;

namespace voxseg::ui {

class ViewerState;
class MprView;
class LabelTable;
class LogPanel;
class SeriesBrowser;
class EditController;
class EditToolbar;
class InteractiveToolbar;
class MeasureTool;
class MeasureToolbar;
class SegmentationComparison;
class SeriesArea;
class RunModelDialog;
class TaskProgressBar;

class MainWindow : public QMainWindow {
    Q_OBJECT

  public:
    using Layout = ViewGrid::Layout;

    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    ViewerState* state() const { return state_; }
    MprView* view(ViewAxis axis) const { return views_[static_cast<int>(axis)]; }
    QSlider* slider(ViewAxis axis) const { return sliders_[static_cast<int>(axis)]; }
    LabelTable* labelTable() const { return label_table_; }
    LogPanel* logPanel() const { return log_panel_; }
    SeriesBrowser* seriesBrowser() const { return series_browser_; }
    // The 3D view; nullptr until the 2x2 layout is first shown.
    QWidget* surfaceView() const { return surface_; }
    QProgressBar* progressBar() const;
    EditController* editController() const { return edit_; }
    EditToolbar* editToolbar() const { return edit_toolbar_; }
    InteractiveToolbar* interactiveToolbar() const { return interactive_toolbar_; }
    // Rulers and ROIs (ui/measure_tool.h); their tools and the edit tools exclude each other.
    MeasureTool* measureTool() const { return measure_; }
    MeasureToolbar* measureToolbar() const { return measure_toolbar_; }
    // Segmentation > Compare with segmentation...: a second segmentation of the image read,
    // compared with the shown one (Dice, volumes) in the Comparison dock, its contours drawn.
    Status compareWithSegmentation(const QString& path);
    SegmentationComparison* comparison() const { return comparison_; }
    QLabel* cursorInfo() const { return cursor_info_; }

    // Background operations; each ends with taskFinished(ok, message). One at a time: while one
    // runs, starting another fails with a message.
    // Replace: the active series is replaced. Beside: the series opens beside the open ones
    // (several series at once: ui/series_area.h); with none open it is the same as Replace.
    enum class Open { kReplace, kBeside };
    // Image file, or DICOM folder/file (scan, then load; Beside loads a folder's only series
    // beside, or lists several in the series browser).
    void openPath(const QString& path, Open how = Open::kReplace);
    void loadSeries(int candidate_index, Open how = Open::kReplace);  // a series of the last scan
    // The open series (panes in screen order; the active one's pane holds view(), state()),
    // the "Link" toggle (K: linked crosshairs and slices across series).
    SeriesArea* seriesArea() const { return series_; }
    QAction* linkAction() const { return link_action_; }
    // Makes another open series active (unsaved edits of the active one are settled first, as
    // before loading another series); false when cancelled or a task runs.
    bool makeSeriesActive(int pane_index);
    // Closes one open series (the active one hands over to a neighbour); the last one stays.
    bool closeSeries(int pane_index);
    // A label map image, DICOM SEG or RTSTRUCT, with the names, colours, codes, review status
    // and provenance saved with it (edit/segmentation_load.h: the file and its sidecar).
    void loadSegmentation(const QString& path);
    // `options`: segment's per-run options (the Run model dialog's); the viewer turns off the
    // preview and SEG outputs of the run folder (saved explicitly instead).
    void runModel(const QString& model_folder, const QString& out_dir = {},
                  pipeline::SegmentOptions options = {});
    // Segmentation > Run model: the dialog (ui/run_model_dialog.h), non-modal; accepted -> run.
    RunModelDialog* openRunModelDialog();
    void cancelTask();
    bool busy() const { return busy_; }
    // Model runs keep the imported model (pipeline::Segmenter) per package and options while
    // the window is open; modelImports() counts the imports (tests). Without `out_dir` a run's
    // files go to a temporary folder (lastRunFolder()) that is removed when the next run
    // replaces it and when the window is destroyed: the label map stays in memory and is saved
    // explicitly.
    int modelImports() const;
    QString lastRunFolder() const;

    // Outputs (fast; written atomically). Errors are returned and also shown. Each writes the
    // table's sidecar beside it (edit/segment_meta.h: x.nii.gz -> x.json, x.dcm ->
    // x.review.json) and marks the edits saved. An edited SEG is a new series "edited
    // segmentation" whose segments say SEMIAUTOMATIC (edited) / MANUAL (new) / AUTOMATIC, and
    // each segment's description carries the review status.
    Status saveLabelMap(const QString& path);
    Status saveDicomSeg(const QString& path);
    Status saveRtStruct(const QString& path);
    // Edits of the shown source and series journalled by a viewer that did not close (kill -9):
    // offered after opening (a question when interactive, else recoveryAvailable()).
    bool hasRecoverableEdits() const;
    Status restoreEdits();
    void discardRecoverableEdits();
    // On close with unsaved edits: asks Save / Discard / Cancel (the default shows a message
    // box; tests replace it). Save writes a DICOM SEG (label map for an image file) chosen in
    // a file dialog.
    void setUnsavedEditsPrompt(std::function<int()> prompt) { unsaved_prompt_ = std::move(prompt); }
    Status saveStatistics(const QString& path);  // .csv or .json
    // PNG of the views area (or of the whole window, docks included).
    Status saveScreenshot(const QString& path, bool whole_window = false);
    QImage grabViews(bool whole_window = false);

    void setLayoutMode(Layout layout);
    Layout layoutMode() const { return grid_->layoutMode(); }
    // F or a double-click on a view: the pane under the mouse (a view with its slider, or the 3D
    // view) fills its series' views area (the window's, or a series' beside it); again restores
    // the layout. maximizedView(): the window's (the active series') maximised pane, nullptr
    // while its layout is shown.
    void toggleMaximizedView();
    QWidget* maximizedView() const { return grid_->maximized(); }
    // Shows the window as it was last closed (window_settings.h: geometry, maximised, docks,
    // toolbars, layout); the first time maximised, in 2x2. voxseg-viewer's start.
    void showAsLastTime();
    // Window presets: "auto" or a name from ctWindowPresets() ("CT lung", ...).
    bool applyWindowPreset(const QString& name);

    // false: errors are only logged and kept in lastError() (tests, scripted runs).
    void setInteractive(bool interactive) { interactive_ = interactive; }
    const QString& lastError() const { return last_error_; }
    QStringList recentFiles() const;

  signals:
    void taskFinished(bool ok, const QString& message);
    void recoveryAvailable(int journal_lines);

  protected:
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;
    void closeEvent(QCloseEvent* event) override;
    // Keys of the views (slices, zoom, R reset) typed while the mouse is over a view and the
    // focus is on something that is not a text field (the label table, a button) go to that view.
    bool eventFilter(QObject* watched, QEvent* event) override;

  private:
    template <typename R>
    bool startTask(const QString& name, std::function<R(const Progress&)> work,
                   std::function<void(R&)> done);
    void finishTask(bool ok, const QString& message);
    void reportError(const QString& what, const Status& status);
    Status saveDicomObject(bool rtstruct, const QString& path);  // SEG or RTSTRUCT
    void buildViews();
    void buildDocks();
    void buildMenus();  // the four below, and the tool bar
    void buildFileMenu();
    void buildSegmentationMenu();
    QComboBox* buildViewMenu();
    void buildHelpMenu();
    void updateActions();
    void updateSliders();
    // The status bar's read-out: `voxel` of `doc` (the hovered view's series, the active one or
    // one beside it); nullopt: the active series' crosshair.
    void updateCursorInfo(const ViewerState* doc, std::optional<std::array<int64_t, 3>> voxel);
    void addRecent(const QString& path);
    void rebuildRecentMenu();
    void scanFolder(const QString& path, Open how);
    void loadImageFile(const QString& path, Open how);
    // A study loaded to open beside the others (Beside with an image shown).
    void openBeside(pipeline::StudyInput study, const QString& source);
    void buildSeriesActions(QMenu* file);
    bool looksLikeLabelMap(const QString& path) const;
    void offerRecovery();
    void buildEditing();
    // Writes the sidecar of a saved segmentation; SEG saves record the algorithm types.
    Status writeSidecar(const QString& path, const std::vector<edit::LabelChange>& changes);
    void onSaved(const QString& path, const Status& status, const char* what);
    bool saveBeforeClose();
    // Before the label map is replaced or the window closes: with unsaved edits, asks Save /
    // Discard / Cancel (the prompt set by setUnsavedEditsPrompt, a dialog, or, non-interactive,
    // keeps them for recovery). False: cancelled, nothing may be replaced. `action` completes
    // "Save them before ...?".
    bool keepOrSaveEdits(const QString& action);
    // The same for a background task: cancelled ends the task (taskFinished false) at once.
    bool keepOrSaveEditsBeforeTask(const QString& action);

    ViewerState* state_;
    EditController* edit_ = nullptr;
    EditToolbar* edit_toolbar_ = nullptr;
    InteractiveToolbar* interactive_toolbar_ = nullptr;
    MeasureTool* measure_ = nullptr;
    MeasureToolbar* measure_toolbar_ = nullptr;
    SegmentationComparison* comparison_ = nullptr;
    QDockWidget* comparison_dock_ = nullptr;
    std::optional<edit::RecoveryInfo> pending_recovery_;
    std::function<int()> unsaved_prompt_;
    std::array<MprView*, 3> views_{};
    std::array<QSlider*, 3> sliders_{};
    std::array<QWidget*, 3> panels_{};
    QWidget* surface_ = nullptr;
    ViewGrid* grid_ = nullptr;
    LabelTable* label_table_ = nullptr;
    LogPanel* log_panel_ = nullptr;
    SeriesBrowser* series_browser_ = nullptr;
    QDockWidget* series_dock_ = nullptr;
    QLabel* cursor_info_ = nullptr;
    TaskProgressBar* progress_ = nullptr;
    QPushButton* cancel_ = nullptr;
    QMenu* recent_menu_ = nullptr;
    QMenu* recent_beside_menu_ = nullptr;
    SeriesArea* series_ = nullptr;
    QAction* link_action_ = nullptr;
    QList<QAction*> image_actions_;  // need an image
    QList<QAction*> label_actions_;  // need a label map
    QList<QAction*> dicom_actions_;  // need a DICOM source (SEG, RTSTRUCT)
    QAction* outline_action_ = nullptr;

    bool busy_ = false;
    WindowLevel auto_window_;  // autoWindow() of auto_window_image_
    const void* auto_window_image_ = nullptr;
    struct SegmenterCache;
    std::shared_ptr<SegmenterCache> segmenter_cache_;
    std::shared_ptr<QTemporaryDir> run_dir_;
    QString task_name_;
    QString last_model_folder_;
    CancelToken token_;
    QList<QPointer<QThread>> threads_;
    std::optional<io::DicomScanResult> scan_;
    QString scan_path_;
    std::string algorithm_name_ = "voxseg-viewer";
    std::string algorithm_version_ = "0";
    bool interactive_ = true;
    bool routing_key_ = false;
    QString last_error_;
};

}  // namespace voxseg::ui
