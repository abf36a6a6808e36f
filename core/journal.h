// The append-only JSON-lines journal every layer shares (batch journal, node job journal, edit
// journal, node audit log): one record per line, written whole and synced before append returns,
// with one torn-line policy for reading back after a crash.
//
// Writing (JournalFile): the file is opened with O_APPEND; each record is one write of the line
// plus '\n' (retried on EINTR and short writes) followed by fsync (or fdatasync), so a record is
// on disk when append returns OK. EINVAL from the sync (some FUSE file systems cannot sync) is
// not an error. append is thread-safe: lines of concurrent appends never interleave. One process
// appends to a file at a time (the batch runner per shard, the node, one edit session).
//
// The torn-line policy (docs/cli.md#voxseg-batch, docs/viewer.md#edit-journal):
//  - Reading: a line the caller's parser refuses is
//      * a torn write when it is the last non-blank line and is not complete JSON (a crash cut
//        the write short, or its bytes never reached the disk): dropped, with a warning naming the
//        file and the line, and reported in JournalReadReport::torn_line;
//      * an error otherwise (a line in the middle, or a last line that is JSON but not a valid
//        record): "line N: <the parser's message>", the file as the status's subject.
//    A complete last line without its newline (cut just before it) is a whole record and read.
//  - Appending: open() looks at the file's end. A last line without newline that is not complete
//    JSON is the torn write: it is cut off (with a warning naming the file and line), so the next
//    record starts on a line of its own and the file reads back clean. A complete JSON line
//    without newline gets its newline.
//
//   VOXSEG_ASSIGN_OR_RETURN(JournalFile f, JournalFile::open(path, {.what = "the batch journal"}));
//   VOXSEG_RETURN_IF_ERROR(f.append(record.dump()));
//   VOXSEG_ASSIGN_OR_RETURN(auto report, readJournalLines(path, "the batch journal",
//       [&](std::string_view line, int number) -> Status { ... }));
#pragma once

#include "core/status.h"

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace voxseg {

enum class JournalSync {
    kFsync,      // data and metadata (the batch and edit journals)
    kFdatasync,  // data and the size only (the node's audit log, written on every event)
};

struct JournalOptions {
    std::string_view what = "the journal";  // names the file in messages ("the edit journal")
    JournalSync sync = JournalSync::kFsync;
    unsigned mode = 0644;         // permissions of a new file
    bool create_folders = false;  // create missing parent folders
    bool truncate = false;        // empty the file first (a new edit session)
};

class JournalFile {
  public:
    JournalFile();
    ~JournalFile();
    JournalFile(JournalFile&&) noexcept;
    JournalFile& operator=(JournalFile&&) noexcept;

    // Opens (creating) `path` for appending; a torn last line is cut off (above). kIoError when
    // the file cannot be opened, read or repaired.
    static Result<JournalFile> open(const std::string& path, const JournalOptions& options = {});

    // Appends `record` (one line of JSON, without its newline) and syncs: durable when this
    // returns OK. kFailedPrecondition when not open, kIoError when the write or sync fails.
    Status append(std::string_view record);

    bool isOpen() const;
    const std::string& path() const;

  private:
    struct State;
    std::unique_ptr<State> state_;
};

struct JournalReadReport {
    int records = 0;    // lines the parser accepted
    int torn_line = 0;  // the 1-based number of the torn last line dropped; 0 when none
};

// Called with each non-blank line (without its newline and a trailing '\r') and its 1-based
// number; returns OK when it took the record, or why the line is not one.
using JournalLineParser = std::function<Status(std::string_view line, int number)>;

// Reads `path` (kNotFound when missing), passing each line to `parse` in order, with the policy
// above. `what` names the file in the torn-line warning.
Result<JournalReadReport> readJournalLines(const std::string& path, std::string_view what,
                                           const JournalLineParser& parse);

}  // namespace voxseg
