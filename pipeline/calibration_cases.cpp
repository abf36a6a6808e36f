// Calibration and held-back cases (calibration_cases.h).
#include "pipeline/calibration_cases.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace voxseg::pipeline {

Result<HeldBackSpec> parseHeldBack(const std::string& text) {
    HeldBackSpec spec;
    const auto bad = [&] {
        return invalidArgument("--held-back '" + text +
                               "': give a number of cases (2) or a share of them (25%)");
    };
    if (text.empty()) return bad();
    size_t used = 0;
    try {
        if (text.back() == '%') {
            const double p = std::stod(text.substr(0, text.size() - 1), &used);
            if (used != text.size() - 1 || !(p > 0.0 && p < 100.0)) return bad();
            spec.fraction = p / 100.0;
            spec.min_count = 1;
            return spec;
        }
        const int n = std::stoi(text, &used);
        if (used != text.size() || n < 1) return bad();
        spec.count = n;
        return spec;
    } catch (const std::exception&) {
        return bad();
    }
}

Result<CalibrationSplit> splitCalibrationCases(const std::vector<CalibrationCase>& cases,
                                               const HeldBackSpec& spec, int min_cases) {
    std::set<std::string> ids;
    for (const CalibrationCase& c : cases)
        if (!ids.insert(c.id).second)
            return invalidArgument("calibration case id '" + c.id +
                                   "' appears twice: give every case its own id");
    const int n = static_cast<int>(cases.size());
    int held = spec.count;
    if (held < 0)
        held =
            std::max(spec.min_count,
                     static_cast<int>(std::floor(spec.fraction * static_cast<double>(n) + 1e-9)));
    if (n - held < min_cases || held < 1)
        return invalidArgument(fmt::format(
            "{} cases given: calibration needs at least {} to calibrate on (--min-cases) and {} "
            "held back to validate int8 against fp32 (--held-back): give {} or more "
            "representative cases, or lower --min-cases (fewer cases make ranges that miss "
            "what the model meets)",
            n, min_cases, std::max(held, 1), min_cases + std::max(held, 1)));
    // Held-back positions spread evenly: case floor((k + 0.5) n / held), k = 0..held-1.
    std::vector<bool> is_held(cases.size(), false);
    for (int k = 0; k < held; ++k)
        is_held[static_cast<size_t>((2 * k + 1) * n / (2 * held))] = true;
    CalibrationSplit split;
    for (size_t i = 0; i < cases.size(); ++i)
        (is_held[i] ? split.held_back : split.calibration).push_back(cases[i]);
    return split;
}

}  // namespace voxseg::pipeline
