#include "ui/interactive_prompt.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace voxseg::ui {

const char* promptKindName(PromptKind kind) {
    switch (kind) {
        case PromptKind::kPoint:
            return "point";
        case PromptKind::kBox:
            return "box";
        case PromptKind::kScribble:
            return "scribble";
        case PromptKind::kLasso:
            return "lasso";
    }
    return "?";
}

std::vector<Point3> onFirstSlice(const std::vector<Point3>& points, int slice_axis) {
    std::vector<Point3> out = points;
    if (out.empty()) return out;
    const double slice = std::nearbyint(out.front()[slice_axis]);  // halves to even
    for (Point3& p : out) p[slice_axis] = slice;
    return out;
}

edit::interactive::BoxRequest boxOfDrag(const Point3& a, const Point3& b, int slice_axis) {
    edit::interactive::BoxRequest box;
    for (int axis = 0; axis < 3; ++axis) {
        if (axis == slice_axis) {
            box.lo[axis] = std::nearbyint(a[axis]);
            box.hi[axis] = box.lo[axis] + 1;
        } else {
            box.lo[axis] = std::nearbyint(std::min(a[axis], b[axis]));
            box.hi[axis] = std::nearbyint(std::max(a[axis], b[axis])) + 1;
        }
    }
    return box;
}

std::vector<Point3> closedLasso(std::vector<Point3> points) {
    if (points.empty()) return points;
    auto voxel = [](const Point3& p) {
        return std::array<double, 3>{std::nearbyint(p[0]), std::nearbyint(p[1]),
                                     std::nearbyint(p[2])};
    };
    if (voxel(points.back()) != voxel(points.front())) points.push_back(points.front());
    return points;
}

namespace {

// Drops the middle point of every straight run (same step before and after it).
std::vector<Index3> mergeStraightRuns(const std::vector<Index3>& walk) {
    std::vector<Index3> out;
    for (size_t i = 0; i < walk.size(); ++i) {
        if (i > 0 && i + 1 < walk.size()) {
            bool straight = true;
            for (int a = 0; a < 3; ++a)
                straight &= walk[i][a] - walk[i - 1][a] == walk[i + 1][a] - walk[i][a];
            if (straight) continue;
        }
        out.push_back(walk[i]);
    }
    return out;
}

}  // namespace

std::vector<std::vector<Index3>> strokesOfMask(const std::vector<uint8_t>& mask, Index3 shape) {
    const int64_t nz = shape[0], ny = shape[1], nx = shape[2];
    std::vector<uint8_t> seen(mask.size(), 0);
    std::vector<std::vector<Index3>> strokes;
    const int64_t step[3] = {ny * nx, nx, 1};
    // Per stack entry: the voxel and the next neighbour direction (0..5) to try.
    std::vector<std::pair<int64_t, int>> stack;
    for (int64_t start = 0; start < static_cast<int64_t>(mask.size()); ++start) {
        if (!mask[start] || seen[start]) continue;
        std::vector<Index3> walk;
        auto at = [&](int64_t v) { return Index3{v / step[0], (v / nx) % ny, v % nx}; };
        seen[start] = 1;
        stack.push_back({start, 0});
        walk.push_back(at(start));
        while (!stack.empty()) {
            auto& [v, dir] = stack.back();
            if (dir == 6) {
                stack.pop_back();
                if (!stack.empty()) walk.push_back(at(stack.back().first));  // back to the parent
                continue;
            }
            const int d = dir++;
            const int axis = d / 2;
            const int64_t sign = d % 2 ? 1 : -1;
            const Index3 c = at(v);
            const int64_t n = c[axis] + sign;
            if (n < 0 || n >= (axis == 0 ? nz : axis == 1 ? ny : nx)) continue;
            const int64_t w = v + sign * step[axis];
            if (!mask[w] || seen[w]) continue;
            seen[w] = 1;
            walk.push_back(at(w));
            stack.push_back({w, 0});
        }
        strokes.push_back(mergeStraightRuns(walk));
    }
    return strokes;
}

}  // namespace voxseg::ui
