#include "io/dicom_resample.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

namespace voxseg::io {

namespace {

Vec3 unit(const Vec3& v) {
    double n = norm(v);
    return n > 0 ? Vec3{v[0] / n, v[1] / n, v[2] / n} : v;
}

Vec3 sub(const Vec3& a, const Vec3& b) { return {a[0] - b[0], a[1] - b[1], a[2] - b[2]}; }

double medianOf(std::vector<double> v) {
    if (v.empty()) return 1.0;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Rounds an extent in steps up to whole steps, absorbing the 1e-9-level noise of positions.
int64_t stepsCovering(double extent, double step) {
    return static_cast<int64_t>(std::ceil(extent / step - 1e-3));
}

// The stack in the frame of its acquired orientation: r along rows, c down columns, n the slice
// normal pointing from the first slice to the last. Slice m's origin is a[m] * r + b[m] * c +
// u[m] * n from slice 0's.
struct StackFrame {
    Vec3 r, c, n;
    std::vector<double> a, b, u;
    double median_step = 1.0;
};

StackFrame frameOf(const IrregularStack& s) {
    StackFrame f;
    f.r = unit(s.row_dir);
    f.n = unit(cross(s.row_dir, s.col_dir));
    const Vec3& p0 = s.positions.front();
    if (dot(sub(s.positions.back(), p0), f.n) < 0) f.n = {-f.n[0], -f.n[1], -f.n[2]};
    f.c = unit(s.col_dir);
    for (const Vec3& p : s.positions) {
        const Vec3 d = sub(p, p0);
        f.a.push_back(dot(d, f.r));
        f.b.push_back(dot(d, f.c));
        f.u.push_back(dot(d, f.n));
    }
    std::vector<double> steps;
    for (size_t k = 1; k < f.u.size(); ++k) steps.push_back(f.u[k] - f.u[k - 1]);
    f.median_step = steps.empty() ? 1.0 : medianOf(steps);
    return f;
}

Geometry gridOf(const IrregularStack& s, const StackFrame& f) {
    const auto [amin_it, amax_it] = std::minmax_element(f.a.begin(), f.a.end());
    const auto [bmin_it, bmax_it] = std::minmax_element(f.b.begin(), f.b.end());
    const double amin = *amin_it, amax = *amax_it + (s.columns - 1) * s.column_spacing;
    const double bmin = *bmin_it, bmax = *bmax_it + (s.rows - 1) * s.row_spacing;
    const double range = f.u.back();
    // First and last slice on grid planes: the step closest to the median that divides the
    // stack's length.
    const int64_t steps = range > 0 ? std::max<int64_t>(1, std::llround(range / f.median_step)) : 0;
    Geometry g;
    g.size = {stepsCovering(amax - amin, s.column_spacing) + 1,
              stepsCovering(bmax - bmin, s.row_spacing) + 1, steps + 1};
    g.spacing = {s.column_spacing, s.row_spacing, steps > 0 ? range / steps : f.median_step};
    const Vec3& p0 = s.positions.front();
    for (int a = 0; a < 3; ++a) g.origin[a] = p0[a] + amin * f.r[a] + bmin * f.c[a];
    g.direction = {f.r[0], f.c[0], f.n[0], f.r[1], f.c[1], f.n[1], f.r[2], f.c[2], f.n[2]};
    return g;
}

// What one grid plane is made of: the slice it lies on, the pair of slices around it when they
// may be interpolated, and the slices less than one grid step away, nearest first.
struct PlanePlan {
    int on_slice = -1;
    int lo = -1, hi = -1;
    double w = 0;  // weight of `hi`
    std::vector<int> nearby;
};

PlanePlan planFor(const StackFrame& f, double z, double grid_step) {
    const double eps = 1e-3 * f.median_step;
    const std::vector<double>& u = f.u;
    PlanePlan plan;
    const size_t hi = std::upper_bound(u.begin(), u.end(), z) - u.begin();
    for (size_t m : {hi == 0 ? hi : hi - 1, hi})
        if (m < u.size() && std::abs(u[m] - z) <= eps) plan.on_slice = static_cast<int>(m);
    if (hi > 0 && hi < u.size()) {
        const double gap = u[hi] - u[hi - 1];
        if (gap > 0 && gap <= kMaxInterpolatedStep * f.median_step + eps) {
            plan.lo = static_cast<int>(hi - 1);
            plan.hi = static_cast<int>(hi);
            plan.w = (z - u[hi - 1]) / gap;
        }
    }
    for (size_t m = 0; m < u.size(); ++m)
        if (std::abs(u[m] - z) < grid_step - eps) plan.nearby.push_back(static_cast<int>(m));
    std::stable_sort(plan.nearby.begin(), plan.nearby.end(),
                     [&](int x, int y) { return std::abs(u[x] - z) < std::abs(u[y] - z); });
    return plan;
}

// Bilinear reads of slices at grid positions: slice m's pixel coordinates of grid voxel (i, j)
// are (i + dx[m], j + dy[m]).
struct SliceSampler {
    const IrregularStack& s;
    std::vector<double> dx, dy;

    // Covered: less than one pixel beyond the outer pixel centres (1e-3 absorbs the rounding
    // of positions, so a point exactly one pixel out is not covered).
    bool covers(int m, int64_t i, int64_t j) const {
        const double x = i + dx[m], y = j + dy[m];
        constexpr double kEdge = 1.0 - 1e-3;
        return x > -kEdge && y > -kEdge && x < s.columns - 1 + kEdge && y < s.rows - 1 + kEdge;
    }
    float at(int m, int64_t i, int64_t j) const {
        const double x = std::clamp(i + dx[m], 0.0, s.columns - 1.0);
        const double y = std::clamp(j + dy[m], 0.0, s.rows - 1.0);
        const int x0 = std::min(static_cast<int>(x), std::max(0, s.columns - 2));
        const int y0 = std::min(static_cast<int>(y), std::max(0, s.rows - 2));
        const int x1 = std::min(x0 + 1, s.columns - 1), y1 = std::min(y0 + 1, s.rows - 1);
        const double fx = x - x0, fy = y - y0;
        const float* p = s.data + static_cast<size_t>(m) * s.columns * s.rows;
        const double top = p[y0 * s.columns + x0] * (1 - fx) + p[y0 * s.columns + x1] * fx;
        const double bottom = p[y1 * s.columns + x0] * (1 - fx) + p[y1 * s.columns + x1] * fx;
        return static_cast<float>(top * (1 - fy) + bottom * fy);
    }
};

}  // namespace

Geometry regularGridFor(const IrregularStack& s) { return gridOf(s, frameOf(s)); }

Result<ResampledStack> resampleStack(const IrregularStack& s, int threads) {
    if (s.positions.empty() || !s.data || s.columns <= 0 || s.rows <= 0)
        return internalError("resampleStack called with an empty stack");
    const StackFrame f = frameOf(s);
    ResampledStack out;
    out.geometry = gridOf(s, f);
    const Geometry& g = out.geometry;
    if (g.voxelCount() <= 0 || g.voxelCount() > (int64_t{1} << 33))
        return unsupported("irregular stack would resample to an implausible grid");
    const size_t plane = static_cast<size_t>(s.columns) * s.rows;
    out.fill = *std::min_element(s.data, s.data + plane * s.positions.size());
    out.data.assign(static_cast<size_t>(g.voxelCount()), out.fill);

    SliceSampler sampler{s, {}, {}};
    const double amin = *std::min_element(f.a.begin(), f.a.end());
    const double bmin = *std::min_element(f.b.begin(), f.b.end());
    for (size_t m = 0; m < s.positions.size(); ++m) {
        sampler.dx.push_back((amin - f.a[m]) / s.column_spacing);
        sampler.dy.push_back((bmin - f.b[m]) / s.row_spacing);
    }

    std::atomic<int64_t> next{0};
    std::atomic<int64_t> filled{0};
    auto worker = [&] {
        int64_t local_filled = 0;
        for (int64_t k = next++; k < g.size[2]; k = next++) {
            const PlanePlan plan = planFor(f, k * g.spacing[2], g.spacing[2]);
            float* dst = out.data.data() + k * g.size[0] * g.size[1];
            for (int64_t j = 0; j < g.size[1]; ++j) {
                for (int64_t i = 0; i < g.size[0]; ++i) {
                    float& v = dst[j * g.size[0] + i];
                    if (plan.on_slice >= 0 && sampler.covers(plan.on_slice, i, j)) {
                        v = sampler.at(plan.on_slice, i, j);
                        continue;
                    }
                    if (plan.lo >= 0 && sampler.covers(plan.lo, i, j) &&
                        sampler.covers(plan.hi, i, j)) {
                        v = static_cast<float>((1 - plan.w) * sampler.at(plan.lo, i, j) +
                                               plan.w * sampler.at(plan.hi, i, j));
                        continue;
                    }
                    bool found = false;
                    for (int m : plan.nearby)
                        if (sampler.covers(m, i, j)) {
                            v = sampler.at(m, i, j);
                            found = true;
                            break;
                        }
                    if (!found) ++local_filled;
                }
            }
        }
        filled += local_filled;
    };
    const int n_threads =
        std::max(1, threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (int t = 1; t < n_threads; ++t) pool.emplace_back(worker);
    worker();
    for (std::thread& t : pool) t.join();
    out.filled = filled;
    return out;
}

}  // namespace voxseg::io
