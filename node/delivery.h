// Sends the results of outbox/<job> to every destination of its route that has not confirmed
// them yet (C-STORE or STOW-RS), each up to send.attempts times with exponential back-off
// (initial_delay_seconds, doubled). A confirmed destination gets a sent-<name> marker (fsync'ed)
// and is never sent to again; the result files are sent as written, so a retried send carries
// the same SOP Instance UIDs. When every destination confirmed, the job is journaled done and
// its folders removed (statistics kept in results/<job>); nothing is deleted before. When the
// attempts are exhausted the job is held (outbox/<job>/held) until `voxseg serve --resend`.
//
// Thread-safe per job (one deliverer at a time per job: a lock file in the job folder).
#pragma once

#include "core/progress.h"
#include "node/audit_log.h"
#include "node/config.h"
#include "node/job_journal.h"
#include "node/metrics.h"
#include "node/spool.h"
#include "node/spool_crypto.h"

#include <string>

namespace voxseg::node {

enum class DeliveryResult { kDelivered, kHeld, kBusy, kStopped };

class Delivery {
  public:
    Delivery(const NodeConfig& config, Spool& spool, AuditLog& audit, NodeMetrics& metrics,
             JobJournal& journal, const SpoolKey* key = nullptr)
        : config_(config),
          spool_(spool),
          audit_(audit),
          metrics_(metrics),
          journal_(journal),
          key_(key) {}

    // `resend`: also jobs that are held (the held marker is removed first).
    DeliveryResult deliver(const std::string& job, bool resend, const CancelToken& stop);
    static bool isHeld(const Spool& spool, const std::string& job);

  private:
    Status sendOnce(const Destination& d, const std::vector<std::string>& files);
    void finish(const std::string& job, const std::vector<std::string>& files);

    const NodeConfig& config_;
    Spool& spool_;
    AuditLog& audit_;
    NodeMetrics& metrics_;
    JobJournal& journal_;
    const SpoolKey* key_;  // set: result files are decrypted into memory files for sending
};

}  // namespace voxseg::node
