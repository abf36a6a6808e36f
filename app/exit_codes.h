// Exit codes of the `voxseg` command line (documented in docs/exit-codes.md; keep both in sync).
// Scripts and batch schedulers branch on these, so a code's meaning never changes once released;
// new failure kinds get new numbers.
#pragma once

#include "core/status.h"

namespace voxseg::app {

enum class ExitCode : int {
    kOk = 0,
    kInternal = 1,           // a bug or an unexpected failure
    kUsage = 2,              // bad command line (unknown option, bad value, unknown format)
    kInputNotFound = 3,      // input missing or unreadable (permissions, I/O error)
    kAmbiguousSeries = 4,    // several candidate series and no --series
    kUnsupportedInput = 5,   // input exists but cannot be converted (corrupt, unsupported, refused)
    kOutputNotWritable = 6,  // output folder missing or read-only, disk full, output exists
    kSomeCasesFailed = 7,    // batch finished, some cases failed (each in summary.json)
    kNoCudaDevice = 8,       // reserved: --device cuda asked for and no usable GPU
    kOutOfMemory = 9,        // host memory exhausted
    kBatchStopped = 10,      // batch stopped early by SIGTERM/SIGINT (preemption); rerun resumes
    kCancelled = 130,        // interrupted (SIGINT/SIGTERM) or cancelled; no partial output
};

// Where in a command the failure happened: the same StatusCode (kIoError) means "input
// unreadable" while reading and "output not writable" while writing.
enum class Stage { kInput, kOutput };

ExitCode exitCodeFor(const Status& status, Stage stage);

inline int toInt(ExitCode code) { return static_cast<int>(code); }

}  // namespace voxseg::app
