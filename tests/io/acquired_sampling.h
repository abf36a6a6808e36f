// Test helper: does a loaded (possibly resampled) volume hold every acquired pixel? For each
// pixel of each source slice, its patient position must map inside the volume's grid, and the
// volume's trilinear value there must lie within the range of the acquired values physically
// around it (the slices less than two grid steps away along the normal, 7x7 pixels around the
// pixel's projection onto each): what linear interpolation of acquired values can give, and
// nothing a fill value or an extrapolation from elsewhere would.
#pragma once

#include "core/geometry.h"
#include "core/volume.h"
#include "io/dicom_series.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace voxseg::testing {

struct AcquiredSampling {
    int64_t pixels = 0;
    int64_t outside = 0;        // pixel centre outside the grid's voxel-centre box
    int64_t out_of_range = 0;   // interpolated value outside the local acquired range
    double mean_abs_error = 0;  // |interpolated - acquired|, mean over pixels inside
    double worst_excess = 0;    // largest distance outside the local range
};

inline std::vector<float> asFloats(const Volume& v) {
    std::vector<float> out(static_cast<size_t>(v.geometry().voxelCount()));
    visitPixels(v, [&](auto* p) {
        for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(p[i]);
    });
    return out;
}

// 7x7 min or max filter of each plane (clamped at the borders).
inline std::vector<float> windowFilter(const std::vector<float>& in, int64_t cols, int64_t rows,
                                       int64_t planes, bool take_max) {
    constexpr int64_t kR = 3;
    std::vector<float> tmp(in.size()), out(in.size());
    auto pick = [&](float a, float b) { return take_max ? std::max(a, b) : std::min(a, b); };
    for (int64_t k = 0; k < planes; ++k)
        for (int64_t y = 0; y < rows; ++y)
            for (int64_t x = 0; x < cols; ++x) {
                float v = in[(k * rows + y) * cols + x];
                for (int64_t d = std::max<int64_t>(0, x - kR); d <= std::min(cols - 1, x + kR); ++d)
                    v = pick(v, in[(k * rows + y) * cols + d]);
                tmp[(k * rows + y) * cols + x] = v;
            }
    for (int64_t k = 0; k < planes; ++k)
        for (int64_t y = 0; y < rows; ++y)
            for (int64_t x = 0; x < cols; ++x) {
                float v = tmp[(k * rows + y) * cols + x];
                for (int64_t d = std::max<int64_t>(0, y - kR); d <= std::min(rows - 1, y + kR); ++d)
                    v = pick(v, tmp[(k * rows + d) * cols + x]);
                out[(k * rows + y) * cols + x] = v;
            }
    return out;
}

// `acquired`: the series' slices as decoded, plane k = c.slices[k] (cols x rows x slices).
// `loaded`: what loadSeries returned. tolerance: allowed excess (int16 rounding: 0.5).
inline AcquiredSampling sampleAcquiredPixels(const io::SeriesCandidate& c, const Volume& acquired,
                                             const Volume& loaded, double tolerance) {
    AcquiredSampling s;
    const Geometry ag = acquired.geometry();
    const int64_t cols = ag.size[0], rows = ag.size[1], n = ag.size[2];
    const std::vector<float> a = asFloats(acquired);
    const std::vector<float> lo = windowFilter(a, cols, rows, n, false);
    const std::vector<float> hi = windowFilter(a, cols, rows, n, true);
    const std::vector<float> v = asFloats(loaded);
    const Geometry g = loaded.geometry();
    const Vec3 row = c.geometry.axisDirection(0), col = c.geometry.axisDirection(1);
    const double cs = c.geometry.spacing[0], rs = c.geometry.spacing[1];
    Vec3 normal = cross(row, col);
    std::vector<double> u;
    for (const io::SliceRef& r : c.slices) u.push_back(dot(r.position, normal));
    const double reach = 2 * g.spacing[2] + 1e-3;
    auto at = [&](int64_t i, int64_t j, int64_t k) {
        return v[static_cast<size_t>((k * g.size[1] + j) * g.size[0] + i)];
    };
    double sum_err = 0;
    for (int64_t k = 0; k < n; ++k) {
        const Vec3& p0 = c.slices[static_cast<size_t>(k)].position;
        for (int64_t y = 0; y < rows; ++y)
            for (int64_t x = 0; x < cols; ++x) {
                ++s.pixels;
                Vec3 w;
                for (int d = 0; d < 3; ++d) w[d] = p0[d] + x * cs * row[d] + y * rs * col[d];
                const Vec3 q = g.physicalToIndex(w);
                bool inside = true;
                for (int d = 0; d < 3; ++d) inside &= q[d] >= -1e-3 && q[d] <= g.size[d] - 1 + 1e-3;
                if (!inside) {
                    ++s.outside;
                    continue;
                }
                int64_t i0[3];
                double f[3];
                for (int d = 0; d < 3; ++d) {
                    const double qc = std::clamp(q[d], 0.0, g.size[d] - 1.0);
                    i0[d] = std::min<int64_t>(static_cast<int64_t>(qc),
                                              std::max<int64_t>(0, g.size[d] - 2));
                    f[d] = g.size[d] > 1 ? qc - i0[d] : 0.0;
                }
                double value = 0;
                for (int corner = 0; corner < 8; ++corner) {
                    double wgt = 1;
                    int64_t idx[3];
                    for (int d = 0; d < 3; ++d) {
                        const int bit = (corner >> d) & 1;
                        idx[d] = std::min(i0[d] + bit, g.size[d] - 1);
                        wgt *= bit ? f[d] : 1 - f[d];
                    }
                    if (wgt > 0) value += wgt * at(idx[0], idx[1], idx[2]);
                }
                float range_lo = 1e30f, range_hi = -1e30f;
                const double uk = u[static_cast<size_t>(k)];
                for (int64_t m = 0; m < n; ++m) {
                    if (std::abs(u[static_cast<size_t>(m)] - uk) > reach) continue;
                    const Vec3& pm = c.slices[static_cast<size_t>(m)].position;
                    const Vec3 d{w[0] - pm[0], w[1] - pm[1], w[2] - pm[2]};
                    const int64_t xm =
                        std::clamp<int64_t>(std::llround(dot(d, row) / cs), 0, cols - 1);
                    const int64_t ym =
                        std::clamp<int64_t>(std::llround(dot(d, col) / rs), 0, rows - 1);
                    const size_t idx = static_cast<size_t>((m * rows + ym) * cols + xm);
                    range_lo = std::min(range_lo, lo[idx]);
                    range_hi = std::max(range_hi, hi[idx]);
                }
                const double excess = std::max(range_lo - value, value - range_hi);
                if (excess > tolerance) {
                    ++s.out_of_range;
                    s.worst_excess = std::max(s.worst_excess, excess);
                }
                sum_err += std::abs(value - a[static_cast<size_t>((k * rows + y) * cols + x)]);
            }
    }
    const int64_t in = s.pixels - s.outside;
    s.mean_abs_error = in > 0 ? sum_err / in : 0;
    return s;
}

// The series' slices as acquired (no resampling): the same candidate with its irregularity
// flags cleared stacks the decoded slices as they are.
inline Volume loadAcquired(const io::SeriesCandidate& c) {
    io::SeriesCandidate plain = c;
    plain.tilted = plain.uneven_spacing = plain.has_gaps = false;
    auto v = io::loadSeries(plain);
    EXPECT_TRUE(v.isOk()) << v.status().toString();
    return v.isOk() ? *v : Volume{};
}

}  // namespace voxseg::testing
