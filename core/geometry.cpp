#include "core/geometry.h"

#include <algorithm>
#include <cmath>

namespace voxseg {

Vec3 multiply(const Mat3& m, const Vec3& v) {
    return {m[0] * v[0] + m[1] * v[1] + m[2] * v[2], m[3] * v[0] + m[4] * v[1] + m[5] * v[2],
            m[6] * v[0] + m[7] * v[1] + m[8] * v[2]};
}

Vec3 cross(const Vec3& a, const Vec3& b) {
    return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}

double dot(const Vec3& a, const Vec3& b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
double norm(const Vec3& a) { return std::sqrt(dot(a, a)); }

VoxelSpan voxelSpan(double lo, double hi, int64_t size) {
    const double last = static_cast<double>(size - 1);
    // Written so that NaN fails every comparison and gives the empty span.
    if (!(size > 0 && lo <= hi && hi >= 0.0 && lo <= last)) return {};
    return {static_cast<int64_t>(std::max(0.0, std::floor(lo))),
            static_cast<int64_t>(std::min(last, std::ceil(hi)))};
}

Mat3 invert(const Mat3& m) {
    const double det = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
                       m[2] * (m[3] * m[7] - m[4] * m[6]);
    const double d = det == 0.0 ? 0.0 : 1.0 / det;
    return {(m[4] * m[8] - m[5] * m[7]) * d, (m[2] * m[7] - m[1] * m[8]) * d,
            (m[1] * m[5] - m[2] * m[4]) * d, (m[5] * m[6] - m[3] * m[8]) * d,
            (m[0] * m[8] - m[2] * m[6]) * d, (m[2] * m[3] - m[0] * m[5]) * d,
            (m[3] * m[7] - m[4] * m[6]) * d, (m[1] * m[6] - m[0] * m[7]) * d,
            (m[0] * m[4] - m[1] * m[3]) * d};
}

Vec3 Geometry::indexToPhysical(const Vec3& index) const {
    const Vec3 scaled{index[0] * spacing[0], index[1] * spacing[1], index[2] * spacing[2]};
    const Vec3 d = multiply(direction, scaled);
    return {origin[0] + d[0], origin[1] + d[1], origin[2] + d[2]};
}

Vec3 Geometry::physicalToIndex(const Vec3& point) const {
    const Vec3 rel{point[0] - origin[0], point[1] - origin[1], point[2] - origin[2]};
    const Vec3 s = multiply(invert(direction), rel);
    return {s[0] / spacing[0], s[1] / spacing[1], s[2] / spacing[2]};
}

std::string Geometry::orientationCode() const {
    // Letter for the positive direction of each LPS axis and its negative.
    static const char kPos[3] = {'L', 'P', 'S'};
    static const char kNeg[3] = {'R', 'A', 'I'};
    std::string code;
    for (int axis = 0; axis < 3; ++axis) {
        const Vec3 v = axisDirection(axis);
        int best = 0;
        for (int c = 1; c < 3; ++c)
            if (std::abs(v[c]) > std::abs(v[best])) best = c;
        code += v[best] >= 0 ? kPos[best] : kNeg[best];
    }
    return code;
}

double Geometry::obliquityDegrees() const {
    double worst = 0.0;
    for (int axis = 0; axis < 3; ++axis) {
        const Vec3 v = axisDirection(axis);
        const double m = std::max({std::abs(v[0]), std::abs(v[1]), std::abs(v[2])}) / norm(v);
        worst = std::max(worst, std::acos(std::clamp(m, -1.0, 1.0)) * 180.0 / M_PI);
    }
    return worst;
}

bool Geometry::isFinite() const {
    for (int i = 0; i < 3; ++i)
        if (!std::isfinite(spacing[i]) || spacing[i] <= 0 || !std::isfinite(origin[i]))
            return false;
    return std::all_of(direction.begin(), direction.end(),
                       [](double d) { return std::isfinite(d); });
}

bool Geometry::approxEqual(const Geometry& o, double origin_tol_mm, double spacing_rel,
                           double direction_tol) const {
    if (size != o.size) return false;
    for (int i = 0; i < 3; ++i) {
        if (std::abs(origin[i] - o.origin[i]) > origin_tol_mm) return false;
        if (std::abs(spacing[i] - o.spacing[i]) > spacing_rel * std::max(spacing[i], o.spacing[i]))
            return false;
    }
    for (int i = 0; i < 9; ++i)
        if (std::abs(direction[i] - o.direction[i]) > direction_tol) return false;
    return true;
}

}  // namespace voxseg
