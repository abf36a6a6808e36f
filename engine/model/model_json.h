// Reading and writing model.json, internal to engine/: the typed JSON reader that names every
// key path in its errors, the v1 value readers/writers shared by both format versions
// (engine/model/model_json.cpp), and the format version 2 stage readers/writers and stage network
// loading (engine/model/model_stages.cpp). engine/model/model_package.cpp holds the public entry
// points.
#pragma once

#include "engine/model/model_package.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace voxseg::engine::detail {

using nlohmann::json;

inline const char* jsonTypeName(const json& j) {
    if (j.is_null()) return "null";
    if (j.is_boolean()) return "a boolean";
    if (j.is_number_integer() || j.is_number_unsigned()) return "an integer";
    if (j.is_number()) return "a number";
    if (j.is_string()) return "a string";
    if (j.is_array()) return "an array";
    return "an object";
}

inline std::string shortDump(const json& j) {
    std::string s = j.dump();
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return s;
}

// Reads typed values out of model.json, remembering the first error. Every accessor names the
// key path ("labels[2].color") and what was expected.
class Reader {
  public:
    explicit Reader(std::string source) : source_(std::move(source)) {}

    bool ok() const { return status_.isOk(); }
    const Status& status() const { return status_; }

    void fail(const std::string& key, const std::string& what) {
        if (!status_.isOk()) return;
        status_ = invalidArgument(
            "model.json key '" + key + "': " + what + " (see docs/model-package.md for the format)",
            source_);
    }
    void failType(const std::string& key, const std::string& expected, const json& got) {
        fail(key, "expected " + expected + ", got " + jsonTypeName(got) + " " + shortDump(got));
    }

    // The member, or nullptr (with an error when required).
    const json* member(const json& obj, const std::string& prefix, const std::string& key,
                       bool required) {
        auto it = obj.find(key);
        if (it == obj.end()) {
            if (required) fail(join(prefix, key), "missing (required)");
            return nullptr;
        }
        return &*it;
    }

    // Rejects keys not in `allowed` (typos such as "overlapp" would otherwise be ignored);
    // keys starting with '_' are free for comments and extensions.
    void onlyKeys(const json& obj, const std::string& prefix,
                  std::initializer_list<const char*> allowed) {
        for (auto it = obj.begin(); it != obj.end(); ++it) {
            const std::string& k = it.key();
            if (!k.empty() && k[0] == '_') continue;
            if (std::none_of(allowed.begin(), allowed.end(),
                             [&](const char* a) { return k == a; })) {
                std::string list;
                for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
                fail(join(prefix, k), "unknown key; allowed here: " + list +
                                          " (prefix a key with '_' for comments)");
                return;
            }
        }
    }

    std::string string(const json& j, const std::string& key, bool allow_empty = false) {
        if (!j.is_string()) {
            failType(key, "a string", j);
            return {};
        }
        std::string s = j.get<std::string>();
        if (s.empty() && !allow_empty) fail(key, "must not be empty");
        return s;
    }
    double number(const json& j, const std::string& key) {
        if (!j.is_number()) {
            failType(key, "a number", j);
            return 0.0;
        }
        const double v = j.get<double>();
        if (!std::isfinite(v)) fail(key, "must be finite");
        return v;
    }
    int64_t integer(const json& j, const std::string& key, int64_t lo, int64_t hi) {
        if (!j.is_number_integer() && !j.is_number_unsigned()) {
            failType(key, "an integer", j);
            return 0;
        }
        if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(hi)) {
            fail(key, "expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi) +
                          ", got " + shortDump(j));
            return 0;
        }
        const int64_t v = j.get<int64_t>();
        if (v < lo || v > hi)
            fail(key, "expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi) +
                          ", got " + std::to_string(v));
        return v;
    }
    bool boolean(const json& j, const std::string& key) {
        if (!j.is_boolean()) {
            failType(key, "true or false", j);
            return false;
        }
        return j.get<bool>();
    }
    bool array(const json& j, const std::string& key, const std::string& of) {
        if (!j.is_array()) {
            failType(key, "an array of " + of, j);
            return false;
        }
        return true;
    }
    bool object(const json& j, const std::string& key) {
        if (!j.is_object()) {
            failType(key, "an object", j);
            return false;
        }
        return true;
    }

    static std::string join(const std::string& prefix, const std::string& key) {
        return prefix.empty() ? key : prefix + "." + key;
    }
    static std::string index(const std::string& key, size_t i) {
        return key + "[" + std::to_string(i) + "]";
    }

  private:
    std::string source_;
    Status status_;
};

// model.json values shared by both format versions (engine/model/model_json.cpp).
bool isHex64(const std::string& s);
bool validOrientation(const std::string& code);
bool readPair(Reader& r, const json& j, const std::string& key, const std::string& what, double& a,
              double& b, bool ordered = true);
// `stages`: version 2 (percentile's "percentiles_of" names a stage).
void readNormalization(Reader& r, const json& j, const std::string& key, Normalization& n,
                       bool stages);
void readInference(Reader& r, const json& v, const std::string& ikey, int64_t rank,
                   InferenceSpec& inf);
std::optional<CodedConcept> readConcept(Reader& r, const json& j, const std::string& key);
json conceptJson(const CodedConcept& c);
void readIntArray(Reader& r, const json& j, const std::string& key, int64_t lo, int64_t hi,
                  std::vector<int64_t>& out);
// `precision`: {"requires_fp32": bool, "reason": string}.
void readPrecision(Reader& r, const json& j, const std::string& key, PrecisionSpec& out);
json precisionJson(const PrecisionSpec& spec);
json normalizationJson(const Normalization& n);
// channels[i].name (default: the modality for one channel, "channel<i>" for several) and
// channels[i].match (series selection rules); `all` is the channels array.
void readChannelName(Reader& r, const json& c, const std::string& key, const json& all, size_t i,
                     ChannelSpec& ch);
json seriesMatchJson(const SeriesMatch& m);
json inferenceJson(const InferenceSpec& inf);

// Format version 2 (engine/model/model_stages.cpp): `stages` and `measurements`, their JSON form,
// and the import of each stage's network with its shapes checked.
void readStages(Reader& r, const json& root, ModelPackage& p);
json stageJson(const StageSpec& st);
Status loadStages(const std::filesystem::path& folder, LoadedModel& model);

}  // namespace voxseg::engine::detail
