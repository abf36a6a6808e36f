#include "node/audit_log.h"

#include "core/log.h"

#include <chrono>
#include <ctime>

#include <fmt/format.h>

namespace voxseg::node {
namespace {

std::string isoNow() {
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() %
        1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    return fmt::format("{}.{:03d}Z", buf, static_cast<int>(ms));
}

// UIDs are kept as they are (they are not identifiers of a person, and a short patient ID
// could otherwise cut digits out of them); every other string is scrubbed.
void scrubStrings(nlohmann::json& j) {
    if (j.is_string()) {
        j = log::scrub(j.get<std::string>());
    } else if (j.is_object()) {
        for (auto it = j.begin(); it != j.end(); ++it) {
            const std::string& k = it.key();
            if (k.size() > 4 && k.compare(k.size() - 4, 4, "_uid") == 0) continue;
            scrubStrings(it.value());
        }
    } else if (j.is_array()) {
        for (auto& v : j) scrubStrings(v);
    }
}

}  // namespace

Status AuditLog::open(const std::string& path) {
    VOXSEG_ASSIGN_OR_RETURN(
        file_, JournalFile::open(
                   path, {.what = "the audit log", .sync = JournalSync::kFdatasync, .mode = 0640}));
    return Status::ok();
}

void AuditLog::record(const std::string& event, nlohmann::json fields) {
    if (!file_.isOpen()) return;
    if (!fields.is_object()) fields = nlohmann::json::object();
    scrubStrings(fields);
    nlohmann::json line = {{"time", isoNow()}, {"event", event}};
    line.update(fields);
    const Status written =
        file_.append(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    if (!written.isOk())
        log::error("node", "audit log {} not written: {}", file_.path(), written.message());
}

}  // namespace voxseg::node
