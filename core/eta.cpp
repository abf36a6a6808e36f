#include "core/eta.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace voxseg {

std::optional<double> EtaEstimator::update(double fraction, double elapsed_s) {
    if (!std::isfinite(fraction) || !std::isfinite(elapsed_s)) return std::nullopt;
    fraction = std::clamp(fraction, 0.0, 1.0);
    const bool backwards = fraction < high_fraction_;
    high_fraction_ = std::max(high_fraction_, fraction);
    if (backwards || fraction < kMinFraction || elapsed_s < kMinSeconds) return std::nullopt;
    return elapsed_s * (1.0 - fraction) / fraction;
}

std::string formatTimeLeft(double seconds) {
    seconds = std::max(0.0, seconds);
    if (seconds < 59.5) return fmt::format("about {} s left", std::max(1L, std::lround(seconds)));
    const long minutes = std::lround(seconds / 60.0);
    if (minutes < 60) return fmt::format("about {} min left", minutes);
    if (minutes % 60 == 0) return fmt::format("about {} h left", minutes / 60);
    return fmt::format("about {} h {} min left", minutes / 60, minutes % 60);
}

std::string progressText(double fraction, std::optional<double> seconds_left) {
    if (!std::isfinite(fraction)) fraction = 0;
    // Rounded down, with a little slack for 0.29 * 100 = 28.999...
    const int percent = static_cast<int>(std::floor(std::clamp(fraction, 0.0, 1.0) * 100 + 1e-9));
    std::string text = fmt::format("{} %", percent);
    if (seconds_left && *seconds_left >= 0.5) text += " - " + formatTimeLeft(*seconds_left);
    return text;
}

}  // namespace voxseg
