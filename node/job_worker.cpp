#include "node/job_worker.h"

#include "core/log.h"
#include "node/audit_log.h"
#include "node/job_runner.h"
#include "node/metrics.h"
#include "node/spool.h"
#include "node/spool_crypto.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>

namespace voxseg::node {
namespace fs = std::filesystem;
namespace {

constexpr const char* kComponent = "node";

}  // namespace

nlohmann::json SegmentReply::toJson() const {
    nlohmann::json j = {{"code", static_cast<int>(status.code())},
                        {"message", status.toString()},
                        {"stages", stages},
                        {"model", model_name},
                        {"model_sha256", model_sha256}};
    return j;
}

SegmentReply SegmentReply::fromJson(const nlohmann::json& j) {
    SegmentReply r;
    try {
        const int code = j.at("code").get<int>();
        if (code != 0) r.status = Status(static_cast<StatusCode>(code), j.at("message"));
        r.stages = j.at("stages").get<std::map<std::string, double>>();
        r.model_name = j.at("model").get<std::string>();
        r.model_sha256 = j.at("model_sha256").get<std::string>();
    } catch (const nlohmann::json::exception& e) {
        r.status =
            internalError(std::string("unreadable reply from the worker process: ") + e.what());
    }
    return r;
}

Status WorkerClient::start() {
    if (child_) return Status::ok();
    // A worker that died before it was ready (a model that crashes its loader) is not
    // restarted in a tight loop.
    if (std::chrono::steady_clock::now() < next_start_)
        return Status(StatusCode::kFailedPrecondition, "the segmentation worker is restarting");
    next_start_ = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    ready_ = false;
    VOXSEG_ASSIGN_OR_RETURN(child_, batch::ChildProcess::spawn(args_, {}));
    log::info(kComponent, "segmentation worker process {} started", child_->pid());
    return Status::ok();
}

void WorkerClient::cleanUpAfter(const SegmentRequest& request) {
    // What a worker ended in the middle of a job can leave: its staging folders in the outbox
    // and, with an encrypted spool, the plaintext folder in memory (named after the node).
    std::error_code ec;
    fs::remove_all("/dev/shm/voxseg-" + std::to_string(::getpid()) + "-" + request.job, ec);
}

SegmentReply WorkerClient::segment(const SegmentRequest& request, const CancelToken& abort) {
    SegmentReply reply;
    if (auto st = start(); !st.isOk()) {
        reply.status = st;
        reply.worker_unavailable = true;
        return reply;
    }
    const std::string line = nlohmann::json{
        {"job", request.job},
        {"route", request.route},
        {"series_uid",
         request.series_uid}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    Status sent = child_->send(line);
    std::string answer;
    for (;;) {
        if (abort.isCancelled()) {  // the stop's grace is over: the job stays queued
            child_->signal(SIGKILL);
            child_->wait();
            child_.reset();
            cleanUpAfter(request);
            reply.status = Status(StatusCode::kCancelled, "stopped", request.job);
            return reply;
        }
        const auto r =
            sent.isOk() ? child_->readLine(answer, 50) : batch::ChildProcess::Read::kClosed;
        if (r == batch::ChildProcess::Read::kTimeout) continue;
        if (r == batch::ChildProcess::Read::kLine) {
            try {
                const auto j = nlohmann::json::parse(answer);
                if (j.contains("ready")) {  // the models are loaded; the job is next
                    ready_ = true;
                    continue;
                }
                return SegmentReply::fromJson(j);
            } catch (const nlohmann::json::exception& e) {
                reply.status = internalError(
                    std::string("unreadable reply from the worker process: ") + e.what());
                return reply;
            }
        }
        // The socket closed: the worker ended (a worker that died between jobs dies here too:
        // the job was sent, so it counts; a worker that could not start has not read it).
        const batch::ChildExit exit = child_->wait();
        log::error(kComponent, "segmentation worker process {} {} (job {})", child_->pid(),
                   exit.describe(), request.job);
        child_.reset();
        cleanUpAfter(request);
        if (!ready_) {  // died loading the models, before it took the job: not the job's fault
            reply.worker_unavailable = true;
            reply.status = internalError("the segmentation worker " + exit.describe() +
                                         " before it was ready");
            return reply;
        }
        next_start_ = {};
        reply.died = exit;
        reply.status = internalError("the segmentation worker " + exit.describe(), request.job);
        return reply;
    }
}

int runJobWorker(const NodeConfig& config) {
    const int fd = batch::connectToParent();
    if (fd < 0) {
        log::error(kComponent,
                   "--internal-worker: the node that started this worker process is gone (or this "
                   "was run by hand: the flag is for the node's own worker): exiting");
        return 2;
    }
    // The node decides when its worker stops (it kills it when a stop's grace is over; the
    // kernel kills it with the node): a terminal's Ctrl-C or systemd's SIGTERM to the whole
    // group does not cut a series short here.
    ::signal(SIGINT, SIG_IGN);
    ::signal(SIGTERM, SIG_IGN);
    std::optional<SpoolKey> key;
    if (!config.spool_key_file.empty()) {
        auto k = loadSpoolKey(config.spool_key_file);
        if (!k.isOk()) {
            log::error(kComponent, "{}", k.status().toString());
            return 3;
        }
        key = *k;
    }
    auto spool = Spool::attach(config.spool_dir);
    AuditLog audit;  // not opened: the node audits each outcome
    NodeMetrics metrics;
    JobRunner runner(config, *spool, audit, metrics, key ? &*key : nullptr);
    runner.setOwnerPid(static_cast<int>(::getppid()));
    runner.preload();
    if (!batch::sendLine(fd, R"({"ready":true})").isOk()) return 0;
    std::string buffer, line;
    while (batch::readLineBlocking(fd, buffer, line)) {
        SegmentRequest request;
        try {
            const auto j = nlohmann::json::parse(line);
            request.job = j.at("job").get<std::string>();
            request.route = j.at("route").get<std::string>();
            request.series_uid = j.at("series_uid").get<std::string>();
        } catch (const nlohmann::json::exception& e) {
            log::error(kComponent, "unreadable request from the node: {}", e.what());
            return 1;
        }
        const SegmentReply reply = runner.segmentHere(request, CancelToken());
        if (!batch::sendLine(
                 fd, reply.toJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
                 .isOk())
            return 0;  // the node is gone
    }
    return 0;
}

}  // namespace voxseg::node
