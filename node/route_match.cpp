#include "node/route_match.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

namespace voxseg::node {
namespace {

constexpr size_t kSeriesDescriptionMatched = 64;

std::string upper(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return s;
}

bool anyOf(const std::vector<std::string>& allowed, const std::string& value, bool fold_case) {
    if (allowed.empty()) return true;
    for (const auto& a : allowed)
        if (fold_case ? upper(a) == upper(value) : a == value) return true;
    return false;
}

}  // namespace

std::string routeMismatch(const Route& route, const SeriesInfo& s) {
    const RouteMatch& m = route.match;
    if (!anyOf(m.modality, s.modality, true))
        return fmt::format("modality '{}' not in [{}]", s.modality, fmt::join(m.modality, ", "));
    if (!anyOf(m.body_part, s.body_part, true))
        return fmt::format("body part '{}' not in [{}]", s.body_part, fmt::join(m.body_part, ", "));
    // On the first 64 characters, SeriesDescription's most (VR LO): a sender's 1 MB value
    // would make libstdc++'s backtracking matcher recurse past the stack for patterns like
    // "portal.*venous".
    if (m.series_description_re &&
        !std::regex_search(s.series_description.substr(0, kSeriesDescriptionMatched),
                           *m.series_description_re))
        return fmt::format("series description does not match /{}/", m.series_description);
    if (!anyOf(m.calling_ae, s.calling_ae, false))
        return fmt::format("calling AE '{}' not in [{}]", s.calling_ae,
                           fmt::join(m.calling_ae, ", "));
    if (s.slices() < m.min_slices || s.slices() > m.max_slices)
        return fmt::format("{} slices outside {}..{}", s.slices(), m.min_slices, m.max_slices);
    return {};
}

const Route* matchRoute(const NodeConfig& config, const SeriesInfo& series, std::string* why_not) {
    std::string reasons;
    for (const auto& r : config.routes) {
        const std::string why = routeMismatch(r, series);
        if (why.empty()) return &r;
        if (!reasons.empty()) reasons += "; ";
        reasons += r.name + ": " + why;
    }
    if (why_not) *why_not = reasons;
    return nullptr;
}

}  // namespace voxseg::node
