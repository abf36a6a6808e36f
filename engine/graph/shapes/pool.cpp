// Shape rules: MaxPool, AveragePool, GlobalAveragePool (engine/graph/shapes/shape_rules.h).
#include "engine/graph/shapes/shape_rules.h"

#include <string>

namespace voxseg::engine::shapes {

// MaxPool, AveragePool.
Result<Shape> poolShape(const NodeShapes& s) {
    const Node& node = s.node;
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(1));
    const Shape& x = s.in(0);
    const PoolAttrs& p = node.pool;
    const size_t sr = p.kernel.size();
    if (x.size() != sr + 2 || p.strides.size() != sr || p.pads_begin.size() != sr ||
        p.pads_end.size() != sr || p.dilations.size() != sr)
        return s.error("attributes do not match input " + shapeToString(x));
    out = {x[0], x[1]};
    for (size_t i = 0; i < sr; ++i) {
        const int64_t o = windowOutput(x[2 + i], p.kernel[i], p.strides[i], p.dilations[i],
                                       p.pads_begin[i], p.pads_end[i], p.ceil_mode);
        if (o <= 0) return s.error("input " + shapeToString(x) + " too small");
        out.push_back(o);
    }
    return out;
}

Result<Shape> globalAveragePoolShape(const NodeShapes& s) {
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(1));
    out = s.in(0);
    if (out.size() < 2) return s.error("input must have a channel axis");
    for (size_t i = 2; i < out.size(); ++i) out[i] = 1;
    return out;
}

}  // namespace voxseg::engine::shapes
