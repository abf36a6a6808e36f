#include "node/job_runner.h"

#include "batch/case_stages.h"
#include "core/atomic_file.h"
#include "core/log.h"
#include "node/route_match.h"
#include "node/spool_crypto.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace voxseg::node {
namespace fs = std::filesystem;
namespace {

constexpr const char* kComponent = "node";

// queue/<job>/work.json: what happened to the job's earlier attempts (job_runner.h).
struct WorkRecord {
    bool in_work = false;    // written before the work starts, cleared after its outcome
    int worker_deaths = 0;   // its worker process died under it
    int interruptions = 0;   // the node stopped (kill -9, crash, power) while it was in work
    std::string last_death;  // how the worker ended, the last time
};

std::string workPath(const std::string& dir) { return dir + "/work.json"; }

WorkRecord readWork(const std::string& dir) {
    WorkRecord w;
    std::error_code ec;
    if (!fs::exists(workPath(dir), ec)) return w;
    auto text = readFileBytes(workPath(dir));
    if (!text.isOk()) return w;
    try {
        const auto j = nlohmann::json::parse(*text);
        w.in_work = j.value("in_work", false);
        w.worker_deaths = j.value("worker_deaths", 0);
        w.interruptions = j.value("interruptions", 0);
        w.last_death = j.value("last_death", "");
    } catch (const nlohmann::json::exception&) {
        log::warning(kComponent, "{}: unreadable, counted as a first attempt", workPath(dir));
    }
    return w;
}

// Written under a temporary name, fsync'ed and renamed (core/atomic_file.h).
Status writeWork(const std::string& dir, const WorkRecord& w) {
    return writeFileAtomically(workPath(dir), nlohmann::json{{"in_work", w.in_work},
                                                             {"worker_deaths", w.worker_deaths},
                                                             {"interruptions", w.interruptions},
                                                             {"last_death", w.last_death}}
                                                  .dump(2));
}

// How the worker ended, for a reason.txt: the signal, or what its exit code means.
std::string deathText(const batch::ChildExit& e) {
    if (e.signaled) return e.describe();
    if (e.code == 9) return "ran out of memory (exit code 9)";
    return fmt::format("ended with an internal error (exit code {})", e.code);
}

}  // namespace

std::vector<std::string> resultFiles(const std::string& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.is_regular_file(ec) && e.path().extension() == ".dcm")
            out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
    return out;
}

Result<pipeline::Segmenter*> JobRunner::segmenterFor(const Route& route) {
    auto it = segmenters_.find(route.name);
    if (it != segmenters_.end()) return it->second.get();
    pipeline::SegmentOptions so = route.segment;  // parsed by the option schema (config.h)
    so.output_threads = 1;
    so.trust.require_signed = config_.require_signed_models;
    so.trust.trusted_keys = config_.trusted_keys;
    const auto t0 = std::chrono::steady_clock::now();
    std::string warning;
    auto s = pipeline::Segmenter::create(route.model, so, &warning);
    if (!warning.empty()) log::warning(kComponent, "route {}: {}", route.name, warning);
    if (!s.isOk()) return s.status().withContext("route " + route.name);
    log::info(kComponent, "route {}: model {} loaded in {:.2f} s ({})", route.name, s->model().name,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
              s->backendName());
    auto owned = std::make_unique<pipeline::Segmenter>(std::move(*s));
    pipeline::Segmenter* raw = owned.get();
    segmenters_[route.name] = std::move(owned);
    return raw;
}

void JobRunner::preload() {
    for (const auto& r : config_.routes)
        if (auto s = segmenterFor(r); !s.isOk())
            log::error(kComponent, "{}", s.status().toString());
}

namespace {

// A private folder on /dev/shm (memory), removed with everything in it when destroyed.
class MemoryFolder {
  public:
    MemoryFolder(const std::string& name, int owner_pid)
        : path_("/dev/shm/voxseg-" + std::to_string(owner_pid) + "-" + name) {}
    ~MemoryFolder() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    Status create() const {
        std::error_code ec;
        fs::remove_all(path_, ec);
        if (!fs::create_directory(path_, ec) || ec)
            return ioError(
                "spool encryption needs a writable /dev/shm (memory) for the series "
                "in work",
                path_);
        fs::permissions(path_, fs::perms::owner_all, ec);
        return Status::ok();
    }
    const std::string& path() const { return path_; }

  private:
    std::string path_;
};

}  // namespace

Status JobRunner::segment(const std::string& job, const std::string& dir,
                          pipeline::Segmenter& segmenter, const std::string& series_uid,
                          const CancelToken& stop, std::map<std::string, double>& stages) {
    const std::string outbox = spool_.dir("outbox");
    MemoryFolder plain(job, owner_pid_);
    batch::CaseWork w;
    w.c = {job, dir, ""};
    w.series = series_uid;
    w.start = std::chrono::steady_clock::now();
    batch::CaseFolders folders{outbox + "/.staging-" + job, spool_.jobDir("outbox", job),
                               outbox + "/.trash-" + job};
    if (key_) {  // decrypt the series into memory; results staged there too
        VOXSEG_RETURN_IF_ERROR(plain.create());
        fs::create_directory(plain.path() + "/in");
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(dir, ec)) {
            if (e.path().extension() != ".dcm") continue;
            VOXSEG_ASSIGN_OR_RETURN(std::string c, readFileBytes(e.path().string()));
            auto bytes = decryptBytes(*key_, c);
            if (!bytes.isOk()) return bytes.status().withContext(e.path().string());
            std::ofstream(plain.path() + "/in/" + e.path().filename().string(), std::ios::binary)
                << *bytes;
        }
        w.c.input = plain.path() + "/in";
        folders = {plain.path() + "/.staging", plain.path() + "/out", plain.path() + "/.trash"};
    }
    VOXSEG_RETURN_IF_ERROR(batch::loadCase(w, segmenter, batch::LoadPolicy{}, stop));
    VOXSEG_RETURN_IF_ERROR(batch::inferCase(w, segmenter));
    auto files = batch::writeCase(w, segmenter, folders);
    stages = w.stages;
    if (!files.isOk()) return files.status();
    if (!key_) return Status::ok();
    // Encrypted copies staged in the outbox, renamed whole into place.
    const std::string staged = outbox + "/.staging-" + job;
    std::error_code ec;
    fs::remove_all(staged, ec);
    fs::create_directories(staged, ec);
    for (const auto& f : *files) {
        VOXSEG_ASSIGN_OR_RETURN(std::string bytes, readFileBytes(folders.final_dir + "/" + f.name));
        const std::string to = staged + "/" + f.name;
        VOXSEG_RETURN_IF_ERROR(fs::path(f.name).extension() == ".dcm"
                                   ? writeEncryptedFile(*key_, to, bytes)
                                   : writeFileAtomically(to, bytes));
    }
    fs::rename(staged, spool_.jobDir("outbox", job), ec);
    if (ec) return ioError("cannot move the results into the outbox: " + ec.message(), staged);
    return Status::ok();
}

void JobRunner::moveWithReason(const std::string& job, const std::string& area,
                               const std::string& reason) {
    // A reason naming the job's folder names the folder it moves to.
    const std::string from = spool_.jobDir("queue", job);
    const std::string to = spool_.jobDir(area, job);
    std::string text = reason;
    for (size_t p = 0; (p = text.find(from, p)) != std::string::npos; p += to.size())
        text.replace(p, from.size(), to);
    if (auto st = writeFileAtomically(from + "/reason.txt", text + "\n"); !st.isOk())
        log::warning(kComponent, "{}", st.toString());
    if (auto st = spool_.move("queue", job, area); !st.isOk())
        log::error(kComponent, "{}", st.toString());
}

JobOutcome JobRunner::fail(const std::string& job, nlohmann::json ids, const std::string& error) {
    log::error(kComponent, "series {} (job {}): {}", ids.value("series_uid", std::string()), job,
               error);
    ids["error"] = error;
    audit_.record("segmentation_failed", ids);
    moveWithReason(job, "failed", error);
    ++metrics_.jobs_failed;
    return JobOutcome::kFailed;
}

void JobRunner::useWorkerProcess(std::vector<std::string> args) {
    worker_ = std::make_unique<WorkerClient>(std::move(args));
    if (auto st = worker_->start(); !st.isOk()) log::error(kComponent, "{}", st.toString());
}

void JobRunner::recoverInterrupted() {
    std::error_code ec;
    for (const auto& job : spool_.jobs("queue")) {
        const std::string dir = spool_.jobDir("queue", job);
        WorkRecord w = readWork(dir);
        if (!w.in_work) continue;
        w.in_work = false;
        // Results complete in the outbox: the stop came after the segmentation.
        const bool segmented = fs::exists(spool_.jobDir("outbox", job), ec);
        if (!segmented) ++w.interruptions;
        if (auto st = writeWork(dir, w); !st.isOk()) log::warning(kComponent, "{}", st.toString());
        if (segmented) continue;
        auto series = Spool::readSeries(dir);
        const std::string uid = series.isOk() ? series->series_uid : std::string();
        log::warning(kComponent,
                     "job {} (series {}) was in work when the node stopped (killed or crashed): "
                     "segmenting it again ({} of {} such stops before it is failed)",
                     job, uid, w.interruptions, kMaxInterruptions);
        audit_.record("job_interrupted",
                      {{"job", job}, {"series_uid", uid}, {"times", w.interruptions}});
    }
}

SegmentReply JobRunner::segmentHere(const SegmentRequest& r, const CancelToken& stop) {
    SegmentReply reply;
    const Route* route = nullptr;
    for (const auto& candidate : config_.routes)
        if (candidate.name == r.route) route = &candidate;
    if (!route) {
        reply.status = notFound("no route named '" + r.route +
                                "' in the configuration any more: move the job back to queue/ "
                                "after restoring it");
        return reply;
    }
    auto segmenter = segmenterFor(*route);
    if (!segmenter.isOk()) {
        reply.status = segmenter.status();
        return reply;
    }
    reply.model_name = (*segmenter)->model().name;
    reply.model_sha256 = (*segmenter)->modelSha256();
    reply.status = segment(r.job, spool_.jobDir("queue", r.job), **segmenter, r.series_uid, stop,
                           reply.stages);
    return reply;
}

JobOutcome JobRunner::process(const std::string& job, const CancelToken& stop) {
    const std::string dir = spool_.jobDir("queue", job);
    auto series = Spool::readSeries(dir);
    if (!series.isOk()) {
        log::error(kComponent, "job {}: {}", job, series.status().toString());
        moveWithReason(job, "failed", series.status().toString());
        ++metrics_.jobs_failed;
        return JobOutcome::kFailed;
    }
    nlohmann::json ids = {{"job", job},
                          {"study_uid", series->study_uid},
                          {"series_uid", series->series_uid},
                          {"calling_ae", series->calling_ae},
                          {"instances", series->instances}};
    std::string why_not;
    const Route* route = matchRoute(config_, *series, &why_not);
    if (!route) {
        log::info(kComponent, "series {} ({} instances, modality {}) matches no route: {}",
                  series->series_uid, series->instances, series->modality, why_not);
        audit_.record("series_unmatched", {{"job", job},
                                           {"study_uid", series->study_uid},
                                           {"series_uid", series->series_uid},
                                           {"reason", why_not}});
        moveWithReason(job, "unmatched", why_not);
        ++metrics_.series_unmatched;
        return JobOutcome::kUnmatched;
    }
    // Where the results go, fixed now (queue/<job>/route.json, kept until every destination
    // confirmed): a later configuration change does not redirect them.
    if (auto rs = writeFileAtomically(
            dir + "/route.json",
            nlohmann::json{{"route", route->name}, {"send_to", route->send_to}}.dump(2));
        !rs.isOk()) {
        log::error(kComponent, "job {}: {}", job, rs.toString());
        return JobOutcome::kStopped;  // the spool is not writable: retried later
    }
    ids["route"] = route->name;
    ids["model"] = route->model;
    WorkRecord work = readWork(dir);
    if (work.interruptions >= kMaxInterruptions)
        return fail(job, ids,
                    fmt::format("the node stopped {} times while this series was in work (killed, "
                                "or crashed without a trace): not tried again; to retry, move the "
                                "folder back to queue/",
                                work.interruptions));
    // Durable before the work starts: a node that dies now finds it at its next start.
    work.in_work = true;
    if (auto ws = writeWork(dir, work); !ws.isOk()) {
        log::error(kComponent, "job {}: {}", job, ws.toString());
        return JobOutcome::kStopped;  // the spool is not writable: retried later
    }
    const auto t0 = std::chrono::steady_clock::now();
    const SegmentRequest request{job, route->name, series->series_uid};
    SegmentReply reply = worker_ ? worker_->segment(request, stop) : segmentHere(request, stop);
    work.in_work = false;
    if (reply.died || (!reply.status.isOk() && stop.isCancelled())) {
        // A worker ended in the middle: its staging folders (the node's own are removed by
        // writeCase).
        std::error_code ec;
        fs::remove_all(spool_.dir("outbox") + "/.staging-" + job, ec);
        fs::remove_all(spool_.dir("outbox") + "/.trash-" + job, ec);
    }
    if (reply.worker_unavailable) {
        if (reply.status.code() != StatusCode::kFailedPrecondition)  // not "restarting" again
            log::warning(kComponent, "job {}: {}; it waits", job, reply.status.toString());
        (void)writeWork(dir, work);
        return JobOutcome::kStopped;
    }
    if (reply.died) {
        ++work.worker_deaths;
        work.last_death = reply.died->describe();
    }
    if (auto ws = writeWork(dir, work); !ws.isOk()) log::warning(kComponent, "{}", ws.toString());
    if (reply.died) {
        const std::string what = fmt::format(
            "the segmentation worker {} while segmenting this series", deathText(*reply.died));
        nlohmann::json crash = ids;
        crash["error"] = what;
        crash["attempt"] = work.worker_deaths;
        audit_.record("worker_crashed", crash);
        if (work.worker_deaths < kMaxWorkerDeaths) {
            log::warning(kComponent, "series {} (job {}): {}; trying it once more in a new worker",
                         series->series_uid, job, what);
            return JobOutcome::kStopped;
        }
        return fail(job, ids,
                    fmt::format("{} ({} times; the node went on with the other series): not tried "
                                "again; to retry, move the folder back to queue/",
                                what, work.worker_deaths));
    }
    const Status& st = reply.status;
    if (!st.isOk() && stop.isCancelled()) return JobOutcome::kStopped;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!reply.model_name.empty()) ids["model"] = reply.model_name;
    if (!reply.model_sha256.empty()) ids["model_sha256"] = reply.model_sha256;
    ids["seconds"] = seconds;
    if (!st.isOk()) return fail(job, ids, st.toString());
    for (const auto& [stage, s] : reply.stages) metrics_.addStageSeconds(stage, s);
    nlohmann::json outputs = nlohmann::json::array();
    for (const auto& f : resultFiles(spool_.jobDir("outbox", job)))
        outputs.push_back(fs::path(f).filename().string());
    ids["outputs"] = outputs;
    audit_.record("segmented", ids);
    log::info(kComponent, "series {} segmented by route {} in {:.2f} s", series->series_uid,
              route->name, seconds);
    return JobOutcome::kSegmented;
}

}  // namespace voxseg::node
