// Shape rules: Softmax, ReduceMean/ReduceSum/ReduceMax (engine/graph/shapes/shape_rules.h).
#include "engine/graph/shapes/shape_rules.h"

#include <algorithm>
#include <string>

namespace voxseg::engine::shapes {

Result<Shape> softmaxShape(const NodeShapes& s) {
    const Node& node = s.node;
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(1));
    out = s.in(0);
    if (node.axis < 0 || node.axis >= static_cast<int64_t>(out.size()))
        return s.error("axis " + std::to_string(node.axis) + " out of range");
    return out;
}

// ReduceMean, ReduceSum, ReduceMax over sorted axes (all when none).
Result<Shape> reduceShape(const NodeShapes& s) {
    const Node& node = s.node;
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(1));
    const Shape& x = s.in(0);
    for (size_t i = 0; i < node.reduce_axes.size(); ++i)
        if (node.reduce_axes[i] < 0 || node.reduce_axes[i] >= static_cast<int64_t>(x.size()) ||
            (i > 0 && node.reduce_axes[i] <= node.reduce_axes[i - 1]))
            return s.error("reduce axes " + shapeToString(node.reduce_axes) + " invalid for " +
                           shapeToString(x));
    for (size_t i = 0; i < x.size(); ++i) {
        const bool reduced = node.reduce_axes.empty() ||
                             std::find(node.reduce_axes.begin(), node.reduce_axes.end(),
                                       static_cast<int64_t>(i)) != node.reduce_axes.end();
        if (!reduced)
            out.push_back(x[i]);
        else if (node.keepdims)
            out.push_back(1);
    }
    return out;
}

}  // namespace voxseg::engine::shapes
