#include "edit/segment_meta.h"

#include "core/atomic_file.h"
#include "core/file_io.h"
#include "core/json_object.h"
#include "io/dicom_charset.h"
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
constexpr const char* kReviewSeparator = "; review: ";
constexpr size_t kSegmentLabelBytes = 64;  // SegmentLabel and ROIName are LO: 64 characters

Json conceptJson(const CodedConcept& c) {
    return Json{{"code", c.code}, {"scheme", c.scheme}, {"meaning", c.meaning}};
}

// {"code", "scheme", "meaning"}: strings, the code not empty.
Result<CodedConcept> conceptFrom(JsonObject& o) {
    CodedConcept c;
    VOXSEG_ASSIGN_OR_RETURN(c.code, o.string("code"));
    VOXSEG_ASSIGN_OR_RETURN(c.scheme, o.string("scheme"));
    VOXSEG_ASSIGN_OR_RETURN(c.meaning, o.string("meaning"));
    if (c.code.empty()) return o.error("code", "must not be empty");
    return c;
}

// One entry of "segments".
Result<SegmentMeta> segmentFrom(JsonObject& o) {
    VOXSEG_RETURN_IF_ERROR(o.onlyKeys({"value", "name", "color", "category", "type",
                                       "type_modifier", "review_status", "algorithm_type"}));
    SegmentMeta m;
    VOXSEG_ASSIGN_OR_RETURN(const int64_t value, o.integer("value", 1, 65535));
    m.value = static_cast<int>(value);
    VOXSEG_ASSIGN_OR_RETURN(m.name, o.string("name"));
    const nlohmann::json* c = o.value("color");
    if (!c || !c->is_array() || c->size() != 3) return o.error("color", "must be [r, g, b]");
    for (size_t i = 0; i < 3; ++i) {
        VOXSEG_ASSIGN_OR_RETURN(
            const int64_t v,
            o.document().integer((*c)[i], JsonDocument::index(o.keyPath("color"), i), 0, 255));
        m.color[i] = static_cast<uint8_t>(v);
    }
    VOXSEG_ASSIGN_OR_RETURN(JsonObject category, o.object("category"));
    VOXSEG_ASSIGN_OR_RETURN(m.category, conceptFrom(category));
    VOXSEG_ASSIGN_OR_RETURN(JsonObject type, o.object("type"));
    VOXSEG_ASSIGN_OR_RETURN(m.type, conceptFrom(type));
    if (o.value("type_modifier") != nullptr) {
        VOXSEG_ASSIGN_OR_RETURN(JsonObject modifier, o.object("type_modifier"));
        VOXSEG_ASSIGN_OR_RETURN(CodedConcept tm, conceptFrom(modifier));
        m.type_modifier = tm;
    }
    VOXSEG_ASSIGN_OR_RETURN(const std::string status, o.string("review_status"));
    auto parsed = parseReviewStatus(status);
    if (!parsed.isOk()) return o.error("review_status", parsed.status().message());
    m.status = *parsed;
    VOXSEG_ASSIGN_OR_RETURN(m.algorithm_type, o.string("algorithm_type", ""));
    return m;
}

}  // namespace

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
    io::SegmentDescription d{meta};  // the label part
    d.name = io::charset::truncateUtf8(meta.name, kSegmentLabelBytes);
    // The status must survive writers that keep 64 characters of the description (voxseg's
    // SEG writer): a long name is cut there, never the status.
    const std::string status = std::string(kReviewSeparator) + reviewStatusName(meta.status);
    d.description =
        io::charset::truncateUtf8(meta.name, kSegmentLabelBytes - status.size()) + status;
    d.algorithm_type = meta.algorithm_type;
    return d;
}

std::optional<ReviewStatus> reviewStatusInDescription(const std::string& description) {
    const size_t at = description.rfind(kReviewSeparator);
    if (at == std::string::npos) return std::nullopt;
    auto status = parseReviewStatus(description.substr(at + std::strlen(kReviewSeparator)));
    if (!status.isOk()) return std::nullopt;
    return *status;
}

SegmentMeta fromSegmentDescription(const io::SegmentDescription& description) {
    SegmentMeta m;
    static_cast<LabelInfo&>(m) = description;  // the label part
    const std::string& text = description.description;
    if (const auto status = reviewStatusInDescription(text)) m.status = *status;
    for (const char* known : {"AUTOMATIC", "SEMIAUTOMATIC", "MANUAL"})
        if (description.algorithm_type == known) m.algorithm_type = known;
    return m;
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
        if (s.type_modifier) j["type_modifier"] = conceptJson(*s.type_modifier);
        if (!s.algorithm_type.empty()) j["algorithm_type"] = s.algorithm_type;
        list.push_back(std::move(j));
    }
    Json root{{"format", kFormat}, {"version", 1}, {"segments", std::move(list)}};
    return root.dump(2) + "\n";
}

Result<std::vector<SegmentMeta>> segmentsFromJson(const std::string& text) {
    nlohmann::json root;
    try {
        root = nlohmann::json::parse(text);
    } catch (const std::exception& e) {
        return invalidArgument(std::string("not JSON: ") + e.what());
    }
    if (!root.is_object() || root.value("format", "") != kFormat)
        return invalidArgument(
            fmt::format("not a label sidecar: \"format\" must be \"{}\"", kFormat));
    if (!root.contains("version") || root["version"] != 1)
        return unsupported("label sidecar version must be 1");
    VOXSEG_ASSIGN_OR_RETURN(JsonObject o, JsonObject::wrap(root, "", {.quote = '"'}));
    VOXSEG_ASSIGN_OR_RETURN(std::vector<JsonObject> segments, o.objects("segments"));
    std::vector<SegmentMeta> out;
    for (JsonObject& s : segments) {
        VOXSEG_ASSIGN_OR_RETURN(SegmentMeta m, segmentFrom(s));
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
