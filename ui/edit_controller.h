// The viewer's editing state over edit/ (Qt-free, where every operation lives): the current
// tool (paint, erase, level trace, grow, threshold), label, brush radius in mm and shape,
// Slicer's masking options (intensity range, overwrite policy), and the edit::EditSession that
// applies, undoes and journals the ops. Views hand it mouse positions in patient LPS mm;
// toolbar buttons run one-shot ops (fill between slices, islands, smoothing, margin, undo,
// redo). Threshold, grow and level trace show what a click would paint before it is committed
// (preview(): threshold the in-range voxels of each view's slice, grow and level trace the
// region from the voxel under the mouse), computed by edit/edit_preview.h with the op the click
// will apply. The default masking protects other labels (only background is painted); the
// islands ops say what they removed. After each op the ViewerState is told which box and labels
// changed, so the three views redraw at once and the 3D view re-meshes only those labels.
//
// The session starts on the first edit of a shown label map (or on a new empty one); its
// journal goes to the recovery folder under recoveryRoot() so that a killed viewer's edits are
// offered for restore when the same source and series are opened again. GUI thread only.
#pragma once

#include "core/status.h"
#include "edit/edit_preview.h"
#include "edit/interactive/prompt_ops.h"
#include "edit/session.h"
#include "ui/interactive_prompt.h"
#include "ui/mpr_slice.h"

#include <QList>
#include <QObject>
#include <QPointer>
#include <QString>
#include <QThread>
#include <QTimer>

#include <optional>

namespace voxseg::ui {

class ViewerState;
class InteractiveTool;

enum class EditTool { kNone, kPaint, kErase, kLevelTrace, kGrow, kThreshold, kInteractive };
const char* editToolName(EditTool tool);  // "paint", ...

// The patient plane an edit in `view` acts in.
edit::Plane planeOfView(ViewAxis view);

class EditController : public QObject {
    Q_OBJECT

  public:
    explicit EditController(ViewerState* state, QObject* parent = nullptr);
    ~EditController() override;

    // Where recovery folders go (the viewer: <app data>/recovery); empty: no journal.
    void setRecoveryRoot(const QString& root) { recovery_root_ = root; }
    const QString& recoveryRoot() const { return recovery_root_; }

    EditTool tool() const { return tool_; }
    void setTool(EditTool tool);
    int activeLabel() const { return label_; }
    void setActiveLabel(int value);
    double radiusMm() const { return radius_mm_; }
    void setRadiusMm(double mm);  // clamped to [0.1, 200]
    // Sphere (3D) or disk in the view's plane; also threshold/grow in 3D or in the slice.
    bool sphere() const { return sphere_; }
    void setSphere(bool on);
    // Default: only background (a click never paints over another label).
    const edit::Overwrite& overwrite() const { return overwrite_; }
    void setOverwrite(edit::Overwrite o);
    // Intensity range masking (inclusive, image units); nullopt when off. A range whose lower
    // bound is above its upper one is refused (error; the range stays as it was).
    std::optional<std::pair<double, double>> range() const { return range_; }
    Status setRange(std::optional<std::pair<double, double>> range);
    // Grow without a range: the seed's value +- this.
    double growTolerance() const { return grow_tolerance_; }
    void setGrowTolerance(double t) { grow_tolerance_ = t; }

    // Mouse, from the views (points in LPS mm). press returns false when the tool does not
    // take the click (kNone: the view moves the crosshair instead). `exclude` (Shift or right
    // click) only matters to the Interactive tool: an exclude prompt.
    bool press(ViewAxis view, const Vec3& point_mm, bool exclude = false);
    void drag(ViewAxis view, const Vec3& point_mm);
    void release();
    bool stroking() const { return session_ && session_->inStroke(); }
    // Where the brush outline is drawn (the point under the mouse, in its view); nullopt hides it.
    void hover(ViewAxis view, std::optional<Vec3> point_mm);
    std::optional<Vec3> brushCentre() const { return brush_centre_; }
    ViewAxis brushView() const { return brush_view_; }
    bool showsBrush() const {
        return brush_centre_ && (tool_ == EditTool::kPaint || tool_ == EditTool::kErase);
    }

    // What a click of the current tool would paint (threshold, grow, level trace), drawn over
    // the views; nullptr when there is nothing to show. Recomputed when the tool, label,
    // masking, slices or the voxel under the mouse change; a click commits exactly these
    // voxels (in the clicked slice; threshold with Sphere: in 3D), cancelPreview() (Esc) drops it.
    // With the Interactive tool: its current object.
    const edit::EditPreview* preview() const;
    int previewGeneration() const { return preview_generation_; }
    void cancelPreview();

    // One-shot ops on the active label; errors are returned (and emitted as editFailed).
    // The islands ops report what they removed (lastReport(), the log and reported()).
    Status fillBetweenSlices(ViewAxis view);
    Status keepLargestIsland();
    Status removeSmallIslands(double min_ml);
    Status smooth(edit::OpKind kind, double radius_mm);  // kMedian, kOpening, kClosing
    Status margin(double mm);                            // > 0 grows, < 0 shrinks
    Status clearLabel(int value);                        // every voxel of `value` to 0
    Status apply(const edit::EditOp& op);                // any op (tests, scripts)
    // The message of the last one-shot op that reports (islands): "Keep largest island of
    // Liver (1): removed 3 islands, 1234 voxels, 5.61 mL".
    const QString& lastReport() const { return last_report_; }
    Status undo();
    Status redo();
    // Undo / redo of the label map's history, which holds the interactive prompts as steps
    // too: undoing one reverts it in the interactive session as well (edit::interactive::
    // PromptHistory), as `voxseg edit` replays an "undo" line. Refused while a prompt runs.
    bool canUndo() const;
    bool canRedo() const { return session_ && session_->editor().canRedo(); }

    // The Interactive tool (kInteractive): its prompts, model and current object. Its object is
    // the preview while the tool is selected.
    InteractiveTool* interactive() const { return interactive_; }
    // "Next object": once the prompts given so far ran, the current object is written into the
    // active label (a prompt_accept step recording the object, with the masking options as
    // every paint) and a new object starts, in a new label (the next value above every label in
    // use). Error without a model, or with an empty object and nothing queued.
    Status nextObject();

    // The session: started by the first edit. dirty(): edits since the last save.
    Status ensureSession();
    bool hasSession() const { return session_.has_value(); }
    bool dirty() const { return session_ && session_->dirty(); }
    void markSaved();
    // The map the session started from (SEMIAUTOMATIC / MANUAL on save); empty without one.
    Volume baseLabels() const { return session_ ? session_->base() : Volume(); }
    int journalLines() const { return session_ ? session_->journalLines() : 0; }
    QString journalPath() const;
    // Ends the session (a new image or label map is shown); `keep_recovery` false removes its
    // folder (the reviewer discarded the edits).
    void endSession(bool keep_recovery);
    // Writes the table's metadata into the recovery folder (after renames, codes, status).
    void saveSegmentsToRecovery();

    // Crash recovery of the shown source and series.
    std::optional<edit::RecoveryInfo> pendingRecovery() const;
    Status restore(const edit::RecoveryInfo& info);

    // Statistics (and the sagittal view's label runs) are recomputed this long after the last
    // edit, not during a stroke, on a worker thread from a copy of the map; a result that an
    // edit overtook is dropped and recomputed. Saves recompute them at once (flushStatistics).
    static constexpr int kStatisticsDelayMs = 400;
    void flushStatistics();
    bool statisticsPending() const;

  signals:
    void toolChanged();
    void historyChanged();  // undo/redo availability, dirty state
    void brushChanged();
    void editFailed(const QString& message);
    void reported(const QString& message);  // what a one-shot op did (status bar)
    void previewChanged();

  private:
    Status run(const std::function<Result<edit::ApplyReport>()>& op);
    Status undoOrRedo(bool undo);
    // A finished interactive job's op: applied and journalled; its session delta kept by step.
    void applyPromptStep(const edit::EditOp& op,
                         std::shared_ptr<edit::interactive::InteractiveDelta> delta,
                         bool history_cleared);
    // The op a click of the current tool at `point` in `view` applies; nullopt without one
    // (error: why, e.g. threshold without a range).
    Result<std::optional<edit::EditOp>> clickOp(ViewAxis view, const Vec3& point) const;
    void updatePreview();
    // The label map previews run on: the session's, the shown one, or an empty one.
    const Volume* previewLabels();
    Status islands(const edit::EditOp& op, const QString& what);
    edit::EditOp baseOp(edit::OpKind kind) const;
    Point3 voxelOf(const Vec3& point_mm) const;  // (z, y, x) continuous
    void connectInteractive();
    std::string sourceKey() const;
    std::string seriesUid() const;

    ViewerState* state_;
    QString recovery_root_;
    std::optional<edit::EditSession> session_;
    EditTool tool_ = EditTool::kNone;
    int label_ = 1;
    double radius_mm_ = 5.0;
    bool sphere_ = false;
    edit::Overwrite overwrite_{edit::Overwrite::Mode::kBackground, 0};
    edit::interactive::PromptHistory prompt_history_;
    std::optional<std::pair<double, double>> range_;
    double grow_tolerance_ = 100.0;
    std::optional<Vec3> brush_centre_;
    ViewAxis brush_view_ = ViewAxis::kAxial;
    ViewAxis stroke_view_ = ViewAxis::kAxial;
    void startStatistics();

    QTimer* stats_timer_;
    int64_t edits_ = 0;  // applied edits, for dropping stale statistics
    bool stats_running_ = false;
    QList<QPointer<QThread>> threads_;
    bool ending_ = false;
    edit::EditPreviewer previewer_;
    std::optional<edit::EditPreview> preview_;
    std::optional<std::array<int64_t, 3>> preview_voxel_;  // the hovered voxel it was made for
    int preview_generation_ = 0;
    Volume empty_labels_;  // previews before any label map exists
    QString last_report_;
    InteractiveTool* interactive_ = nullptr;
};

}  // namespace voxseg::ui
