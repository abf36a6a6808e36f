// The node's DICOM listener: the storage SCP of io/dicom_net_scp.h (C-ECHO and C-STORE, one
// worker thread per association, up to max_associations at once) with the node's policy. It
// accepts the storage SOP classes of CT, MR and PET and their enhanced and legacy-converted
// forms, in uncompressed and compressed transfer syntaxes (stored as received), refuses callers
// outside allowed_callers at association, refuses associations while the spool's free space is
// below the guard ("out of resources": rejected transient, local limit exceeded) and answers a
// C-STORE with success only after the instance is fsync'ed and renamed into the spool.
//
// start() opens the port and returns; stop() stops accepting, lets running associations end
// and joins. Thread-safe; one Receiver per process (one SCP per process).
#pragma once

#include "core/status.h"
#include "node/audit_log.h"
#include "node/config.h"
#include "node/metrics.h"
#include "node/spool.h"
#include "node/spool_crypto.h"

#include <memory>

namespace voxseg::node {

struct ReceiverContext {
    const NodeConfig* config = nullptr;
    Spool* spool = nullptr;
    AuditLog* audit = nullptr;
    NodeMetrics* metrics = nullptr;
    const SpoolKey* key = nullptr;  // set: instances are written encrypted (spool_crypto.h)
};

class Receiver {
  public:
    ~Receiver();
    static Result<std::unique_ptr<Receiver>> start(const ReceiverContext& context);
    void stop();

    struct Impl;

  private:
    explicit Receiver(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// True when the spool's file system has less free space than the guard; updates the metrics.
bool diskGuardActive(const ReceiverContext& context);

}  // namespace voxseg::node
