// What the pipeline needs to know about a model's labels for statistics and previews: value,
// name and display colour. Filled from the model package's labels (engine/model/model_package.h) by
// the segment pipeline; kept minimal so stages do not depend on how models are stored.
// Plain value type.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace voxseg::pipeline {

struct LabelInfo {
    int value = 0;
    std::string name;
    std::array<uint8_t, 3> color{255, 0, 0};  // sRGB
};

// Name of `value` in `labels`, or "label <value>".
std::string labelName(const std::vector<LabelInfo>& labels, int value);

// Colour of `value` in `labels`, or a fixed distinct colour from a palette.
std::array<uint8_t, 3> labelColor(const std::vector<LabelInfo>& labels, int value);

}  // namespace voxseg::pipeline
