#include "node/metrics.h"

#include "batch/gpu_metrics.h"

#include <fmt/format.h>

namespace voxseg::node {
namespace {

void counter(std::string& out, const char* name, const char* help, int64_t v,
             const char* type = "counter") {
    out +=
        fmt::format("# HELP voxseg_node_{0} {1}\n# TYPE voxseg_node_{0} {2}\nvoxseg_node_{0} {3}\n",
                    name, help, type, v);
}

}  // namespace

void NodeMetrics::addStageSeconds(const std::string& stage, double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    stage_seconds_[stage] += seconds;
    ++stage_count_[stage];
}

std::string NodeMetrics::render() const {
    std::string o;
    counter(o, "associations_total", "Associations accepted", associations);
    o += "# HELP voxseg_node_associations_rejected_total Associations refused, by reason\n"
         "# TYPE voxseg_node_associations_rejected_total counter\n";
    o += fmt::format("voxseg_node_associations_rejected_total{{reason=\"caller\"}} {}\n",
                     associations_rejected_caller.load());
    o += fmt::format("voxseg_node_associations_rejected_total{{reason=\"out_of_resources\"}} {}\n",
                     associations_rejected_disk.load());
    counter(o, "instances_received_total", "Instances stored in the spool", instances_received);
    counter(o, "instances_refused_total", "C-STORE requests answered with a failure",
            instances_refused);
    counter(o, "series_queued_total", "Series complete and queued", series_queued);
    counter(o, "series_unmatched_total", "Series no route took", series_unmatched);
    counter(o, "jobs_done_total", "Series segmented and sent everywhere", jobs_done);
    counter(o, "jobs_failed_total", "Series whose segmentation failed", jobs_failed);
    counter(o, "sends_total", "Results confirmed by a destination", sends_ok);
    counter(o, "send_failures_total", "Failed send attempts", sends_failed);
    counter(o, "queue_depth", "Series waiting for or in segmentation", queue_depth, "gauge");
    counter(o, "outbox_depth", "Results not yet confirmed by every destination", outbox_depth,
            "gauge");
    counter(o, "outbox_held", "Results held after failed retries (voxseg serve --resend)",
            outbox_held, "gauge");
    counter(o, "disk_free_bytes", "Free space on the spool's file system", disk_free_bytes,
            "gauge");
    counter(o, "disk_guard", "1 while associations are refused for lack of space",
            disk_guard ? 1 : 0, "gauge");
    std::lock_guard<std::mutex> lock(mutex_);
    o += "# HELP voxseg_node_stage_seconds_total Seconds spent per pipeline stage\n"
         "# TYPE voxseg_node_stage_seconds_total counter\n";
    for (const auto& [stage, s] : stage_seconds_)
        o += fmt::format("voxseg_node_stage_seconds_total{{stage=\"{}\"}} {:.6f}\n", stage, s);
    o += "# HELP voxseg_node_stage_runs_total Runs per pipeline stage\n"
         "# TYPE voxseg_node_stage_runs_total counter\n";
    for (const auto& [stage, n] : stage_count_)
        o += fmt::format("voxseg_node_stage_runs_total{{stage=\"{}\"}} {}\n", stage, n);
    o += batch::gpuPrometheusText("voxseg_node");  // omitted without NVML or GPU
    return o;
}

}  // namespace voxseg::node
