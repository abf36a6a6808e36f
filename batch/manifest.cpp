#include "batch/manifest.h"

#include "core/file_io.h"

#include "io/image_io.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace voxseg::batch {
namespace fs = std::filesystem;
namespace {

std::string resolve(const std::string& input, const std::string& base_dir) {
    if (input.empty() || base_dir.empty() || fs::path(input).is_absolute()) return input;
    return (fs::path(base_dir) / input).lexically_normal().string();
}

// A channel value: a path relative to the manifest when one exists there, else as given (a
// series index or UID of the case's input, or an absolute path).
std::string resolveChannel(const std::string& value, const std::string& base_dir) {
    std::error_code ec;
    const std::string resolved = resolve(value, base_dir);
    return fs::exists(resolved, ec) ? resolved : value;
}

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return {};
    const auto e = s.find_last_not_of(" \t\r\n");
    return s.substr(b, e - b + 1);
}

// One CSV record (RFC 4180 quoting within a line; manifests have no multi-line fields).
Result<std::vector<std::string>> splitCsv(const std::string& line) {
    std::vector<std::string> fields;
    std::string cur;
    bool quoted = false, was_quoted = false;
    for (size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (quoted) {
            if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
                cur += '"';
                ++i;
            } else if (c == '"') {
                quoted = false;
            } else {
                cur += c;
            }
        } else if (c == '"') {
            quoted = was_quoted = true;
        } else if (c == ',') {
            fields.push_back(was_quoted ? cur : trim(cur));
            cur.clear();
            was_quoted = false;
        } else {
            cur += c;
        }
    }
    if (quoted) return invalidArgument("unterminated quote");
    fields.push_back(was_quoted ? cur : trim(cur));
    return fields;
}

Status addCase(std::vector<BatchCase>& cases, std::set<std::string>& seen, BatchCase c,
               const std::string& where, size_t max_rows) {
    if (cases.size() >= max_rows)
        return invalidArgument(fmt::format("lists more than {} cases (limit {} rows per "
                                           "manifest): split it into several manifests, one per "
                                           "batch job, or raise --max-manifest-rows",
                                           max_rows, max_rows),
                               where);
    if (const std::string problem = caseIdProblem(c.id); !problem.empty())
        return invalidArgument("case id '" + c.id + "' " + problem, where);
    if (c.input.empty()) return invalidArgument("case " + c.id + " has no input", where);
    if (!seen.insert(c.id).second)
        return invalidArgument("case id " + c.id + " appears twice: case ids must be unique",
                               where);
    cases.push_back(std::move(c));
    return Status::ok();
}

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
}

}  // namespace

std::string caseIdProblem(const std::string& id) {
    if (id.empty()) return "is empty";
    if (id.size() > 200) return "is longer than 200 characters";
    if (id[0] == '.') return "starts with '.': use letters, digits, '.', '_' or '-'";
    for (unsigned char c : id)
        if (!std::isalnum(c) && c != '.' && c != '_' && c != '-')
            return "has a character other than letters, digits, '.', '_' or '-' (it names the "
                   "output folder)";
    return {};
}

Result<std::vector<BatchCase>> parseCsvManifest(const std::string& text,
                                                const std::string& base_dir,
                                                const std::string& name, size_t max_rows) {
    std::istringstream in(text);
    std::string line;
    int line_no = 0;
    int col_id = -1, col_input = -1, col_series = -1;
    std::vector<std::pair<int, std::string>> col_channels;  // column, channel name
    size_t columns = 0;
    std::vector<BatchCase> cases;
    std::set<std::string> seen;
    while (std::getline(in, line)) {
        ++line_no;
        if (line_no == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line = line.substr(3);  // BOM
        const std::string t = trim(line);
        if (t.empty() || t[0] == '#') continue;
        const std::string where = name + ":" + std::to_string(line_no);
        auto fields = splitCsv(line);
        if (!fields.isOk()) return invalidArgument(fields.status().message(), where);
        if (col_id < 0) {
            for (size_t i = 0; i < fields->size(); ++i) {
                const std::string h = lower((*fields)[i]);
                if (h == "case_id") col_id = static_cast<int>(i);
                if (h == "input") col_input = static_cast<int>(i);
                if (h == "series") col_series = static_cast<int>(i);
                if (h.rfind("channel:", 0) == 0) {
                    const std::string name = trim((*fields)[i].substr(8));
                    if (name.empty())
                        return invalidArgument(
                            "column \"" + (*fields)[i] + "\" names no channel (channel:NAME)",
                            where);
                    col_channels.emplace_back(static_cast<int>(i), name);
                }
            }
            if (col_id < 0 || col_input < 0)
                return invalidArgument(
                    "the first line must be a header naming the columns case_id,input[,series]",
                    where);
            columns = fields->size();
            continue;
        }
        if (fields->size() != columns)
            return invalidArgument("expected " + std::to_string(columns) + " fields, found " +
                                       std::to_string(fields->size()),
                                   where);
        BatchCase c;
        c.id = (*fields)[col_id];
        c.input = resolve((*fields)[col_input], base_dir);
        if (col_series >= 0) c.series = (*fields)[col_series];
        for (const auto& [col, name] : col_channels)
            if (!(*fields)[col].empty())
                c.channels.emplace_back(name, resolveChannel((*fields)[col], base_dir));
        VOXSEG_RETURN_IF_ERROR(addCase(cases, seen, std::move(c), where, max_rows));
    }
    if (col_id < 0) return invalidArgument("manifest is empty (no header row)", name);
    return cases;
}

Result<std::vector<BatchCase>> parseJsonLinesManifest(const std::string& text,
                                                      const std::string& base_dir,
                                                      const std::string& name, size_t max_rows) {
    std::istringstream in(text);
    std::string line;
    int line_no = 0;
    std::vector<BatchCase> cases;
    std::set<std::string> seen;
    while (std::getline(in, line)) {
        ++line_no;
        if (trim(line).empty()) continue;
        const std::string where = name + ":" + std::to_string(line_no);
        nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object())
            return invalidArgument("not a JSON object (one case per line)", where);
        BatchCase c;
        if (!j.contains("case_id") || !j["case_id"].is_string() || !j.contains("input") ||
            !j["input"].is_string())
            return invalidArgument("needs string keys \"case_id\" and \"input\"", where);
        c.id = j["case_id"].get<std::string>();
        c.input = resolve(j["input"].get<std::string>(), base_dir);
        if (j.contains("series")) {
            if (j["series"].is_string())
                c.series = j["series"].get<std::string>();
            else if (j["series"].is_number_integer())
                c.series = std::to_string(j["series"].get<int64_t>());
            else if (!j["series"].is_null())
                return invalidArgument("\"series\" must be an index or a UID", where);
        }
        if (j.contains("channels")) {
            if (!j["channels"].is_object())
                return invalidArgument(
                    "\"channels\" must be an object {\"NAME\": \"path or series\"}", where);
            for (auto it = j["channels"].begin(); it != j["channels"].end(); ++it) {
                if (!it.value().is_string())
                    return invalidArgument("channel \"" + it.key() + "\" must be a string", where);
                c.channels.emplace_back(it.key(),
                                        resolveChannel(it.value().get<std::string>(), base_dir));
            }
        }
        VOXSEG_RETURN_IF_ERROR(addCase(cases, seen, std::move(c), where, max_rows));
    }
    return cases;
}

Result<std::vector<BatchCase>> listCaseFolders(const std::string& root,
                                               const std::string& exclude) {
    std::error_code ec;
    fs::directory_iterator it(root, ec);
    if (ec) return ioError("cannot list the case folder: " + ec.message(), root);
    const fs::path excluded = exclude.empty() ? fs::path() : fs::weakly_canonical(exclude, ec);
    std::vector<BatchCase> cases;
    std::set<std::string> seen;
    for (const auto& e : it) {
        const std::string id = e.path().filename().string();
        if (id.empty() || id[0] == '.' || !e.is_directory(ec)) continue;
        if (!excluded.empty() && fs::weakly_canonical(e.path(), ec) == excluded) continue;
        BatchCase c;
        c.id = id;
        // A folder holding exactly one image file is that image; anything else is DICOM.
        std::vector<std::string> images;
        for (const auto& f : fs::directory_iterator(e.path(), ec))
            if (f.is_regular_file(ec) && io::isImageFile(f.path().string()))
                images.push_back(f.path().string());
        if (images.size() > 1)
            return invalidArgument("case folder holds " + std::to_string(images.size()) +
                                       " image files: keep one per case folder, or list the "
                                       "cases in a manifest",
                                   e.path().string());
        c.input = images.size() == 1 ? images[0] : e.path().string();
        VOXSEG_RETURN_IF_ERROR(
            addCase(cases, seen, std::move(c), e.path().string(), readLimits().manifest_rows));
    }
    std::sort(cases.begin(), cases.end(),
              [](const BatchCase& a, const BatchCase& b) { return a.id < b.id; });
    if (cases.empty()) return notFound("no case sub-folders in the input folder", root);
    return cases;
}

Result<std::vector<BatchCase>> readManifest(const std::string& path, size_t max_rows) {
    std::error_code ec;
    if (!fs::exists(path, ec)) return notFound("manifest or case folder not found", path);
    if (fs::is_directory(path, ec)) return listCaseFolders(path);
    VOXSEG_ASSIGN_OR_RETURN(
        const std::string text,
        readFileBytes(path, "the manifest",
                      {kMaxManifestBytes, "split it into several manifests (core/limits.h)"}));
    const std::string base = fs::absolute(path, ec).parent_path().string();
    const std::string ext = lower(fs::path(path).extension().string());
    bool json = ext == ".jsonl" || ext == ".ndjson" || ext == ".json";
    if (ext != ".csv" && !json) {
        const auto first = text.find_first_not_of(" \t\r\n");
        json = first != std::string::npos && text[first] == '{';
    }
    auto cases = json ? parseJsonLinesManifest(text, base, path, max_rows)
                      : parseCsvManifest(text, base, path, max_rows);
    if (cases.isOk() && cases->empty()) return invalidArgument("manifest lists no cases", path);
    return cases;
}

}  // namespace voxseg::batch
