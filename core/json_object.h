// Strict reading of a JSON document (node.json, model.json, an edit journal line, a label
// sidecar): every value is checked for its type and range, every error names the key by its path
// from the root ("routes[1].match.modalty", "labels[2].color") and says what was expected and what
// was found, and an unknown key is an error instead of a silently ignored setting.
//
// JsonDocument says how the errors of one document read (its file, how a key is quoted, a pointer
// to the docs) and checks single values; JsonObject reads one object of it, remembering every key
// read so that finish() names the first key nobody asked for. Not thread-safe.
#pragma once

#include "core/status.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace voxseg {

// One JSON document being read: how its errors name it and its keys, and the checks of single
// values. An error reads `<document><key>: <what> (<help>)`, the key written as its path
// (`quote` 0), or as `key 'path'` / `key "path"`; the Status subject is `subject`.
struct JsonDocument {
    std::string subject;        // the file, subject of every error ("" for none)
    std::string document;       // written before the key, e.g. "model.json " ("" for none)
    char quote = 0;             // 0: `path: what`; '\'' or '"': `key 'path': what`
    std::string help;           // appended to every message as " (help)" unless empty
    bool comment_keys = false;  // keys starting with '_' are free (comments, extensions)

    // "a string", "an integer", ... for messages.
    static const char* typeName(const nlohmann::json& value);
    // The value as JSON, cut to 60 characters.
    static std::string shortDump(const nlohmann::json& value);
    // "a.b" (or "b" when `path` is empty) and "a[3]".
    static std::string join(const std::string& path, const std::string& key);
    static std::string index(const std::string& path, size_t i);

    // kInvalidArgument about the value at `path`.
    Status error(const std::string& path, const std::string& what) const;
    // "expected <expected>, got <type> <value>".
    Status typeError(const std::string& path, const std::string& expected,
                     const nlohmann::json& got) const;

    Result<std::string> string(const nlohmann::json& value, const std::string& path) const;
    // A finite number in [min, max] (a value past its range is refused naming the range, so
    // nothing downstream converts 1e300 seconds or megabytes into an integer).
    Result<double> number(const nlohmann::json& value, const std::string& path, double min,
                          double max) const;
    Result<int64_t> integer(const nlohmann::json& value, const std::string& path, int64_t min,
                            int64_t max) const;
    Result<bool> boolean(const nlohmann::json& value, const std::string& path) const;
    // The first key of `object` (at `path`) not in `allowed`, as "unknown key; allowed here: ...".
    Status onlyKeys(const nlohmann::json& object, const std::string& path,
                    const std::vector<std::string_view>& allowed) const;
    // A key that needs no reader (a comment, when `comment_keys`).
    bool freeKey(const std::string& key) const;
};

class JsonObject {
  public:
    // `path` is how errors name this object ("" for the root, "routes[0]", ...); `subject` is the
    // file, the subject of every error (errors name keys as `path: what`).
    static Result<JsonObject> wrap(const nlohmann::json& value, std::string path,
                                   std::string subject);
    static Result<JsonObject> wrap(const nlohmann::json& value, std::string path,
                                   JsonDocument document);

    bool has(const std::string& key) const;
    // The full name of `key` for messages ("routes[0].model").
    std::string keyPath(const std::string& key) const;

    Result<std::string> string(const std::string& key, std::optional<std::string> fallback = {});
    // A finite number in [min, max].
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
    // The raw value of `key` (marked as read), or nullptr when missing or null: for values of a
    // shape of their own ([x, y, z], [r, g, b]), checked by the caller.
    const nlohmann::json* value(const std::string& key);
    // Keys of the object (nlohmann sorts: use for maps of named entries).
    std::vector<std::string> keys() const;

    // kInvalidArgument naming the first key that was never read.
    Status finish() const;
    // kInvalidArgument naming the first key not in `allowed`, listing them (before reading, for
    // objects whose keys depend on a value read from them).
    Status onlyKeys(const std::vector<std::string_view>& allowed) const;
    Status error(const std::string& key, const std::string& what) const;
    const std::string& file() const { return document_->subject; }
    const JsonDocument& document() const { return *document_; }

  private:
    JsonObject(const nlohmann::json* value, std::string path,
               std::shared_ptr<const JsonDocument> document)
        : value_(value), path_(std::move(path)), document_(std::move(document)) {}
    static Result<JsonObject> wrap(const nlohmann::json& value, std::string path,
                                   std::shared_ptr<const JsonDocument> document);
    const nlohmann::json* find(const std::string& key);

    const nlohmann::json* value_ = nullptr;
    std::string path_;
    std::shared_ptr<const JsonDocument> document_;
    std::set<std::string> read_;
};

}  // namespace voxseg
