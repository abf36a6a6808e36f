#include "batch/runner.h"

#include "backends/registry.h"
#include "batch/bounded_queue.h"
#include "batch/case_stages.h"
#include "batch/journal.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/process_metrics.h"
#include "core/sha256.h"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

namespace voxseg::batch {
namespace fs = std::filesystem;
namespace {

constexpr const char* kComponent = "batch";
using Clock = std::chrono::steady_clock;

// One case on its way through the pipeline (batch/case_stages.h); `on_end` runs when it is
// recorded or dropped.
struct Item : CaseWork {
    std::function<void()> on_end;
    ~Item() {
        if (on_end) on_end();
    }
};
using ItemPtr = std::unique_ptr<Item>;

// Serialises everything a finished case touches: journal, counters, metrics file, callback.
class Recorder {
  public:
    Recorder(Journal journal, BatchStats stats, std::string metrics_path, CaseCallback callback,
             Clock::time_point start)
        : journal_(std::move(journal)),
          stats_(std::move(stats)),
          metrics_path_(std::move(metrics_path)),
          callback_(std::move(callback)),
          start_(start) {}

    // Returns the journal's status: a journal that cannot be written stops the batch.
    Status record(const Item& item, CaseState state, const Status& error,
                  const std::vector<OutputFile>& files) {
        std::lock_guard<std::mutex> lock(mutex_);
        JournalEntry e;
        e.case_id = item.c.id;
        e.state = state;
        e.input = item.c.input;
        e.series = item.series;
        e.model_sha256 = stats_.model_sha256;
        e.options_hash = stats_.options_hash;
        e.files = files;
        if (!error.isOk()) {
            e.error = error.toString();
            e.error_code = statusCodeName(error.code());
        }
        e.seconds = secondsSince(item.start);
        e.time = unixNow();
        const Status journaled = journal_.append(e);

        CaseRecord r;
        r.case_id = item.c.id;
        r.state = caseStateName(state);
        r.seconds = e.seconds;
        r.stages = item.stages;
        r.error = e.error;
        r.error_code = e.error_code;
        r.rss_mb = currentRssMib();
        r.max_rss_mb = peakRssMib();
        if (state == CaseState::kDone) ++stats_.done;
        if (state == CaseState::kFailed) ++stats_.failed;
        if (state == CaseState::kInterrupted) ++stats_.interrupted;
        if (state == CaseState::kDone)
            for (const auto& [stage, sec] : item.stages) stats_.stage_seconds[stage] += sec;
        stats_.wall_seconds = secondsSince(start_);
        stats_.cases.push_back(r);
        if (state == CaseState::kDone)
            log::info(kComponent, "case {} done in {:.2f} s ({} of {} in this shard)", r.case_id,
                      r.seconds, stats_.done + stats_.skipped, stats_.cases_in_shard);
        else if (state == CaseState::kFailed)
            log::error(kComponent, "case {} failed: {}", r.case_id, r.error);
        else
            log::warning(kComponent, "case {} abandoned at the stop; the next run redoes it",
                         r.case_id);
        if (auto st = writeMetrics(stats_, true, metrics_path_); !st.isOk())
            log::warning(kComponent, "metrics file not updated: {}", st.toString());
        if (callback_) callback_(r, stats_);
        return journaled;
    }

    BatchStats finish() {
        std::lock_guard<std::mutex> lock(mutex_);
        stats_.wall_seconds = secondsSince(start_);
        return stats_;
    }

  private:
    std::mutex mutex_;
    Journal journal_;
    BatchStats stats_;
    std::string metrics_path_;
    CaseCallback callback_;
    Clock::time_point start_;
};

bool outputsComplete(const JournalEntry& e, const fs::path& dir) {
    if (e.files.empty()) return false;
    std::error_code ec;
    for (const auto& f : e.files) {
        const fs::path p = dir / f.name;
        if (!fs::is_regular_file(p, ec) || fs::file_size(p, ec) != f.bytes) return false;
    }
    return true;
}

// Temporary files AtomicFile left for `target` when a run was killed (SIGKILL) mid-write:
// ".tmp-<random>-<name>" beside it. Only this shard's own files: other shards may be writing
// theirs right now.
void removeStaleTemps(const fs::path& target) {
    std::error_code ec;
    const std::string suffix = "-" + target.filename().string();
    for (const auto& e : fs::directory_iterator(target.parent_path(), ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind(".tmp-", 0) == 0 && name.size() > suffix.size() &&
            name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
            fs::remove(e.path(), ec);
    }
}

bool allDigits(const std::string& s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Where a run keeps its cases on their way: staging (being written), trash (replaced outputs),
// and the output root itself.
struct RunFolders {
    fs::path out_root, staging_root, trash_root;
};

// Whether `device` resolves to the CPU backend: "cpu", or "auto" on a machine where no better
// backend has a device (asked of the registry without loading the model).
bool resolvesToCpu(const engine::DeviceSpec& device) {
    if (device.kind == engine::DeviceSpec::Kind::kCpu) return true;
    if (device.kind != engine::DeviceSpec::Kind::kAuto) return false;
    std::string fallback;  // a GPU that exists but failed (no GPU at all is logged as info)
    auto backend = engine::createBackend(device, &fallback);
    if (!fallback.empty()) log::warning(kComponent, "{}", fallback);
    return backend.isOk() && (*backend)->name() == "cpu";
}

// One Segmenter per device; CPU workers share the cores. Without --devices, a CPU run gets two
// workers: one worker's inference leaves cores idle (small patches scale poorly across threads)
// and its stages wait for each other; two overlap (docs/perf-batch.md). `devices` becomes the
// devices the workers run on. The model is loaded once per worker.
Result<std::vector<pipeline::Segmenter>> createWorkers(const BatchOptions& options, int cores,
                                                       std::vector<engine::DeviceSpec>& devices) {
    if (options.devices.empty() && cores >= 2 && resolvesToCpu(devices[0])) {
        devices = {engine::DeviceSpec::cpu(), engine::DeviceSpec::cpu()};
        log::info(kComponent, "2 CPU workers with {} threads each (--devices cpu for one)",
                  std::max(1, cores / 2));
    }
    std::vector<pipeline::Segmenter> segmenters;
    for (const auto& d : devices) {
        pipeline::SegmentOptions so = options.segment;
        so.device = d;
        so.output_threads = 1;  // the writers already overlap cases; memory stays per case
        if (devices.size() > 1 && !d.isCuda())
            so.threads = std::max(1, cores / static_cast<int>(devices.size()));
        std::string warning;
        auto s = pipeline::Segmenter::create(options.model, so, &warning);
        if (!warning.empty()) log::warning(kComponent, "{}", warning);
        if (!s.isOk()) return s.status().withContext("device " + d.toString());
        segmenters.push_back(std::move(*s));
    }
    return segmenters;
}

// This shard's cases; those complete from an earlier run (same model, options, input and
// series, outputs all there) are skipped and counted in `stats`.
Result<std::vector<BatchCase>> casesToRun(const std::vector<BatchCase>& all_cases,
                                          const BatchOptions& options, const fs::path& state,
                                          const RunFolders& folders, BatchStats& stats) {
    std::map<std::string, JournalEntry> journaled;
    if (!options.redo_all || options.run_started > 0) {
        VOXSEG_ASSIGN_OR_RETURN(journaled, readJournals(state.string()));
    }
    // --force ignores earlier runs, not the entries of this run's earlier workers.
    if (options.redo_all)
        std::erase_if(journaled,
                      [&](const auto& kv) { return kv.second.time < options.run_started; });
    std::error_code ec;
    std::vector<BatchCase> todo;
    const std::set<std::string> only(options.only.begin(), options.only.end());
    for (const auto& c : all_cases) {
        if (!inShard(c.id, options.shard)) continue;
        ++stats.cases_in_shard;
        const std::string series = c.series.empty() ? options.series : c.series;
        auto it = journaled.find(c.id);
        const bool this_run = it != journaled.end() && options.run_started > 0 &&
                              it->second.time >= options.run_started;
        if (it != journaled.end() && it->second.state == CaseState::kDone &&
            it->second.model_sha256 == stats.model_sha256 &&
            it->second.options_hash == stats.options_hash && it->second.input == c.input &&
            it->second.series == series && outputsComplete(it->second, folders.out_root / c.id)) {
            CaseRecord r;
            r.case_id = c.id;
            r.state = this_run ? "done" : "skipped";
            r.seconds = it->second.seconds;
            ++(this_run ? stats.done : stats.skipped);
            stats.cases.push_back(r);
            continue;
        }
        // Failed in this run (by a worker before this one), or killed a worker in an earlier
        // run on the same input: recorded, not run again (would die again).
        if (it != journaled.end() && it->second.state == CaseState::kFailed &&
            (this_run || (it->second.worker_died && !options.retry_failed &&
                          it->second.input == c.input && it->second.series == series))) {
            CaseRecord r;
            r.case_id = c.id;
            r.state = "failed";
            r.error = it->second.error;
            if (!this_run) r.error += " (not run again: --retry-failed runs it)";
            r.error_code = it->second.error_code;
            ++stats.failed;
            stats.cases.push_back(r);
            if (!this_run)
                log::warning(kComponent,
                             "case {} killed its worker in an earlier run: not run again "
                             "(--retry-failed runs it)",
                             c.id);
            continue;
        }
        if (!only.empty() && !only.count(c.id)) continue;
        // Debris of an earlier run killed hard (SIGKILL, node loss) for this case only: other
        // shards may be writing their own cases next to it.
        fs::remove_all(folders.staging_root / c.id, ec);
        fs::remove_all(folders.trash_root / c.id, ec);
        todo.push_back(c);
    }
    return todo;
}

// The cases' pipeline: loader threads read cases into `ready`, one thread per device runs their
// sliding windows into `to_write`, writer threads (CPU only, so that a device takes its next case
// as soon as its window is done) write the outputs; a watchdog turns the caller's signal into a
// stop and enforces the grace period. run() returns why it stopped early, if it did.
class CasePipeline {
  public:
    CasePipeline(const BatchOptions& options, const CancelToken& signal,
                 std::vector<pipeline::Segmenter>& segmenters, const std::vector<BatchCase>& todo,
                 const RunFolders& folders, Recorder& recorder, int cores)
        : options_(options),
          signal_(signal),
          segmenters_(segmenters),
          todo_(todo),
          folders_(folders),
          recorder_(recorder),
          ready_(static_cast<size_t>(std::max(1, options.prefetch))),
          // Default: one writer per device, and up to 4 while half the cores allow (a GPU's
          // cases can arrive faster than one CPU thread finishes them).
          writers_(options.writers > 0
                       ? options.writers
                       : std::max(static_cast<int>(segmenters.size()), std::min(4, cores / 2))),
          to_write_(static_cast<size_t>(writers_)),
          loaders_(std::max(1, options.loaders)),
          loaders_left_(loaders_),
          devices_left_(static_cast<int>(segmenters.size())) {
        load_policy_.dicom = options.dicom;
        load_policy_.read_retries = options.read_retries;
        load_policy_.retry_delay_seconds = options.retry_delay_seconds;
        load_policy_.ambiguous_hint =
            "several series: give this case a 'series' (index or UID, see voxseg info) in the "
            "manifest";
    }

    StopReason run() {
        std::thread watchdog([this] { watch(); });
        std::vector<std::thread> threads;
        for (int l = 0; l < loaders_; ++l) threads.emplace_back([this] { load(); });
        for (size_t d = 0; d < segmenters_.size(); ++d)
            threads.emplace_back([this, d] { infer(d); });
        for (int w = 0; w < writers_; ++w) threads.emplace_back([this] { write(); });
        for (auto& t : threads) t.join();
        finished_ = true;
        watchdog.join();
        if (signal_.isCancelled())
            requestStop(StopReason::kSignal, false);  // keeps an earlier reason
        return static_cast<StopReason>(stop_reason_.load());
    }

  private:
    void requestStop(StopReason why, bool abort_now) {
        int none = static_cast<int>(StopReason::kNone);
        stop_reason_.compare_exchange_strong(none, static_cast<int>(why));
        stop_.cancel();
        if (abort_now) abort_.cancel();
    }
    // The threads read the caller's signal themselves rather than wait for the watchdog's next
    // look: a case that starts or reaches its writer after the signal is not done any more.
    bool stopping() const { return stop_.isCancelled() || signal_.isCancelled(); }
    bool abandoning() const {
        return abort_.isCancelled() || (options_.grace_seconds <= 0 && signal_.isCancelled());
    }
    void recordOrStop(const Item& item, CaseState st, const Status& error,
                      const std::vector<OutputFile>& files) {
        const Status journaled = recorder_.record(item, st, error, files);
        if (!journaled.isOk()) {
            log::error(kComponent, "{}: stopping", journaled.toString());
            requestStop(StopReason::kDiskFull, true);
        }
    }

    void load() {
        const Progress progress(ProgressCallback{}, stop_);
        while (!stopping()) {
            if (options_.one_at_a_time) {
                std::unique_lock<std::mutex> lock(flight_mutex_);
                while (in_flight_ != 0 && !stopping())
                    flight_cv_.wait_for(lock, std::chrono::milliseconds(50));
                if (stopping()) break;
            }
            const size_t i = next_.fetch_add(1);
            if (i >= todo_.size()) break;
            auto item = std::make_unique<Item>();
            item->c = todo_[i];
            {
                std::lock_guard<std::mutex> lock(flight_mutex_);
                ++in_flight_;
            }
            if (options_.on_flight) options_.on_flight(item->c.id, true);
            item->on_end = [this, id = item->c.id] {
                if (options_.on_flight) options_.on_flight(id, false);
                {
                    std::lock_guard<std::mutex> lock(flight_mutex_);
                    --in_flight_;
                }
                flight_cv_.notify_all();
            };
            item->series = item->c.series.empty() ? options_.series : item->c.series;
            item->start = Clock::now();
            Status st = loadCase(*item, segmenters_[0], load_policy_, stop_, progress);
            if (stopping()) break;  // not started: the next run does it
            if (!st.isOk()) {
                recordOrStop(*item, CaseState::kFailed, st.withContext("case " + item->c.id), {});
                continue;
            }
            if (!ready_.push(std::move(item))) break;
        }
        if (--loaders_left_ == 0) ready_.close();
    }

    void infer(size_t d) {
        const Progress progress(ProgressCallback{}, abort_);
        while (auto item = ready_.pop()) {
            if (stopping()) continue;  // waiting, not started: dropped
            Status st = inferCase(**item, segmenters_[d], progress);
            if (!st.isOk()) {
                const bool abandoned = st.code() == StatusCode::kCancelled && abort_.isCancelled();
                recordOrStop(**item, abandoned ? CaseState::kInterrupted : CaseState::kFailed,
                             st.withContext("case " + (*item)->c.id), {});
                continue;
            }
            to_write_.push(std::move(*item));
        }
        if (--devices_left_ == 0) to_write_.close();
    }

    void write() {
        const Progress progress(ProgressCallback{}, abort_);
        while (auto popped = to_write_.pop()) {
            Item& item = **popped;
            if (abandoning()) {
                recordOrStop(item, CaseState::kInterrupted,
                             Status(StatusCode::kCancelled, "stopped"), {});
                continue;
            }
            std::error_code space_ec;
            const auto space = fs::space(folders_.out_root, space_ec);
            if (!space_ec && space.available < options_.min_free_bytes) {
                log::error(kComponent,
                           "only {} MiB free on the output file system (guard: {} MiB): "
                           "stopping; free space and rerun",
                           space.available >> 20, options_.min_free_bytes >> 20);
                requestStop(StopReason::kDiskFull, true);
                recordOrStop(item, CaseState::kInterrupted,
                             Status(StatusCode::kIoError, "output file system full"), {});
                continue;
            }
            const CaseFolders folders{(folders_.staging_root / item.c.id).string(),
                                      (folders_.out_root / item.c.id).string(),
                                      (folders_.trash_root / item.c.id).string()};
            auto files = writeCase(item, segmenters_[0], folders, progress);
            if (!files.isOk()) {
                const Status& st = files.status();
                const bool abandoned = st.code() == StatusCode::kCancelled && abort_.isCancelled();
                recordOrStop(item, abandoned ? CaseState::kInterrupted : CaseState::kFailed,
                             st.withContext("case " + item.c.id), {});
                continue;
            }
            recordOrStop(item, CaseState::kDone, Status::ok(), *files);
        }
    }

    // Watches for the signal and enforces the grace period.
    void watch() {
        bool seen = false;
        Clock::time_point since{};
        while (!finished_.load()) {
            if (!seen && (signal_.isCancelled() || stop_.isCancelled())) {
                seen = true;
                since = Clock::now();
                if (signal_.isCancelled()) {
                    requestStop(StopReason::kSignal, false);
                    log::warning(kComponent,
                                 "stop requested: no new cases; cases in flight get {:.0f} s "
                                 "to finish",
                                 options_.grace_seconds);
                }
            }
            if (seen && !abort_.isCancelled() && secondsSince(since) > options_.grace_seconds) {
                log::warning(kComponent, "grace period over: abandoning the cases in flight");
                abort_.cancel();
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }

    const BatchOptions& options_;
    const CancelToken& signal_;
    std::vector<pipeline::Segmenter>& segmenters_;
    const std::vector<BatchCase>& todo_;
    const RunFolders& folders_;
    Recorder& recorder_;
    LoadPolicy load_policy_;
    CancelToken stop_;   // no new cases (a signal, a full disk, an unwritable journal)
    CancelToken abort_;  // cases in flight give up (grace expired, or nothing can be written)
    std::atomic<int> stop_reason_{static_cast<int>(StopReason::kNone)};
    BoundedQueue<ItemPtr> ready_;
    const int writers_;
    BoundedQueue<ItemPtr> to_write_;
    std::atomic<size_t> next_{0};
    const int loaders_;
    std::atomic<int> loaders_left_;
    std::atomic<int> devices_left_;
    std::atomic<bool> finished_{false};
    std::mutex flight_mutex_;  // cases loaded and not yet recorded (one_at_a_time)
    std::condition_variable flight_cv_;
    int in_flight_ = 0;
};

}  // namespace

std::string stateFolder(const std::string& output_root) {
    return (fs::path(output_root) / ".voxseg-batch").string();
}

std::string journalPath(const std::string& output_root, const Shard& shard) {
    return (fs::path(stateFolder(output_root)) / ("journal-" + shard.tag() + ".jsonl")).string();
}

std::string optionsHash(const BatchOptions& o,
                        const std::vector<pipeline::SegmentOptionSpec>& schema) {
    const auto& s = o.segment;
    nlohmann::json j;
    // Every option of the schema that changes results and is not at its default, in the
    // schema's order (pipeline::resultOptions): a new option is in the hash when it is set.
    nlohmann::json options = nlohmann::json::array();
    for (const auto& [key, value] : pipeline::resultOptions(s, schema))
        options.push_back({key, value});
    j["options"] = options;
    // What no front end sets but the library API can: only when set.
    auto post = [](const pipeline::PostprocessOptions& p) {
        return nlohmann::json{{"largest_component", p.largest_component},
                              {"min_component_ml", p.min_component_ml},
                              {"fill_holes", static_cast<int>(p.fill_holes)},
                              {"fully_connected", p.fully_connected}};
    };
    for (const auto& l : s.postprocess)
        j["postprocess"].push_back({{"label", l.label}, {"options", post(l.options)}});
    if (s.postprocess_all && s.postprocess_all->fully_connected) j["fully_connected"] = true;
    // How DICOM series are read (--refuse-tilt, --refuse-uneven): not segment options.
    j["dicom"] = {{"tilt", static_cast<int>(o.dicom.tilt)},
                  {"uneven_spacing", static_cast<int>(o.dicom.uneven_spacing)},
                  {"allow_gaps", o.dicom.allow_gaps},
                  {"philips_precise", o.dicom.philips_precise}};
    return sha256Hex(j.dump());
}

Result<std::vector<engine::DeviceSpec>> parseDevices(const std::string& list,
                                                     const engine::DeviceSpec& base) {
    using Kind = engine::DeviceSpec::Kind;
    std::vector<std::string> tokens;
    std::string cur;
    for (char c : list + ",") {
        if (c == ',') {
            if (!cur.empty()) tokens.push_back(cur);
            cur.clear();
        } else if (c != ' ') {
            cur += c;
        }
    }
    if (tokens.empty()) return std::vector<engine::DeviceSpec>{};  // runBatch picks the default
    bool numbered_cuda = base.isCuda();
    if (base.kind == Kind::kAuto && std::any_of(tokens.begin(), tokens.end(), allDigits)) {
        const auto names = engine::availableBackends();
        if (std::find(names.begin(), names.end(), "cuda") != names.end())
            numbered_cuda = engine::createBackend(engine::DeviceSpec::cuda()).isOk();
        if (!numbered_cuda)
            log::warning(kComponent,
                         "--devices {}: no usable CUDA device, running {} CPU "
                         "worker(s)",
                         list, tokens.size());
    }
    std::vector<engine::DeviceSpec> out;
    for (const auto& t : tokens) {
        engine::DeviceSpec d;
        if (allDigits(t) && t.size() <= 3) {
            d = numbered_cuda ? engine::DeviceSpec::cuda(std::stoi(t))
                              : (base.kind == Kind::kAuto ? engine::DeviceSpec::cpu() : base);
        } else {
            // The device parser's own message (it names the device names), plus the numbers.
            auto parsed = engine::parseDevice(t, "--devices");
            if (!parsed.isOk())
                return invalidArgument(parsed.status().message() + ", or GPU numbers like 0,1");
            d = *parsed;
        }
        if (d.isCuda() && std::find(out.begin(), out.end(), d) != out.end())
            return invalidArgument("--devices lists " + d.toString() + " twice");
        out.push_back(d);
    }
    return out;
}

Result<BatchResult> runBatch(const std::vector<BatchCase>& all_cases, const BatchOptions& options,
                             const CancelToken& signal, const CaseCallback& on_case) {
    const auto t0 = Clock::now();
    const fs::path state = stateFolder(options.output_root);
    const RunFolders folders{options.output_root, state / "staging", state / "trash"};
    std::error_code ec;
    fs::create_directories(folders.staging_root, ec);
    if (ec)
        return ioError("cannot create the output folder: " + ec.message(),
                       folders.out_root.string());
    fs::create_directories(folders.trash_root, ec);

    BatchResult result;
    const std::string tag = options.shard.tag();
    result.journal_path = journalPath(options.output_root, options.shard);
    result.summary_path = (state / ("summary-" + tag + ".json")).string();
    result.metrics_path = options.metrics_path.empty()
                              ? (state / ("metrics-" + tag + ".prom")).string()
                              : options.metrics_path;
    VOXSEG_ASSIGN_OR_RETURN(Journal journal, Journal::open(result.journal_path));
    removeStaleTemps(result.summary_path);
    removeStaleTemps(result.metrics_path);

    std::vector<engine::DeviceSpec> devices =
        options.devices.empty() ? std::vector<engine::DeviceSpec>{options.segment.device}
                                : options.devices;
    const int cores = options.segment.threads > 0
                          ? options.segment.threads
                          : static_cast<int>(std::thread::hardware_concurrency());
    const auto model_t0 = Clock::now();
    VOXSEG_ASSIGN_OR_RETURN(std::vector<pipeline::Segmenter> segmenters,
                            createWorkers(options, cores, devices));

    BatchStats stats;
    stats.shard = std::to_string(options.shard.index) + "/" + std::to_string(options.shard.count);
    stats.model_name = segmenters[0].model().name;
    stats.model_sha256 = segmenters[0].modelSha256();
    stats.options_hash = optionsHash(options);
    for (const auto& d : devices) stats.devices.push_back(d.toString());
    stats.cases_total = static_cast<int>(all_cases.size());
    stats.started = unixNow();
    // A worker that replaced a dead one reports the whole run (batch/supervisor.h).
    const double earlier_workers =
        options.run_started > 0 ? std::max(0.0, stats.started - options.run_started) : 0.0;
    if (earlier_workers > 0) stats.started = options.run_started;
    stats.model_load_seconds = secondsSince(model_t0);
    if (options.on_ready) options.on_ready(stats.model_sha256, stats.options_hash);

    VOXSEG_ASSIGN_OR_RETURN(const std::vector<BatchCase> todo,
                            casesToRun(all_cases, options, state, folders, stats));
    log::info(kComponent, "shard {} ({}): {} of {} cases, {} already done, {} to run on {}",
              stats.shard, options.shard.source, stats.cases_in_shard, stats.cases_total,
              stats.skipped, todo.size(), fmt::format("{}", fmt::join(stats.devices, ",")));

    Recorder recorder(std::move(journal), stats, result.metrics_path, on_case,
                      t0 - std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(earlier_workers)));
    {
        auto st = writeMetrics(stats, true, result.metrics_path);
        if (!st.isOk()) log::warning(kComponent, "metrics file not written: {}", st.toString());
    }
    // A signal that arrived after the last case still counts as a stop only if work was left.
    result.stop = CasePipeline(options, signal, segmenters, todo, folders, recorder, cores).run();

    // Anything a killed run could have left for these cases.
    for (const auto& c : todo) fs::remove_all(folders.staging_root / c.id, ec);

    result.stats = recorder.finish();
    if (result.stop == StopReason::kSignal) result.stats.stopped = "signal";
    if (result.stop == StopReason::kDiskFull) result.stats.stopped = "disk_full";
    if (result.stop == StopReason::kSignal && result.stats.pending() == 0 &&
        result.stats.interrupted == 0) {
        result.stop = StopReason::kNone;  // the signal came after the last case: nothing lost
        result.stats.stopped.clear();
    }
    VOXSEG_RETURN_IF_ERROR(writeSummary(result.stats, result.summary_path));
    if (auto st = writeMetrics(result.stats, false, result.metrics_path); !st.isOk())
        log::warning(kComponent, "metrics file not written: {}", st.toString());
    return result;
}

}  // namespace voxseg::batch
