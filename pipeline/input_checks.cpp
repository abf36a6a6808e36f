#include "pipeline/input_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace voxseg::pipeline {
namespace {

using Range = std::array<double, 2>;

// 256, 35.2, 0.45: millimetres as a reader writes them (4 significant digits).
std::string mm(double v) { return fmt::format("{:.4g}", v); }

std::string triple(const std::array<double, 3>& v) {
    return mm(v[0]) + "x" + mm(v[1]) + "x" + mm(v[2]);
}

std::string range(const Range& r) { return mm(r[0]) + ".." + mm(r[1]); }

const char* axisName(int a) { return a == 0 ? "i" : a == 1 ? "j" : "k"; }

std::string modelName(const engine::ModelPackage& model) {
    return model.name.empty() ? std::string("the model") : "model " + model.name;
}

// " (intended input: head, ...; axis i is 2.8x too large)": the body region and `detail`.
std::string context(const engine::IntendedInput& in, const std::string& detail = {}) {
    std::string text = in.body_region.empty() ? "" : "intended input: " + in.body_region;
    if (!detail.empty()) text += (text.empty() ? "" : "; ") + detail;
    return text.empty() ? text : " (" + text + ")";
}

std::string modalityFinding(const engine::ModelPackage& model, const engine::IntendedInput& in,
                            const std::string& modality) {
    if (in.modalities.empty() || modality.empty()) return {};
    if (std::find(in.modalities.begin(), in.modalities.end(), modality) != in.modalities.end())
        return {};
    std::string list;
    for (const auto& m : in.modalities) list += (list.empty() ? "" : " or ") + m;
    return fmt::format("input modality {}, but {} is made for {}{}", modality, modelName(model),
                       list, context(in));
}

std::string extentFinding(const engine::ModelPackage& model, const engine::IntendedInput& in,
                          const Geometry& g) {
    if (in.extent_mm.empty()) return {};
    std::array<double, 3> extent{}, low{}, high{};
    for (int a = 0; a < 3; ++a) {
        extent[a] = static_cast<double>(g.size[a]) * g.spacing[a];
        const Range& r = in.extent_mm[in.extent_mm.size() == 1 ? 0 : a];
        low[a] = r[0];
        high[a] = r[1];
    }
    // The axis furthest outside, as a factor (2.8x too large, 3x too small).
    double worst = 1.0;
    int worst_axis = -1;
    bool too_large = false;
    for (int a = 0; a < 3; ++a) {
        const double over = high[a] > 0 ? extent[a] / high[a] : INFINITY;
        const double under = extent[a] > 0 ? low[a] / extent[a] : INFINITY;
        if (extent[a] > high[a] && over > worst) {
            worst = over, worst_axis = a, too_large = true;
        } else if (extent[a] < low[a] && under > worst) {
            worst = under, worst_axis = a, too_large = false;
        }
    }
    if (worst_axis < 0) return {};
    const std::string by = fmt::format("axis {} is {:.1f}x too {}", axisName(worst_axis), worst,
                                       too_large ? "large" : "small");
    if (in.expects_crop && too_large)
        return fmt::format(
            "input extent {} mm, but {} expects crops of at most {} mm{}: the result will be "
            "meaningless; crop the input around the structure",
            triple(extent), modelName(model), triple(high), context(in, by));
    std::string intended;
    for (int a = 0; a < 3; ++a) intended += (a ? " x " : "") + range({low[a], high[a]});
    return fmt::format(
        "input extent {} mm is outside the {} mm {} is made for{}: the result may "
        "be meaningless",
        triple(extent), intended, modelName(model), context(in, by));
}

std::string spacingFinding(const engine::ModelPackage& model, const engine::IntendedInput& in,
                           const Geometry& g) {
    if (!in.spacing_mm) return {};
    const Range& r = *in.spacing_mm;
    std::string off;
    for (int a = 0; a < 3; ++a)
        if (g.spacing[a] < r[0] || g.spacing[a] > r[1])
            off += fmt::format("{}axis {} {} mm", off.empty() ? "" : ", ", axisName(a),
                               mm(g.spacing[a]));
    if (off.empty()) return {};
    return fmt::format("input spacing {} mm is outside the {} mm {} is made for{}",
                       triple(g.spacing), range(r), modelName(model), " (" + off + ")");
}

}  // namespace

std::vector<ModalityMismatch> modalityMismatches(const engine::ModelPackage& model,
                                                 const std::vector<std::string>& modalities) {
    std::vector<ModalityMismatch> out;
    for (size_t c = 0; c < modalities.size() && c < model.channels.size(); ++c) {
        const std::string& want = model.channels[c].modality;
        const std::string& have = modalities[c];
        if (want.empty() || have.empty() || want == have) continue;
        out.push_back(
            {model.channels.size() > 1 ? model.channels[c].name : std::string(), have, want});
    }
    return out;
}

std::string modalityMismatchReason(const engine::ModelPackage& model, const ModalityMismatch& m) {
    const std::string which = m.channel.empty() ? std::string() : " (channel " + m.channel + ")";
    return "input" + which + " is " + m.have + " but model " + model.name + " expects " + m.want;
}

Status modalityRefusal(const engine::ModelPackage& model, const ModalityMismatch& m,
                       const std::string& how_to_override, const std::string& subject) {
    return invalidArgument(modalityMismatchReason(model, m) +
                               ": choose another series or model (or " + how_to_override +
                               " to run anyway)",
                           subject);
}

std::vector<std::string> checkIntendedInput(const engine::ModelPackage& model,
                                            const InputDescription& input, bool check_modality) {
    std::vector<std::string> findings;
    if (!model.intended_input) return findings;
    const engine::IntendedInput& in = *model.intended_input;
    for (std::string f :
         {check_modality ? modalityFinding(model, in, input.modality) : std::string(),
          extentFinding(model, in, input.geometry), spacingFinding(model, in, input.geometry)})
        if (!f.empty()) findings.push_back(std::move(f));
    return findings;
}

std::string inputWarning(const std::string& finding) {
    return finding + " (--strict-input refuses such inputs)";
}

Status strictInputRefusal(const engine::ModelPackage& model,
                          const std::vector<std::string>& findings, const std::string& subject) {
    std::string all;
    for (const auto& f : findings) all += (all.empty() ? "" : "; ") + f;
    return Status(StatusCode::kFailedPrecondition,
                  fmt::format("--strict-input: the input is not what {} is made for: {}. Give it "
                              "an input it is made for (model.json \"intended_input\"), or run "
                              "without --strict-input to segment it anyway",
                              modelName(model), all),
                  subject);
}

std::vector<std::string> flagImplausibleVolumes(const engine::ModelPackage& model,
                                                StatisticsReport& stats) {
    std::vector<std::string> warnings;
    for (LabelStatistics& s : stats.labels) {
        const auto it =
            std::find_if(model.plausible_volumes.begin(), model.plausible_volumes.end(),
                         [&](const engine::PlausibleVolume& v) { return v.label == s.label; });
        if (it == model.plausible_volumes.end()) continue;
        s.plausible_volume_ml = Range{it->low_ml, it->high_ml};
        s.implausible = s.volume_ml < it->low_ml || s.volume_ml > it->high_ml;
        if (!s.implausible) continue;
        const std::string factor =
            s.volume_ml > it->high_ml
                ? fmt::format("{:.1f}x the upper bound", s.volume_ml / it->high_ml)
                : std::string("below the lower bound");
        warnings.push_back(fmt::format(
            "implausible result: {} {:.2f} mL is outside the plausible {} mL of {} ({}): the "
            "input is probably not what the model is made for; check it before using the result",
            s.name, s.volume_ml, range(*s.plausible_volume_ml), modelName(model), factor));
    }
    return warnings;
}

}  // namespace voxseg::pipeline
