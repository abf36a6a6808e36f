// SIGINT/SIGTERM handling for the command line: the first signal requests cancellation through
// a CancelToken (long loops stop at their next safe point, temporary outputs are removed and the
// command exits with code 130); a second signal terminates at once. Call once, from main().
#pragma once

#include "core/progress.h"

namespace voxseg::app {

void installCancelOnSignals(const CancelToken& token);

// Ignores SIGXFSZ: a write beyond the file size limit (ulimit -f) then fails with EFBIG and is
// reported like a full disk (exit 6, staged outputs removed) instead of killing the process
// with half-written files left behind.
void ignoreFileSizeSignal();

// For `voxseg batch` under schedulers: a repeated SIGTERM only repeats the request (Slurm
// signals every process of a job, and wrapper scripts forward it once more; the grace period
// and the scheduler's SIGKILL bound the stop). A second SIGINT still terminates at once.
// Call after installCancelOnSignals.
void keepRunningOnRepeatedSigterm();

}  // namespace voxseg::app
