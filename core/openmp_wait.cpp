#include "core/openmp_wait.h"

#include <unistd.h>

#include <cstdlib>
#include <string_view>

namespace voxseg {

namespace {

// The subcommand named on the command line ("" when none): the first argument that is neither an
// option nor the value of --log-format, the one global option that takes a separate value.
std::string_view subcommand(char** argv) {
    for (int i = 1; argv[i] != nullptr; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--log-format") {
            if (argv[i + 1] == nullptr) break;
            ++i;
        } else if (arg.empty() || arg[0] != '-') {
            return arg;
        }
    }
    return {};
}

}  // namespace

void usePassiveOpenMpWaiting(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr)
        return;
    // These never run OpenMP code (no inference), so libgomp's wait policy cannot matter to them,
    // and the second program start is not worth paying: 20-60 ms of a 0.3 s `voxseg convert` of
    // a 512x512x300 CT (loading and relocating ~55 shared libraries again; docs/perf-io.md).
    const std::string_view sub = subcommand(argv);
    if (sub == "convert" || sub == "info" || sub == "synth") return;
    if (::setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
    ::execv("/proc/self/exe", argv);
    // Still here: exec failed; run on with libgomp's defaults (the variable is left set, which
    // only affects child processes).
}

}  // namespace voxseg
