// Names and colours of label values for statistics and previews, from the labels a model package
// or a label map's files describe (core/label_info.h), with a fallback for values none describes.
// Plain functions.
#pragma once

#include "core/label_info.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace voxseg::pipeline {

// Name of `value` in `labels`, or "label <value>".
std::string labelName(const std::vector<LabelInfo>& labels, int value);

// Colour of `value` in `labels`, or for a value none describes the (value - 1)-th colour of the
// viewer's palette (core/label_colors.h labelPalette).
std::array<uint8_t, 3> labelColor(const std::vector<LabelInfo>& labels, int value);

}  // namespace voxseg::pipeline
