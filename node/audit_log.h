// The node's audit trail: one JSON object per line (time, event and its fields), appended and
// fsync'ed, for the hospital's security review: associations (caller AE, peer address, accepted
// or why not), series received (study/series UIDs, instance count), routing, segmentation
// (route, model, model sha256, seconds), results and where they went, every failure.
//
// It holds no patient names, IDs or birth dates: callers pass UIDs, AE titles and addresses
// only, and every string is also put through the log's identifier scrubber. Thread-safe.
// Written through core/journal.h (fdatasync per line; a torn last line is cut off on open).
#pragma once

#include "core/journal.h"
#include "core/status.h"

#include <nlohmann/json.hpp>

#include <string>

namespace voxseg::node {

class AuditLog {
  public:
    AuditLog() = default;
    AuditLog(const AuditLog&) = delete;
    AuditLog& operator=(const AuditLog&) = delete;

    Status open(const std::string& path);
    // Appends {"time": ..., "event": event, ...fields}; failures go to the application log.
    void record(const std::string& event, nlohmann::json fields);

  private:
    JournalFile file_;
};

}  // namespace voxseg::node
