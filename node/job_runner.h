// Routes and segments one complete series of the spool (queue/<job>): the first matching route
// picks the model; the series goes through batch's loader / inferer / writer parts on that
// route's Segmenter (one model load per route, kept for the node's lifetime); the results are
// staged and renamed whole into outbox/<job>; queue/<job>/route.json says where they go.
// A series no route takes moves to unmatched/ (logged once, with the reason per route); one
// whose segmentation fails moves to failed/ with reason.txt. Audit events for each outcome.
//
// Not thread-safe: one JobRunner per worker thread.
#pragma once

#include "core/progress.h"
#include "node/audit_log.h"
#include "node/config.h"
#include "node/metrics.h"
#include "node/spool.h"
#include "node/spool_crypto.h"
#include "pipeline/segment.h"

#include <map>
#include <memory>
#include <string>

namespace voxseg::node {

enum class JobOutcome { kSegmented, kUnmatched, kFailed, kStopped };

class JobRunner {
  public:
    // `key`: the spool is encrypted; the series is decrypted into a private folder on /dev/shm
    // for segmenting, and the results are encrypted into the outbox.
    JobRunner(const NodeConfig& config, Spool& spool, AuditLog& audit, NodeMetrics& metrics,
              const SpoolKey* key = nullptr)
        : config_(config), spool_(spool), audit_(audit), metrics_(metrics), key_(key) {}
    JobOutcome process(const std::string& job, const CancelToken& stop);
    // Loads every route's model now (at start-up), so the first series does not wait for it;
    // a model that fails to load is logged and retried with its first series.
    void preload();

  private:
    Result<pipeline::Segmenter*> segmenterFor(const Route& route);
    Status segment(const std::string& job, const std::string& dir, pipeline::Segmenter& segmenter,
                   const std::string& series_uid, const CancelToken& stop,
                   std::map<std::string, double>& stages);
    void moveWithReason(const std::string& job, const std::string& area, const std::string& reason);

    const NodeConfig& config_;
    Spool& spool_;
    AuditLog& audit_;
    NodeMetrics& metrics_;
    const SpoolKey* key_;
    std::map<std::string, std::unique_ptr<pipeline::Segmenter>> segmenters_;  // by route name
};

// Files of outbox/<job> that are sent (the DICOM results), sorted.
std::vector<std::string> resultFiles(const std::string& outbox_job_dir);

}  // namespace voxseg::node
