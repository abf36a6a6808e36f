// Which route takes a series: the first route, in node.json's order, whose every condition
// holds (modality, body part, series description regex, calling AE, slice count). An empty
// condition matches anything. Pure function: thread-safe.
#pragma once

#include "node/config.h"
#include "node/series_info.h"

#include <string>

namespace voxseg::node {

// nullptr when no route matches; `why_not` (when given) then says, per route, the first
// condition that failed ("ct-liver: modality MR not in [CT]").
const Route* matchRoute(const NodeConfig& config, const SeriesInfo& series,
                        std::string* why_not = nullptr);

// Empty when `route` takes `series`, else the first failed condition.
std::string routeMismatch(const Route& route, const SeriesInfo& series);

}  // namespace voxseg::node
