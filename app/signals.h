// SIGINT/SIGTERM handling for the command line: the first signal requests cancellation through
// a CancelToken (long loops stop at their next safe point, temporary outputs are removed and the
// command exits with code 130); a second signal terminates at once. Call once, from main().
#pragma once

#include "core/progress.h"

namespace voxseg::app {

void installCancelOnSignals(const CancelToken& token);

}  // namespace voxseg::app
