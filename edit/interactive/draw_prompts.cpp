#include "edit/interactive/draw_prompts.h"

#include "edit/interactive/prompts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace voxseg::edit::interactive {

namespace {

std::string pointText(const Point3& p) { return fmt::format("({}, {}, {})", p[0], p[1], p[2]); }

Status checkInside(const std::vector<Point3>& points, Index3 shape, const char* what) {
    for (const Point3& p : points)
        for (int a = 0; a < 3; ++a) {
            if (!std::isfinite(p[a]))
                return invalidArgument(
                    fmt::format("{}: point {} is not finite", what, pointText(p)));
            const int64_t i = roundHalfEven(p[a]);
            if (i < 0 || i >= shape[a])
                return invalidArgument(fmt::format(
                    "{}: point {} (z, y, x) is outside the image of {} x {} x {} voxels", what,
                    pointText(p), shape[0], shape[1], shape[2]));
        }
    return Status::ok();
}

// The in-plane axes of `plane` (u, v) and a point's coordinates along them.
struct PlaneFrame {
    int u = 1, v = 2;
    explicit PlaneFrame(int axis) : u(axis == 0 ? 1 : 0), v(axis == 2 ? 1 : 2) {}
};

// The prompt's box: the slice, and in-plane the points' extent grown by `margin`, clipped.
MaskPrompt slab(const std::vector<Point3>& points, const SlicePlane& plane, const PlaneFrame& f,
                double margin, Index3 shape) {
    MaskPrompt m;
    m.box.lo[plane.axis] = plane.index;
    m.box.hi[plane.axis] = plane.index + 1;
    for (int a : {f.u, f.v}) {
        double lo = points[0][a], hi = lo;
        for (const Point3& p : points) lo = std::min(lo, p[a]), hi = std::max(hi, p[a]);
        m.box.lo[a] = std::max<int64_t>(0, static_cast<int64_t>(std::floor(lo - margin)));
        m.box.hi[a] = std::min(shape[a], static_cast<int64_t>(std::ceil(hi + margin)) + 1);
    }
    m.mask.assign(static_cast<size_t>((m.box.hi[0] - m.box.lo[0]) * (m.box.hi[1] - m.box.lo[1]) *
                                      (m.box.hi[2] - m.box.lo[2])),
                  0);
    return m;
}

void mark(MaskPrompt& m, const SlicePlane& plane, const PlaneFrame& f, int64_t iu, int64_t iv) {
    Index3 i{};
    i[plane.axis] = plane.index;
    i[f.u] = iu;
    i[f.v] = iv;
    for (int a = 0; a < 3; ++a)
        if (i[a] < m.box.lo[a] || i[a] >= m.box.hi[a]) return;
    const int64_t ny = m.box.hi[1] - m.box.lo[1], nx = m.box.hi[2] - m.box.lo[2];
    m.mask[static_cast<size_t>(((i[0] - m.box.lo[0]) * ny + i[1] - m.box.lo[1]) * nx + i[2] -
                               m.box.lo[2])] = 1;
}

double segmentDistance(double pu, double pv, double au, double av, double bu, double bv) {
    const double du = bu - au, dv = bv - av;
    const double len2 = du * du + dv * dv;
    double t = len2 > 0.0 ? ((pu - au) * du + (pv - av) * dv) / len2 : 0.0;
    t = std::clamp(t, 0.0, 1.0);
    const double eu = au + t * du - pu, ev = av + t * dv - pv;
    return std::sqrt(eu * eu + ev * ev);
}

// The voxels a segment passes through, sampled at most a quarter voxel apart.
void markSegment(MaskPrompt& mask, const SlicePlane& plane, const PlaneFrame& f, const Point3& a,
                 const Point3& b) {
    const double du = b[f.u] - a[f.u], dv = b[f.v] - a[f.v];
    const auto steps = static_cast<int64_t>(std::ceil(std::max(std::abs(du), std::abs(dv)) * 4.0));
    for (int64_t s = 0; s <= steps; ++s) {
        const double t = steps ? static_cast<double>(s) / static_cast<double>(steps) : 0.0;
        mark(mask, plane, f, roundHalfEven(a[f.u] + t * du), roundHalfEven(a[f.v] + t * dv));
    }
}

}  // namespace

Result<SlicePlane> findSlicePlane(const std::vector<Point3>& points, Index3 shape,
                                  const char* what) {
    if (points.empty()) return invalidArgument(fmt::format("{}: no points given", what));
    VOXSEG_RETURN_IF_ERROR(checkInside(points, shape, what));
    for (int axis = 0; axis < 3; ++axis) {
        const int64_t index = roundHalfEven(points[0][axis]);
        bool same = true;
        for (const Point3& p : points) same = same && roundHalfEven(p[axis]) == index;
        if (same) return SlicePlane{axis, index};
    }
    return invalidArgument(fmt::format(
        "{}: the points are not on one slice (no axis has the same voxel index at every point); "
        "draw it on one slice",
        what));
}

Result<MaskPrompt> drawScribble(const std::vector<Point3>& points, double thickness, Index3 shape) {
    if (!(thickness > 0.0))
        return invalidArgument(fmt::format("scribble: thickness must be > 0, got {}", thickness));
    VOXSEG_ASSIGN_OR_RETURN(SlicePlane plane, findSlicePlane(points, shape, "scribble"));
    const PlaneFrame f(plane.axis);
    const double r = thickness / 2.0;
    MaskPrompt mask = slab(points, plane, f, r, shape);
    for (size_t k = 0; k < points.size(); ++k) {
        const Point3& a = points[k];
        const Point3& b = points[k + 1 < points.size() ? k + 1 : k];
        mark(mask, plane, f, roundHalfEven(a[f.u]), roundHalfEven(a[f.v]));
        const auto u0 = static_cast<int64_t>(std::floor(std::min(a[f.u], b[f.u]) - r));
        const auto u1 = static_cast<int64_t>(std::ceil(std::max(a[f.u], b[f.u]) + r));
        const auto v0 = static_cast<int64_t>(std::floor(std::min(a[f.v], b[f.v]) - r));
        const auto v1 = static_cast<int64_t>(std::ceil(std::max(a[f.v], b[f.v]) + r));
        for (int64_t iu = std::max<int64_t>(0, u0); iu <= std::min(shape[f.u] - 1, u1); ++iu)
            for (int64_t iv = std::max<int64_t>(0, v0); iv <= std::min(shape[f.v] - 1, v1); ++iv)
                if (segmentDistance(static_cast<double>(iu), static_cast<double>(iv), a[f.u],
                                    a[f.v], b[f.u], b[f.v]) <= r)
                    mark(mask, plane, f, iu, iv);
    }
    return mask;
}

Result<MaskPrompt> drawLasso(const std::vector<Point3>& points, Index3 shape) {
    VOXSEG_ASSIGN_OR_RETURN(SlicePlane plane, findSlicePlane(points, shape, "lasso"));
    const PlaneFrame f(plane.axis);
    const Point3& first = points.front();
    const Point3& last = points.back();
    bool closed = points.size() >= 2;
    for (int a = 0; a < 3; ++a)
        closed = closed && roundHalfEven(first[a]) == roundHalfEven(last[a]);
    if (!closed)
        return invalidArgument(fmt::format(
            "lasso: the lasso does not close: its last point {} is not its first point {} (same "
            "voxel); close the outline where it started",
            pointText(last), pointText(first)));
    std::vector<Point3> poly(points.begin(), points.end() - 1);
    std::vector<Point3> distinct;
    for (const Point3& p : poly)
        if (std::find(distinct.begin(), distinct.end(), p) == distinct.end()) distinct.push_back(p);
    if (distinct.size() < 3)
        return invalidArgument("lasso: needs at least 3 distinct points to enclose an area");
    MaskPrompt mask = slab(poly, plane, f, 0.0, shape);
    double umin = poly[0][f.u], umax = umin, vmin = poly[0][f.v], vmax = vmin;
    for (const Point3& p : poly) {
        umin = std::min(umin, p[f.u]), umax = std::max(umax, p[f.u]);
        vmin = std::min(vmin, p[f.v]), vmax = std::max(vmax, p[f.v]);
    }
    const size_t n = poly.size();
    for (auto iu = std::max<int64_t>(0, static_cast<int64_t>(std::floor(umin)));
         iu <= std::min(shape[f.u] - 1, static_cast<int64_t>(std::ceil(umax))); ++iu)
        for (auto iv = std::max<int64_t>(0, static_cast<int64_t>(std::floor(vmin)));
             iv <= std::min(shape[f.v] - 1, static_cast<int64_t>(std::ceil(vmax))); ++iv) {
            const auto pu = static_cast<double>(iu), pv = static_cast<double>(iv);
            bool inside = false;
            for (size_t i = 0, j = n - 1; i < n; j = i++) {
                const double ui = poly[i][f.u], vi = poly[i][f.v];
                const double uj = poly[j][f.u], vj = poly[j][f.v];
                if ((vi > pv) != (vj > pv) && pu < (uj - ui) * (pv - vi) / (vj - vi) + ui)
                    inside = !inside;
            }
            if (inside) mark(mask, plane, f, iu, iv);
        }
    for (size_t i = 0; i < n; ++i) markSegment(mask, plane, f, poly[i], poly[(i + 1) % n]);
    return mask;
}

}  // namespace voxseg::edit::interactive
