// scanDicom() and selectSeries(); loadSeries() lives in dicom_load.cpp.
#include "io/dicom_series.h"

#include "core/log.h"
#include "io/dicom_header.h"
#include "io/dicom_stack.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace voxseg::io {

namespace {

namespace fs = std::filesystem;

constexpr const char* kLog = "io.dicom";

bool isDicomdirName(const fs::path& p) {
    std::string name = p.filename().string();
    std::transform(name.begin(), name.end(), name.begin(), ::toupper);
    return name == "DICOMDIR";
}

Status tooManyFiles(const std::string& input, int64_t limit) {
    return unsupported(fmt::format("holds more than {} files (limit {} files per scan): give "
                                   "the study or series folder, not an archive's root, or "
                                   "raise --max-files",
                                   limit, limit),
                       input);
}

Status collectFiles(const std::vector<std::string>& inputs, int64_t max_files,
                    std::vector<std::string>& files, std::vector<SkippedFile>& skipped) {
    for (const std::string& input : inputs) {
        std::error_code ec;
        fs::file_status st = fs::status(input, ec);
        if (ec || !fs::exists(st))
            return notFound("input does not exist; give a DICOM folder, file or DICOMDIR", input);
        if (fs::is_directory(st)) {
            fs::recursive_directory_iterator it(input,
                                                fs::directory_options::skip_permission_denied, ec);
            if (ec) return ioError("cannot list folder (" + ec.message() + ")", input);
            for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
                if (ec) return ioError("cannot list folder (" + ec.message() + ")", input);
                std::error_code fec;
                if (it->is_regular_file(fec)) files.push_back(it->path().string());
                if (static_cast<int64_t>(files.size()) > max_files)
                    return tooManyFiles(input, max_files);
            }
            continue;
        }
        if (isDicomdirName(input)) {
            auto listed = readDicomdir(input);
            if (!listed.isOk()) return listed.status();
            if (static_cast<int64_t>(files.size() + listed->size()) > max_files)
                return tooManyFiles(input, max_files);
            for (const std::string& f : *listed) {
                if (fs::is_regular_file(f, ec))
                    files.push_back(f);
                else
                    skipped.push_back({f, "listed in DICOMDIR " + input + " but missing"});
            }
            continue;
        }
        files.push_back(input);
    }
    std::sort(files.begin(), files.end());
    files.erase(std::unique(files.begin(), files.end()), files.end());
    return Status::ok();
}

// Without SeriesDescription: messages are logged and kept, free text never is
// (core/free_text.h); `voxseg info` and the candidate list show it.
std::string describeCandidates(const DicomScanResult& scan) {
    std::string out;
    for (const SeriesCandidate& c : scan.series) {
        out += fmt::format("\n  [{}] {} {} {}x{}x{}{}", c.index,
                           c.series_uid.empty() ? "(no UID)" : c.series_uid, c.modality,
                           c.geometry.size[0], c.geometry.size[1], c.geometry.size[2],
                           c.split_reason.empty() ? "" : " (" + c.split_reason + ")");
    }
    return out;
}

}  // namespace

Result<DicomScanResult> scanDicom(const std::vector<std::string>& inputs,
                                  const DicomScanOptions& options, const Progress& progress) {
    if (inputs.empty()) return invalidArgument("no input given; give a DICOM folder or files");
    DicomScanResult result;
    std::vector<std::string> files;
    VOXSEG_RETURN_IF_ERROR(collectFiles(inputs, options.max_files, files, result.skipped));

    std::vector<FileHeaders> headers(files.size());
    std::atomic<size_t> next{0};
    std::atomic<size_t> done{0};
    std::mutex report_mutex;
    int threads = options.threads > 0 ? options.threads
                                      : static_cast<int>(std::thread::hardware_concurrency());
    threads = std::max(1, std::min<int>(threads, static_cast<int>(files.size())));
    auto worker = [&] {
        for (size_t i = next++; i < files.size(); i = next++) {
            if (progress.isCancelled()) return;
            try {
                headers[i] = readDicomHeaders(files[i]);
            } catch (const std::exception& e) {
                headers[i].frames.clear();
                headers[i].skip_reason = std::string("unreadable header (") + e.what() + ")";
            }
            size_t d = ++done;
            if (d % 32 == 0 || d == files.size()) {
                std::lock_guard<std::mutex> lock(report_mutex);
                progress.report(d, files.size(), "reading DICOM headers");
            }
        }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
    for (std::thread& t : pool) t.join();
    VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());

    std::vector<FrameHeader> frames;
    for (size_t i = 0; i < files.size(); ++i) {
        if (headers[i].frames.empty()) {
            result.skipped.push_back({files[i], headers[i].skip_reason});
            continue;
        }
        for (FrameHeader& f : headers[i].frames) {
            log::registerIdentifier(f.patient.name);
            log::registerIdentifier(f.patient.id);
            log::registerIdentifier(f.patient.birth_date);
            frames.push_back(std::move(f));
        }
    }
    result.series = buildCandidates(frames);
    log::debug(kLog, "scanned {} file(s): {} volume(s), {} skipped", files.size(),
               result.series.size(), result.skipped.size());
    if (result.series.empty()) {
        std::string why;
        std::map<std::string, int> reasons;
        for (const SkippedFile& s : result.skipped) ++reasons[s.reason];
        for (const auto& [reason, count] : reasons) why += fmt::format("; {} x {}", count, reason);
        std::string subject =
            inputs.size() == 1 ? inputs[0] : fmt::format("{} inputs", inputs.size());
        return notFound(
            fmt::format("no DICOM image series found in {} file(s){}", files.size(), why), subject);
    }
    return result;
}

Result<const SeriesCandidate*> selectSeries(const DicomScanResult& scan,
                                            const std::string& selector) {
    if (scan.series.empty()) return notFound("no DICOM image series to choose from");
    if (selector.empty()) {
        if (scan.series.size() == 1) return &scan.series.front();
        return Status(StatusCode::kAmbiguous,
                      fmt::format("{} volumes found; pick one with --series INDEX|UID:{}",
                                  scan.series.size(), describeCandidates(scan)));
    }
    const bool numeric = std::all_of(selector.begin(), selector.end(), ::isdigit);
    if (numeric && selector.size() < 9) {
        int index = std::stoi(selector);
        for (const SeriesCandidate& c : scan.series)
            if (c.index == index) return &c;
        return notFound(fmt::format("no volume with index {} (valid: 0..{}):{}", index,
                                    scan.series.size() - 1, describeCandidates(scan)),
                        selector);
    }
    std::vector<const SeriesCandidate*> matches;
    for (const SeriesCandidate& c : scan.series)
        if (c.series_uid == selector) matches.push_back(&c);
    if (matches.size() == 1) return matches.front();
    if (matches.empty())
        return notFound("no series with this SeriesInstanceUID:" + describeCandidates(scan),
                        selector);
    return Status(StatusCode::kAmbiguous,
                  fmt::format("series {} was split into {} volumes; pick one by index:{}", selector,
                              matches.size(), describeCandidates(scan)),
                  selector);
}

}  // namespace voxseg::io
