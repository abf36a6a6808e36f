#include "node/spool.h"

#include "core/atomic_file.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/sha256.h"
#include "node/spool_crypto.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace voxseg::node {
namespace fs = std::filesystem;
namespace {

constexpr const char* kComponent = "node";
constexpr const char* kAreas[] = {"tmp",     "incoming",  "queue",  "outbox",
                                  "results", "unmatched", "failed", "state"};

bool isUidLike(const std::string& s) {
    return !s.empty() && s.size() <= 64 && s.front() != '.' &&
           std::all_of(s.begin(), s.end(),
                       [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

// Newest modification time of the files in a folder, as a steady_clock time point.
std::chrono::steady_clock::time_point newestFileTime(const fs::path& dir) {
    auto newest = fs::file_time_type::min();
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
        newest = std::max(newest, e.last_write_time(ec));
    if (newest == fs::file_time_type::min()) return std::chrono::steady_clock::now();
    const auto age = fs::file_time_type::clock::now() - newest;
    return std::chrono::steady_clock::now() -
           std::chrono::duration_cast<std::chrono::steady_clock::duration>(age);
}

constexpr const char* kMarker = ".receiving-";

bool isMarker(const fs::path& p) { return p.filename().string().rfind(kMarker, 0) == 0; }

bool hasMarker(const fs::path& dir) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (isMarker(e.path())) return true;
    return false;
}

// Removes the markers of `dir` except those of the associations in `keep`.
void removeMarkers(const fs::path& dir, const std::set<uint64_t>& keep) {
    std::error_code ec;
    std::vector<fs::path> gone;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (isMarker(e.path())) {
            const std::string id = e.path().filename().string().substr(std::strlen(kMarker));
            if (!keep.count(std::strtoull(id.c_str(), nullptr, 10))) gone.push_back(e.path());
        }
    for (const auto& p : gone) fs::remove(p, ec);
}

void removeTemporaries(const fs::path& dir) {
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind(".tmp-", 0) == 0) fs::remove(e.path(), ec);
    }
}

}  // namespace

std::string seriesKey(const std::string& series_uid) {
    return isUidLike(series_uid) ? series_uid : "h" + sha256Hex(series_uid).substr(0, 40);
}

Result<std::unique_ptr<Spool>> Spool::open(const std::string& root) {
    std::error_code ec;
    for (const char* area : kAreas) {
        fs::create_directories(fs::path(root) / area, ec);
        if (ec)
            return ioError("cannot create the spool folder: " + ec.message(),
                           (fs::path(root) / area).string());
    }
    std::unique_ptr<Spool> spool(new Spool(root));
    // A process killed while writing leaves temporaries; none of them was acknowledged.
    removeTemporaries(fs::path(root) / "incoming");
    removeTemporaries(fs::path(root) / "outbox");
    fs::remove_all(fs::path(root) / "tmp", ec);
    fs::create_directories(fs::path(root) / "tmp", ec);
    for (const auto& e : fs::directory_iterator(fs::path(root) / "incoming", ec))
        if (e.is_directory(ec)) {
            auto s = readSeries(e.path().string());
            Arrival& a = spool->arrivals_[e.path().filename().string()];
            a.last = newestFileTime(e.path());
            a.study_uid = s.isOk() ? s->study_uid : std::string();
            a.interrupted = hasMarker(e.path());  // its sender was cut off by the stop
        }
    if (!spool->arrivals_.empty())
        log::info(kComponent, "{} series were still arriving before the restart",
                  spool->arrivals_.size());
    return spool;
}

std::unique_ptr<Spool> Spool::attach(const std::string& root) {
    return std::unique_ptr<Spool>(new Spool(root));
}

std::string Spool::dir(const std::string& area) const { return (fs::path(root_) / area).string(); }

std::string Spool::jobDir(const std::string& area, const std::string& job) const {
    return (fs::path(root_) / area / job).string();
}

Result<std::string> Spool::beginInstance(const SeriesInfo& series, const std::string& sop_uid,
                                         uint64_t association) {
    const std::string key = seriesKey(series.series_uid);
    const fs::path dir = fs::path(root_) / "incoming" / key;
    std::lock_guard<std::mutex> lock(mutex_);
    std::error_code ec;
    if (!fs::exists(dir / "series.json", ec)) {
        fs::create_directories(dir, ec);
        if (ec) return ioError("cannot create the series folder: " + ec.message(), dir.string());
        SeriesInfo first = series;
        first.first_received = unixNow();
        VOXSEG_RETURN_IF_ERROR(writeFileAtomically(
            (dir / "series.json").string(),
            first.toJson().dump(2, ' ', false, nlohmann::json::error_handler_t::replace)));
    }
    Arrival& a = arrivals_[key];
    if (association != 0 && !a.open.count(association)) {
        // Durable before the first instance of this association is acknowledged.
        VOXSEG_RETURN_IF_ERROR(writeFileAtomically(
            (dir / (kMarker + std::to_string(association))).string(), std::string()));
        a.open.insert(association);
    }
    a.study_uid = series.study_uid;
    ++a.in_flight;
    a.last = std::chrono::steady_clock::now();
    return (dir / (seriesKey(sop_uid) + ".dcm")).string();
}

void Spool::endInstance(const std::string& series_uid) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = arrivals_.find(seriesKey(series_uid));
    if (it == arrivals_.end()) return;
    --it->second.in_flight;
    it->second.last = std::chrono::steady_clock::now();
}

std::vector<std::string> Spool::endAssociation(uint64_t association, bool released) {
    std::vector<std::string> keys;
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [key, a] : arrivals_) {
        if (!a.open.erase(association)) continue;
        keys.push_back(key);
        a.last = std::chrono::steady_clock::now();
        if (released) {
            a.interrupted = false;
            removeMarkers(fs::path(root_) / "incoming" / key, a.open);
        } else {
            a.interrupted = true;
            log::warning(kComponent,
                         "series {}: its association ended without a release; waiting for the "
                         "sender to send it again",
                         key);
        }
    }
    return keys;
}

std::vector<std::string> Spool::takeCompleteSeries(double quiet_seconds, GroupBy group_by,
                                                   double interrupted_wait_seconds) {
    std::vector<std::string> taken;
    std::lock_guard<std::mutex> lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    // The newest arrival and the writes in flight of each group (a study, or the series alone
    // when grouping by series or when its study is unknown).
    auto groupOf = [group_by](const std::string& key, const Arrival& a) {
        return group_by == GroupBy::kStudy && !a.study_uid.empty() ? "study " + a.study_uid
                                                                   : "series " + key;
    };
    std::map<std::string, Arrival> groups;
    for (const auto& [key, a] : arrivals_) {
        Arrival& g = groups[groupOf(key, a)];
        g.last = std::max(g.last, a.last);
        g.in_flight += a.in_flight;
        g.interrupted = g.interrupted || a.interrupted;
    }
    for (auto it = arrivals_.begin(); it != arrivals_.end();) {
        const Arrival& g = groups[groupOf(it->first, it->second)];
        const double quiet = std::chrono::duration<double>(now - g.last).count();
        const double wait =
            g.interrupted ? std::max(quiet_seconds, interrupted_wait_seconds) : quiet_seconds;
        if (g.in_flight > 0 || quiet < wait) {
            ++it;
            continue;
        }
        const fs::path from = fs::path(root_) / "incoming" / it->first;
        std::error_code gone;
        if (!fs::exists(from, gone)) {  // removed by hand: nothing to queue
            it = arrivals_.erase(it);
            continue;
        }
        if (it->second.interrupted) {
            auto s = readSeries(from.string());
            log::warning(kComponent,
                         "series {}: not sent again within {:g} s of an interrupted "
                         "association; segmenting the {} instances received",
                         it->first, wait, s.isOk() ? s->instances : 0);
        }
        removeMarkers(from, {});
        // Job names sort by completion time; the key keeps them unique and findable.
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
        const std::string job = fmt::format("{}-{}", ms, sha256Hex(it->first).substr(0, 12));
        std::error_code ec;
        fs::rename(from, fs::path(root_) / "queue" / job, ec);
        if (ec) {
            log::error(kComponent, "cannot queue series folder {}: {}", from.string(),
                       ec.message());
            ++it;
            continue;
        }
        taken.push_back(job);
        it = arrivals_.erase(it);
    }
    return taken;
}

std::vector<std::string> Spool::jobs(const std::string& area) const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::path(root_) / area, ec))
        if (e.is_directory(ec) && e.path().filename().string().front() != '.')
            out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

Status Spool::move(const std::string& from_area, const std::string& job,
                   const std::string& to_area) {
    std::error_code ec;
    const fs::path to = fs::path(root_) / to_area / job;
    fs::remove_all(to, ec);
    fs::rename(fs::path(root_) / from_area / job, to, ec);
    if (ec) return ioError("cannot move job to " + to_area + ": " + ec.message(), job);
    return Status::ok();
}

int Spool::removeOlderThan(const std::string& area, double hours) {
    int removed = 0;
    std::error_code ec;
    const auto now = fs::file_time_type::clock::now();
    for (const auto& job : jobs(area)) {
        const fs::path p = fs::path(root_) / area / job;
        const auto t = fs::last_write_time(p, ec);
        if (ec) continue;
        if (std::chrono::duration<double, std::ratio<3600>>(now - t).count() >= hours) {
            fs::remove_all(p, ec);
            if (!ec) ++removed;
        }
    }
    return removed;
}

size_t Spool::incomingCount() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return arrivals_.size();
}

std::vector<std::string> Spool::interruptedSeries() const {
    std::vector<std::string> keys;
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [key, a] : arrivals_)
        if (a.interrupted) keys.push_back(key);
    return keys;
}

Result<SeriesInfo> Spool::readSeries(const std::string& job_dir) {
    auto text = readFileBytes((fs::path(job_dir) / "series.json").string());
    if (!text.isOk()) return notFound("no series.json", job_dir);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(*text);
    } catch (const nlohmann::json::exception& e) {
        return corruptData(std::string("series.json: ") + e.what(), job_dir);
    }
    VOXSEG_ASSIGN_OR_RETURN(SeriesInfo s, SeriesInfo::fromJson(j));
    s.instances = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(job_dir, ec))
        if (e.path().extension() == ".dcm") ++s.instances;
    return s;
}

}  // namespace voxseg::node
