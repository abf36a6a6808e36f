// The node's audit trail: one JSON object per line (time, event and its fields), appended and
// fsync'ed, for the hospital's security review: associations (caller AE, peer address, accepted
// or why not), series received (study/series UIDs, instance count), routing, segmentation
// (route, model, model sha256, seconds), results and where they went, every failure.
//
// It holds no patient names, IDs or birth dates: callers pass UIDs, AE titles and addresses
// only, and every string is also put through the log's identifier scrubber. Thread-safe.
#pragma once

#include "core/status.h"

#include <nlohmann/json.hpp>

#include <mutex>
#include <string>

namespace voxseg::node {

class AuditLog {
  public:
    AuditLog() = default;
    ~AuditLog();
    AuditLog(const AuditLog&) = delete;
    AuditLog& operator=(const AuditLog&) = delete;

    Status open(const std::string& path);
    // Appends {"time": ..., "event": event, ...fields}; failures go to the application log.
    void record(const std::string& event, nlohmann::json fields);

  private:
    std::mutex mutex_;
    int fd_ = -1;
    std::string path_;
};

}  // namespace voxseg::node
