// GPU utilisation and memory for the Prometheus metrics of `voxseg batch` and `voxseg serve`,
// through NVML loaded at run time (dlopen of libnvidia-ml.so.1, which comes with the NVIDIA
// driver): a machine without the driver or without a GPU simply has no GPU metrics, and voxseg
// needs no NVML at build time. Thread-safe (NVML is initialised once).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace voxseg::batch {

struct GpuSample {
    int index = 0;
    std::string name;
    double utilization_percent = 0.0;  // over NVML's last sample period
    uint64_t memory_used_bytes = 0;
    uint64_t memory_total_bytes = 0;
};

// Empty when NVML cannot be loaded or initialised, or reports no device.
std::vector<GpuSample> sampleGpus();

// `<prefix>_gpu_utilization_percent{gpu="0",name="..."}` and `<prefix>_gpu_memory_used_bytes` /
// `_total_bytes` gauges; "" without GPUs (the metrics are then omitted, not zero).
std::string gpuPrometheusText(const std::string& prefix);
std::string gpuPrometheusText(const std::string& prefix, const std::vector<GpuSample>& gpus);

}  // namespace voxseg::batch
