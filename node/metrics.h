// Counters and gauges of a running node, rendered as Prometheus text for /metrics. Updated by
// the receiving threads, the scheduler and the senders: atomics, thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace voxseg::node {

struct NodeMetrics {
    std::atomic<int64_t> associations{0};
    std::atomic<int64_t> associations_rejected_caller{0};
    std::atomic<int64_t> associations_rejected_disk{0};
    std::atomic<int64_t> instances_received{0};
    std::atomic<int64_t> instances_refused{0};
    std::atomic<int64_t> series_queued{0};
    std::atomic<int64_t> series_unmatched{0};
    std::atomic<int64_t> jobs_done{0};
    std::atomic<int64_t> jobs_failed{0};
    std::atomic<int64_t> sends_ok{0};
    std::atomic<int64_t> sends_failed{0};
    std::atomic<int64_t> queue_depth{0};   // series waiting for or in segmentation
    std::atomic<int64_t> outbox_depth{0};  // results not yet confirmed everywhere
    std::atomic<int64_t> outbox_held{0};   // results waiting for --resend
    std::atomic<int64_t> disk_free_bytes{0};
    std::atomic<bool> disk_guard{false};  // refusing associations for lack of space

    void addStageSeconds(const std::string& stage, double seconds);
    // Prometheus text exposition format.
    std::string render() const;

  private:
    mutable std::mutex mutex_;
    std::map<std::string, double> stage_seconds_;
    std::map<std::string, int64_t> stage_count_;
};

}  // namespace voxseg::node
