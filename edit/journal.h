// The edit journal: one EditOp per line (JSON lines, docs/viewer.md), appended as edits are
// applied and replayed onto a label map by the viewer (crash recovery) and `voxseg edit`.
//
// JournalWriter flushes and fsyncs every line, so a crash (kill -9, power loss) loses at most the
// op being written; a torn last line is reported by replay with its line number. Replay runs the
// same LabelEditor::apply the viewer runs, so both produce the same voxels. Not thread-safe.
#pragma once

#include "core/status.h"
#include "edit/edit_op.h"
#include "edit/label_editor.h"

#include <string>
#include <vector>

namespace voxseg::edit {

class JournalWriter {
  public:
    // Opens `path` for appending (created when missing; `truncate` empties it first).
    static Result<JournalWriter> open(const std::string& path, bool truncate = false);
    JournalWriter(JournalWriter&&) noexcept;
    JournalWriter& operator=(JournalWriter&&) noexcept;
    ~JournalWriter();

    // Writes the op's line, then fsync: durable when this returns OK.
    Status append(const EditOp& op);
    const std::string& path() const { return path_; }

  private:
    JournalWriter() = default;
    int fd_ = -1;
    std::string path_;
};

struct JournalLine {
    int line = 0;  // 1-based line number in the file
    EditOp op;
};

// Parses every line (blank lines skipped). Errors name the file and the line:
// "edits.jsonl: line 3: key \"radius_mm\": must be > 0 (got -2)".
// `torn_tail`: for crash recovery. When not null, a last line that has no newline and does not
// parse (the op being written when the process died) is dropped and *torn_tail set to true
// instead of failing; a bad line elsewhere is still an error.
Result<std::vector<JournalLine>> readJournal(const std::string& path, bool* torn_tail = nullptr);

struct ReplayReport {
    int ops_applied = 0;  // undo/redo lines included
    int64_t voxels_changed = 0;
};

// Applies parsed lines (from readJournal of `path`) to `editor`, in order; stops at the first
// failure, naming `path` and the line.
Result<ReplayReport> applyJournalLines(const std::vector<JournalLine>& lines, LabelEditor& editor,
                                       const std::string& path);

// Reads and applies each line of `path` to `editor`, in order; stops at the first failure (the
// editor then holds the result of the lines before it), naming the file and line.
Result<ReplayReport> replayJournal(const std::string& path, LabelEditor& editor);

}  // namespace voxseg::edit
