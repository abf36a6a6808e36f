// The node's segmentation worker process (crash isolation, batch/child_process.h): `voxseg
// serve` reads, pre-processes, segments and writes each series in a long-lived child process
// (`voxseg serve ... --internal-worker`) that loads every route's model once, at its start, and
// takes one job at a time over its socket. A crash in a library while a series is segmented
// (a parser's stack overflow, SIGSEGV, an escaping exception, the kernel's out-of-memory kill)
// ends the child, not the node: the node sees how it ended (waitpid), counts the crash against
// that job (job_runner.h: retried once, then failed/ with the reason) and starts a new worker
// for the next job. Figures: a worker per job would load the model for every series; the
// long-lived worker adds one message round trip per series (docs/node.md).
//
// Protocol, one JSON object per line: worker -> node {"ready": true} once the models are
// loaded; node -> worker {"job", "route", "series_uid"}; worker -> node SegmentReply::toJson.
//
// Thread safety: a WorkerClient belongs to the node's worker thread (the child dies with it).
#pragma once

#include "batch/child_process.h"
#include "core/progress.h"
#include "core/status.h"
#include "node/config.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace voxseg::node {

struct SegmentRequest {
    std::string job;
    std::string route;  // its name
    std::string series_uid;
};

// What segmenting one job gave.
struct SegmentReply {
    Status status;
    std::map<std::string, double> stages;  // seconds per pipeline stage
    std::string model_name, model_sha256;
    // The worker process ended while it had the job, without being asked to.
    std::optional<batch::ChildExit> died;
    // No worker could take the job (it is starting again, or died loading the models): the job
    // waits, nothing is counted against it.
    bool worker_unavailable = false;

    nlohmann::json toJson() const;
    static SegmentReply fromJson(const nlohmann::json& j);
};

class WorkerClient {
  public:
    // `args`: this executable's arguments that make it the worker.
    explicit WorkerClient(std::vector<std::string> args) : args_(std::move(args)) {}
    // Starts the worker (it loads the models) unless one runs.
    Status start();
    // Gives the job to the worker (started first when none runs) and waits for its reply. When
    // `abort` is cancelled the worker is killed and the reply is kCancelled.
    SegmentReply segment(const SegmentRequest& request, const CancelToken& abort);

  private:
    void cleanUpAfter(const SegmentRequest& request);
    std::vector<std::string> args_;
    std::unique_ptr<batch::ChildProcess> child_;
    bool ready_ = false;  // the worker said it loaded the models
    std::chrono::steady_clock::time_point next_start_{};
};

// The worker's side (`voxseg serve --internal-worker`): answers the node's requests until it
// closes the socket. Returns the process's exit code.
int runJobWorker(const NodeConfig& config);

}  // namespace voxseg::node
