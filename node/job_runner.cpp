#include "node/job_runner.h"

#include "batch/case_stages.h"
#include "core/atomic_file.h"
#include "core/log.h"
#include "node/route_match.h"
#include "node/spool_crypto.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace voxseg::node {
namespace fs = std::filesystem;
namespace {

constexpr const char* kComponent = "node";

bool has(const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
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
    pipeline::SegmentOptions so;
    so.outputs.label_map = false;
    so.outputs.preview = false;
    so.outputs.dicom_seg = has(route.outputs, "seg");
    so.outputs.rtstruct = has(route.outputs, "rtstruct");
    so.outputs.statistics = has(route.outputs, "stats");
    so.outputs.seg_type =
        route.seg_type == "labelmap" ? io::SegType::kLabelMap : io::SegType::kBinary;
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
    explicit MemoryFolder(const std::string& name)
        : path_("/dev/shm/voxseg-" + std::to_string(::getpid()) + "-" + name) {}
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
    MemoryFolder plain(job);
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
    if (auto st = writeFileAtomically(spool_.jobDir("queue", job) + "/reason.txt", reason + "\n");
        !st.isOk())
        log::warning(kComponent, "{}", st.toString());
    if (auto st = spool_.move("queue", job, area); !st.isOk())
        log::error(kComponent, "{}", st.toString());
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
    auto segmenter = segmenterFor(*route);
    Status st = segmenter.isOk() ? Status::ok() : segmenter.status();
    const auto t0 = std::chrono::steady_clock::now();
    std::map<std::string, double> stages;
    if (st.isOk()) st = segment(job, dir, **segmenter, series->series_uid, stop, stages);
    if (!st.isOk() && stop.isCancelled()) return JobOutcome::kStopped;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ids["route"] = route->name;
    ids["model"] = segmenter.isOk() ? (*segmenter)->model().name : route->model;
    if (segmenter.isOk()) ids["model_sha256"] = (*segmenter)->modelSha256();
    ids["seconds"] = seconds;
    if (!st.isOk()) {
        log::error(kComponent, "series {} (route {}): {}", series->series_uid, route->name,
                   st.toString());
        ids["error"] = st.toString();
        audit_.record("segmentation_failed", ids);
        moveWithReason(job, "failed", st.toString());
        ++metrics_.jobs_failed;
        return JobOutcome::kFailed;
    }
    for (const auto& [stage, s] : stages) metrics_.addStageSeconds(stage, s);
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
