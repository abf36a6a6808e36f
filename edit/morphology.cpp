// Whole-label operations: fill between slices (morphological contour interpolation), islands,
// median smoothing, opening/closing, margin, logical operations. Each works in the bounding box
// of the label (grown by what the op can reach), so its cost follows the structure, not the
// volume.
//
// Fill between slices: Debian's ITK 5.2 does not ship ITKMorphologicalContourInterpolation (a
// remote module), so the interpolation is written here: for each gap between two slices holding
// the label, the signed distance maps (mm, exact EDT) of the two slices' masks are blended
// linearly at each gap slice and thresholded at 0 (shape-based interpolation, Raya & Udupa 1990;
// Herman et al. 1992), as Slicer's "fill between slices" does with ITK's filter for simple shapes.
#include "edit/canvas.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace voxseg::edit::detail {
namespace {

constexpr double kFar = 1e20;

// 1D squared distance transform of f (n samples at `spacing` mm) into d.
void distance1d(const double* f, int64_t n, double spacing, double* d, std::vector<int64_t>& v,
                std::vector<double>& z) {
    v.resize(static_cast<size_t>(n));
    z.resize(static_cast<size_t>(n + 1));
    auto x = [&](int64_t q) { return static_cast<double>(q) * spacing; };
    int64_t k = 0;
    v[0] = 0;
    z[0] = -1e300;
    z[1] = 1e300;
    auto meet = [&](int64_t q, int64_t p) {
        return ((f[q] + x(q) * x(q)) - (f[p] + x(p) * x(p))) / (2.0 * (x(q) - x(p)));
    };
    for (int64_t q = 1; q < n; ++q) {
        double s = meet(q, v[static_cast<size_t>(k)]);
        while (s <= z[static_cast<size_t>(k)]) {  // z[0] = -inf ends the loop at k = 0
            --k;
            s = meet(q, v[static_cast<size_t>(k)]);
        }
        ++k;
        v[static_cast<size_t>(k)] = q;
        z[static_cast<size_t>(k)] = s;
        z[static_cast<size_t>(k + 1)] = 1e300;
    }
    k = 0;
    for (int64_t q = 0; q < n; ++q) {
        while (z[static_cast<size_t>(k + 1)] < x(q)) ++k;
        const int64_t p = v[static_cast<size_t>(k)];
        d[q] = (x(q) - x(p)) * (x(q) - x(p)) + f[p];
    }
}

struct Box {
    std::array<int64_t, 3> lo{0, 0, 0};
    std::array<int64_t, 3> hi{-1, -1, -1};  // inclusive; empty when hi < lo
    bool empty() const { return hi[0] < lo[0]; }
    std::array<int64_t, 3> extent() const {
        return {hi[0] - lo[0] + 1, hi[1] - lo[1] + 1, hi[2] - lo[2] + 1};
    }
    void add(int64_t i, int64_t j, int64_t k) {
        if (empty()) {
            lo = hi = {i, j, k};
            return;
        }
        const int64_t p[3] = {i, j, k};
        for (int a = 0; a < 3; ++a) {
            lo[a] = std::min(lo[a], p[a]);
            hi[a] = std::max(hi[a], p[a]);
        }
    }
    void grow(const std::array<int64_t, 3>& by, const std::array<int64_t, 3>& size) {
        for (int a = 0; a < 3; ++a) {
            lo[a] = std::max<int64_t>(0, lo[a] - by[a]);
            hi[a] = std::min<int64_t>(size[a] - 1, hi[a] + by[a]);
        }
    }
};

Box labelBox(const Canvas& canvas, int label) {
    Box b;
    const auto& n = canvas.size();
    int64_t idx = 0;
    for (int64_t k = 0; k < n[2]; ++k)
        for (int64_t j = 0; j < n[1]; ++j)
            for (int64_t i = 0; i < n[0]; ++i, ++idx)
                if (canvas.get(idx) == label) b.add(i, j, k);
    return b;
}

// The label's voxels in `box` as a 0/1 mask (x fastest).
std::vector<uint8_t> boxMask(const Canvas& canvas, const Box& box, int label) {
    const auto e = box.extent();
    std::vector<uint8_t> m(static_cast<size_t>(e[0] * e[1] * e[2]));
    size_t o = 0;
    for (int64_t k = box.lo[2]; k <= box.hi[2]; ++k)
        for (int64_t j = box.lo[1]; j <= box.hi[1]; ++j)
            for (int64_t i = box.lo[0]; i <= box.hi[0]; ++i) m[o++] = canvas.get(i, j, k) == label;
    return m;
}

// Writes a new mask of `label` in `box`: voxels leaving it become background; voxels joining it
// follow the overwrite policy.
void writeMask(Canvas& canvas, const Box& box, const std::vector<uint8_t>& mask, int label,
               const Overwrite& overwrite) {
    size_t o = 0;
    for (int64_t k = box.lo[2]; k <= box.hi[2]; ++k)
        for (int64_t j = box.lo[1]; j <= box.hi[1]; ++j)
            for (int64_t i = box.lo[0]; i <= box.hi[0]; ++i, ++o) {
                const int cur = canvas.get(i, j, k);
                if (cur == label && !mask[o])
                    canvas.set(i, j, k, 0);
                else if (cur != label && mask[o] && mayOverwrite(overwrite, cur, label))
                    canvas.set(i, j, k, label);
            }
}

std::vector<uint8_t> dilate(const std::vector<uint8_t>& mask, const std::array<int64_t, 3>& n,
                            const Vec3& spacing, double r) {
    std::vector<double> d;
    squaredDistance(mask, n, spacing, d);
    std::vector<uint8_t> out(mask.size());
    for (size_t v = 0; v < mask.size(); ++v) out[v] = d[v] <= r * r;
    return out;
}

std::vector<uint8_t> erode(const std::vector<uint8_t>& mask, const std::array<int64_t, 3>& n,
                           const Vec3& spacing, double r) {
    std::vector<uint8_t> background(mask.size());
    for (size_t v = 0; v < mask.size(); ++v) background[v] = !mask[v];
    std::vector<double> d;
    squaredDistance(background, n, spacing, d);
    std::vector<uint8_t> out(mask.size());
    for (size_t v = 0; v < mask.size(); ++v) out[v] = mask[v] && d[v] > r * r;
    return out;
}

std::array<int64_t, 3> voxelsFor(double mm, const Vec3& spacing) {
    return {static_cast<int64_t>(std::ceil(mm / spacing[0])) + 1,
            static_cast<int64_t>(std::ceil(mm / spacing[1])) + 1,
            static_cast<int64_t>(std::ceil(mm / spacing[2])) + 1};
}

// Signed distance (mm) of a 2D mask: negative inside (distance to the nearest outside pixel),
// positive outside (distance to the nearest inside pixel).
std::vector<double> signedDistance2d(const std::vector<uint8_t>& mask, int64_t nu, int64_t nv,
                                     double su, double sv) {
    std::vector<uint8_t> outside(mask.size());
    for (size_t p = 0; p < mask.size(); ++p) outside[p] = !mask[p];
    std::vector<double> to_in, to_out;
    squaredDistance(mask, {nu, nv, 1}, {su, sv, 1.0}, to_in);
    squaredDistance(outside, {nu, nv, 1}, {su, sv, 1.0}, to_out);
    std::vector<double> sdf(mask.size());
    for (size_t p = 0; p < mask.size(); ++p)
        sdf[p] = mask[p] ? -std::sqrt(to_out[p]) : std::sqrt(to_in[p]);
    return sdf;
}

}  // namespace

void squaredDistance(const std::vector<uint8_t>& feature, const std::array<int64_t, 3>& n,
                     const Vec3& spacing, std::vector<double>& out) {
    out.resize(feature.size());
    for (size_t v = 0; v < feature.size(); ++v) out[v] = feature[v] ? 0.0 : kFar;
    const int64_t stride[3] = {1, n[0], n[0] * n[1]};
    std::vector<double> f, d;
    std::vector<int64_t> v;
    std::vector<double> z;
    for (int a = 0; a < 3; ++a) {
        if (n[a] <= 1) continue;
        const int b = (a + 1) % 3, c = (a + 2) % 3;
        f.resize(static_cast<size_t>(n[a]));
        d.resize(static_cast<size_t>(n[a]));
        for (int64_t y = 0; y < n[c]; ++y)
            for (int64_t x = 0; x < n[b]; ++x) {
                const int64_t base = x * stride[b] + y * stride[c];
                for (int64_t q = 0; q < n[a]; ++q) f[q] = out[base + q * stride[a]];
                distance1d(f.data(), n[a], spacing[a], d.data(), v, z);
                for (int64_t q = 0; q < n[a]; ++q) out[base + q * stride[a]] = d[q];
            }
    }
}

Status applyFillBetweenSlices(const EditOp& op, const Grid& grid, Canvas& canvas) {
    const int a = grid.sliceAxis(op.plane);
    const int u = a == 0 ? 1 : 0, w = a == 2 ? 1 : 2;  // the in-slice axes, ascending
    // Per slice: the label's bounding box in (u, w).
    std::vector<Box> slices(static_cast<size_t>(grid.size[a]));
    int64_t idx = 0;
    for (int64_t k = 0; k < grid.size[2]; ++k)
        for (int64_t j = 0; j < grid.size[1]; ++j)
            for (int64_t i = 0; i < grid.size[0]; ++i, ++idx) {
                if (canvas.get(idx) != op.label) continue;
                const int64_t p[3] = {i, j, k};
                slices[static_cast<size_t>(p[a])].add(p[u], p[w], 0);
            }
    std::vector<int64_t> keys;
    for (int64_t s = 0; s < grid.size[a]; ++s)
        if (!slices[static_cast<size_t>(s)].empty()) keys.push_back(s);
    auto voxel = [&](int64_t s, int64_t pu, int64_t pw) {
        std::array<int64_t, 3> p{};
        p[a] = s;
        p[u] = pu;
        p[w] = pw;
        return p;
    };
    for (size_t n = 0; n + 1 < keys.size(); ++n) {
        const int64_t s0 = keys[n], s1 = keys[n + 1];
        if (s1 - s0 < 2) continue;
        Box box = slices[static_cast<size_t>(s0)];
        const Box& other = slices[static_cast<size_t>(s1)];
        box.add(other.lo[0], other.lo[1], 0);
        box.add(other.hi[0], other.hi[1], 0);
        box.grow({1, 1, 0}, {grid.size[u], grid.size[w], 1});
        const int64_t nu = box.hi[0] - box.lo[0] + 1, nw = box.hi[1] - box.lo[1] + 1;
        auto sliceMask = [&](int64_t s) {
            std::vector<uint8_t> m(static_cast<size_t>(nu * nw));
            for (int64_t y = 0; y < nw; ++y)
                for (int64_t x = 0; x < nu; ++x) {
                    const auto p = voxel(s, box.lo[0] + x, box.lo[1] + y);
                    m[static_cast<size_t>(x + nu * y)] = canvas.get(p[0], p[1], p[2]) == op.label;
                }
            return m;
        };
        const std::vector<double> d0 =
            signedDistance2d(sliceMask(s0), nu, nw, grid.spacing[u], grid.spacing[w]);
        const std::vector<double> d1 =
            signedDistance2d(sliceMask(s1), nu, nw, grid.spacing[u], grid.spacing[w]);
        for (int64_t s = s0 + 1; s < s1; ++s) {
            const double t = static_cast<double>(s - s0) / static_cast<double>(s1 - s0);
            for (int64_t y = 0; y < nw; ++y)
                for (int64_t x = 0; x < nu; ++x) {
                    const size_t q = static_cast<size_t>(x + nu * y);
                    if ((1.0 - t) * d0[q] + t * d1[q] > 0) continue;
                    const auto p = voxel(s, box.lo[0] + x, box.lo[1] + y);
                    if (mayOverwrite(op.overwrite, canvas.get(p[0], p[1], p[2]), op.label))
                        canvas.set(p[0], p[1], p[2], op.label);
                }
        }
    }
    return {};
}

Status applyIslands(const EditOp& op, const Grid& grid, Canvas& canvas, std::vector<int>& created) {
    const Box box = labelBox(canvas, op.label);
    if (box.empty()) return {};
    const auto e = box.extent();
    const std::vector<uint8_t> mask = boxMask(canvas, box, op.label);
    std::vector<int32_t> comp(mask.size(), -1);
    std::vector<int64_t> sizes;
    std::vector<std::array<int, 3>> offsets;
    for (int dz = -1; dz <= 1; ++dz)
        for (int dy = -1; dy <= 1; ++dy)
            for (int dx = -1; dx <= 1; ++dx) {
                const int n = std::abs(dx) + std::abs(dy) + std::abs(dz);
                if (n == 0 || (op.connectivity == 6 && n != 1)) continue;
                offsets.push_back({dx, dy, dz});
            }
    std::vector<int64_t> stack;
    for (int64_t start = 0; start < static_cast<int64_t>(mask.size()); ++start) {
        if (!mask[start] || comp[start] >= 0) continue;
        const int32_t id = static_cast<int32_t>(sizes.size());
        sizes.push_back(0);
        comp[start] = id;
        stack.push_back(start);
        while (!stack.empty()) {
            const int64_t v = stack.back();
            stack.pop_back();
            ++sizes[id];
            const int64_t x = v % e[0], y = (v / e[0]) % e[1], z = v / (e[0] * e[1]);
            for (const auto& d : offsets) {
                const int64_t nx = x + d[0], ny = y + d[1], nz = z + d[2];
                if (nx < 0 || ny < 0 || nz < 0 || nx >= e[0] || ny >= e[1] || nz >= e[2]) continue;
                const int64_t nidx = nx + e[0] * (ny + e[1] * nz);
                if (!mask[nidx] || comp[nidx] >= 0) continue;
                comp[nidx] = id;
                stack.push_back(nidx);
            }
        }
    }
    // Largest first; equal sizes keep the order of their first voxel (i fastest, then j, k).
    std::vector<int32_t> order(sizes.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t x, int32_t y) { return sizes[x] > sizes[y]; });
    std::vector<int> new_value(sizes.size(), op.label);
    const double voxel_ml = grid.spacing[0] * grid.spacing[1] * grid.spacing[2] / 1000.0;
    if (op.island_mode == IslandMode::kKeepLargest) {
        for (size_t r = 1; r < order.size(); ++r) new_value[order[r]] = 0;
    } else if (op.island_mode == IslandMode::kRemoveSmall) {
        for (size_t c = 0; c < sizes.size(); ++c)
            if (static_cast<double>(sizes[c]) * voxel_ml < op.min_ml) new_value[c] = 0;
    } else {
        int max_label = 0;
        const int64_t total = grid.geometry.voxelCount();
        for (int64_t v = 0; v < total; ++v) max_label = std::max(max_label, canvas.get(v));
        if (max_label + static_cast<int64_t>(order.size()) - 1 > canvas.maxLabel())
            return invalidArgument(fmt::format(
                "splitting label {} into {} labels needs values up to {}: the label map holds at "
                "most {}",
                op.label, order.size(), max_label + order.size() - 1, canvas.maxLabel()));
        for (size_t r = 1; r < order.size(); ++r) {
            new_value[order[r]] = max_label + static_cast<int>(r);
            created.push_back(new_value[order[r]]);
        }
    }
    size_t o = 0;
    for (int64_t k = box.lo[2]; k <= box.hi[2]; ++k)
        for (int64_t j = box.lo[1]; j <= box.hi[1]; ++j)
            for (int64_t i = box.lo[0]; i <= box.hi[0]; ++i, ++o)
                if (mask[o]) canvas.set(i, j, k, new_value[comp[o]]);
    return {};
}

Status applyMorphology(const EditOp& op, const Grid& grid, Canvas& canvas) {
    Box box = labelBox(canvas, op.label);
    if (box.empty()) return {};
    const Vec3& sp = grid.spacing;
    if (op.kind == OpKind::kMedian) {
        // Binary median in a box of voxels whose centres are within radius_mm along each axis:
        // a voxel is in the label when more than half of its box is (outside the image counts as
        // not in the label).
        const std::array<int64_t, 3> h{static_cast<int64_t>(std::floor(op.radius_mm / sp[0])),
                                       static_cast<int64_t>(std::floor(op.radius_mm / sp[1])),
                                       static_cast<int64_t>(std::floor(op.radius_mm / sp[2]))};
        box.grow(h, grid.size);
        const auto e = box.extent();
        const std::vector<uint8_t> mask = boxMask(canvas, box, op.label);
        std::vector<int32_t> count(mask.begin(), mask.end());
        const int64_t stride[3] = {1, e[0], e[0] * e[1]};
        std::vector<int32_t> line, prefix;
        for (int a = 0; a < 3; ++a) {
            if (h[a] == 0) continue;
            const int b = (a + 1) % 3, c = (a + 2) % 3;
            line.resize(static_cast<size_t>(e[a]));
            prefix.resize(static_cast<size_t>(e[a] + 1));
            for (int64_t y = 0; y < e[c]; ++y)
                for (int64_t x = 0; x < e[b]; ++x) {
                    const int64_t base = x * stride[b] + y * stride[c];
                    prefix[0] = 0;
                    for (int64_t q = 0; q < e[a]; ++q)
                        prefix[q + 1] = prefix[q] + count[base + q * stride[a]];
                    for (int64_t q = 0; q < e[a]; ++q) {
                        const int64_t l = std::max<int64_t>(0, q - h[a]);
                        const int64_t r = std::min<int64_t>(e[a], q + h[a] + 1);
                        count[base + q * stride[a]] = prefix[r] - prefix[l];
                    }
                }
        }
        const int64_t window = (2 * h[0] + 1) * (2 * h[1] + 1) * (2 * h[2] + 1);
        std::vector<uint8_t> out(mask.size());
        for (size_t v = 0; v < mask.size(); ++v) out[v] = 2 * int64_t{count[v]} > window;
        writeMask(canvas, box, out, op.label, op.overwrite);
        return {};
    }
    const double r = op.kind == OpKind::kMargin ? std::abs(op.margin_mm) : op.radius_mm;
    const double reach = op.kind == OpKind::kClosing ? 2 * r : r;
    box.grow(voxelsFor(reach, sp), grid.size);
    const auto e = box.extent();
    const std::vector<uint8_t> mask = boxMask(canvas, box, op.label);
    std::vector<uint8_t> out;
    switch (op.kind) {
        case OpKind::kOpening:
            out = dilate(erode(mask, e, sp, r), e, sp, r);
            break;
        case OpKind::kClosing:
            out = erode(dilate(mask, e, sp, r), e, sp, r);
            break;
        default:
            out = op.margin_mm > 0 ? dilate(mask, e, sp, r) : erode(mask, e, sp, r);
            break;
    }
    writeMask(canvas, box, out, op.label, op.overwrite);
    return {};
}

Status applyLogical(const EditOp& op, const Grid& grid, Canvas& canvas) {
    // A label map holds one label per voxel, so `label` and `other` never overlap: union moves
    // other's voxels into label, copy makes label exactly other's voxels (other is emptied),
    // intersect empties label, subtract leaves it as it is, clear empties it.
    int64_t idx = 0;
    for (int64_t k = 0; k < grid.size[2]; ++k)
        for (int64_t j = 0; j < grid.size[1]; ++j)
            for (int64_t i = 0; i < grid.size[0]; ++i, ++idx) {
                const int cur = canvas.get(idx);
                switch (op.logical) {
                    case LogicalOp::kUnion:
                        if (cur == op.other) canvas.set(i, j, k, op.label);
                        break;
                    case LogicalOp::kCopy:
                        if (cur == op.other)
                            canvas.set(i, j, k, op.label);
                        else if (cur == op.label)
                            canvas.set(i, j, k, 0);
                        break;
                    case LogicalOp::kIntersect:
                    case LogicalOp::kClear:
                        if (cur == op.label) canvas.set(i, j, k, 0);
                        break;
                    case LogicalOp::kSubtract:
                        break;
                }
            }
    return {};
}

}  // namespace voxseg::edit::detail
