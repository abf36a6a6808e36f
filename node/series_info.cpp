#include "node/series_info.h"

#include "core/json_integer.h"

namespace voxseg::node {

nlohmann::json SeriesInfo::toJson() const {
    return {{"study_uid", study_uid},
            {"series_uid", series_uid},
            {"sop_class_uid", sop_class_uid},
            {"modality", modality},
            {"body_part", body_part},
            {"series_description", series_description},
            {"calling_ae", calling_ae},
            {"peer", peer},
            {"frames_per_instance", frames_per_instance},
            {"instances", instances},
            {"first_received", first_received}};
}

Result<SeriesInfo> SeriesInfo::fromJson(const nlohmann::json& j) {
    try {
        SeriesInfo s;
        s.study_uid = j.at("study_uid").get<std::string>();
        s.series_uid = j.at("series_uid").get<std::string>();
        s.sop_class_uid = j.value("sop_class_uid", "");
        s.modality = j.value("modality", "");
        s.body_part = j.value("body_part", "");
        s.series_description = j.value("series_description", "");
        s.calling_ae = j.value("calling_ae", "");
        s.peer = j.value("peer", "");
        const auto frames = jsonInteger<int>(j, "frames_per_instance", 1);
        const auto instances = jsonInteger<int>(j, "instances", 0);
        if (!frames || !instances)
            return corruptData("series record: frames_per_instance or instances is not an int");
        s.frames_per_instance = *frames;
        s.instances = *instances;
        s.first_received = j.value("first_received", 0.0);
        return s;
    } catch (const nlohmann::json::exception& e) {
        return corruptData(std::string("series record: ") + e.what());
    }
}

}  // namespace voxseg::node
