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

}  // namespace voxseg::ui
