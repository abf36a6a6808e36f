// `voxseg batch` survives a case that kills its worker: the command runs as a supervisor that
// starts the batch in a worker process (batch/child_process.h), which loads the model once and
// runs the cases as runner.h describes, telling the supervisor which cases are in flight. When
// the worker dies without finishing (a signal such as SIGSEGV from a library's stack overflow,
// an escaping exception, memory exhaustion), the supervisor:
//   - one case in flight: journals it failed with the reason ("the worker died of signal 11
//     (SIGSEGV) while segmenting this case") and starts a new worker for the rest;
//   - several in flight: starts a worker that runs only those, one at a time, so that the next
//     death names its case (a case that does not crash alone is simply done);
//   - none in flight (model load, setup): ends with the worker's exit code.
// A rerun skips a case journaled as having killed its worker unless --retry-failed (runner.h).
// Each worker loads the model once; a worker is restarted only after a death. The supervisor
// forwards a stop (SIGTERM/SIGINT through `stop`) to the worker, whose grace period applies.
//
// Thread safety: superviseBatch is one call on one thread.
#pragma once

#include "batch/manifest.h"
#include "core/progress.h"
#include "core/status.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace voxseg::batch {

// The environment variable that makes `voxseg batch` a worker, holding its WorkerPlan (JSON).
inline constexpr const char* kBatchWorkerVariable = "VOXSEG_INTERNAL_BATCH_WORKER";

// What the supervisor asks of one worker.
struct WorkerPlan {
    double run_started = 0.0;       // unix seconds: journal entries since then are this run's
    std::vector<std::string> only;  // isolation: these cases only, one at a time
    bool final = true;              // the worker whose summary line the user sees
    nlohmann::json toJson() const;
    static Result<WorkerPlan> fromJson(const std::string& text);
};

// The worker's end: reports to the supervisor over the socket of connectToParent().
class WorkerLink {
  public:
    // The link of this process when it was started as a batch worker (else null).
    static Result<std::unique_ptr<WorkerLink>> fromEnvironment();
    const WorkerPlan& plan() const { return plan_; }
    // Thread-safe; a lost supervisor is ignored (the worker is killed with it anyway).
    void caseStarted(const std::string& case_id);
    void caseEnded(const std::string& case_id);
    void ready(const std::string& model_sha256, const std::string& options_hash);
    void finished(int exit_code);

  private:
    WorkerLink() = default;
    void send(const nlohmann::json& message);
    std::mutex mutex_;  // one line at a time on the socket
    int fd_ = -1;
    WorkerPlan plan_;
};

struct SupervisedCase {
    std::string id, input, series;  // series: the effective selector
};

// Runs workers (this executable with `args`) until one finishes the batch; returns its exit code,
// or 1 when a worker died outside any case (or kept dying). `journal_path`: the shard's journal,
// where cases that killed a worker are recorded.
int superviseBatch(const std::vector<std::string>& args, const std::vector<SupervisedCase>& cases,
                   const std::string& journal_path, const CancelToken& stop);

}  // namespace voxseg::batch
