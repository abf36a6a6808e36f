#include "node/server.h"

#include "core/log.h"
#include "node/audit_log.h"
#include "node/delivery.h"
#include "node/http_endpoints.h"
#include "node/job_journal.h"
#include "node/job_runner.h"
#include "node/metrics.h"
#include "node/receiver.h"
#include "node/spool.h"
#include "node/spool_crypto.h"

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

namespace voxseg::node {
namespace fs = std::filesystem;
namespace {

constexpr const char* kComponent = "node";
using Clock = std::chrono::steady_clock;

// Plaintext folders (/dev/shm/voxseg-<pid>-<job>) of an encrypted node killed while segmenting:
// their process is gone, nothing else would ever remove them.
void removeOrphanMemoryFolders() {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/dev/shm", ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("voxseg-", 0) != 0) continue;
        const int pid = std::atoi(name.c_str() + 7);
        if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) {
            fs::remove_all(e.path(), ec);
            log::info(kComponent, "removed {} left by a killed node", e.path().string());
        }
    }
}

struct Node {
    const NodeConfig& config;
    std::unique_ptr<Spool> spool;
    AuditLog audit;
    NodeMetrics metrics;
    std::unique_ptr<JobJournal> journal;
    std::optional<SpoolKey> key;
    const SpoolKey* keyPtr() const { return key ? &*key : nullptr; }

    explicit Node(const NodeConfig& c) : config(c) {}

    Status open() {
        if (!config.spool_key_file.empty()) {
            VOXSEG_ASSIGN_OR_RETURN(SpoolKey k, loadSpoolKey(config.spool_key_file));
            key = k;
            removeOrphanMemoryFolders();
        }
        VOXSEG_ASSIGN_OR_RETURN(spool, Spool::open(config.spool_dir));
        VOXSEG_RETURN_IF_ERROR(audit.open(config.audit_log));
        VOXSEG_ASSIGN_OR_RETURN(journal, JobJournal::open(spool->dir("state")));
        // Jobs journaled done whose folders a kill left behind.
        int cleaned = 0;
        std::error_code ec;
        for (const char* area : {"queue", "outbox"})
            for (const auto& job : spool->jobs(area))
                if (journal->isDone(job)) {
                    fs::remove_all(spool->jobDir(area, job), ec);
                    ++cleaned;
                }
        if (cleaned) log::info(kComponent, "{} folders of finished jobs removed", cleaned);
        refreshGauges();
        return Status::ok();
    }

    void refreshGauges() {
        const auto outbox = spool->jobs("outbox");
        int held = 0;
        for (const auto& j : outbox) held += Delivery::isHeld(*spool, j) ? 1 : 0;
        metrics.outbox_depth = static_cast<int64_t>(outbox.size());
        metrics.outbox_held = held;
        metrics.queue_depth =
            static_cast<int64_t>(spool->jobs("queue").size()) - static_cast<int64_t>(outbox.size());
    }

    // The next queued series that has no results yet and is not finished.
    std::string nextToSegment() const {
        std::error_code ec;
        for (const auto& job : spool->jobs("queue"))
            if (!journal->isDone(job) && !fs::exists(spool->jobDir("outbox", job), ec)) return job;
        return {};
    }
};

void sleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace

Result<ServeStats> runNode(const NodeConfig& config, const CancelToken& stop, double grace_seconds,
                           const std::vector<std::string>& worker_args) {
    Node node(config);
    VOXSEG_RETURN_IF_ERROR(node.open());
    log::info(kComponent, "spool {}: {} series queued, {} results in the outbox ({} held)",
              config.spool_dir, node.spool->jobs("queue").size(), node.metrics.outbox_depth.load(),
              node.metrics.outbox_held.load());
    node.audit.record("node_started", {{"ae_title", config.ae_title}, {"port", config.port}});

    ReceiverContext rc{&config, node.spool.get(), &node.audit, &node.metrics, node.keyPtr()};
    VOXSEG_ASSIGN_OR_RETURN(auto receiver, Receiver::start(rc));
    std::unique_ptr<HttpEndpoints> http;
    if (config.http_port > 0) {
        auto health = [&node, &rc] {
            const bool guard = diskGuardActive(rc);
            nlohmann::json j = {{"status", guard ? "refusing: disk" : "ok"},
                                {"queue", node.metrics.queue_depth.load()},
                                {"outbox", node.metrics.outbox_depth.load()},
                                {"held", node.metrics.outbox_held.load()},
                                {"disk_guard", guard}};
            return std::make_pair(!guard, j.dump());
        };
        VOXSEG_ASSIGN_OR_RETURN(http,
                                HttpEndpoints::start(config.http_bind, config.http_port, health,
                                                     [&node] { return node.metrics.render(); }));
        log::info(kComponent, "/healthz and /metrics on http://{}:{}", config.http_bind,
                  config.http_port);
    }

    CancelToken abort;  // the series in segmentation gives up (grace over)
    std::thread worker([&] {
        JobRunner runner(config, *node.spool, node.audit, node.metrics, node.keyPtr());
        runner.recoverInterrupted();
        // The worker process is started from this thread: it dies when the thread ends.
        if (worker_args.empty())
            runner.preload();
        else
            runner.useWorkerProcess(worker_args);
        while (!stop.isCancelled()) {
            const std::string job = node.nextToSegment();
            if (job.empty()) {
                sleepMs(25);
                continue;
            }
            if (runner.process(job, abort) == JobOutcome::kStopped) sleepMs(500);
            node.refreshGauges();
        }
    });
    std::thread sender([&] {
        Delivery delivery(config, *node.spool, node.audit, node.metrics, *node.journal,
                          node.keyPtr());
        while (!stop.isCancelled()) {
            bool any = false;
            for (const auto& job : node.spool->jobs("outbox")) {
                if (stop.isCancelled()) break;
                if (Delivery::isHeld(*node.spool, job)) continue;
                delivery.deliver(job, false, stop);
                any = true;
            }
            if (any) node.refreshGauges();
            sleepMs(25);
        }
    });

    auto last_retention = Clock::now() - std::chrono::hours(1);
    while (!stop.isCancelled()) {
        for (const auto& job : node.spool->takeCompleteSeries(config.quiet_seconds, config.group_by,
                                                              config.interrupted_wait_seconds)) {
            ++node.metrics.series_queued;
            auto s = Spool::readSeries(node.spool->jobDir("queue", job));
            if (s.isOk()) {
                log::info(kComponent, "series {} complete: {} instances from {} (job {})",
                          s->series_uid, s->instances, s->calling_ae, job);
                node.audit.record("series_received", {{"job", job},
                                                      {"study_uid", s->study_uid},
                                                      {"series_uid", s->series_uid},
                                                      {"instances", s->instances},
                                                      {"calling_ae", s->calling_ae},
                                                      {"peer", s->peer}});
            }
            node.refreshGauges();
        }
        if (Clock::now() - last_retention > std::chrono::minutes(1)) {
            last_retention = Clock::now();
            const int u =
                node.spool->removeOlderThan("unmatched", config.unmatched_retention_hours);
            if (u)
                log::info(kComponent, "{} unmatched series removed after the retention period", u);
            node.spool->removeOlderThan("results", config.unmatched_retention_hours);
        }
        sleepMs(50);
    }

    log::info(kComponent, "stopping: no new associations; the series in work gets {:.0f} s",
              grace_seconds);
    receiver->stop();
    std::atomic<bool> joined{false};
    std::thread watchdog([&] {
        const auto t0 = Clock::now();
        while (!joined) {
            if (std::chrono::duration<double>(Clock::now() - t0).count() > grace_seconds)
                abort.cancel();
            sleepMs(50);
        }
    });
    worker.join();
    sender.join();
    joined = true;
    watchdog.join();
    if (http) http->stop();
    receiver.reset();
    node.refreshGauges();
    node.audit.record("node_stopped", {{"queued", node.metrics.queue_depth.load()},
                                       {"outbox", node.metrics.outbox_depth.load()}});
    ServeStats stats;
    stats.held = static_cast<int>(node.metrics.outbox_held.load());
    return stats;
}

Result<ServeStats> resendOutbox(const NodeConfig& config, const CancelToken& stop) {
    Node node(config);
    VOXSEG_RETURN_IF_ERROR(node.open());
    Delivery delivery(config, *node.spool, node.audit, node.metrics, *node.journal, node.keyPtr());
    ServeStats stats;
    for (const auto& job : node.spool->jobs("outbox")) {
        const DeliveryResult r = delivery.deliver(job, true, stop);
        if (r == DeliveryResult::kDelivered) ++stats.delivered;
        if (r == DeliveryResult::kHeld) ++stats.held;
        if (r == DeliveryResult::kBusy)
            log::info(kComponent, "job {} is being sent by the running node", job);
        if (r == DeliveryResult::kStopped) break;
    }
    node.audit.record("resend", {{"delivered", stats.delivered}, {"held", stats.held}});
    return stats;
}

}  // namespace voxseg::node
