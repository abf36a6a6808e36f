#include "batch/supervisor.h"

#include "batch/child_process.h"
#include "batch/journal.h"
#include "core/clock.h"
#include "core/log.h"

#include <fmt/format.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

namespace voxseg::batch {
namespace {

constexpr const char* kComponent = "batch";

// What the worker's exit means to a user.
std::string deathText(const ChildExit& e) {
    if (e.signaled) return e.describe();
    if (e.code == 9) return "ran out of memory (exit code 9)";
    return fmt::format("ended with an internal error (exit code {})", e.code);
}

}  // namespace

nlohmann::json WorkerPlan::toJson() const {
    return {{"run_started", run_started}, {"only", only}, {"final", final}};
}

Result<WorkerPlan> WorkerPlan::fromJson(const std::string& text) {
    WorkerPlan p;
    try {
        const auto j = nlohmann::json::parse(text);
        p.run_started = j.at("run_started").get<double>();
        p.only = j.at("only").get<std::vector<std::string>>();
        p.final = j.at("final").get<bool>();
    } catch (const nlohmann::json::exception& e) {
        return invalidArgument(std::string("bad worker plan: ") + e.what(), kBatchWorkerVariable);
    }
    return p;
}

Result<std::unique_ptr<WorkerLink>> WorkerLink::fromEnvironment() {
    const char* text = std::getenv(kBatchWorkerVariable);
    if (text == nullptr) return std::unique_ptr<WorkerLink>();
    std::unique_ptr<WorkerLink> link(new WorkerLink());
    VOXSEG_ASSIGN_OR_RETURN(link->plan_, WorkerPlan::fromJson(text));
    link->fd_ = connectToParent();
    if (link->fd_ < 0)
        return Status(StatusCode::kFailedPrecondition,
                      std::string(kBatchWorkerVariable) +
                          " is set but this process was not started by `voxseg batch` "
                          "(or it is gone): unset it");
    return link;
}

void WorkerLink::send(const nlohmann::json& message) {
    std::lock_guard<std::mutex> lock(mutex_);
    (void)sendLine(fd_, message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}
void WorkerLink::caseStarted(const std::string& id) { send({{"start", id}}); }
void WorkerLink::caseEnded(const std::string& id) { send({{"end", id}}); }
void WorkerLink::ready(const std::string& model_sha256, const std::string& options_hash) {
    send({{"model_sha256", model_sha256}, {"options_hash", options_hash}});
}
void WorkerLink::finished(int exit_code) { send({{"finished", exit_code}}); }

int superviseBatch(const std::vector<std::string>& args, const std::vector<SupervisedCase>& cases,
                   const std::string& journal_path, const CancelToken& stop) {
    std::map<std::string, const SupervisedCase*> by_id;
    for (const auto& c : cases) by_id[c.id] = &c;
    WorkerPlan plan;
    plan.run_started = unixNow();
    std::set<std::string> suspects;  // in flight together when a worker died
    std::string model_sha256, options_hash;
    const size_t max_deaths = cases.size() + 4;
    size_t deaths = 0;
    for (;;) {
        plan.only.assign(suspects.begin(), suspects.end());
        plan.final = suspects.empty();
        auto child = ChildProcess::spawn(
            args, {std::string(kBatchWorkerVariable) + "=" +
                   plan.toJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)});
        if (!child.isOk()) {
            log::error(kComponent, "{}", child.status().toString());
            return 1;
        }
        std::set<std::string> in_flight;
        bool finished = false, stop_forwarded = false;
        std::string line;
        for (;;) {
            if (stop.isCancelled() && !stop_forwarded) {
                (*child)->signal(SIGTERM);  // the worker's own grace period applies
                stop_forwarded = true;
            }
            const auto r = (*child)->readLine(line, 100);
            if (r == ChildProcess::Read::kClosed) break;
            if (r == ChildProcess::Read::kTimeout) continue;
            try {
                const auto j = nlohmann::json::parse(line);
                if (j.contains("start")) in_flight.insert(j["start"].get<std::string>());
                if (j.contains("end")) {  // recorded: no longer a suspect either
                    in_flight.erase(j["end"].get<std::string>());
                    suspects.erase(j["end"].get<std::string>());
                }
                if (j.contains("model_sha256")) {
                    model_sha256 = j["model_sha256"].get<std::string>();
                    options_hash = j["options_hash"].get<std::string>();
                }
                if (j.contains("finished")) finished = true;
            } catch (const nlohmann::json::exception&) {
                log::warning(kComponent, "unreadable message from the batch worker ignored");
            }
        }
        const ChildExit exit = (*child)->wait();
        if (finished) {
            if (!plan.final) {  // the suspects ran alone; now the rest
                suspects.clear();
                continue;
            }
            return exit.signaled ? 128 + exit.signal : exit.code;
        }
        if (stop.isCancelled()) return 10;  // stopped: the next run redoes what was in flight
        if (in_flight.empty()) {
            log::error(kComponent, "the batch worker {} outside any case", deathText(exit));
            return exit.signaled || exit.code == 0 ? 1 : exit.code;
        }
        if (++deaths > max_deaths) {
            log::error(kComponent, "the batch worker died {} times: giving up", deaths);
            return 1;
        }
        if (in_flight.size() > 1) {
            log::warning(kComponent,
                         "the batch worker {} with {} cases in flight; running them one at a "
                         "time to find the one that kills it",
                         deathText(exit), in_flight.size());
            suspects = in_flight;
            continue;
        }
        const std::string id = *in_flight.begin();
        suspects.erase(id);
        JournalEntry e;
        e.case_id = id;
        e.state = CaseState::kFailed;
        if (auto it = by_id.find(id); it != by_id.end()) {
            e.input = it->second->input;
            e.series = it->second->series;
        }
        e.model_sha256 = model_sha256;
        e.options_hash = options_hash;
        e.error = fmt::format(
            "case {}: the worker {} while segmenting this case; the other cases go on in a new "
            "worker, and a rerun skips this one unless --retry-failed",
            id, deathText(exit));
        e.error_code = statusCodeName(StatusCode::kInternal);
        e.worker_died = true;
        e.time = unixNow();
        log::error(kComponent, "{}", e.error);
        auto journal = Journal::open(journal_path);
        const Status journaled = journal.isOk() ? journal->append(e) : journal.status();
        if (!journaled.isOk()) {
            log::error(kComponent, "{}: stopping", journaled.toString());
            return 6;
        }
    }
}

}  // namespace voxseg::batch
