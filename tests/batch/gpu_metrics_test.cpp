// GPU metrics through NVML loaded at run time: the text format of the gauges, and, on this
// machine, agreement between what NVML reports and what the metrics text of batch and the
// node say (no NVIDIA driver: no library, no GPU lines at all rather than zeros).
#include "batch/gpu_metrics.h"

#include "batch/report.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

namespace voxseg::batch {
namespace {

TEST(GpuMetrics, GaugesPerGpuWithNameLabels) {
    GpuSample a;
    a.index = 0;
    a.name = "NVIDIA H200 \"x\"";
    a.utilization_percent = 87;
    a.memory_used_bytes = 1024;
    a.memory_total_bytes = 4096;
    GpuSample b = a;
    b.index = 1;
    const std::string t = gpuPrometheusText("voxseg_node", {a, b});
    EXPECT_NE(t.find("# TYPE voxseg_node_gpu_utilization_percent gauge"), std::string::npos) << t;
    EXPECT_NE(t.find("voxseg_node_gpu_utilization_percent{gpu=\"0\",name=\"NVIDIA H200 x\"} 87"),
              std::string::npos)
        << t;
    EXPECT_NE(t.find("voxseg_node_gpu_memory_used_bytes{gpu=\"1\",name=\"NVIDIA H200 x\"} 1024"),
              std::string::npos);
    EXPECT_NE(t.find("voxseg_node_gpu_memory_total_bytes{gpu=\"1\","), std::string::npos);
    EXPECT_EQ(gpuPrometheusText("voxseg_node", {}), "");
}

TEST(GpuMetrics, OmittedExactlyWhenNvmlHasNoDevice) {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    const auto gpus = sampleGpus();
    if (!lib) EXPECT_TRUE(gpus.empty()) << "no libnvidia-ml.so.1, yet GPUs were reported";
    const std::string text = gpuPrometheusText("voxseg_batch");
    EXPECT_EQ(text.empty(), gpus.empty());
    for (const auto& g : gpus) {
        EXPECT_GT(g.memory_total_bytes, 0u) << g.name;
        EXPECT_NE(text.find("gpu=\"" + std::to_string(g.index) + "\""), std::string::npos);
    }
    std::cout << (lib ? "NVML loaded, " : "no NVML library, ") << gpus.size() << " GPU(s)\n";
    if (lib) dlclose(lib);
}

}  // namespace
}  // namespace voxseg::batch
