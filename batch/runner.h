// `voxseg batch` without the command line: runs one shard of a case list through the segment
// pipeline with the model loaded once per device, resumable, fault-isolated and stoppable.
//
//   loader threads: read the study (transient read errors retried) and pre-process it
//     -> bounded queue (--prefetch) ->
//   one inference thread per device (a Segmenter each): the sliding window only
//     -> bounded queue ->
//   writer threads (--writers): scores back to the input grid and post-processing (CPU),
//     free-space guard, outputs staged under <out>/.voxseg-batch/staging/<id>, renamed to
//     <out>/<id> when complete, journal line (fsync), metrics file, progress.
//
// A case that fails (corrupt input, no matching series, out of memory) is journaled as failed
// and the batch goes on (one that kills its worker process too: batch/supervisor.h). When
// `stop` is cancelled (SIGTERM/SIGINT), no new case is started; cases already in inference or
// writing get `grace_seconds` to finish, then are abandoned (their staging folders removed) and
// redone by the next run. A rerun skips cases whose journal entry says done with the same model
// sha256 and options hash and whose files are all present.
//
// Thread safety: runBatch is one call; it owns its threads and joins them before returning.
#pragma once

#include "batch/manifest.h"
#include "batch/report.h"
#include "batch/shard.h"
#include "core/progress.h"
#include "core/status.h"
#include "io/dicom_series.h"
#include "pipeline/segment.h"
#include "pipeline/segment_options_schema.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace voxseg::batch {

struct BatchOptions {
    std::string model;        // model package folder
    std::string output_root;  // one folder per case inside
    std::string series;       // default series selector for cases without one
    pipeline::SegmentOptions segment;
    io::DicomLoadOptions dicom;
    // Devices, one Segmenter each. Empty: segment.device, and when that is (or "auto"
    // resolves to) the CPU and there are at least 2 cores, two CPU workers sharing them.
    std::vector<engine::DeviceSpec> devices;
    Shard shard;
    int loaders = 1;   // CPU threads reading + pre-processing
    int prefetch = 2;  // pre-processed cases waiting for a device (queue capacity)
    int writers = 0;   // threads exporting and writing cases; 0: max(devices, min(4, cores / 2))
    double grace_seconds = 60.0;           // after a stop, for the cases already running
    int read_retries = 2;                  // extra attempts after a transient read error (kIoError)
    double retry_delay_seconds = 1.0;      // doubled after each attempt
    uint64_t min_free_bytes = 1ull << 30;  // free-space guard on the output file system
    std::string metrics_path;              // default: <out>/.voxseg-batch/metrics-<shard>.prom
    bool redo_all = false;                 // ignore the journal (--force)
    // A case journaled as having killed its worker (batch/supervisor.h) is counted failed and
    // not run again by a rerun unless this is set (--retry-failed); other failed cases are
    // always run again.
    bool retry_failed = false;
    // Crash isolation (batch/supervisor.h). Journal entries recorded since `run_started` (unix
    // seconds; 0: none) are this run's, by an earlier worker: done ones count as done, failed
    // ones as failed, and neither runs again.
    double run_started = 0.0;
    std::vector<std::string> only;  // run only these cases (empty: every case of the shard)
    bool one_at_a_time = false;     // a case starts only when the one before it is recorded
    // Called from the runner's threads (concurrently) when a case starts loading and when it is
    // recorded or dropped; and once after the model load.
    std::function<void(const std::string& case_id, bool started)> on_flight;
    std::function<void(const std::string& model_sha256, const std::string& options_hash)> on_ready;
};

enum class StopReason { kNone, kSignal, kDiskFull };

struct BatchResult {
    BatchStats stats;
    StopReason stop = StopReason::kNone;
    std::string summary_path;
    std::string journal_path;
    std::string metrics_path;
};

// Called after each case is recorded (from the runner's threads, serialised).
using CaseCallback = std::function<void(const CaseRecord& record, const BatchStats& stats)>;

// The state folder inside the output root (journal, summary, metrics, staging).
std::string stateFolder(const std::string& output_root);
// The journal a shard appends to (in the state folder).
std::string journalPath(const std::string& output_root, const Shard& shard);

// sha256 of the options that change outputs: every option of `schema` marked affects_results
// whose value is not its default (pipeline::resultOptions: precision, accumulator, overlap, TTA,
// post-processing, outputs, SEG type, format, labels, modality check; not device or batch
// size), in the schema's order, plus per-label post-processing set through the API and the
// DICOM policies. Not threads.
std::string optionsHash(
    const BatchOptions& options,
    const std::vector<pipeline::SegmentOptionSpec>& schema = pipeline::segmentOptionSchema());

// Devices from `--devices` ("0,1", "cpu,cpu", "cuda:0,cuda:1") and the base `--device`: plain
// numbers become cuda:<n> for cuda (and for auto when a CUDA device is usable), or that many
// workers of the base backend otherwise. Empty list: empty (BatchOptions::devices' default:
// the base device, doubled for the CPU).
// Names are parsed by engine::parseDevice (the one parser of device names).
Result<std::vector<engine::DeviceSpec>> parseDevices(const std::string& list,
                                                     const engine::DeviceSpec& base);

// Retries `fn` after transient read errors (kIoError) up to `retries` more times, sleeping
// `delay_seconds` (doubled each time) between attempts; stops early when `stop` is cancelled.
template <typename T>
Result<T> retryTransient(const std::function<Result<T>()>& fn, int retries, double delay_seconds,
                         const CancelToken& stop, int* attempts_out = nullptr);

// Errors are setup problems (model, output folder, journal); case failures are in the result.
Result<BatchResult> runBatch(const std::vector<BatchCase>& cases, const BatchOptions& options,
                             const CancelToken& stop, const CaseCallback& on_case = {});

}  // namespace voxseg::batch

#include "batch/retry_impl.h"
