#include "pipeline/model_labels.h"

#include <algorithm>

namespace voxseg::pipeline {

std::vector<LabelInfo> modelLabelInfos(const engine::ModelPackage& model) {
    std::vector<LabelInfo> out;
    for (const auto& l : model.labels) out.push_back({l.value, l.name, l.color});
    return out;
}

Result<std::vector<int>> labelValuesByName(const engine::ModelPackage& model,
                                           const std::vector<std::string>& names) {
    std::vector<int> values;
    for (const std::string& name : names) {
        auto it = std::find_if(model.labels.begin(), model.labels.end(),
                               [&](const engine::LabelSpec& l) { return l.name == name; });
        if (it == model.labels.end()) {
            std::string all;
            for (const auto& l : model.labels) all += (all.empty() ? "" : ", ") + l.name;
            return invalidArgument("--labels: model " + model.name + " has no label \"" + name +
                                       "\" (its labels: " + all + ")",
                                   model.folder.string());
        }
        values.push_back(it->value);
    }
    std::vector<int> ordered;  // the package's order, each once
    for (const auto& l : model.labels)
        if (std::find(values.begin(), values.end(), l.value) != values.end())
            ordered.push_back(l.value);
    return ordered;
}

engine::ModelPackage withOnlyLabels(const engine::ModelPackage& model,
                                    const std::vector<int>& values) {
    engine::ModelPackage out = model;
    auto wanted = [&](int v) { return std::find(values.begin(), values.end(), v) != values.end(); };
    out.labels.clear();
    for (const auto& l : model.labels)
        if (wanted(l.value)) out.labels.push_back(l);
    out.measurements.clear();
    for (const auto& m : model.measurements)
        if (std::all_of(m.labels.begin(), m.labels.end(), wanted)) out.measurements.push_back(m);
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
