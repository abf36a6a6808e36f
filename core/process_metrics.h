// This process's resident memory and CPU time, measured in one place for every layer: the stage
// timings of a segmentation (run.json), the batch report and metrics, the CPU profile of a plan,
// the benchmarks. Linux (getrusage, /proc); 0 where the system does not tell.
#pragma once

namespace voxseg {

// The high-water mark of the resident set so far, MiB (getrusage's ru_maxrss, the VmHWM of
// /proc/self/status).
double peakRssMib();

// The resident set now, MiB (/proc/self/statm).
double currentRssMib();

// User plus system CPU seconds of every thread of the process so far.
double processCpuSeconds();

}  // namespace voxseg
