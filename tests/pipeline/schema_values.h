// For the tests that walk the segment option schema (pipeline/segment_options_schema.h): a value
// of an option that differs from its current one and that the option accepts, whatever its kind.
#pragma once

#include "pipeline/segment_options_schema.h"

#include <fmt/format.h>

#include <string>

namespace voxseg::testing {

inline std::string otherValue(const pipeline::SegmentOptionSpec& s,
                              const pipeline::SegmentOptions& o) {
    using Kind = pipeline::SegmentOptionSpec::Kind;
    const std::string now = s.current(o);
    switch (s.kind) {
        case Kind::kFlag:
            return now == "true" ? "false" : "true";
        case Kind::kNumber:
        case Kind::kInteger:
            return fmt::format("{}", now == fmt::format("{}", s.max) ? s.min : s.max);
        case Kind::kText:
            return now == "Liver" ? "Spleen" : "Liver";
        case Kind::kChoice:
        case Kind::kList:
            for (const auto& c : s.choices)
                if (c != now) return c;
    }
    return now;
}

}  // namespace voxseg::testing
