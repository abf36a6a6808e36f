#include "batch/gpu_metrics.h"

#include <dlfcn.h>

#include <fmt/format.h>

#include <mutex>

namespace voxseg::batch {
namespace {

// The few NVML entry points used, declared here (nvml.h ships with the CUDA toolkit only).
using NvmlDevice = void*;
struct NvmlUtilization {
    unsigned int gpu;
    unsigned int memory;
};
struct NvmlMemory {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
};

struct Nvml {
    bool ok = false;
    int (*device_count)(unsigned int*) = nullptr;
    int (*device_by_index)(unsigned int, NvmlDevice*) = nullptr;
    int (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
    int (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
    int (*name)(NvmlDevice, char*, unsigned int) = nullptr;
};

const Nvml& nvml() {
    static Nvml n;
    static std::once_flag once;
    std::call_once(once, [] {
        void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) return;
        auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
        n.device_count =
            reinterpret_cast<int (*)(unsigned int*)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
        n.device_by_index = reinterpret_cast<int (*)(unsigned int, NvmlDevice*)>(
            dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
        n.utilization = reinterpret_cast<int (*)(NvmlDevice, NvmlUtilization*)>(
            dlsym(lib, "nvmlDeviceGetUtilizationRates"));
        n.memory = reinterpret_cast<int (*)(NvmlDevice, NvmlMemory*)>(
            dlsym(lib, "nvmlDeviceGetMemoryInfo"));
        n.name = reinterpret_cast<int (*)(NvmlDevice, char*, unsigned int)>(
            dlsym(lib, "nvmlDeviceGetName"));
        n.ok = init && n.device_count && n.device_by_index && n.utilization && n.memory && n.name &&
               init() == 0;  // NVML_SUCCESS
    });
    return n;
}

std::string labelValue(const std::string& s) {
    std::string out;
    for (char c : s)
        if (c != '"' && c != '\\' && c != '\n') out += c;
    return out;
}

}  // namespace

std::vector<GpuSample> sampleGpus() {
    std::vector<GpuSample> out;
    const Nvml& n = nvml();
    if (!n.ok) return out;
    unsigned int count = 0;
    if (n.device_count(&count) != 0) return out;
    for (unsigned int i = 0; i < count; ++i) {
        NvmlDevice d = nullptr;
        if (n.device_by_index(i, &d) != 0) continue;
        GpuSample s;
        s.index = static_cast<int>(i);
        char name[96] = {};
        if (n.name(d, name, sizeof name) == 0) s.name = name;
        NvmlUtilization u{};
        if (n.utilization(d, &u) == 0) s.utilization_percent = u.gpu;
        NvmlMemory m{};
        if (n.memory(d, &m) == 0) {
            s.memory_used_bytes = m.used;
            s.memory_total_bytes = m.total;
        }
        out.push_back(s);
    }
    return out;
}

std::string gpuPrometheusText(const std::string& prefix, const std::vector<GpuSample>& gpus) {
    if (gpus.empty()) return {};
    std::string o;
    const struct {
        const char* name;
        const char* help;
    } families[] = {{"gpu_utilization_percent", "GPU busy time over NVML's sample period"},
                    {"gpu_memory_used_bytes", "GPU memory in use (all processes)"},
                    {"gpu_memory_total_bytes", "GPU memory in all"}};
    for (int f = 0; f < 3; ++f) {
        o += fmt::format("# HELP {}_{} {}\n# TYPE {}_{} gauge\n", prefix, families[f].name,
                         families[f].help, prefix, families[f].name);
        for (const auto& g : gpus) {
            const double v = f == 0   ? g.utilization_percent
                             : f == 1 ? static_cast<double>(g.memory_used_bytes)
                                      : static_cast<double>(g.memory_total_bytes);
            o += fmt::format("{}_{}{{gpu=\"{}\",name=\"{}\"}} {}\n", prefix, families[f].name,
                             g.index, labelValue(g.name), v);
        }
    }
    return o;
}

std::string gpuPrometheusText(const std::string& prefix) {
    return gpuPrometheusText(prefix, sampleGpus());
}

}  // namespace voxseg::batch
