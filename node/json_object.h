// Strict reading of one JSON object of a configuration file: every key read is remembered, and
// finish() names the first key nobody asked for ("routes[1].match.modalty: unknown key"), so a
// typo in node.json is an error at start-up instead of a silently ignored setting.
//
// Errors name the key by its path from the root and say what was expected. Not thread-safe.
#pragma once

#include "core/status.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace voxseg::node {

class JsonObject {
  public:
    // `path` is how errors name this object ("" for the root, "routes[0]", ...); `file` is the
    // configuration file, the subject of every error.
    static Result<JsonObject> wrap(const nlohmann::json& value, std::string path, std::string file);

    bool has(const std::string& key) const;
    // The full name of `key` for messages ("routes[0].model").
    std::string keyPath(const std::string& key) const;

    Result<std::string> string(const std::string& key, std::optional<std::string> fallback = {});
    // A finite number in [min, max] (a setting past its range is refused naming the range, so
    // nothing downstream converts 1e300 seconds or megabytes into an integer).
    Result<double> number(const std::string& key, double min, double max,
                          std::optional<double> fallback = {});
    Result<int64_t> integer(const std::string& key, int64_t min, int64_t max,
                            std::optional<int64_t> fallback = {});
    Result<bool> boolean(const std::string& key, std::optional<bool> fallback = {});
    // A string or an array of strings (a single string is a list of one); missing: empty.
    Result<std::vector<std::string>> strings(const std::string& key);
    // Nested object (missing: an empty object when `optional`, else an error).
    Result<JsonObject> object(const std::string& key, bool optional = false);
    // Array of objects (missing: empty when `optional`).
    Result<std::vector<JsonObject>> objects(const std::string& key, bool optional = false);
    // Keys of the object, in file order (nlohmann sorts: use for maps of named entries).
    std::vector<std::string> keys() const;

    // kInvalidArgument naming the first key that was never read.
    Status finish() const;
    Status error(const std::string& key, const std::string& what) const;
    const std::string& file() const { return file_; }

  private:
    JsonObject(const nlohmann::json* value, std::string path, std::string file)
        : value_(value), path_(std::move(path)), file_(std::move(file)) {}
    const nlohmann::json* find(const std::string& key);

    const nlohmann::json* value_ = nullptr;
    std::string path_;
    std::string file_;
    std::set<std::string> read_;
};

}  // namespace voxseg::node
