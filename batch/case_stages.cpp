#include "batch/case_stages.h"

#include "batch/child_process.h"
#include "batch/runner.h"
#include "core/clock.h"
#include "core/log.h"
#include "pipeline/channels.h"

#include <algorithm>
#include <filesystem>

namespace voxseg::batch {
namespace fs = std::filesystem;
namespace {

void mergeTimings(CaseWork& work, const std::vector<pipeline::StageTiming>& timings) {
    for (const auto& t : timings) work.stages[t.stage] = t.seconds;
}

}  // namespace

Status loadCase(CaseWork& w, const pipeline::Segmenter& segmenter, const LoadPolicy& policy,
                const CancelToken& stop, const Progress& progress) {
    crashIfTestPoisoned({w.c.id, w.c.input, w.series});  // test only (child_process.h)
    return guarded([&]() -> Status {
        const auto t = std::chrono::steady_clock::now();
        std::vector<pipeline::ChannelAssignment> channels;  // multi-channel models
        for (const auto& [name, value] : w.c.channels) channels.push_back({name, value});
        auto in = retryTransient<pipeline::StudyInput>(
            [&] {
                return pipeline::loadStudyChannels(w.c.input, w.series, channels, segmenter.model(),
                                                   policy.dicom, progress);
            },
            policy.read_retries, policy.retry_delay_seconds, stop);
        if (!in.isOk() && in.status().code() == StatusCode::kAmbiguous &&
            !policy.ambiguous_hint.empty())
            return in.status().withContext(policy.ambiguous_hint);
        if (!in.isOk()) return in.status();
        w.input = std::move(*in);
        w.stages["load"] = secondsSince(t);
        for (const auto& warning : w.input.volume.info().warnings)
            log::warning("batch", "case {}: {}", w.c.id, warning);
        auto work = segmenter.prepare(w.input, w.c.input, progress);
        if (!work.isOk()) return work.status();
        w.work = std::move(*work);
        mergeTimings(w, w.work.report.timings);
        return Status::ok();
    });
}

Status inferCase(CaseWork& w, pipeline::Segmenter& segmenter, const Progress& progress) {
    Status st = guarded([&] { return segmenter.infer(w.work, progress); });
    if (st.isOk()) mergeTimings(w, w.work.report.timings);
    return st;
}

Result<std::vector<OutputFile>> writeCase(CaseWork& w, const pipeline::Segmenter& segmenter,
                                          const CaseFolders& folders, const Progress& progress) {
    auto t = std::chrono::steady_clock::now();  // "write": from after the export to the rename
    const fs::path staged = folders.staging;
    const fs::path final_dir = folders.final_dir;
    std::vector<OutputFile> files;
    Status st = guarded([&]() -> Status {
        VOXSEG_RETURN_IF_ERROR(segmenter.finish(w.work, progress));
        mergeTimings(w, w.work.report.timings);
        t = std::chrono::steady_clock::now();
        std::error_code e1;
        fs::remove_all(staged, e1);
        auto report =
            segmenter.write(w.input, std::move(w.work), w.c.input, staged.string(), progress);
        if (!report.isOk()) return report.status();
        mergeTimings(w, report->timings);
        // An older output of this case (other model/options, or never journaled) is moved
        // aside first, so the final name only ever holds a complete case.
        std::error_code e2;
        if (fs::exists(final_dir, e2)) {
            fs::rename(final_dir, folders.trash, e2);
            if (e2)
                return ioError("cannot replace the earlier output: " + e2.message(),
                               final_dir.string());
            fs::remove_all(folders.trash, e2);
        }
        fs::rename(staged, final_dir, e2);
        if (e2)
            return ioError("cannot move the case into place: " + e2.message(), final_dir.string());
        files = listOutputs(final_dir.string());
        return Status::ok();
    });
    std::error_code cleanup_ec;
    fs::remove_all(staged, cleanup_ec);
    w.input = pipeline::StudyInput();  // release the volume before the next case
    w.stages["write"] = secondsSince(t);
    if (!st.isOk()) return st;
    return files;
}

std::vector<OutputFile> listOutputs(const std::string& dir) {
    std::vector<OutputFile> files;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.is_regular_file(ec))
            files.push_back({e.path().filename().string(), static_cast<uint64_t>(e.file_size(ec))});
    std::sort(files.begin(), files.end(),
              [](const OutputFile& a, const OutputFile& b) { return a.name < b.name; });
    return files;
}

}  // namespace voxseg::batch
