// The edit journal: one EditOp per line (JSON lines, docs/edit-journal.md), appended as edits are
// applied and replayed onto a label map by the viewer (crash recovery) and `voxseg edit`.
//
// JournalWriter fsyncs every line (core/journal.h), so a crash (kill -9, power loss) loses at most
// the op being written; that torn last line is dropped with a warning naming it (core/journal.h's
// torn-line policy). Replay runs the same LabelEditor::apply the viewer runs, so both produce the
// same voxels.
#pragma once

#include "core/journal.h"
#include "core/status.h"
#include "edit/edit_op.h"
#include "edit/label_editor.h"

#include <functional>
#include <string>
#include <vector>

namespace voxseg::edit {

class JournalWriter {
  public:
    // Opens `path` for appending (created when missing; `truncate` empties it first). A torn last
    // line is cut off first, so the next op starts on a line of its own.
    static Result<JournalWriter> open(const std::string& path, bool truncate = false);
    JournalWriter(JournalWriter&&) noexcept;
    JournalWriter& operator=(JournalWriter&&) noexcept;
    ~JournalWriter();

    // Writes the op's line, then fsync: durable when this returns OK.
    Status append(const EditOp& op);
    const std::string& path() const { return file_.path(); }

  private:
    JournalWriter() = default;
    JournalFile file_;
};

struct JournalLine {
    int line = 0;  // 1-based line number in the file
    EditOp op;
};

// Parses every line (blank lines skipped). Errors name the file and the line:
// "edits.jsonl: line 3: key \"radius_mm\": must be > 0 (got -2)".
// A last line that is not complete JSON (the op being written when the process died) is dropped
// with a warning and *torn_tail, when given, set to true; a bad line elsewhere, or a last line
// that is JSON but not a valid op, is an error.
Result<std::vector<JournalLine>> readJournal(const std::string& path, bool* torn_tail = nullptr);

struct ReplayReport {
    int ops_applied = 0;  // undo/redo lines included
    int64_t voxels_changed = 0;
    // A rerun of prompts with the model: per prompt_accept line that records its object, the
    // voxels where the rerun object differs from it (in journal order).
    std::vector<int64_t> recorded_differs;
    // A rerun with the model: what about the image lies outside the package's intended input
    // (InteractiveModel::inputFindings); the prompts ran all the same.
    std::vector<std::string> input_warnings;
};

// Applies parsed lines (from readJournal of `path`) to `editor`, in order; stops at the first
// failure, naming `path` and the line. `after_each` (optional) runs after each applied line.
Result<ReplayReport> applyJournalLines(const std::vector<JournalLine>& lines, LabelEditor& editor,
                                       const std::string& path,
                                       const std::function<void()>& after_each = {});

// Reads and applies each line of `path` to `editor`, in order; stops at the first failure (the
// editor then holds the result of the lines before it), naming the file and line.
Result<ReplayReport> replayJournal(const std::string& path, LabelEditor& editor);

}  // namespace voxseg::edit
