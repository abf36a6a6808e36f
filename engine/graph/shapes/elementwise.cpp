// Shape rules: unary ops, PRelu, Add/Sub/Mul/Div, Where (engine/graph/shapes/shape_rules.h).
#include "engine/graph/shapes/shape_rules.h"

namespace voxseg::engine::shapes {

// Relu, LeakyRelu, Sigmoid, Tanh, Clip, Identity, Erf, Gelu, Silu, Sqrt, Sin, Cos.
Result<Shape> unaryShape(const NodeShapes& s) {
    VOXSEG_RETURN_IF_ERROR(s.need(1));
    return s.in(0);
}

Result<Shape> preluShape(const NodeShapes& s) {
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(2));
    VOXSEG_ASSIGN_OR_RETURN(out, broadcastShapes(s.in(0), s.in(1)));
    if (out != s.in(0)) return s.error("slope does not broadcast to the input");
    return out;
}

// Add, Sub, Mul, Div: numpy broadcasting.
Result<Shape> binaryShape(const NodeShapes& s) {
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(2));
    auto b = broadcastShapes(s.in(0), s.in(1));
    if (!b) return s.error(b.status().message());
    out = *b;
    return out;
}

Result<Shape> whereShape(const NodeShapes& s) {
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(3));
    auto ab = broadcastShapes(s.in(1), s.in(2));
    if (!ab) return s.error(ab.status().message());
    auto all = broadcastShapes(s.in(0), *ab);
    if (!all) return s.error(all.status().message());
    out = *all;
    return out;
}

}  // namespace voxseg::engine::shapes
