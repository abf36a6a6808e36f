#include "batch/journal.h"

#include "core/json_integer.h"
#include "core/log.h"

#include <algorithm>
#include <filesystem>

namespace voxseg::batch {
namespace fs = std::filesystem;

const char* caseStateName(CaseState state) {
    switch (state) {
        case CaseState::kDone:
            return "done";
        case CaseState::kFailed:
            return "failed";
        case CaseState::kInterrupted:
            return "interrupted";
    }
    return "failed";
}

nlohmann::json JournalEntry::toJson() const {
    nlohmann::json j;
    j["case_id"] = case_id;
    j["state"] = caseStateName(state);
    j["input"] = input;
    if (!series.empty()) j["series"] = series;
    j["model_sha256"] = model_sha256;
    j["options_hash"] = options_hash;
    if (state == CaseState::kDone) {
        nlohmann::json files = nlohmann::json::array();
        for (const auto& f : this->files) files.push_back({{"name", f.name}, {"bytes", f.bytes}});
        j["files"] = files;
    }
    if (!error.empty()) j["error"] = error;
    if (!error_code.empty()) j["error_code"] = error_code;
    if (worker_died) j["worker_died"] = true;
    j["seconds"] = seconds;
    j["time"] = time;
    return j;
}

Result<JournalEntry> JournalEntry::fromJson(const nlohmann::json& j) {
    if (!j.is_object() || !j.contains("case_id") || !j["case_id"].is_string() ||
        !j.contains("state") || !j["state"].is_string())
        return corruptData("journal line without case_id/state");
    JournalEntry e;
    e.case_id = j["case_id"].get<std::string>();
    const std::string state = j["state"].get<std::string>();
    if (state == "done")
        e.state = CaseState::kDone;
    else if (state == "failed")
        e.state = CaseState::kFailed;
    else if (state == "interrupted")
        e.state = CaseState::kInterrupted;
    else
        return corruptData("journal line with unknown state '" + state + "'");
    // json::value() throws when a key holds another type ("input": 1.25, found by
    // fuzz_batch_journal): such a line is corrupt, as one that is not JSON.
    try {
        e.input = j.value("input", "");
        e.series = j.value("series", "");
        e.model_sha256 = j.value("model_sha256", "");
        e.options_hash = j.value("options_hash", "");
        e.error = j.value("error", "");
        e.error_code = j.value("error_code", "");
        e.worker_died = j.value("worker_died", false);
        e.seconds = j.value("seconds", 0.0);
        e.time = j.value("time", 0.0);
        if (j.contains("files") && j["files"].is_array())
            for (const auto& f : j["files"]) {
                if (!f.is_object() || !f.contains("name") || !f["name"].is_string())
                    return corruptData("journal line with a malformed files list");
                const auto bytes = jsonInteger<uint64_t>(f, "bytes", 0);
                if (!bytes) return corruptData("journal line whose file size is not a byte count");
                e.files.push_back({f["name"].get<std::string>(), *bytes});
            }
    } catch (const nlohmann::json::exception& ex) {
        return corruptData(std::string("journal line with a field of the wrong type: ") +
                           ex.what());
    }
    return e;
}

Result<Journal> Journal::open(const std::string& path) {
    Journal j;
    VOXSEG_ASSIGN_OR_RETURN(
        j.file_, JournalFile::open(path, {.what = "the journal", .create_folders = true}));
    return j;
}

Status Journal::append(const JournalEntry& entry) {
    return file_.append(
        entry.toJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

Result<std::vector<JournalEntry>> readJournalFile(const std::string& path, int* skipped) {
    std::vector<JournalEntry> out;
    int bad = 0;
    auto parse = [&](std::string_view line, int) -> Status {
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded()) return corruptData("not JSON");
        auto e = JournalEntry::fromJson(j);
        if (e.isOk())
            out.push_back(std::move(*e));
        else
            ++bad;  // a JSON line that is not an entry: its case is redone
        return Status::ok();
    };
    VOXSEG_ASSIGN_OR_RETURN(const JournalReadReport report,
                            readJournalLines(path, "the journal", parse));
    if (skipped) *skipped = bad + (report.torn_line > 0 ? 1 : 0);
    return out;
}

Result<std::map<std::string, JournalEntry>> readJournals(const std::string& folder) {
    std::map<std::string, JournalEntry> latest;
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) return latest;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(folder, ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("journal-", 0) == 0 && e.path().extension() == ".jsonl")
            files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
        int skipped = 0;
        VOXSEG_ASSIGN_OR_RETURN(auto entries, readJournalFile(f.string(), &skipped));
        if (skipped > 0)
            log::warning("batch",
                         "{}: {} unreadable journal line(s) skipped (a run killed "
                         "mid-write); those cases are redone",
                         f.string(), skipped);
        for (auto& e : entries) {
            auto it = latest.find(e.case_id);
            if (it == latest.end() || e.time >= it->second.time) latest[e.case_id] = std::move(e);
        }
    }
    return latest;
}

}  // namespace voxseg::batch
