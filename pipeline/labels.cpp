#include "pipeline/labels.h"

#include "core/label_colors.h"

namespace voxseg::pipeline {

std::string labelName(const std::vector<LabelInfo>& labels, int value) {
    for (const LabelInfo& l : labels)
        if (l.value == value && !l.name.empty()) return l.name;
    return "label " + std::to_string(value);
}

std::array<uint8_t, 3> labelColor(const std::vector<LabelInfo>& labels, int value) {
    for (const LabelInfo& l : labels)
        if (l.value == value) return l.color;
    // The viewer's perceptually spaced palette (core/label_colors.h), in its order: values 1,
    // 2, 3, ... of a map nothing describes get the colours a reader sees for them in the viewer
    // when it opens the same map.
    const std::vector<Rgb>& palette = labelPalette();
    const auto n = static_cast<int64_t>(palette.size());
    return palette[static_cast<size_t>(((int64_t{value} - 1) % n + n) % n)];
}

}  // namespace voxseg::pipeline
