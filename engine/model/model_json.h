// Reading and writing model.json, internal to engine/: the reader that keeps the first error of
// core/json_object.h's checks (every message names the key path), the v1 value readers/writers
// shared by both format versions (engine/model/model_json.cpp), and the format version 2 stage
// readers/writers and stage network loading (engine/model/model_stages.cpp).
// engine/model/model_package.cpp holds the public entry points.
#pragma once

#include "core/json_object.h"
#include "engine/model/model_package.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace voxseg::engine::detail {

using nlohmann::json;

inline const char* jsonTypeName(const json& j) { return JsonDocument::typeName(j); }
inline std::string shortDump(const json& j) { return JsonDocument::shortDump(j); }

// Reads typed values out of model.json, remembering the first error (so the readers of a format
// with many keys read on without a check after each value). The checks and the messages are
// core/json_object.h's: every accessor names the key path ("labels[2].color") and what was
// expected; keys starting with '_' are free for comments.
class Reader {
  public:
    explicit Reader(std::string source)
        : doc_{.subject = std::move(source),
               .document = "model.json ",
               .quote = '\'',
               .help = "see docs/model-package.md for the format",
               .comment_keys = true} {}

    bool ok() const { return status_.isOk(); }
    const Status& status() const { return status_; }

    void fail(const std::string& key, const std::string& what) { record(doc_.error(key, what)); }
    void failType(const std::string& key, const std::string& expected, const json& got) {
        record(doc_.typeError(key, expected, got));
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

    // Rejects keys not in `allowed` (typos such as "overlapp" would otherwise be ignored).
    void onlyKeys(const json& obj, const std::string& prefix,
                  std::initializer_list<std::string_view> allowed) {
        record(doc_.onlyKeys(obj, prefix, allowed));
    }

    std::string string(const json& j, const std::string& key, bool allow_empty = false) {
        std::string s = take(doc_.string(j, key));
        if (ok() && s.empty() && !allow_empty) fail(key, "must not be empty");
        return s;
    }
    double number(const json& j, const std::string& key) {
        return take(doc_.number(j, key, -std::numeric_limits<double>::max(),
                                std::numeric_limits<double>::max()));
    }
    int64_t integer(const json& j, const std::string& key, int64_t lo, int64_t hi) {
        return take(doc_.integer(j, key, lo, hi));
    }
    bool boolean(const json& j, const std::string& key) { return take(doc_.boolean(j, key)); }
    bool array(const json& j, const std::string& key, const std::string& of) {
        if (!j.is_array()) failType(key, "an array of " + of, j);
        return j.is_array();
    }
    bool object(const json& j, const std::string& key) {
        if (!j.is_object()) failType(key, "an object", j);
        return j.is_object();
    }

    static std::string join(const std::string& prefix, const std::string& key) {
        return JsonDocument::join(prefix, key);
    }
    static std::string index(const std::string& key, size_t i) {
        return JsonDocument::index(key, i);
    }

  private:
    void record(Status s) {
        if (status_.isOk()) status_ = std::move(s);
    }
    template <typename T>
    T take(Result<T> r) {
        if (r.isOk()) return std::move(*r);
        record(r.status());
        return T{};
    }

    JsonDocument doc_;
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
// `intended_input` (IntendedInput) and labels[i].plausible_volume_ml (appended to `out`).
void readIntendedInput(Reader& r, const json& j, const std::string& key, IntendedInput& out);
json intendedInputJson(const IntendedInput& in);
void readPlausibleVolume(Reader& r, const json& j, const std::string& key, int label,
                         std::vector<PlausibleVolume>& out);

// Format version 2 (engine/model/model_stages.cpp): `stages` and `measurements`, their JSON form,
// and the import of each stage's network with its shapes checked.
void readStages(Reader& r, const json& root, ModelPackage& p);
json stageJson(const StageSpec& st);
Result<Graph> importStageGraph(const std::filesystem::path& folder, const ModelPackage& p,
                               size_t stage);
Status loadStages(const std::filesystem::path& folder, LoadedModel& model);

}  // namespace voxseg::engine::detail
