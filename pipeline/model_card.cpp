#include "pipeline/model_card.h"

#include <fmt/format.h>

#include <algorithm>

namespace voxseg::pipeline {
namespace {

// 256, 35.2, 0.45: as a reader writes them (4 significant digits), as input_checks.cpp does.
std::string num(double v) { return fmt::format("{:.4g}", v); }

std::string range(const std::array<double, 2>& r) { return num(r[0]) + ".." + num(r[1]); }

std::string join(const std::vector<std::string>& items, const char* sep) {
    std::string out;
    for (const auto& i : items) out += (out.empty() ? "" : sep) + i;
    return out;
}

std::string labelName(const engine::ModelPackage& model, int value) {
    for (const auto& l : model.labels)
        if (l.value == value) return l.name;
    return "label " + std::to_string(value);
}

// "tiv_ml: volume of Brain in mL; total intracranial volume (...)".
std::string measurementSpecText(const engine::ModelPackage& model,
                                const engine::MeasurementSpec& m) {
    std::vector<std::string> names;
    for (int v : m.labels) names.push_back(labelName(model, v));
    std::string what = m.kind == "volume_ml" ? "volume of " + join(names, " + ") + " in mL"
                                             : m.kind + " of " + join(names, " + ");
    return m.name + ": " + what + (m.description.empty() ? "" : "; " + m.description);
}

// The channels' modalities, for a package that states no intended_input modality.
std::string channelModalities(const engine::ModelPackage& model) {
    std::vector<std::string> m;
    for (const auto& c : model.channels)
        if (!c.modality.empty() && std::find(m.begin(), m.end(), c.modality) == m.end())
            m.push_back(c.modality);
    return join(m, " + ");
}

}  // namespace

std::string describeIntendedInput(const engine::IntendedInput& in) {
    std::vector<std::string> parts;
    if (!in.modalities.empty()) parts.push_back(join(in.modalities, " or "));
    if (!in.body_region.empty()) parts.push_back(in.body_region);
    if (in.extent_mm.size() == 1) {
        parts.push_back("extent " + range(in.extent_mm[0]) + " mm on every axis");
    } else if (in.extent_mm.size() == 3) {
        parts.push_back("extent " + range(in.extent_mm[0]) + " x " + range(in.extent_mm[1]) +
                        " x " + range(in.extent_mm[2]) + " mm (axes i, j, k)");
    }
    if (in.spacing_mm) parts.push_back("spacing " + range(*in.spacing_mm) + " mm");
    if (in.expects_crop) parts.push_back("crops around the structure, not a whole image");
    return join(parts, "; ");
}

std::string measurementText(const Measurement& m) {
    return fmt::format("{} {:.1f}{}{}", m.name, m.value, m.unit.empty() ? "" : " " + m.unit,
                       m.description.empty() ? "" : " (" + m.description + ")");
}

std::vector<ModelCardEntry> modelCard(const engine::ModelPackage& model) {
    std::vector<ModelCardEntry> card;
    auto add = [&](const char* heading, const std::string& text) {
        if (!text.empty()) card.push_back({heading, text});
    };
    add("Model", model.name + (model.version.empty() ? "" : " " + model.version));
    add("Description", model.description);
    std::string intended;
    if (model.intended_input) intended = describeIntendedInput(*model.intended_input);
    if (!model.intended_input || model.intended_input->modalities.empty()) {
        const std::string m = channelModalities(model);
        if (!m.empty()) intended = m + (intended.empty() ? "" : "; " + intended);
    }
    add("Intended input", intended);
    add("Licence", model.license);
    add("Attribution", model.attribution);
    add("Citation", model.citation);
    add("Disclaimer", model.disclaimer);
    std::vector<std::string> measurements;
    for (const auto& m : model.measurements) measurements.push_back(measurementSpecText(model, m));
    add("Measurements", join(measurements, "\n"));
    std::vector<std::string> plausible;
    for (const auto& v : model.plausible_volumes)
        plausible.push_back(labelName(model, v.label) + " " + num(v.low_ml) + ".." +
                            num(v.high_ml) + " mL");
    add("Plausible results", join(plausible, "; "));
    return card;
}

}  // namespace voxseg::pipeline
