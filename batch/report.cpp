#include "batch/report.h"

#include "batch/gpu_metrics.h"
#include "core/atomic_file.h"
#include "core/process_metrics.h"

#include <fmt/format.h>

namespace voxseg::batch {

double BatchStats::casesPerMinute() const {
    return wall_seconds > 0 ? (done + failed) * 60.0 / wall_seconds : 0.0;
}

nlohmann::json summaryJson(const BatchStats& s) {
    nlohmann::json j;
    j["voxseg_version"] = VOXSEG_VERSION;
    j["shard"] = s.shard;
    j["model"] = {{"name", s.model_name}, {"sha256", s.model_sha256}};
    j["options_hash"] = s.options_hash;
    j["devices"] = s.devices;
    j["counts"] = {{"manifest", s.cases_total}, {"shard", s.cases_in_shard},
                   {"skipped", s.skipped},      {"done", s.done},
                   {"failed", s.failed},        {"interrupted", s.interrupted},
                   {"pending", s.pending()}};
    j["stopped"] = s.stopped.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.stopped);
    j["started_unix"] = s.started;
    j["wall_seconds"] = s.wall_seconds;
    j["model_load_seconds"] = s.model_load_seconds;
    j["throughput_cases_per_minute"] = s.casesPerMinute();
    j["stage_seconds_total"] = s.stage_seconds;
    nlohmann::json cases = nlohmann::json::array();
    nlohmann::json failures = nlohmann::json::array();
    for (const auto& c : s.cases) {
        nlohmann::json r = {{"case_id", c.case_id}, {"state", c.state}};
        if (c.state != "skipped") {
            r["seconds"] = c.seconds;
            r["stages"] = c.stages;
            r["rss_mb"] = c.rss_mb;
            r["max_rss_mb"] = c.max_rss_mb;
        }
        if (!c.error.empty()) {
            r["error"] = c.error;
            r["error_code"] = c.error_code;
        }
        if (c.state == "failed")
            failures.push_back(
                {{"case_id", c.case_id}, {"error", c.error}, {"error_code", c.error_code}});
        cases.push_back(std::move(r));
    }
    j["cases"] = cases;
    j["failures"] = failures;
    return j;
}

std::string prometheusText(const BatchStats& s, bool running) {
    const std::string shard = fmt::format("shard=\"{}\"", s.shard);
    std::string t;
    t += "# HELP voxseg_batch_cases Cases of this shard by state in this run (skipped: complete "
         "from an earlier run).\n# TYPE voxseg_batch_cases gauge\n";
    const std::pair<const char*, int> states[] = {{"done", s.done},
                                                  {"failed", s.failed},
                                                  {"skipped", s.skipped},
                                                  {"interrupted", s.interrupted},
                                                  {"pending", s.pending()}};
    for (const auto& [state, n] : states)
        t += fmt::format("voxseg_batch_cases{{{},state=\"{}\"}} {}\n", shard, state, n);
    t += "# HELP voxseg_batch_cases_in_shard Cases assigned to this shard.\n"
         "# TYPE voxseg_batch_cases_in_shard gauge\n";
    t += fmt::format("voxseg_batch_cases_in_shard{{{}}} {}\n", shard, s.cases_in_shard);
    t += "# HELP voxseg_batch_stage_seconds_total Seconds spent per pipeline stage, summed over "
         "cases.\n# TYPE voxseg_batch_stage_seconds_total counter\n";
    for (const auto& [stage, sec] : s.stage_seconds)
        t += fmt::format("voxseg_batch_stage_seconds_total{{{},stage=\"{}\"}} {:.6f}\n", shard,
                         stage, sec);
    t += "# HELP voxseg_batch_model_load_seconds Time to load the model (all devices).\n"
         "# TYPE voxseg_batch_model_load_seconds gauge\n";
    t += fmt::format("voxseg_batch_model_load_seconds{{{}}} {:.6f}\n", shard, s.model_load_seconds);
    t += "# HELP voxseg_batch_wall_seconds Seconds since the batch started.\n"
         "# TYPE voxseg_batch_wall_seconds gauge\n";
    t += fmt::format("voxseg_batch_wall_seconds{{{}}} {:.3f}\n", shard, s.wall_seconds);
    t += "# HELP voxseg_batch_cases_per_minute Finished (done + failed) cases per minute.\n"
         "# TYPE voxseg_batch_cases_per_minute gauge\n";
    t += fmt::format("voxseg_batch_cases_per_minute{{{}}} {:.4f}\n", shard, s.casesPerMinute());
    t += "# HELP voxseg_batch_running 1 while the batch runs, 0 once it has ended.\n"
         "# TYPE voxseg_batch_running gauge\n";
    t += fmt::format("voxseg_batch_running{{{}}} {}\n", shard, running ? 1 : 0);
    t += "# HELP voxseg_batch_resident_memory_mb Resident memory of the batch process.\n"
         "# TYPE voxseg_batch_resident_memory_mb gauge\n";
    t += fmt::format("voxseg_batch_resident_memory_mb{{{}}} {:.1f}\n", shard, currentRssMib());
    return t;
}

Status writeSummary(const BatchStats& stats, const std::string& path) {
    return writeFileAtomically(
        path,
        summaryJson(stats).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

Status writeMetrics(const BatchStats& stats, bool running, const std::string& path) {
    return writeFileAtomically(path,
                               prometheusText(stats, running) + gpuPrometheusText("voxseg_batch"));
}

}  // namespace voxseg::batch
