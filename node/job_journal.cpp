#include "node/job_journal.h"

#include <filesystem>

namespace voxseg::node {

Result<std::unique_ptr<JobJournal>> JobJournal::open(const std::string& state_dir) {
    std::unique_ptr<JobJournal> j(new JobJournal());
    VOXSEG_ASSIGN_OR_RETURN(auto entries, batch::readJournals(state_dir));
    for (const auto& [id, e] : entries)
        if (e.state == batch::CaseState::kDone) j->done_.insert(id);
    VOXSEG_ASSIGN_OR_RETURN(j->journal_, batch::Journal::open(state_dir + "/journal-node.jsonl"));
    return j;
}

bool JobJournal::isDone(const std::string& job) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_.count(job) > 0;
}

Status JobJournal::markDone(const batch::JournalEntry& entry) {
    std::lock_guard<std::mutex> lock(mutex_);
    VOXSEG_RETURN_IF_ERROR(journal_.append(entry));
    done_.insert(entry.case_id);
    return Status::ok();
}

size_t JobJournal::doneCount() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_.size();
}

}  // namespace voxseg::node
