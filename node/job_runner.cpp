#include "node/job_runner.h"

#include "batch/case_stages.h"
#include "core/atomic_file.h"
#include "core/log.h"
#include "node/route_match.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

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
    batch::CaseWork w;
    w.c = {job, dir, ""};
    w.series = series->series_uid;
    w.start = std::chrono::steady_clock::now();
    const std::string staging = spool_.dir("outbox") + "/.staging-" + job;
    if (st.isOk()) st = batch::loadCase(w, **segmenter, batch::LoadPolicy{}, stop);
    if (st.isOk()) st = batch::inferCase(w, **segmenter);
    if (st.isOk()) {
        auto files = batch::writeCase(
            w, **segmenter,
            {staging, spool_.jobDir("outbox", job), spool_.dir("outbox") + "/.trash-" + job});
        if (!files.isOk()) st = files.status();
    }
    if (!st.isOk() && stop.isCancelled()) return JobOutcome::kStopped;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - w.start).count();
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
    for (const auto& [stage, s] : w.stages) metrics_.addStageSeconds(stage, s);
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
