// Paint / erase (sphere or in-plane disk, along a stroke), threshold, flood fill, level tracing.
#include "edit/canvas.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace voxseg::edit::detail {
namespace {

double dist2(const Vec3& a, const Vec3& b) {
    const double x = a[0] - b[0], y = a[1] - b[1], z = a[2] - b[2];
    return x * x + y * y + z * z;
}

// Squared distance from p to the polyline (a single point when it has one).
double dist2ToPolyline(const Vec3& p, const std::vector<Vec3>& line) {
    if (line.size() == 1) return dist2(p, line[0]);
    double best = 1e300;
    for (size_t s = 0; s + 1 < line.size(); ++s) {
        const Vec3& a = line[s];
        const Vec3 ab{line[s + 1][0] - a[0], line[s + 1][1] - a[1], line[s + 1][2] - a[2]};
        const Vec3 ap{p[0] - a[0], p[1] - a[1], p[2] - a[2]};
        const double len2 = dot(ab, ab);
        double t = len2 > 0 ? dot(ap, ab) / len2 : 0.0;
        t = std::clamp(t, 0.0, 1.0);
        best = std::min(best, dist2(p, {a[0] + t * ab[0], a[1] + t * ab[1], a[2] + t * ab[2]}));
    }
    return best;
}

// The slice (index along `axis`) holding point p: the nearest grid slice.
int64_t sliceOf(const Grid& grid, const Vec3& p, int axis) {
    return static_cast<int64_t>(std::llround(grid.index(p)[axis]));
}

}  // namespace

Status applyBrush(const EditOp& op, const Grid& grid, const Intensity& image, Canvas& canvas) {
    if (op.points.empty()) return invalidArgument("no centre");
    const double r = op.radius_mm;
    std::vector<Vec3> line = op.points;
    std::array<int64_t, 3> lo{}, hi{};
    int axis = -1;
    int64_t slice = 0;
    if (op.shape == Shape::kDisk) {
        // The disk lies in the grid slice nearest to the first centre; every centre of a stroke is
        // moved along the slice axis into that slice (a stroke is drawn in one view's slice).
        axis = grid.sliceAxis(op.plane);
        slice = sliceOf(grid, line[0], axis);
        if (slice < 0 || slice >= grid.size[axis]) return {};  // off the image: nothing to paint
        for (Vec3& p : line) {
            Vec3 idx = grid.index(p);
            idx[axis] = static_cast<double>(slice);
            p = grid.physical(idx[0], idx[1], idx[2]);
        }
    }
    // Index box: along axis a a ball of radius r spans r / spacing[a] (orthonormal directions).
    for (int a = 0; a < 3; ++a) {
        double mn = 1e300, mx = -1e300;
        for (const Vec3& p : line) {
            const double c = grid.index(p)[a];
            mn = std::min(mn, c - r / grid.spacing[a]);
            mx = std::max(mx, c + r / grid.spacing[a]);
        }
        const VoxelSpan span = voxelSpan(mn, mx, grid.size[a]);
        if (span.empty()) return {};
        lo[a] = span.first;
        hi[a] = span.last;
    }
    if (axis >= 0) lo[axis] = hi[axis] = slice;
    const double r2 = r * r;
    const bool paint = op.kind == OpKind::kPaint;
    for (int64_t k = lo[2]; k <= hi[2]; ++k) {
        for (int64_t j = lo[1]; j <= hi[1]; ++j) {
            for (int64_t i = lo[0]; i <= hi[0]; ++i) {
                const Vec3 p = grid.physical(double(i), double(j), double(k));
                if (dist2ToPolyline(p, line) > r2) continue;
                const int64_t idx = grid.linear(i, j, k);
                const int cur = canvas.get(idx);
                if (paint) {
                    if (!mayOverwrite(op.overwrite, cur, op.label)) continue;
                } else if (cur == 0 || (op.label != 0 && cur != op.label)) {
                    continue;
                }
                if (!image.inRange(idx, op)) continue;
                canvas.set(i, j, k, paint ? op.label : 0);
            }
        }
    }
    return {};
}

Status applyThreshold(const EditOp& op, const Grid& grid, const Intensity& image, Canvas& canvas) {
    std::array<int64_t, 3> lo{0, 0, 0}, hi{grid.size[0] - 1, grid.size[1] - 1, grid.size[2] - 1};
    if (op.in_slice) {
        const int axis = grid.sliceAxis(op.plane);
        const int64_t s = sliceOf(grid, op.points.at(0), axis);
        if (s < 0 || s >= grid.size[axis]) return invalidArgument("point_mm is outside the image");
        lo[axis] = hi[axis] = s;
    }
    for (int64_t k = lo[2]; k <= hi[2]; ++k)
        for (int64_t j = lo[1]; j <= hi[1]; ++j)
            for (int64_t i = lo[0]; i <= hi[0]; ++i) {
                const int64_t idx = grid.linear(i, j, k);
                if (!mayOverwrite(op.overwrite, canvas.get(idx), op.label)) continue;
                if (image.inRange(idx, op)) canvas.set(i, j, k, op.label);
            }
    return {};
}

Status applyFloodFill(const EditOp& op, const Grid& grid, const Intensity& image, Canvas& canvas) {
    const Vec3 c = grid.index(op.points.at(0));
    const int64_t seed[3] = {std::llround(c[0]), std::llround(c[1]), std::llround(c[2])};
    if (!grid.contains(seed[0], seed[1], seed[2]))
        return invalidArgument(fmt::format("seed_mm [{}, {}, {}] is outside the image",
                                           op.points[0][0], op.points[0][1], op.points[0][2]));
    const int axis = op.in_slice ? grid.sliceAxis(op.plane) : -1;
    // Offsets: faces (6) or faces, edges and corners (26); in a slice, only those within it.
    std::vector<std::array<int, 3>> offsets;
    for (int dz = -1; dz <= 1; ++dz)
        for (int dy = -1; dy <= 1; ++dy)
            for (int dx = -1; dx <= 1; ++dx) {
                const int d[3] = {dx, dy, dz};
                const int n = std::abs(dx) + std::abs(dy) + std::abs(dz);
                if (n == 0 || (op.connectivity == 6 && n != 1)) continue;
                if (axis >= 0 && d[axis] != 0) continue;
                offsets.push_back({dx, dy, dz});
            }
    auto accepts = [&](int64_t idx) {
        const int cur = canvas.get(idx);
        return (cur == op.label || mayOverwrite(op.overwrite, cur, op.label)) &&
               image.inRange(idx, op);
    };
    const int64_t seed_idx = grid.linear(seed[0], seed[1], seed[2]);
    if (!accepts(seed_idx)) return {};  // the seed itself is outside the range: nothing grows
    std::vector<uint64_t> visited(static_cast<size_t>((grid.geometry.voxelCount() + 63) / 64));
    auto mark = [&](int64_t idx) {
        uint64_t& w = visited[static_cast<size_t>(idx >> 6)];
        const uint64_t bit = uint64_t{1} << (idx & 63);
        if (w & bit) return false;
        w |= bit;
        return true;
    };
    std::vector<std::array<int64_t, 3>> stack{{seed[0], seed[1], seed[2]}}, region;
    mark(seed_idx);
    while (!stack.empty()) {
        const auto v = stack.back();
        stack.pop_back();
        region.push_back(v);
        for (const auto& d : offsets) {
            const int64_t x = v[0] + d[0], y = v[1] + d[1], z = v[2] + d[2];
            if (!grid.contains(x, y, z)) continue;
            const int64_t idx = grid.linear(x, y, z);
            if (!accepts(idx) || !mark(idx)) continue;
            stack.push_back({x, y, z});
        }
    }
    for (const auto& v : region) canvas.set(v[0], v[1], v[2], op.label);
    return {};
}

Status applyLevelTrace(const EditOp& op, const Grid& grid, const Intensity& image, Canvas& canvas) {
    // As Slicer's Level tracing: in the seed's slice, the 4-connected region of pixels at least
    // as bright as the seed, with the holes inside its outline filled (the area the iso-intensity
    // contour through the seed encloses).
    const Vec3 c = grid.index(op.points.at(0));
    const int64_t seed[3] = {std::llround(c[0]), std::llround(c[1]), std::llround(c[2])};
    if (!grid.contains(seed[0], seed[1], seed[2]))
        return invalidArgument(fmt::format("seed_mm [{}, {}, {}] is outside the image",
                                           op.points[0][0], op.points[0][1], op.points[0][2]));
    const int a = grid.sliceAxis(op.plane);
    const int u = a == 0 ? 1 : 0, w = a == 2 ? 1 : 2;
    const int64_t nu = grid.size[u], nw = grid.size[w];
    auto voxel = [&](int64_t x, int64_t y) {
        std::array<int64_t, 3> p{};
        p[a] = seed[a];
        p[u] = x;
        p[w] = y;
        return p;
    };
    auto linear = [&](int64_t x, int64_t y) {
        const auto p = voxel(x, y);
        return grid.linear(p[0], p[1], p[2]);
    };
    const double level = image.at(grid.linear(seed[0], seed[1], seed[2]));
    // 0: not reached, 1: in the region, 2: outside (reached from the slice's border).
    std::vector<uint8_t> state(static_cast<size_t>(nu * nw), 0);
    std::vector<std::array<int64_t, 2>> stack;
    auto flood = [&](uint8_t mark, auto&& passes) {
        while (!stack.empty()) {
            const auto [x, y] = stack.back();
            stack.pop_back();
            const int64_t next[4][2] = {{x - 1, y}, {x + 1, y}, {x, y - 1}, {x, y + 1}};
            for (const auto& n : next) {
                if (n[0] < 0 || n[1] < 0 || n[0] >= nu || n[1] >= nw) continue;
                uint8_t& s = state[static_cast<size_t>(n[0] + nu * n[1])];
                if (s != 0 || !passes(n[0], n[1])) continue;
                s = mark;
                stack.push_back({n[0], n[1]});
            }
        }
    };
    const int64_t su = seed[u], sw = seed[w];
    state[static_cast<size_t>(su + nu * sw)] = 1;
    stack.push_back({su, sw});
    flood(1, [&](int64_t x, int64_t y) { return image.at(linear(x, y)) >= level; });
    for (int64_t y = 0; y < nw; ++y)
        for (int64_t x = 0; x < nu; ++x) {
            if (x != 0 && y != 0 && x != nu - 1 && y != nw - 1) continue;
            uint8_t& s = state[static_cast<size_t>(x + nu * y)];
            if (s != 0) continue;
            s = 2;
            stack.push_back({x, y});
        }
    flood(2, [](int64_t, int64_t) { return true; });
    for (int64_t y = 0; y < nw; ++y)
        for (int64_t x = 0; x < nu; ++x) {
            if (state[static_cast<size_t>(x + nu * y)] == 2) continue;
            const auto p = voxel(x, y);
            if (mayOverwrite(op.overwrite, canvas.get(p[0], p[1], p[2]), op.label))
                canvas.set(p[0], p[1], p[2], op.label);
        }
    return {};
}

}  // namespace voxseg::edit::detail
