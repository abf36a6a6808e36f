// LabelEditor: applies EditOps to a label map on an image's grid, with undo/redo.
//
// The label map (uint8 or uint16) must lie on the image's exact grid; the image supplies the
// intensities that masks, thresholds and flood fills read. Every applied op records, for each
// 32x32x32 tile it changed, the tile's voxels before and after (not a copy of the volume), so the
// history's memory is bounded by the voxels changed: a brush stroke on a 512x512x500 CT keeps a
// few tiles (64 KiB each for uint16), not 250 MB. Undo/redo write the recorded tiles back and are
// bit-exact. History depth and bytes are bounded (oldest steps dropped first).
//
// Owns its label map (a deep copy of the one given); labelMap() shares it (copy-on-read is the
// caller's choice: cloneVolume). Not thread-safe: one editor per thread; the viewer edits on its
// GUI thread.
#pragma once

#include "core/status.h"
#include "core/volume.h"
#include "edit/edit_op.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace voxseg::edit {
namespace detail {
class Canvas;
}

struct EditorOptions {
    int max_undo_steps = 100;
    size_t max_undo_bytes = size_t{1} << 30;  // history beyond this drops its oldest steps
};

// What one apply() (or undo/redo) did.
struct ApplyReport {
    OpKind kind = OpKind::kPaint;
    int64_t voxels_changed = 0;
    int tiles_recorded = 0;
    size_t bytes_recorded = 0;    // before + after of the recorded tiles
    std::vector<int> new_labels;  // islands split: the labels created
    // Where it changed: the box (inclusive voxel indices) of the changed tiles (empty when
    // nothing changed: lo > hi), and every label value a changed voxel held before or after
    // (0 included when background changed), ascending. What the viewer redraws and re-meshes.
    std::array<int64_t, 3> box_lo{0, 0, 0};
    std::array<int64_t, 3> box_hi{-1, -1, -1};
    std::vector<int> labels;
    bool changedAnything() const { return box_lo[0] <= box_hi[0]; }
};

// Changed tiles of one step. Internal, but visible for tests of memory bounds. A tile with few
// changed voxels (under 1/8 of it, e.g. a brush's rim) keeps only those: 8 bytes per changed
// voxel instead of the whole tile twice.
struct TileChange {
    int64_t tile = 0;
    std::vector<uint8_t> before;    // the tile's voxels (clipped at the volume's edge), raw bytes
    std::vector<uint8_t> after;     // (both empty when sparse)
    std::vector<uint32_t> offsets;  // sparse: voxel offsets in the tile
    std::vector<uint16_t> sparse_before;
    std::vector<uint16_t> sparse_after;
};
struct UndoStep {
    EditOp op;
    uint64_t id = 0;  // LabelEditor::undoTopId()
    std::vector<TileChange> tiles;
    size_t bytes() const;
};

class LabelEditor {
  public:
    static constexpr int kTile = 32;

    // `image`: any pixel type; `label_map`: uint8 or uint16 on the image's grid (copied).
    static Result<LabelEditor> create(const Volume& image, const Volume& label_map,
                                      const EditorOptions& options = {});

    LabelEditor(LabelEditor&&) noexcept;
    LabelEditor& operator=(LabelEditor&&) noexcept;
    ~LabelEditor();

    // Applies one op (undo/redo ops included). On error nothing is changed. Prompt ops
    // (isPromptOp) replay as recorded, without the session (InteractiveEditor,
    // edit/interactive/prompt_ops.h, reruns them): prompt_session is no step, the other prompts
    // an empty step, prompt_accept writes its recorded object (kFailedPrecondition without one,
    // or on another grid) into `label` as the overwrite policy allows.
    Result<ApplyReport> apply(const EditOp& op);
    // Records `op` as one undo step whose voxels a caller computes: every voxel of the box
    // [lo, hi] (inclusive (i, j, k) indices, clipped to the grid; lo > hi on an axis: none)
    // becomes value(linear index, current label). A step that changes nothing is still recorded
    // (undo/redo then step over it), so undo lines of a journal stay aligned with its ops.
    // Values above the map's range are kInvalidArgument (nothing changed).
    Result<ApplyReport> applyComputed(const EditOp& op, const std::array<int64_t, 3>& lo,
                                      const std::array<int64_t, 3>& hi,
                                      const std::function<int(int64_t index, int current)>& value);
    Result<ApplyReport> undo();
    Result<ApplyReport> redo();
    // Makes the last `n` steps one step recorded as `op` (a brush stroke applied segment by
    // segment while the mouse moves, undone as one stroke). The merged step keeps, per tile, the
    // voxels before the first of them and after the last; the redo history is untouched (it was
    // cleared by the steps). Error when fewer than `n` steps are held.
    Status mergeLast(int n, const EditOp& op);
    bool canUndo() const { return !undo_.empty(); }
    bool canRedo() const { return !redo_.empty(); }
    int undoDepth() const { return static_cast<int>(undo_.size()); }
    int redoDepth() const { return static_cast<int>(redo_.size()); }
    // Every step gets an id when applied (merged steps a new one), kept through undo/redo: what
    // callers key their own per-step data by (InteractiveEditor: the session's prompt deltas).
    // The id of the step undo() would undo / redo() would redo (0 when none), of the last step
    // applied (0 before any), and whether a step is still in the history.
    uint64_t undoTopId() const { return undo_.empty() ? 0 : undo_.back().id; }
    uint64_t redoTopId() const { return redo_.empty() ? 0 : redo_.back().id; }
    uint64_t lastAppliedId() const { return next_id_ - 1; }
    bool holdsStep(uint64_t id) const;
    // Bytes held by the undo and redo history.
    size_t historyBytes() const;

    const Volume& labelMap() const { return labels_; }
    const Volume& image() const { return image_; }
    const Geometry& geometry() const { return geometry_; }

  private:
    LabelEditor() = default;
    Result<ApplyReport> applyRecordedPrompt(const EditOp& op);
    void push(UndoStep step);
    // Keeps the changed tiles of `step` (sparse when few), fills the report, pushes the step.
    ApplyReport finishStep(UndoStep& step, detail::Canvas& canvas, ApplyReport report);

    Volume image_;
    Volume labels_;
    Geometry geometry_;
    EditorOptions options_;
    std::deque<UndoStep> undo_;
    std::vector<UndoStep> redo_;
    uint64_t next_id_ = 1;
};

// How each label differs between two label maps on one grid (the input of an edit session and
// its result): what a SEG writer needs to mark segments SEMIAUTOMATIC (edited) or MANUAL (new).
struct LabelChange {
    int label = 0;
    int64_t voxels_before = 0;
    int64_t voxels_after = 0;
    int64_t added = 0;    // voxels that became this label
    int64_t removed = 0;  // voxels that were this label and are not any more
    bool changed() const { return added != 0 || removed != 0; }
    // "AUTOMATIC" (unchanged: as it came), "SEMIAUTOMATIC" (present before and edited),
    // "MANUAL" (absent before: drawn by hand).
    const char* algorithmType() const;
    // The same for a label whose provenance was `before` (as loaded; empty: unknown): an
    // unchanged label keeps it, an edited MANUAL label stays MANUAL.
    std::string algorithmTypeAfter(const std::string& before) const;
};
Result<std::vector<LabelChange>> compareLabelMaps(const Volume& before, const Volume& after);

}  // namespace voxseg::edit
