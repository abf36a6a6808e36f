#include "io/dicom_resample.h"

#include "io/dicom_stack.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
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

Vec3 stackingAxis(const IrregularStack& s, bool tilted) {
    if (tilted && s.positions.size() > 1) return unit(sub(s.positions.back(), s.positions.front()));
    return unit(cross(s.row_dir, s.col_dir));
}

}  // namespace

Geometry regularGridFor(const IrregularStack& s, bool tilted) {
    const Vec3 axis = stackingAxis(s, tilted);
    const double ra = dot(s.row_dir, axis);
    const Vec3 r = unit(
        {s.row_dir[0] - ra * axis[0], s.row_dir[1] - ra * axis[1], s.row_dir[2] - ra * axis[2]});
    const Vec3 c = cross(axis, r);
    const Vec3& p0 = s.positions.front();
    std::vector<double> steps;
    for (size_t k = 1; k < s.positions.size(); ++k)
        steps.push_back(dot(sub(s.positions[k], s.positions[k - 1]), axis));
    const double dz = steps.empty() ? 1.0 : medianOf(steps);

    // In-plane the grid covers every slice's footprint; along the stack it spans the slice
    // centres (as dcm2niix), so a tilted stack keeps its slice count and loses only the
    // half-covered wedges at both ends.
    const double half_x = 0.5 * (s.columns - 1) * s.column_spacing;
    const double half_y = 0.5 * (s.rows - 1) * s.row_spacing;
    auto centreZ = [&](const Vec3& p) {
        Vec3 q;
        for (int a = 0; a < 3; ++a)
            q[a] = p[a] + half_x * s.row_dir[a] + half_y * s.col_dir[a] - p0[a];
        return dot(q, axis);
    };
    const double z0 = centreZ(p0);
    double amin = 1e300, amax = -1e300, bmin = 1e300, bmax = -1e300, zmax = 0;
    for (const Vec3& p : s.positions) {
        for (int corner = 0; corner < 4; ++corner) {
            const double x = (corner & 1) ? (s.columns - 1) * s.column_spacing : 0.0;
            const double y = (corner & 2) ? (s.rows - 1) * s.row_spacing : 0.0;
            Vec3 q;
            for (int a = 0; a < 3; ++a) q[a] = p[a] + x * s.row_dir[a] + y * s.col_dir[a] - p0[a];
            amin = std::min(amin, dot(q, r));
            amax = std::max(amax, dot(q, r));
            bmin = std::min(bmin, dot(q, c));
            bmax = std::max(bmax, dot(q, c));
        }
        zmax = std::max(zmax, centreZ(p) - z0);
    }
    Geometry g;
    // Rounding absorbs the 1e-9-level noise of an untilted stack, whose footprint is exact.
    g.size = {std::llround((amax - amin) / s.column_spacing) + 1,
              std::llround((bmax - bmin) / s.row_spacing) + 1, std::llround(zmax / dz) + 1};
    g.spacing = {s.column_spacing, s.row_spacing, dz};
    for (int a = 0; a < 3; ++a) g.origin[a] = p0[a] + amin * r[a] + bmin * c[a] + z0 * axis[a];
    g.direction = {r[0], c[0], axis[0], r[1], c[1], axis[1], r[2], c[2], axis[2]};
    return g;
}

Result<ResampledStack> resampleStack(const IrregularStack& s, bool tilted, int threads) {
    if (s.positions.empty() || !s.data || s.columns <= 0 || s.rows <= 0)
        return internalError("resampleStack called with an empty stack");
    ResampledStack out;
    out.geometry = regularGridFor(s, tilted);
    const Geometry& g = out.geometry;
    if (g.voxelCount() <= 0 || g.voxelCount() > (int64_t{1} << 33))
        return unsupported("irregular stack would resample to an implausible grid");
    const size_t plane = static_cast<size_t>(s.columns) * s.rows;
    out.fill = *std::min_element(s.data, s.data + plane * s.positions.size());
    out.data.assign(static_cast<size_t>(g.voxelCount()), out.fill);

    const Vec3 n = unit(cross(s.row_dir, s.col_dir));
    const Vec3& p0 = s.positions.front();
    std::vector<double> u(s.positions.size());
    for (size_t k = 0; k < u.size(); ++k) u[k] = dot(sub(s.positions[k], p0), n);
    std::vector<double> du;
    for (size_t k = 1; k < u.size(); ++k) du.push_back(u[k] - u[k - 1]);
    const double med = du.empty() ? g.spacing[2] : medianOf(du);
    const double eps = 1e-3 * med;  // "on a slice": absorbs rounding of grid positions

    const Vec3 ax = g.axisDirection(0), ay = g.axisDirection(1), az = g.axisDirection(2);
    // Bilinear sample of slice k at point p (relative to p0); false when outside the slice.
    auto sample = [&](size_t k, const Vec3& p, float& value) {
        const Vec3 d = sub(p, sub(s.positions[k], p0));
        double x = dot(d, s.row_dir) / s.column_spacing;
        double y = dot(d, s.col_dir) / s.row_spacing;
        // No extrapolation beyond the outer pixel centres (eps absorbs rounding on the grid).
        constexpr double kEps = 1e-3;
        if (x < -kEps || y < -kEps || x > s.columns - 1 + kEps || y > s.rows - 1 + kEps)
            return false;
        x = std::clamp(x, 0.0, s.columns - 1.0);
        y = std::clamp(y, 0.0, s.rows - 1.0);
        const int x0 = std::min(static_cast<int>(x), s.columns - 2 < 0 ? 0 : s.columns - 2);
        const int y0 = std::min(static_cast<int>(y), s.rows - 2 < 0 ? 0 : s.rows - 2);
        const int x1 = std::min(x0 + 1, s.columns - 1), y1 = std::min(y0 + 1, s.rows - 1);
        const double fx = x - x0, fy = y - y0;
        const float* f = s.data + k * plane;
        const double top = f[y0 * s.columns + x0] * (1 - fx) + f[y0 * s.columns + x1] * fx;
        const double bottom = f[y1 * s.columns + x0] * (1 - fx) + f[y1 * s.columns + x1] * fx;
        value = static_cast<float>(top * (1 - fy) + bottom * fy);
        return true;
    };

    std::atomic<int64_t> next{0};
    std::atomic<int64_t> filled{0};
    const Vec3 origin_rel = sub(g.origin, p0);
    auto worker = [&] {
        int64_t local_filled = 0;
        for (int64_t k = next++; k < g.size[2]; k = next++) {
            float* dst = out.data.data() + k * g.size[0] * g.size[1];
            for (int64_t j = 0; j < g.size[1]; ++j) {
                for (int64_t i = 0; i < g.size[0]; ++i) {
                    Vec3 p;
                    for (int a = 0; a < 3; ++a)
                        p[a] = origin_rel[a] + i * g.spacing[0] * ax[a] + j * g.spacing[1] * ay[a] +
                               k * g.spacing[2] * az[a];
                    const double up = dot(p, n);
                    const size_t hi = std::upper_bound(u.begin(), u.end(), up) - u.begin();
                    float v0 = 0, v1 = 0;
                    bool ok = false;
                    float value = out.fill;
                    if (hi == 0 || hi == u.size()) {
                        // Outside the stack: only points on an end slice (within eps) are kept.
                        const size_t k_end = hi == 0 ? 0 : u.size() - 1;
                        if (std::abs(up - u[k_end]) <= eps) ok = sample(k_end, p, value);
                    } else {
                        const size_t lo = hi - 1;
                        const double gap = u[hi] - u[lo];
                        const double w = gap > 0 ? (up - u[lo]) / gap : 0.0;
                        const bool ok0 = sample(lo, p, v0);
                        const bool ok1 = sample(hi, p, v1);
                        if (gap > kMaxInterpolatedStep * med + eps) {
                            // A wide gap: only points on its bounding slices are kept.
                            if (up - u[lo] <= eps && ok0) value = v0, ok = true;
                            if (u[hi] - up <= eps && ok1) value = v1, ok = true;
                        } else if (ok0 && ok1) {
                            value = static_cast<float>((1 - w) * v0 + w * v1);
                            ok = true;
                        } else if ((ok0 && w <= eps) || (ok1 && 1 - w <= eps)) {
                            value = ok0 ? v0 : v1;
                            ok = true;
                        }
                    }
                    if (ok)
                        dst[j * g.size[0] + i] = value;
                    else
                        ++local_filled;
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
