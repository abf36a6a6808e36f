// Shape rules: Resize (engine/graph/shapes/shape_rules.h).
#include "engine/graph/shapes/shape_rules.h"

#include <cmath>
#include <string>

namespace voxseg::engine::shapes {

Result<Shape> resizeShape(const NodeShapes& s) {
    const Node& node = s.node;
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(1));
    const Shape& x = s.in(0);
    if (node.resize.scales.size() != x.size())
        return s.error("has " + std::to_string(node.resize.scales.size()) + " scales for a rank-" +
                       std::to_string(x.size()) + " input");
    for (size_t i = 0; i < x.size(); ++i) {
        const double scale = node.resize.scales[i];
        if (!(scale > 0)) return s.error("scale must be positive");
        // Relative slack so that scales derived from integer sizes survive rounding.
        const double size = std::floor(static_cast<double>(x[i]) * scale * (1 + 1e-6));
        if (!(size < 9.0e15))  // also NaN and inf: no int64 conversion out of range
            return s.error("scale " + std::to_string(scale) + " gives an output of " +
                           std::to_string(size) + " along axis " + std::to_string(i));
        const auto o = static_cast<int64_t>(size);
        if (o <= 0) return s.error("output would be empty");
        out.push_back(o);
    }
    return out;
}

}  // namespace voxseg::engine::shapes
