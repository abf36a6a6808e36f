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

}  // namespace voxseg::app
