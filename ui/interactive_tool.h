// The viewer's Interactive tool (issue 38): promptable segmentation with an nnInteractive-style
// model package (docs/interactive.md) through the Qt-free edit::interactive::InteractiveSession.
// Prompts come from the views in voxel coordinates (ui/interactive_prompt.h): a point, a box, a
// scribble or a lasso, each include or exclude. Each becomes an edit-journal op (positions in
// patient mm, edit/interactive/prompt_ops.h) whose session part runs on a worker thread
// (ui/background_task.h, edit::interactive::runSessionPart), one after another with the model
// load, accept, reset and undo/redo: the GUI never waits for the network, and a prompt given
// while another runs is queued and runs after it, in order. When a job finishes, the current
// object (the session's target) is copied back per changed box and shown as the edit preview,
// and stepDone() hands the op (the accepted object recorded in prompt_accept; a prompt_session
// line first whenever the model, precision or AutoZoom changed) to the EditController, which
// applies and journals it like any edit: `voxseg edit` replays the same lines. The model is
// loaded in the precision engine::choosePrecision picks (bf16 on CPUs with bf16 instructions).
// Errors (no model, a prompt outside the image, a model that does not load) are emitted as
// failed(); nothing drawn is lost by them. GUI thread only (the session is touched by the worker
// only while its job runs).
#pragma once

#include "backends/registry.h"
#include "core/status.h"
#include "core/volume.h"
#include "edit/edit_op.h"
#include "edit/edit_preview.h"
#include "edit/journal.h"
#include "ui/interactive_prompt.h"

#include <QObject>
#include <QPointer>
#include <QString>
#include <QStringList>
#include <QThread>

#include <deque>
#include <memory>
#include <optional>
#include <vector>

namespace voxseg::edit::interactive {
class InteractiveModel;
class InteractiveSession;
struct InteractiveDelta;
}  // namespace voxseg::edit::interactive

namespace voxseg::ui {

class ViewerState;

class InteractiveTool : public QObject {
    Q_OBJECT

  public:
    struct Job;  // a queued job and its result: defined in the .cpp (its worker helper)
    struct JobResult;

    explicit InteractiveTool(ViewerState* state, QObject* parent = nullptr);
    ~InteractiveTool() override;  // waits for the running job

    // The model package folder: loaded on the worker (queued like a prompt). The folder of the
    // last package that loaded is remembered (QSettings "interactive/model_folder").
    void loadModel(const QString& folder);
    static QString rememberedModelFolder();
    bool hasModel() const { return session_ != nullptr; }
    bool modelPending() const { return loads_pending_ > 0; }  // a load is queued or running
    const QString& modelFolder() const { return model_folder_; }
    const QString& modelDescription() const { return model_description_; }
    // The loaded model's precision ("bf16", "fp32", ...; empty before a load) and the device it
    // was loaded for (auto: the GPU when there is one; cpu after a GPU could not run it).
    QString precisionName() const;
    const engine::DeviceSpec& modelDevice() const { return model_device_; }
    // What about the shown image lies outside the loaded model's intended input (model.json
    // "intended_input": spacing, extent, modality), one finding each; empty without a model or
    // image, or when it fits. Prompts still run; the toolbar shows these as a warning.
    const QStringList& inputFindings() const { return input_findings_; }

    PromptKind kind() const { return kind_; }
    void setKind(PromptKind kind);
    bool include() const { return include_; }
    void setInclude(bool include);
    // nnInteractive's AutoZoom (on by default, as 2.6.0).
    bool autoZoom() const { return autozoom_; }
    void setAutoZoom(bool on) { autozoom_ = on; }

    // Mouse in a view, voxel coordinates (z, y, x); `slice_axis` is the view's slice axis in that
    // order. A point prompt is sent on press; box, scribble and lasso on release.
    // `exclude` (Shift or right button) makes this prompt exclude whatever the toggle says.
    void press(int slice_axis, const Point3& voxel, bool exclude);
    void drag(const Point3& voxel);
    void release();
    bool drawing() const { return drawing_.has_value(); }
    // The box, scribble or lasso being dragged (drawn by the views); nullptr when none.
    const Prompt* drawingPrompt() const { return drawing_ ? &*drawing_ : nullptr; }

    // Queues a prompt. Error (and failed()) without a model loaded or loading.
    Status submit(const Prompt& prompt);
    // Queues the end of the current object: once every earlier prompt ran, stepDone() with
    // prompt_accept (into `label`, as `overwrite` allows, the object recorded) and
    // objectAccepted(mask); the session starts a new object.
    Status accept(int label, edit::Overwrite overwrite);
    // Queues a reset of the current object's prompts (nothing is written).
    Status resetObject();
    // A new session for a new journal (the EditController calls it when its edit session ends
    // or is restored): the current object and its prompts are cleared (queued), and the next
    // prompt's journal line is preceded by prompt_session with restart, so a replay clears too.
    void restart();
    // A restored journal (the EditController's crash recovery): once a model is loaded (now, or
    // when the next load finishes), its session is rebuilt from the journal's lines as they are
    // then, on `base` (edit::interactive::rebuildSession), so the journal's open object comes
    // back and its prompts undo; rebuilt() hands the deltas by line index. When it cannot be
    // (another model, a journal without prompts), the next prompt starts a new session.
    void rebuildFrom(const QString& journal, Volume base);
    // Queues the revert / reapply of a prompt step's session part (the EditController's undo and
    // redo of a step that has one, edit::interactive::PromptHistory).
    void revert(std::shared_ptr<edit::interactive::InteractiveDelta> delta);
    void reapply(std::shared_ptr<edit::interactive::InteractiveDelta> delta);
    // Whether the current object has a prompt (the last finished job was a prompt).
    bool hasObject() const { return !mask_.empty(); }
    // Jobs queued or running.
    int pending() const { return static_cast<int>(queue_.size()) + (running_ ? 1 : 0); }
    bool busy() const { return running_; }

    // The current object as of the last finished prompt: 0/1, (z, y, x) C order, the image's
    // shape; empty before the first prompt.
    const std::vector<uint8_t>& mask() const { return mask_; }
    Index3 shape() const { return shape_; }
    // The object as an edit preview (values = previewLabel()); nullptr when empty.
    const edit::EditPreview* preview() const { return preview_.empty() ? nullptr : &preview_; }
    void setPreviewLabel(int label);
    int generation() const { return generation_; }
    // Wall time of the last prompt's prediction (ms; < 0 before any).
    double lastLatencyMs() const { return last_ms_; }

  signals:
    void maskChanged();
    void drawingChanged();
    void latencyChanged(double ms, const QString& message);
    void failed(const QString& message);
    void modelChanged();
    void inputFindingsChanged();
    void pendingChanged(int pending);
    // The running job's network calls: `done` so far of `planned` (0 while AutoZoom is still
    // widening the window, so the refinement boxes are not planned yet).
    void progressed(int done, int planned);
    void objectAccepted(const std::vector<uint8_t>& mask, Index3 shape);
    // A finished job's op for the label map and the journal, with the session's delta of it
    // (null: nothing to revert) and whether older deltas became void (a reset the model cannot
    // undo).
    void rebuilt(
        const std::vector<std::pair<size_t, std::shared_ptr<edit::interactive::InteractiveDelta>>>&
            deltas);
    void stepDone(const edit::EditOp& op,
                  std::shared_ptr<edit::interactive::InteractiveDelta> delta, bool history_cleared);

  private:
    Status enqueue(Job job);
    void startNext();
    void finish(JobResult& result);
    void finishOp(const Job& job, JobResult& result);
    void copyChanged(const edit::interactive::Box& box);
    void rebuildPreview();
    void onImageChanged();
    void checkInput();
    // The op of a drawn prompt, positions in mm on the shown image.
    edit::EditOp promptOp(const Prompt& prompt) const;

    ViewerState* state_;
    std::unique_ptr<edit::interactive::InteractiveModel> model_;
    std::unique_ptr<edit::interactive::InteractiveSession> session_;
    QString model_folder_;
    engine::DeviceSpec model_device_;
    QString model_description_;
    QStringList input_findings_;
    bool image_dirty_ = true;  // the session's image is not the shown one
    int image_generation_ = 0;
    int session_epoch_ = 0;  // restart() count: jobs of an older one are not journalled
    PromptKind kind_ = PromptKind::kPoint;
    bool include_ = true;
    bool autozoom_ = true;
    std::optional<bool> journalled_autozoom_;  // of the last prompt_session sent (none: send one)
    bool restart_pending_ = true;           // the next prompt_session says restart (a new session)
    std::shared_ptr<Job> pending_rebuild_;  // rebuildFrom() before a model was loaded
    QString rebuild_journal_;               // its journal, read when the job is queued
    void queueRebuild();
    std::optional<Prompt> drawing_;
    std::deque<std::shared_ptr<Job>> queue_;
    bool running_ = false;
    int loads_pending_ = 0;
    QPointer<QThread> thread_;
    std::vector<uint8_t> mask_;
    Index3 shape_{};
    edit::EditPreview preview_;
    int preview_label_ = 1;
    int generation_ = 0;
    double last_ms_ = -1;
};

}  // namespace voxseg::ui
