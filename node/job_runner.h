// Routes and segments one complete series of the spool (queue/<job>): the first matching route
// picks the model; the series goes through batch's loader / inferer / writer parts on that
// route's Segmenter (one model load per route, kept for the node's lifetime); the results are
// staged and renamed whole into outbox/<job>; queue/<job>/route.json says where they go.
// A series no route takes moves to unmatched/ (logged once, with the reason per route); one
// whose segmentation fails moves to failed/ with reason.txt (naming the job's new folder).
// Audit events for each outcome.
//
// Poison pills: with useWorkerProcess the series is segmented in a worker process
// (job_worker.h); a job whose worker dies (a crash in a library) is retried once, then moved to
// failed/ with the reason, audited (worker_crashed, segmentation_failed) and logged, and the
// node goes on. queue/<job>/work.json, written and fsync'ed before the work starts, also counts
// the times the whole node stopped while the job was in work (recoverInterrupted, at start-up):
// an operator's kill -9 is not the job's fault, but a job in work at kMaxInterruptions stops in
// a row (a crash that takes the node itself down) is moved to failed/ too: no crash loop.
//
// Not thread-safe: one JobRunner per worker thread.
#pragma once

#include "core/progress.h"
#include "node/audit_log.h"
#include "node/config.h"
#include "node/job_worker.h"
#include "node/metrics.h"
#include "node/spool.h"
#include "node/spool_crypto.h"
#include "pipeline/segment.h"

#include <unistd.h>

#include <map>
#include <memory>
#include <string>

namespace voxseg::node {

enum class JobOutcome { kSegmented, kUnmatched, kFailed, kStopped };

// Times a job may have its worker die under it (the first is retried), and times the node may
// stop while the job is in work (more than the kills an operator or a test makes in a row).
inline constexpr int kMaxWorkerDeaths = 2;
inline constexpr int kMaxInterruptions = 5;

class JobRunner {
  public:
    // `key`: the spool is encrypted; the series is decrypted into a private folder on /dev/shm
    // for segmenting, and the results are encrypted into the outbox.
    JobRunner(const NodeConfig& config, Spool& spool, AuditLog& audit, NodeMetrics& metrics,
              const SpoolKey* key = nullptr)
        : config_(config),
          spool_(spool),
          audit_(audit),
          metrics_(metrics),
          key_(key),
          owner_pid_(static_cast<int>(::getpid())) {}
    JobOutcome process(const std::string& job, const CancelToken& stop);
    // Loads every route's model now (at start-up), so the first series does not wait for it;
    // a model that fails to load is logged and retried with its first series.
    void preload();
    // Segments in a worker process (job_worker.h) started with these arguments of this
    // executable instead of in this process; starts it (it loads the models).
    void useWorkerProcess(std::vector<std::string> args);
    // Jobs the last run of the node left in work: each counts one interruption (at start-up).
    void recoverInterrupted();
    // Segments one job in this process (without useWorkerProcess, and in the worker process).
    SegmentReply segmentHere(const SegmentRequest& request, const CancelToken& stop);
    // The pid in the names of the /dev/shm folders (the node's, also in its worker process:
    // a killed node's folders are found by it at the next start).
    void setOwnerPid(int pid) { owner_pid_ = pid; }

  private:
    Result<pipeline::Segmenter*> segmenterFor(const Route& route);
    Status segment(const std::string& job, const std::string& dir, pipeline::Segmenter& segmenter,
                   const std::string& series_uid, const CancelToken& stop,
                   std::map<std::string, double>& stages);
    void moveWithReason(const std::string& job, const std::string& area, const std::string& reason);
    JobOutcome fail(const std::string& job, nlohmann::json ids, const std::string& error);

    const NodeConfig& config_;
    Spool& spool_;
    AuditLog& audit_;
    NodeMetrics& metrics_;
    const SpoolKey* key_;
    std::map<std::string, std::unique_ptr<pipeline::Segmenter>> segmenters_;  // by route name
    std::unique_ptr<WorkerClient> worker_;
    int owner_pid_;
};

// Files of outbox/<job> that are sent (the DICOM results), sorted.
std::vector<std::string> resultFiles(const std::string& outbox_job_dir);

}  // namespace voxseg::node
