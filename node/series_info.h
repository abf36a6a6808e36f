// What the node knows about a received series before loading it: the header attributes routes
// match on, who sent it, and how many instances and frames arrived. Recorded in the spool
// (series.json) when the first instance arrives, so a restart routes the series the same way.
// No patient identifiers are kept here (names, IDs and birth dates stay in the DICOM files).
// Plain data.
#pragma once

#include "core/status.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace voxseg::node {

// What has to be quiet before series are routed (node.json group_by): each series on its own,
// or a whole study, whose series are then all routed together.
enum class GroupBy { kSeries, kStudy };

struct SeriesInfo {
    std::string study_uid;
    std::string series_uid;
    std::string sop_class_uid;
    std::string modality;
    std::string body_part;           // BodyPartExamined
    std::string series_description;  // SeriesDescription
    std::string calling_ae;
    std::string peer;             // caller's address
    int frames_per_instance = 1;  // NumberOfFrames of the first instance (enhanced: all slices)
    int instances = 0;            // counted in the spool when routed
    double first_received = 0.0;  // unix seconds

    int64_t slices() const {
        return int64_t{instances} * (frames_per_instance > 0 ? frames_per_instance : 1);
    }
    nlohmann::json toJson() const;
    static Result<SeriesInfo> fromJson(const nlohmann::json& j);
};

}  // namespace voxseg::node
