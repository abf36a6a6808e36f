#include "pipeline/model_labels.h"

namespace voxseg::pipeline {

std::vector<LabelInfo> modelLabelInfos(const engine::ModelPackage& model) {
    std::vector<LabelInfo> out;
    for (const auto& l : model.labels) out.push_back({l.value, l.name, l.color});
    return out;
}

std::vector<io::SegmentDescription> modelSegmentDescriptions(const engine::ModelPackage& model) {
    std::vector<io::SegmentDescription> out;
    for (const auto& l : model.labels) {
        io::SegmentDescription d;
        d.label_value = l.value;
        d.label = l.name.substr(0, 64);
        d.description = l.name;
        d.color = l.color;
        if (l.category) d.category = *l.category;
        if (l.type) d.type = *l.type;
        d.algorithm_name = model.name;
        out.push_back(std::move(d));
    }
    return out;
}

}  // namespace voxseg::pipeline
