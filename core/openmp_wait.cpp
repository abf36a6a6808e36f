#include "core/openmp_wait.h"

#include <unistd.h>

#include <cstdlib>

namespace voxseg {

void usePassiveOpenMpWaiting(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr)
        return;
    if (::setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
    ::execv("/proc/self/exe", argv);
    // Still here: exec failed; run on with libgomp's defaults (the variable is left set, which
    // only affects child processes).
}

}  // namespace voxseg
