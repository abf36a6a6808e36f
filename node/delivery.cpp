#include "node/delivery.h"

#include "core/atomic_file.h"
#include "core/clock.h"
#include "core/log.h"
#include "io/dicom_net_scu.h"
#include "node/dicom_sender.h"
#include "node/job_runner.h"
#include "node/stow_sender.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

namespace voxseg::node {
namespace fs = std::filesystem;
namespace {

constexpr const char* kComponent = "node";

Result<nlohmann::json> readJson(const std::string& path) {
    VOXSEG_ASSIGN_OR_RETURN(std::string text, readFileBytes(path));
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        return corruptData(e.what(), path);
    }
}

// flock on a file in the job folder: --resend and a running node never send one job at once.
class JobLock {
  public:
    explicit JobLock(const std::string& dir) {
        fd_ = ::open((dir + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        locked_ = fd_ >= 0 && ::flock(fd_, LOCK_EX | LOCK_NB) == 0;
    }
    ~JobLock() {
        if (fd_ >= 0) ::close(fd_);
    }
    bool locked() const { return locked_; }

  private:
    int fd_ = -1;
    bool locked_ = false;
};

// Sleeps `seconds` unless `stop` is cancelled first; false when stopped.
bool sleepFor(double seconds, const CancelToken& stop) {
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(seconds));
    while (std::chrono::steady_clock::now() < until) {
        if (stop.isCancelled()) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return !stop.isCancelled();
}

}  // namespace

bool Delivery::isHeld(const Spool& spool, const std::string& job) {
    std::error_code ec;
    return fs::exists(spool.jobDir("outbox", job) + "/held", ec);
}

Status Delivery::sendOnce(const Destination& d, const std::vector<std::string>& files) {
    if (d.kind == DestinationKind::kDicom) return sendByCStore(d, config_.ae_title, files);
    return sendByStow(d, files);
}

DeliveryResult Delivery::deliver(const std::string& job, bool resend, const CancelToken& stop) {
    const std::string dir = spool_.jobDir("outbox", job);
    JobLock lock(dir);
    if (!lock.locked()) return DeliveryResult::kBusy;
    std::error_code ec;
    if (fs::exists(dir + "/held", ec)) {
        if (!resend) return DeliveryResult::kHeld;
        fs::remove(dir + "/held", ec);
    }
    const std::vector<std::string> stored = resultFiles(dir);
    std::vector<MemoryFile> plain;  // the decrypted results, in memory while they are sent
    std::vector<std::string> files = stored;
    if (key_) {
        files.clear();
        for (const auto& f : stored) {
            auto bytes = readFileBytes(f);
            auto clear =
                bytes.isOk() ? decryptBytes(*key_, *bytes) : Result<std::string>(bytes.status());
            auto mem = clear.isOk() ? MemoryFile::create("result", *clear)
                                    : Result<MemoryFile>(clear.status());
            if (!mem.isOk()) {
                log::error(kComponent, "job {}: {}", job, mem.status().withContext(f).toString());
                return DeliveryResult::kHeld;
            }
            plain.push_back(std::move(*mem));
            files.push_back(plain.back().path());
        }
    }
    auto route = readJson(spool_.jobDir("queue", job) + "/route.json");
    std::vector<std::string> send_to;
    if (route.isOk()) send_to = route->value("send_to", std::vector<std::string>{});
    auto series = Spool::readSeries(spool_.jobDir("queue", job));
    const std::string series_uid = series.isOk() ? series->series_uid : std::string();

    std::string last_error;
    if (!route.isOk()) last_error = route.status().toString();
    for (const auto& name : send_to) {
        const std::string marker = dir + "/sent-" + name + ".json";
        if (fs::exists(marker, ec)) continue;
        const Destination* d = config_.destination(name);
        if (!d) {
            last_error = "destination '" + name + "' is no longer in the configuration";
            continue;
        }
        double delay = config_.send.initial_delay_seconds;
        Status st = Status::ok();
        for (int attempt = 1; attempt <= config_.send.attempts; ++attempt) {
            const auto t0 = std::chrono::steady_clock::now();
            st = files.empty() ? notFound("no DICOM result to send", dir) : sendOnce(*d, files);
            const double secs =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (st.isOk()) {
                metrics_.addStageSeconds("send", secs);
                break;
            }
            ++metrics_.sends_failed;
            log::warning(kComponent, "job {}: send to {} failed (attempt {} of {}): {}", job, name,
                         attempt, config_.send.attempts, st.toString());
            if (attempt < config_.send.attempts && !sleepFor(delay, stop))
                return DeliveryResult::kStopped;
            delay *= 2;
        }
        nlohmann::json ev = {{"job", job}, {"series_uid", series_uid}, {"destination", name}};
        nlohmann::json sent = nlohmann::json::array();
        for (size_t i = 0; i < files.size(); ++i) {
            auto ids = io::readDicomFileIds(files[i]);
            if (ids.isOk())
                sent.push_back({{"file", fs::path(stored[i]).filename().string()},
                                {"sop_class_uid", ids->sop_class_uid},
                                {"sop_instance_uid", ids->sop_instance_uid}});
        }
        ev["results"] = sent;
        if (!st.isOk()) {
            last_error = st.toString();
            ev["error"] = last_error;
            audit_.record("send_failed", ev);
            continue;
        }
        ++metrics_.sends_ok;
        if (auto ms = writeFileAtomically(
                marker, ev.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
            !ms.isOk())
            log::error(kComponent, "{}", ms.toString());  // sent again later: same UIDs
        audit_.record("sent", ev);
        log::info(kComponent, "job {}: results of series {} confirmed by {}", job, series_uid,
                  name);
    }
    for (const auto& name : send_to)
        if (!fs::exists(dir + "/sent-" + name + ".json", ec)) {
            if (auto hs = writeFileAtomically(dir + "/held", last_error + "\n"); !hs.isOk())
                log::error(kComponent, "{}", hs.toString());
            log::error(kComponent,
                       "job {}: results held in the outbox ({}); send them with voxseg serve "
                       "--resend",
                       job, last_error);
            audit_.record("held",
                          {{"job", job}, {"series_uid", series_uid}, {"error", last_error}});
            return DeliveryResult::kHeld;
        }
    if (!route.isOk()) return DeliveryResult::kHeld;
    finish(job, stored);
    return DeliveryResult::kDelivered;
}

void Delivery::finish(const std::string& job, const std::vector<std::string>& files) {
    batch::JournalEntry e;
    e.case_id = job;
    e.state = batch::CaseState::kDone;
    e.input = spool_.jobDir("queue", job);
    if (auto s = Spool::readSeries(e.input); s.isOk()) e.series = s->series_uid;
    for (const auto& f : files) {
        std::error_code ec;
        e.files.push_back(
            {fs::path(f).filename().string(), static_cast<uint64_t>(fs::file_size(f, ec))});
    }
    e.time = unixNow();
    if (auto st = journal_.markDone(e); !st.isOk()) {
        log::error(kComponent, "job {}: journal not written ({}); folders kept", job,
                   st.toString());
        return;
    }
    ++metrics_.jobs_done;
    std::error_code ec;
    // Order matters: the worker must never see the series queued without its results.
    fs::remove_all(spool_.jobDir("queue", job), ec);
    const std::string out = spool_.jobDir("outbox", job);
    if (fs::exists(out + "/statistics.json", ec)) {
        const std::string keep = spool_.jobDir("results", job);
        fs::create_directories(keep, ec);
        for (const char* f : {"statistics.json", "statistics.csv", "run.json"})
            fs::rename(out + "/" + f, keep + "/" + f, ec);
    }
    fs::remove_all(out, ec);
}

}  // namespace voxseg::node
