// The three parts of one case's way through the segment pipeline, shared by `voxseg batch`
// (runner.cpp overlaps them on loader, device and writer threads) and `voxseg serve` (node/,
// which runs them one series at a time on a route's Segmenter):
//
//   loadCase:  read the study (transient read errors retried) and pre-process it   (CPU)
//   inferCase: the sliding window                                                  (device)
//   writeCase: scores back to the input grid, post-processing, every output staged in a
//              folder of its own and renamed to the final folder when complete     (CPU)
//
// Exceptions that escape library code (memory exhaustion above all) become a Status, so one
// case cannot end a batch or a node. loadCase, finish and writeCase only read the Segmenter and
// may run on several threads at once; inferCase must not run concurrently on one Segmenter.
#pragma once

#include "batch/journal.h"
#include "batch/manifest.h"
#include "core/progress.h"
#include "core/status.h"
#include "io/dicom_series.h"
#include "pipeline/segment.h"

#include <chrono>
#include <map>
#include <new>
#include <string>
#include <vector>

namespace voxseg::batch {

// One case between the parts.
struct CaseWork {
    BatchCase c;
    std::string series;  // effective selector
    pipeline::StudyInput input;
    pipeline::SegmentWork work;
    std::map<std::string, double> stages;  // seconds per pipeline stage
    std::chrono::steady_clock::time_point start;
};

struct LoadPolicy {
    io::DicomLoadOptions dicom;
    int read_retries = 2;              // extra attempts after a transient read error (kIoError)
    double retry_delay_seconds = 1.0;  // doubled after each attempt
    std::string ambiguous_hint;        // added to "several series" errors: what the caller can do
};

// Where writeCase puts a case: outputs are written into `staging`, an older `final_dir` is
// moved to `trash` and removed, then `staging` is renamed to `final_dir`. Same file system.
struct CaseFolders {
    std::string staging;
    std::string final_dir;
    std::string trash;
};

// Runs `fn`, turning escaping exceptions into a Status.
template <typename Fn>
Status guarded(Fn&& fn) {
    try {
        return fn();
    } catch (const std::bad_alloc&) {
        return Status(
            StatusCode::kOutOfMemory,
            "out of memory: use fewer --loaders/--prefetch, or a machine with more memory");
    } catch (const std::exception& e) {
        return internalError(std::string("unexpected error: ") + e.what());
    }
}

// Reads work.c.input (selector work.series) and pre-processes it; stages "load" and prepare's.
Status loadCase(CaseWork& work, const pipeline::Segmenter& segmenter, const LoadPolicy& policy,
                const CancelToken& stop, const Progress& progress = {});
// The sliding window; the segmenter's stage timings are merged into work.stages.
Status inferCase(CaseWork& work, pipeline::Segmenter& segmenter, const Progress& progress = {});
// finish + write + rename; releases the loaded volume; stage "write". The files of the final
// folder on success. The staging folder is removed in every case.
Result<std::vector<OutputFile>> writeCase(CaseWork& work, const pipeline::Segmenter& segmenter,
                                          const CaseFolders& folders,
                                          const Progress& progress = {});

// Files of a finished case folder with their sizes, sorted by name (flat).
std::vector<OutputFile> listOutputs(const std::string& dir);

}  // namespace voxseg::batch
