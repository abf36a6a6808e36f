#include "edit/roi_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

namespace voxseg::edit {
namespace {

struct IndexRange {
    std::array<int64_t, 3> lo{0, 0, 0};
    std::array<int64_t, 3> hi{-1, -1, -1};  // inclusive; lo > hi: empty
};

// The index box (clamped to the grid) holding every voxel centre inside the convex hull of
// `corners_mm`: the index map is affine, so the hull's image lies in the box of the corners'.
IndexRange rangeOf(const Geometry& g, const std::vector<Vec3>& corners_mm) {
    std::array<double, 3> lo, hi;
    lo.fill(std::numeric_limits<double>::infinity());
    hi.fill(-std::numeric_limits<double>::infinity());
    for (const Vec3& c : corners_mm) {
        const Vec3 idx = g.physicalToIndex(c);
        for (int d = 0; d < 3; ++d) {
            lo[d] = std::min(lo[d], idx[d]);
            hi[d] = std::max(hi[d], idx[d]);
        }
    }
    IndexRange r;
    for (int d = 0; d < 3; ++d) {
        const VoxelSpan span = voxelSpan(lo[d], hi[d], g.size[d]);
        r.lo[d] = span.first;
        r.hi[d] = span.last;
    }
    return r;
}

// Welford's running mean and sum of squared deviations (as pipeline/statistics.cpp).
struct Accumulator {
    int64_t n = 0;
    double mean = 0.0, m2 = 0.0;
    double min = std::numeric_limits<double>::infinity();
    double max = -std::numeric_limits<double>::infinity();
    void add(double x) {
        ++n;
        const double delta = x - mean;
        mean += delta / static_cast<double>(n);
        m2 += delta * (x - mean);
        min = std::min(min, x);
        max = std::max(max, x);
    }
};

// Adds the image value of every voxel of `range` whose centre (LPS mm) passes `inside`.
template <typename Inside>
Accumulator accumulate(const Volume& image, const IndexRange& range, Inside inside) {
    const Geometry g = image.geometry();
    Accumulator a;
    visitPixels(image, [&](const auto* data) {
        for (int64_t k = range.lo[2]; k <= range.hi[2]; ++k)
            for (int64_t j = range.lo[1]; j <= range.hi[1]; ++j)
                for (int64_t i = range.lo[0]; i <= range.hi[0]; ++i) {
                    const Vec3 p = g.indexToPhysical(
                        {static_cast<double>(i), static_cast<double>(j), static_cast<double>(k)});
                    if (!inside(p)) continue;
                    a.add(static_cast<double>(data[(k * g.size[1] + j) * g.size[0] + i]));
                }
    });
    return a;
}

void fillIntensity(const Accumulator& a, RoiStatistics& s) {
    s.voxels = a.n;
    if (a.n == 0) return;
    s.mean = a.mean;
    s.sd = std::sqrt(a.m2 / static_cast<double>(a.n));
    s.min = a.min;
    s.max = a.max;
}

bool finite(const Vec3& v) {
    return std::isfinite(v[0]) && std::isfinite(v[1]) && std::isfinite(v[2]);
}

Vec3 add(const Vec3& a, const Vec3& b, double sb = 1.0) {
    return {a[0] + sb * b[0], a[1] + sb * b[1], a[2] + sb * b[2]};
}

Status checkImage(const Volume& image, const char* what) {
    if (image.empty()) return invalidArgument(fmt::format("{}: no image", what));
    if (!image.geometry().isFinite())
        return invalidArgument(fmt::format("{}: the image's geometry is not finite", what),
                               image.info().source);
    return Status::ok();
}

}  // namespace

Result<RoiStatistics> ellipseStatistics(const Volume& image, const EllipseRoi& roi) {
    VOXSEG_RETURN_IF_ERROR(checkImage(image, "ellipse ROI"));
    const Geometry g = image.geometry();
    if (roi.slice_axis < 0 || roi.slice_axis > 2)
        return invalidArgument(
            fmt::format("ellipse ROI: slice axis {} is not 0, 1 or 2", roi.slice_axis));
    if (roi.slice < 0 || roi.slice >= g.size[roi.slice_axis])
        return invalidArgument(fmt::format("ellipse ROI: slice {} is outside the image (0..{})",
                                           roi.slice, g.size[roi.slice_axis] - 1));
    const Vec3 &c = roi.centre_mm, &u = roi.semi_axis_u_mm, &v = roi.semi_axis_v_mm;
    if (!finite(c) || !finite(u) || !finite(v))
        return invalidArgument("ellipse ROI: centre or semi-axes not finite");
    const double uu = dot(u, u), vv = dot(v, v);
    if (std::abs(dot(u, v)) > 1e-3 * std::sqrt(uu * vv))
        return invalidArgument("ellipse ROI: the semi-axes are not perpendicular");

    RoiStatistics s;
    s.area_mm2 = M_PI * std::sqrt(uu) * std::sqrt(vv);
    if (uu <= 0 || vv <= 0) return s;  // a line: no voxel centre strictly inside
    IndexRange range = rangeOf(g, {add(add(c, u), v), add(add(c, u), v, -1), add(add(c, u, -1), v),
                                   add(add(c, u, -1), v, -1)});
    range.lo[roi.slice_axis] = range.hi[roi.slice_axis] = roi.slice;
    // The voxel centres of the slice lie in its plane; only their in-plane offsets count.
    fillIntensity(accumulate(image, range,
                             [&](const Vec3& p) {
                                 const Vec3 d = add(p, c, -1);
                                 const double a = dot(d, u) / uu, b = dot(d, v) / vv;
                                 return a * a + b * b <= 1.0;
                             }),
                  s);
    double pixel_mm2 = 1.0;
    for (int d = 0; d < 3; ++d)
        if (d != roi.slice_axis) pixel_mm2 *= g.spacing[d];
    s.voxel_area_mm2 = static_cast<double>(s.voxels) * pixel_mm2;
    return s;
}

Result<RoiStatistics> sphereStatistics(const Volume& image, const SphereRoi& roi) {
    VOXSEG_RETURN_IF_ERROR(checkImage(image, "sphere ROI"));
    const Geometry g = image.geometry();
    const Vec3& c = roi.centre_mm;
    const double r = roi.radius_mm;
    if (!finite(c) || !std::isfinite(r) || r < 0)
        return invalidArgument(fmt::format(
            "sphere ROI: radius {} mm or centre not valid (need a finite radius >= 0)", r));
    RoiStatistics s;
    s.volume_ml = 4.0 / 3.0 * M_PI * r * r * r / 1000.0;
    std::vector<Vec3> corners;
    for (double x : {-r, r})
        for (double y : {-r, r})
            for (double z : {-r, r}) corners.push_back({c[0] + x, c[1] + y, c[2] + z});
    const double r2 = r * r;
    fillIntensity(accumulate(image, rangeOf(g, corners),
                             [&](const Vec3& p) {
                                 const Vec3 d = add(p, c, -1);
                                 return dot(d, d) <= r2;
                             }),
                  s);
    s.voxel_volume_ml =
        static_cast<double>(s.voxels) * g.spacing[0] * g.spacing[1] * g.spacing[2] / 1000.0;
    return s;
}

}  // namespace voxseg::edit
