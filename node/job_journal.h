// Which jobs are finished: batch's fsync'ed journal (state/journal-node.jsonl) plus an
// in-memory set, so the worker never segments again a series whose results were confirmed,
// even when the process died between the journal line and the removal of its folders.
// Thread-safe.
#pragma once

#include "batch/journal.h"
#include "core/status.h"

#include <memory>
#include <mutex>
#include <set>
#include <string>

namespace voxseg::node {

class JobJournal {
  public:
    static Result<std::unique_ptr<JobJournal>> open(const std::string& state_dir);
    bool isDone(const std::string& job) const;
    Status markDone(const batch::JournalEntry& entry);
    size_t doneCount() const;

  private:
    JobJournal() = default;
    mutable std::mutex mutex_;
    batch::Journal journal_;
    std::set<std::string> done_;
};

}  // namespace voxseg::node
