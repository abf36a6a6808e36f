// The batch journal: one JSON object per line, appended and fsync'ed after every case, so a
// batch killed at any moment (spot reclaim, node failure) knows on rerun which cases are done.
// Each shard appends to its own file (journal-<i>-of-<N>.jsonl in the batch state folder), so
// shards sharing an output folder never write to the same file; a rerun reads all of them.
// Written and read through core/journal.h, whose torn-line policy applies: a torn last line (a
// crash mid-write) is dropped with a warning, a line in the middle that is not JSON is an error
// naming the file and line. A JSON line that is not a valid entry is skipped (its case is redone).
//
// Journal: one writer per file (appends are thread-safe).
#pragma once

#include "core/journal.h"
#include "core/status.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace voxseg::batch {

enum class CaseState { kDone, kFailed, kInterrupted };
const char* caseStateName(CaseState state);

struct OutputFile {
    std::string name;  // relative to the case's output folder
    uint64_t bytes = 0;
};

struct JournalEntry {
    std::string case_id;
    CaseState state = CaseState::kFailed;
    std::string input;
    std::string series;
    std::string model_sha256;
    std::string options_hash;
    std::vector<OutputFile> files;  // kDone: every output, with its size
    std::string error;              // kFailed
    std::string error_code;         // StatusCode name
    bool worker_died = false;       // kFailed: the case killed its worker (batch/supervisor.h)
    double seconds = 0.0;
    double time = 0.0;  // unix seconds when recorded

    nlohmann::json toJson() const;
    static Result<JournalEntry> fromJson(const nlohmann::json& j);
};

class Journal {
  public:
    // Opens (creating) `path` for appending.
    static Result<Journal> open(const std::string& path);
    // Appends one line and flushes it to disk (fsync) before returning.
    Status append(const JournalEntry& entry);

  private:
    JournalFile file_;
};

// The latest entry per case over every journal-*.jsonl in `folder` (missing folder: none).
Result<std::map<std::string, JournalEntry>> readJournals(const std::string& folder);
// Entries of one file, in order. Skipped lines (JSON that is not an entry, and a torn last line)
// are counted in `skipped` when given; a line in the middle that is not JSON is an error.
Result<std::vector<JournalEntry>> readJournalFile(const std::string& path, int* skipped = nullptr);

}  // namespace voxseg::batch
