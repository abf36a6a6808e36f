#include "edit/segment_meta.h"

#include "core/atomic_file.h"
#include "core/file_io.h"
#include "io/image_io.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>

namespace voxseg::edit {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kFormat = "voxseg-labels";

Json conceptJson(const CodedConcept& c) {
    return Json{{"code", c.code}, {"scheme", c.scheme}, {"meaning", c.meaning}};
}

Result<CodedConcept> conceptFrom(const Json& j, const std::string& where) {
    if (!j.is_object()) return invalidArgument(where + ": must be an object");
    CodedConcept c;
    for (const char* key : {"code", "scheme", "meaning"}) {
        if (!j.contains(key) || !j[key].is_string())
            return invalidArgument(fmt::format("{}: key \"{}\" must be a string", where, key));
    }
    c.code = j["code"].get<std::string>();
    c.scheme = j["scheme"].get<std::string>();
    c.meaning = j["meaning"].get<std::string>();
    if (c.code.empty()) return invalidArgument(where + ": empty code");
    return c;
}

bool sameConcept(const CodedConcept& a, const CodedConcept& b) {
    return a.code == b.code && a.scheme == b.scheme && a.meaning == b.meaning;
}

}  // namespace

bool SegmentMeta::operator==(const SegmentMeta& o) const {
    return value == o.value && name == o.name && color == o.color &&
           sameConcept(category, o.category) && sameConcept(type, o.type) && status == o.status &&
           algorithm_type == o.algorithm_type;
}

const char* reviewStatusName(ReviewStatus status) {
    switch (status) {
        case ReviewStatus::kNotReviewed:
            return "not reviewed";
        case ReviewStatus::kAccepted:
            return "accepted";
        case ReviewStatus::kCorrected:
            return "corrected";
        case ReviewStatus::kRejected:
            return "rejected";
    }
    return "not reviewed";
}

Result<ReviewStatus> parseReviewStatus(const std::string& name) {
    for (ReviewStatus s : {ReviewStatus::kNotReviewed, ReviewStatus::kAccepted,
                           ReviewStatus::kCorrected, ReviewStatus::kRejected})
        if (name == reviewStatusName(s)) return s;
    if (name == "not_reviewed") return ReviewStatus::kNotReviewed;
    return invalidArgument(fmt::format(
        "review status \"{}\": use \"not reviewed\", \"accepted\", \"corrected\" or \"rejected\"",
        name));
}

io::SegmentDescription toSegmentDescription(const SegmentMeta& meta) {
    io::SegmentDescription d;
    d.label_value = meta.value;
    d.label = meta.name.substr(0, 64);
    d.description = fmt::format("{}; review: {}", meta.name, reviewStatusName(meta.status));
    d.color = meta.color;
    d.category = meta.category;
    d.type = meta.type;
    d.algorithm_type = meta.algorithm_type;
    return d;
}

std::string segmentsToJson(const std::vector<SegmentMeta>& segments) {
    Json list = Json::array();
    for (const SegmentMeta& s : segments) {
        Json j{{"value", s.value},
               {"name", s.name},
               {"color", {s.color[0], s.color[1], s.color[2]}},
               {"category", conceptJson(s.category)},
               {"type", conceptJson(s.type)},
               {"review_status", reviewStatusName(s.status)}};
        if (!s.algorithm_type.empty()) j["algorithm_type"] = s.algorithm_type;
        list.push_back(std::move(j));
    }
    Json root{{"format", kFormat}, {"version", 1}, {"segments", std::move(list)}};
    return root.dump(2) + "\n";
}

Result<std::vector<SegmentMeta>> segmentsFromJson(const std::string& text) {
    Json root;
    try {
        root = Json::parse(text);
    } catch (const std::exception& e) {
        return invalidArgument(std::string("not JSON: ") + e.what());
    }
    if (!root.is_object() || root.value("format", "") != kFormat)
        return invalidArgument(
            fmt::format("not a label sidecar: \"format\" must be \"{}\"", kFormat));
    if (!root.contains("version") || root["version"] != 1)
        return unsupported("label sidecar version must be 1");
    if (!root.contains("segments") || !root["segments"].is_array())
        return invalidArgument("key \"segments\" must be an array");
    std::vector<SegmentMeta> out;
    int n = 0;
    for (const Json& j : root["segments"]) {
        const std::string where = fmt::format("segments[{}]", n++);
        if (!j.is_object()) return invalidArgument(where + ": must be an object");
        for (const auto& [key, value] : j.items()) {
            static const char* known[] = {"value", "name",          "color",         "category",
                                          "type",  "review_status", "algorithm_type"};
            if (std::find(std::begin(known), std::end(known), key) == std::end(known))
                return invalidArgument(fmt::format("{}: unknown key \"{}\"", where, key));
        }
        SegmentMeta m;
        if (!j.contains("value") || !j["value"].is_number_integer() || j["value"] < 1 ||
            j["value"] > 65535)
            return invalidArgument(where + ": key \"value\" must be an integer in [1, 65535]");
        m.value = j["value"].get<int>();
        if (!j.contains("name") || !j["name"].is_string())
            return invalidArgument(where + ": key \"name\" must be a string");
        m.name = j["name"].get<std::string>();
        const Json& c = j.value("color", Json());
        if (!c.is_array() || c.size() != 3)
            return invalidArgument(where + ": key \"color\" must be [r, g, b]");
        for (int i = 0; i < 3; ++i) {
            if (!c[i].is_number_integer() || c[i] < 0 || c[i] > 255)
                return invalidArgument(where + ": key \"color\" values must be 0..255");
            m.color[i] = c[i].get<uint8_t>();
        }
        VOXSEG_ASSIGN_OR_RETURN(
            m.category, conceptFrom(j.value("category", Json()), where + ": key \"category\""));
        VOXSEG_ASSIGN_OR_RETURN(m.type,
                                conceptFrom(j.value("type", Json()), where + ": key \"type\""));
        if (!j.contains("review_status") || !j["review_status"].is_string())
            return invalidArgument(where + ": key \"review_status\" must be a string");
        VOXSEG_ASSIGN_OR_RETURN(m.status, parseReviewStatus(j["review_status"].get<std::string>()));
        if (j.contains("algorithm_type")) {
            if (!j["algorithm_type"].is_string())
                return invalidArgument(where + ": key \"algorithm_type\" must be a string");
            m.algorithm_type = j["algorithm_type"].get<std::string>();
        }
        out.push_back(std::move(m));
    }
    return out;
}

Status writeSegmentsFile(const std::vector<SegmentMeta>& segments, const std::string& path) {
    return writeFileAtomically(path, segmentsToJson(segments));
}

Result<std::vector<SegmentMeta>> readSegmentsFile(const std::string& path) {
    VOXSEG_ASSIGN_OR_RETURN(std::string text, readFileBytes(path, "the label sidecar"));
    auto r = segmentsFromJson(text);
    if (!r.isOk()) return r.status().withContext(path + ": ");
    return r;
}

std::string sidecarPath(const std::string& output_path) {
    auto ends = [&](const std::string& suffix) {
        if (output_path.size() < suffix.size()) return false;
        for (size_t i = 0; i < suffix.size(); ++i)
            if (std::tolower(static_cast<unsigned char>(
                    output_path[output_path.size() - suffix.size() + i])) != suffix[i])
                return false;
        return true;
    };
    const std::string ext = io::imageExtension(output_path);
    if (!ext.empty()) return output_path.substr(0, output_path.size() - ext.size()) + ".json";
    if (ends(".dcm")) return output_path.substr(0, output_path.size() - 4) + ".review.json";
    return output_path + ".review.json";
}

}  // namespace voxseg::edit
