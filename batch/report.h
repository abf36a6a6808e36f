// What a batch reports while and after it runs: summary.json (counts, per-case timings,
// throughput, every failure) and a Prometheus text-format metrics file (cases done/failed,
// seconds per stage) that node exporters' textfile collectors pick up. Both are rewritten
// atomically (temporary file + rename), so a reader never sees half a file.
//
// BatchStats is a plain value; the runner updates it under its own lock.
#pragma once

#include "core/status.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace voxseg::batch {

struct CaseRecord {
    std::string case_id;
    std::string state;                     // done, failed, interrupted, skipped
    double seconds = 0.0;                  // load start -> recorded
    std::map<std::string, double> stages;  // load, preprocess, inference, ..., write
    std::string error;
    std::string error_code;
    double rss_mb = 0.0;      // resident memory when the case was recorded
    double max_rss_mb = 0.0;  // process peak so far
};

struct BatchStats {
    std::string shard;  // "i/N"
    std::string model_name;
    std::string model_sha256;
    std::string options_hash;
    std::vector<std::string> devices;
    int cases_total = 0;     // in the manifest
    int cases_in_shard = 0;  // this shard's share
    int skipped = 0;         // complete from an earlier run
    int done = 0;
    int failed = 0;
    int interrupted = 0;        // abandoned at a stop (redone on rerun)
    std::string stopped;        // "", "signal", "disk_full"
    double started = 0.0;       // unix seconds
    double wall_seconds = 0.0;  // so far
    double model_load_seconds = 0.0;
    std::map<std::string, double> stage_seconds;  // summed over cases
    std::vector<CaseRecord> cases;                // in completion order (skipped ones too)

    int pending() const { return cases_in_shard - skipped - done - failed - interrupted; }
    double casesPerMinute() const;
};

nlohmann::json summaryJson(const BatchStats& stats);
std::string prometheusText(const BatchStats& stats, bool running);

Status writeSummary(const BatchStats& stats, const std::string& path);
Status writeMetrics(const BatchStats& stats, bool running, const std::string& path);

}  // namespace voxseg::batch
