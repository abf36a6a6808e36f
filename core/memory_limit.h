// How much memory this process may use: the machine's physical memory, or a container's limit
// where that is lower (cgroup v2 memory.max, v1 memory.limit_in_bytes: Docker, Kubernetes,
// Slurm's cgroup plugin). Linux over-commits: an allocation larger than the limit succeeds and
// the kernel kills the process when its pages are touched, so a plan that cannot fit is refused
// against this figure before anything is allocated (engine/cpu_backend.cpp, cpu_plan.cpp,
// sliding_window.cpp), with advice instead of a killed process.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace voxseg {

// min(physical memory, the cgroup limit) in bytes; 0 where neither is known.
uint64_t memoryLimitBytes();

// The same from a cgroup file system mounted at `cgroup_root` (v2: <root>/memory.max; v1:
// <root>/memory/memory.limit_in_bytes) and a physical memory size (0: unknown): for tests.
uint64_t memoryLimitBytes(const std::filesystem::path& cgroup_root, uint64_t physical);

// "23.4 GiB of memory (the machine's)" or "(the container's limit)": for error messages.
std::string describeMemoryLimit();

}  // namespace voxseg
