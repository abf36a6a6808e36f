// The prompts of an interactive session as edit-journal ops (issue 38): how the viewer turns a
// prompt into an EditOp (positions in patient LPS mm, as every journal op stores them), and
// InteractiveEditor, which applies such ops to a LabelEditor + InteractiveSession pair, with the
// same code in the viewer and in `voxseg edit --interactive-model` (docs/interactive.md,
// "Prompts in the edit journal").
//
// Prompt ops change the session's current object (its target), not the label map; only
// prompt_accept writes the object into a label (then the session starts the next object). Every
// prompt op is still one step of the LabelEditor's undo history (an empty one, but for accept),
// and the session's delta of that prompt (InteractiveSession::takeLastDelta) is kept beside it:
// undo/redo of the edit library (journal lines "undo"/"redo" included) reverts/reapplies the
// prompt in the session as well. Reset and accept are undoable too when the model takes an
// initial segmentation (they are written as an empty one); otherwise they end the session's
// undo: undoing them or a prompt before them restores only the label map.
//
// The deltas are kept by the editor's step ids (LabelEditor::undoTopId), so ops applied to the
// LabelEditor directly (a brush stroke merged segment by segment) interleave safely; apply()
// takes any op and passes the others to the LabelEditor. Not thread-safe.
#pragma once

#include "core/geometry.h"
#include "core/status.h"
#include "edit/edit_op.h"
#include "edit/interactive/draw_prompts.h"
#include "edit/interactive/interactive_session.h"
#include "edit/interactive/prompts.h"
#include "edit/journal.h"
#include "edit/label_editor.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace voxseg::edit::interactive {

// Session voxel coordinates (z, y, x) <-> patient mm on the image's grid `g`. voxelOfMm rounds to
// 1e-6 voxel, so a position written from voxel coordinates reads back as the same coordinates
// (a box side of exactly one voxel stays 1: bbox2d).
Vec3 mmOfVoxel(const Geometry& g, const Point3& zyx);
Point3 voxelOfMm(const Geometry& g, const Vec3& mm);

// A prompt as a journal op (voxel coordinates (z, y, x) of the session in, patient mm out).
// A box is written as its two corners lo and hi ([lo, hi) per axis, BoxRequest's bounds).
EditOp pointPromptOp(const Geometry& g, const Point3& point, bool include);
EditOp boxPromptOp(const Geometry& g, const BoxRequest& box, bool include);
EditOp scribblePromptOp(const Geometry& g, const std::vector<Point3>& points, bool include);
EditOp lassoPromptOp(const Geometry& g, const std::vector<Point3>& points, bool include);
// The initial segmentation: the voxels of `label` in the current label map, or a mask file
// (nonzero = in; read onto the image's grid by the MaskLoader).
EditOp initialSegFromLabelOp(int label, bool run_prediction = false);
EditOp initialSegFromMaskOp(const std::string& mask_file, bool run_prediction = false);
EditOp resetPromptOp();
// Writes the object into `label` (voxels the overwrite policy allows), then the next object.
// With the object (one byte per voxel of `g`, nonzero = in), the line records it: a replay
// without the model writes it as recorded (LabelEditor::apply), a rerun checks against it.
EditOp acceptPromptOp(int label, Overwrite overwrite = {});
EditOp acceptPromptOp(int label, Overwrite overwrite, const Geometry& g,
                      const std::vector<uint8_t>& object);
// The session's settings: the package's "name version", its network's sha256 (may be empty),
// the precision it runs in (engine::precisionName) and AutoZoom.
EditOp sessionPromptOp(const std::string& model, const std::string& network_sha256,
                       const std::string& precision, bool autozoom, bool restart = false);

// Reads a mask file onto the image's grid: one value per voxel, (z, y, x) C order (x fastest),
// nonzero = in. The CLI reads label maps, SEG and RTSTRUCT this way (pipeline).
using MaskLoader = std::function<Result<std::vector<uint8_t>>(const std::string& file)>;

// A prompt op's part in the session, as runSessionPart ran it.
struct SessionStep {
    std::optional<Box> object_changed;        // the target's changed box, if any
    std::shared_ptr<InteractiveDelta> delta;  // null: nothing the session can undo
    bool history_cleared = false;             // older deltas can no longer be reverted
    std::vector<uint8_t> accepted;            // prompt_accept: the object, before it was cleared
};

// Runs the session's part of a prompt op (any but prompt_session, which only sets the session
// up): the prompt, the reset, or for prompt_accept the object taken out and cleared (through an
// all-zero initial segmentation when the model takes one, so it is undoable). Positions are read
// on the image grid `g`; `labels` is the label map a prompt_initial_seg by label reads (may be
// null otherwise). On error the session is as it was. The viewer runs it on its worker thread
// and applies the op (with the accepted object recorded) to its EditSession afterwards;
// InteractiveEditor does both in turn.
Result<SessionStep> runSessionPart(InteractiveSession& session, const Geometry& g, const EditOp& op,
                                   const Volume* labels, const MaskLoader& load_mask);

// The session deltas of prompt steps, by the LabelEditor's step ids: undo/redo of such a step
// reverts/reapplies its delta in the session.
class PromptHistory {
  public:
    void keep(uint64_t step_id, std::shared_ptr<InteractiveDelta> delta);
    // Null when the step has no session part (or it can no longer be undone there).
    std::shared_ptr<InteractiveDelta> find(uint64_t step_id) const;
    void clear() { deltas_.clear(); }
    // Drops the deltas of steps `editor` no longer holds (redo history cleared, oldest dropped).
    void prune(const LabelEditor& editor);
    const std::map<uint64_t, std::shared_ptr<InteractiveDelta>>& deltas() const { return deltas_; }

  private:
    std::map<uint64_t, std::shared_ptr<InteractiveDelta>> deltas_;
};

// What a prompt_session op changes besides a restart (which InteractiveEditor does itself: the
// session's prompts cleared, the older deltas dropped): the CLI turns AutoZoom and reloads the
// network in the line's precision. Without one, InteractiveEditor sets the session's AutoZoom.
using SessionSettings = std::function<Status(const EditOp& op)>;

struct PromptApplyReport {
    ApplyReport edit;                   // the label map's change (the LabelEditor's report)
    std::optional<Box> object_changed;  // the session target's changed box, if any
    // prompt_accept of a line that records its object: voxels where the rerun object differs
    // from the recorded one (unset when the line records none, or on another grid: then
    // recorded_unplaced says why)
    std::optional<int64_t> recorded_differs;
    std::string recorded_unplaced;
};

// A session rebuilt from a restored journal (rebuildSession).
struct RebuiltSession {
    // The session deltas of the journal's prompt steps, by line index (0-based): the caller keys
    // them by its own steps (EditSession::stepOfLine).
    std::vector<std::pair<size_t, std::shared_ptr<InteractiveDelta>>> deltas;
    bool autozoom = true;  // the last prompt_session's
};

// The interactive session a journal leaves (the viewer reopening a crash's journal): `lines`
// replayed on a scratch label editor from `base` (on `image`'s grid), by LabelEditor alone up to
// the last prompt_session with restart, from there through an InteractiveEditor on `session`
// (whose image must be `image`), so the session holds the journal's open object and can undo its
// prompts. Refused (kFailedPrecondition) when the journal has no prompt_session line or its last
// one names another model than `model_identity`; a line that fails names its number. The
// session's prompts are reset first.
Result<RebuiltSession> rebuildSession(InteractiveSession& session, const Volume& image,
                                      const Volume& base, const std::vector<JournalLine>& lines,
                                      const std::string& model_identity);

class InteractiveEditor {
  public:
    // Both must outlive this (the editor may be a member of the viewer's EditSession); the
    // session's image must be on the editor's grid (shape (z, y, x) = the grid's size reversed).
    InteractiveEditor(LabelEditor& editor, InteractiveSession& session, MaskLoader load_mask = {});
    void setSessionSettings(SessionSettings settings) { settings_ = std::move(settings); }

    // Applies any op: prompt ops to the session (and an undo step to the editor), undo/redo to
    // both, other ops to the editor. On error nothing is changed. Errors name the op.
    Result<PromptApplyReport> apply(const EditOp& op);

    // True when the session holds an object that is not accepted yet (its target has voxels).
    bool objectOpen() const;
    // The session deltas of the prompt steps applied so far, by the editor's step ids.
    const PromptHistory& history() const { return history_; }

  private:
    Result<PromptApplyReport> applyPrompt(const EditOp& op);
    Result<PromptApplyReport> undoOrRedo(bool undo);

    LabelEditor& editor_;
    InteractiveSession& session_;
    MaskLoader load_mask_;
    SessionSettings settings_;
    PromptHistory history_;
};

}  // namespace voxseg::edit::interactive
