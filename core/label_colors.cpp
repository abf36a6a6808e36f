#include "core/label_colors.h"

#include <algorithm>
#include <cmath>
#include <string_view>

namespace voxseg {
namespace {

struct Lab {
    double l, a, b;
};

double linear(uint8_t c) {
    const double v = c / 255.0;
    return v <= 0.04045 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4);
}

Lab toLab(const Rgb& c) {
    const double r = linear(c[0]), g = linear(c[1]), b = linear(c[2]);
    // sRGB -> XYZ (D65), normalised by the white point.
    const double x = (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047;
    const double y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b;
    const double z = (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883;
    auto f = [](double t) {
        return t > 216.0 / 24389.0 ? std::cbrt(t) : (24389.0 / 27.0 * t + 16.0) / 116.0;
    };
    return {116.0 * f(y) - 16.0, 500.0 * (f(x) - f(y)), 200.0 * (f(y) - f(z))};
}

double distance(const Lab& p, const Lab& q) {
    return std::sqrt((p.l - q.l) * (p.l - q.l) + (p.a - q.a) * (p.a - q.a) +
                     (p.b - q.b) * (p.b - q.b));
}

struct StandardColor {
    std::string_view scheme, code, modifier;
    Rgb rgb;
};

constexpr StandardColor kStandard[] = {
#include "core/data/standard_colors.inc"
};

std::vector<Rgb> buildPalette() {
    constexpr int kSize = 128, kStep = 17;  // candidates: 16 levels per channel
    std::vector<Rgb> candidates;
    std::vector<Lab> labs;
    for (int r = 0; r <= 255; r += kStep)
        for (int g = 0; g <= 255; g += kStep)
            for (int b = 0; b <= 255; b += kStep) {
                const Rgb c{static_cast<uint8_t>(r), static_cast<uint8_t>(g),
                            static_cast<uint8_t>(b)};
                const Lab lab = toLab(c);
                // Coloured, neither dark nor washed out nor garish: it must stand out over grey.
                const double chroma = std::hypot(lab.a, lab.b);
                if (lab.l < 50 || lab.l > 85 || chroma < 30 || chroma > 80) continue;
                candidates.push_back(c);
                labs.push_back(lab);
            }
    std::vector<Rgb> palette{{221, 68, 51}};  // a red first, as most tools' label 1
    const Lab first = toLab(palette[0]);
    std::vector<double> nearest(candidates.size());
    for (size_t n = 0; n < candidates.size(); ++n) nearest[n] = distance(labs[n], first);
    while (static_cast<int>(palette.size()) < kSize) {
        const size_t best =
            static_cast<size_t>(std::max_element(nearest.begin(), nearest.end()) - nearest.begin());
        palette.push_back(candidates[best]);
        for (size_t n = 0; n < candidates.size(); ++n)
            nearest[n] = std::min(nearest[n], distance(labs[n], labs[best]));
    }
    return palette;
}

}  // namespace

const std::vector<Rgb>& labelPalette() {
    static const std::vector<Rgb> palette = buildPalette();
    return palette;
}

Rgb distinctColor(const std::vector<Rgb>& used) {
    const auto& palette = labelPalette();
    std::vector<Lab> taken;
    taken.reserve(used.size());
    for (const Rgb& c : used) taken.push_back(toLab(c));
    size_t best = 0;
    double best_distance = -1;
    for (size_t n = 0; n < palette.size(); ++n) {
        const Lab lab = toLab(palette[n]);
        double nearest = 1e9;
        for (const Lab& t : taken) nearest = std::min(nearest, distance(lab, t));
        if (nearest > best_distance + 1e-9) {
            best_distance = nearest;
            best = n;
        }
    }
    return palette[best];
}

std::optional<Rgb> standardColor(const CodedConcept& type,
                                 const std::optional<CodedConcept>& modifier) {
    const std::string_view m = modifier ? std::string_view(modifier->code) : std::string_view();
    const StandardColor* alone = nullptr;
    for (const StandardColor& s : kStandard) {
        if (s.scheme != type.scheme || s.code != type.code) continue;
        if (s.modifier == m) return s.rgb;
        if (s.modifier.empty()) alone = &s;
    }
    if (alone) return alone->rgb;
    return std::nullopt;
}

Rgb defaultLabelColor(const LabelInfo& label, const std::vector<Rgb>& used) {
    if (label.type != defaultLabelType())  // "Tissue" names no structure
        if (auto c = standardColor(label.type, label.type_modifier)) return *c;
    return distinctColor(used);
}

double colorDifference(const Rgb& a, const Rgb& b) { return distance(toLab(a), toLab(b)); }

}  // namespace voxseg
