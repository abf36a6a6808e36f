#include "pipeline/model_labels.h"

#include <algorithm>

namespace voxseg::pipeline {

Result<std::vector<int>> labelValuesByName(const engine::ModelPackage& model,
                                           const std::vector<std::string>& names) {
    std::vector<int> values;
    for (const std::string& name : names) {
        auto it = std::find_if(model.labels.begin(), model.labels.end(),
                               [&](const LabelInfo& l) { return l.name == name; });
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
    for (const LabelInfo& l : model.labels) {
        io::SegmentDescription d{l};
        d.name = l.name.substr(0, 64);  // SegmentLabel is at most 64 characters
        d.description = l.name;
        d.algorithm_name = model.name;
        out.push_back(std::move(d));
    }
    return out;
}

}  // namespace voxseg::pipeline
