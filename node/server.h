// `voxseg serve` without the command line: wires the spool, the DICOM receiver, the worker
// (route + segment, one series at a time), the sender (outbox, retries), the audit log and the
// HTTP endpoints, and runs until `stop` is cancelled (SIGTERM/SIGINT).
//
// Threads: DCMTK's association workers write instances into the spool; the main loop turns
// quiet series into queue jobs and applies the retention periods; one worker thread segments
// (in a worker process of its own: job_worker.h); one sender thread delivers. On stop: no new
// associations, the running ones finish; the series in segmentation gets grace_seconds to finish,
// everything else stays queued on disk for the next start. A restart resumes from the spool
// (spool.h): nothing received is lost and nothing confirmed is segmented or sent again.
#pragma once

#include "core/progress.h"
#include "core/status.h"
#include "node/config.h"

#include <string>
#include <vector>

namespace voxseg::node {

struct ServeStats {
    int held = 0;       // results held in the outbox (resend: still held afterwards)
    int delivered = 0;  // resend: results confirmed now
};

// `worker_args`: this executable's arguments that make it the segmentation worker process
// (job_worker.h: a crash while segmenting costs one job, not the node); empty: segment in this
// process.
Result<ServeStats> runNode(const NodeConfig& config, const CancelToken& stop,
                           double grace_seconds = 60.0,
                           const std::vector<std::string>& worker_args = {});

// Sends every result of the outbox (held ones included) once more, with the retry policy,
// then returns. Safe while a node runs on the same spool (a job is sent by one at a time).
Result<ServeStats> resendOutbox(const NodeConfig& config, const CancelToken& stop);

}  // namespace voxseg::node
