#include "pipeline/labels.h"

namespace voxseg::pipeline {

std::string labelName(const std::vector<LabelInfo>& labels, int value) {
    for (const LabelInfo& l : labels)
        if (l.value == value && !l.name.empty()) return l.name;
    return "label " + std::to_string(value);
}

std::array<uint8_t, 3> labelColor(const std::vector<LabelInfo>& labels, int value) {
    for (const LabelInfo& l : labels)
        if (l.value == value) return l.color;
    // Slicer's GenericColors-like palette for labels the model does not describe.
    static constexpr std::array<std::array<uint8_t, 3>, 8> kPalette{{{128, 174, 128},
                                                                     {241, 214, 145},
                                                                     {177, 122, 101},
                                                                     {111, 184, 210},
                                                                     {216, 101, 79},
                                                                     {221, 130, 101},
                                                                     {144, 238, 144},
                                                                     {192, 104, 88}}};
    return kPalette[static_cast<size_t>(value) % kPalette.size()];
}

}  // namespace voxseg::pipeline
