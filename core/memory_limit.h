// How much memory this process may use: the machine's physical memory, or a container's limit
// where that is lower (cgroup v2 memory.max, v1 memory.limit_in_bytes: Docker, Kubernetes,
// Slurm's cgroup plugin, `systemd-run -p MemoryMax=`), or the address-space limit (RLIMIT_AS,
// `ulimit -v`) where that is lower still. Linux over-commits: an allocation larger than the limit
// succeeds and the kernel kills the process when its pages are touched, so a plan that cannot fit
// is refused against this figure before anything is allocated (engine/cpu/cpu_backend.cpp,
// engine/cpu/plan.cpp, engine/inference/sliding_window.cpp, the image and DICOM readers), with
// advice instead of a killed process.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace voxseg {

// min(physical memory, the cgroup limit, RLIMIT_AS) in bytes; 0 where none is known. The cgroup
// limit is the lowest one on the path from the process's own cgroup (/proc/self/cgroup) up to
// the root of the mounted hierarchy: a child cgroup (a systemd scope, a Slurm step) counts.
uint64_t memoryLimitBytes();

// The same from a cgroup file system mounted at `cgroup_root` (v2: <root>/memory.max; v1:
// <root>/memory/memory.limit_in_bytes) and a physical memory size (0: unknown): for tests.
// `self_cgroup` is the text of /proc/self/cgroup ("0::/a/b" for v2, "4:memory:/a/b" for v1):
// the limits of <root>/a/b, <root>/a and <root> count, the lowest wins (a path not mounted under
// `cgroup_root`, as in a container that sees its own cgroup as the root, counts the root only).
uint64_t memoryLimitBytes(const std::filesystem::path& cgroup_root, uint64_t physical,
                          const std::string& self_cgroup = {});

// "23.4 GiB of memory (the machine's)", "(the container's limit)" or "(the address-space limit,
// ulimit -v)": for error messages.
std::string describeMemoryLimit();

}  // namespace voxseg
