// EditSession: one reviewer's editing of one segmentation, as the viewer runs it: a LabelEditor
// whose every step is appended to an edit journal as it happens, brush strokes applied segment
// by segment while the mouse moves and kept as one undoable, journalled stroke, and a crash
// recovery folder from which a killed viewer's edits are restored on reopening the same series.
//
// Recovery folder (one per source and series, under a root the caller picks; the viewer uses
// its application data folder):
//   <root>/<recoveryKey(source, series_uid)>/
//     base.nrrd      the label map the session started from (uncompressed, written once)
//     edits.jsonl    the journal (edit/journal.h), fsync'ed per line: a crash loses at most the
//                    stroke being drawn
//     session.json   source, series UID, start time and the segments' metadata
//                    (edit/segment_meta.h), rewritten atomically when they change
// Restoring = reading base.nrrd and replaying edits.jsonl with the same LabelEditor::apply, so
// the restored map equals the lost one voxel for voxel (and `voxseg edit` of base + journal
// gives it too). Qt-free; not thread-safe (the viewer's GUI thread).
#pragma once

#include "core/status.h"
#include "core/volume.h"
#include "edit/journal.h"
#include "edit/label_editor.h"
#include "edit/segment_meta.h"

#include <optional>
#include <string>
#include <vector>

namespace voxseg::edit {

// Label maps read from image files may be any integer type; the editor takes uint8/uint16:
// whole numbers in [0, 255] become uint8, up to 65535 uint16; anything else is an error naming
// `path`. uint8/uint16 maps are returned as they are (shared).
Result<Volume> asEditableLabels(const Volume& labels, const std::string& path);

// A stable folder name for a source (path of the image or DICOM folder) and series UID: 16 hex
// digits of FNV-1a 64 over "source\nseries_uid".
std::string recoveryKey(const std::string& source, const std::string& series_uid);

struct RecoveryInfo {
    std::string folder;
    std::string source;
    std::string series_uid;
    std::string started;  // ISO 8601 UTC
    int journal_lines = 0;
    std::vector<SegmentMeta> segments;
};
// The recovery folder of a source and series when one holds a readable session with at least
// one journalled edit; nullopt when there is none (a folder that cannot be read is reported in
// the log and ignored).
std::optional<RecoveryInfo> findRecovery(const std::string& root, const std::string& source,
                                         const std::string& series_uid);
// Removes a recovery folder (after the reviewer declined to restore it).
Status removeRecovery(const RecoveryInfo& info);

struct SessionOptions {
    std::string recovery_root;  // empty: no journal, no recovery
    std::string source;
    std::string series_uid;
    EditorOptions editor;
};

class EditSession {
  public:
    // A new session on `labels` (uint8/uint16 on the image's grid; copied). With a recovery
    // root, replaces that source's recovery folder: base.nrrd, an empty journal, session.json.
    static Result<EditSession> start(const Volume& image, const Volume& labels,
                                     const std::vector<SegmentMeta>& segments,
                                     const SessionOptions& options);
    // Reopens a recovery folder: base.nrrd plus the journal replayed (a torn last line, the op
    // being written at the crash, is dropped); the journal goes on from there.
    static Result<EditSession> restore(const Volume& image, const RecoveryInfo& info,
                                       const SessionOptions& options);

    EditSession(EditSession&&) noexcept;
    EditSession& operator=(EditSession&&) noexcept;
    ~EditSession();

    // One op (undo/redo included), journalled when it succeeded.
    Result<ApplyReport> apply(const EditOp& op);
    Result<ApplyReport> undo();
    Result<ApplyReport> redo();

    // A brush stroke: `op` (paint or erase) at op.points[0], then one segment per extendStroke
    // from the last point, then endStroke(): one undo step and one journal line (stroke_mm with
    // every point), which replays to the same voxels. Other calls end a stroke first.
    Result<ApplyReport> beginStroke(const EditOp& op);
    Result<ApplyReport> extendStroke(const Vec3& point_mm);
    Status endStroke();
    bool inStroke() const { return stroke_steps_ > 0; }

    // Rewrites session.json with these segments (names, colours, codes, review status).
    Status saveSegments(const std::vector<SegmentMeta>& segments);

    const LabelEditor& editor() const { return *editor_; }
    const Volume& labelMap() const { return editor_->labelMap(); }
    // The label map the session started from (what "SEMIAUTOMATIC" and "MANUAL" compare to).
    const Volume& base() const { return base_; }
    bool dirty() const { return dirty_; }
    void markSaved() { dirty_ = false; }
    // Journal lines written (restored ones included).
    int journalLines() const { return journal_lines_; }
    // The editor step the journal's line `index` (0-based) made, 0 when it made none (undo,
    // redo, prompt_session): how callers key per-step data by line (the viewer's interactive
    // tool rebuilding its session from a restored journal).
    uint64_t stepOfLine(size_t index) const {
        return index < line_steps_.size() ? line_steps_[index] : 0;
    }
    const std::string& folder() const { return folder_; }
    // Ends the session's recovery: removes its folder (after a save the reviewer keeps, or a
    // discard on close). The session stays usable without a journal.
    Status discardRecovery();

  private:
    EditSession() = default;
    Status journal(const EditOp& op);

    std::optional<LabelEditor> editor_;  // always set once created
    Volume base_;
    std::optional<JournalWriter> writer_;
    std::string folder_;
    SessionOptions options_;
    std::string started_;
    bool dirty_ = false;
    int journal_lines_ = 0;
    std::vector<uint64_t> line_steps_;  // stepOfLine
    uint64_t last_step_ = 0;            // the editor's last step id at the last line
    void noteLineStep();
    EditOp stroke_op_;
    int stroke_steps_ = 0;
};

}  // namespace voxseg::edit
