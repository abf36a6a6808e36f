// Shape rules: Reshape, Transpose, Slice, Pad, Concat, Expand, Tile, Roll
// (engine/graph/shapes/shape_rules.h).
#include "engine/graph/shapes/shape_rules.h"

#include <limits>
#include <string>
#include <vector>

namespace voxseg::engine::shapes {

Result<Shape> reshapeShape(const NodeShapes& s) {
    const Node& node = s.node;
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(1));
    const Shape& x = s.in(0);
    int64_t known = 1;
    int infer = -1;
    for (size_t i = 0; i < node.shape.size(); ++i) {
        int64_t d = node.shape[i];
        if (d == 0) {
            if (i >= x.size()) return s.error("0 in target beyond input rank");
            d = x[i];
        }
        if (d == -1) {
            if (infer >= 0) return s.error("more than one -1 in target");
            infer = static_cast<int>(i);
            out.push_back(-1);
            continue;
        }
        if (d < 0) return s.error("negative target dim");
        // Dims come from the file: their product must not overflow (fuzz_onnx_import).
        if (d > 0 && known > std::numeric_limits<int64_t>::max() / d)
            return s.error("target shape has more than 2^63 elements");
        known *= d;
        out.push_back(d);
    }
    if (infer >= 0) {
        if (known == 0 || numel(x) % known) return s.error("cannot reshape " + shapeToString(x));
        out[infer] = numel(x) / known;
    }
    if (numel(out) != numel(x))
        return s.error("cannot reshape " + shapeToString(x) + " to " + shapeToString(out));
    return out;
}

Result<Shape> transposeShape(const NodeShapes& s) {
    const Node& node = s.node;
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(1));
    const Shape& x = s.in(0);
    if (node.perm.size() != x.size()) return s.error("perm does not match rank");
    std::vector<bool> seen(x.size(), false);
    for (int64_t p : node.perm) {
        if (p < 0 || p >= static_cast<int64_t>(x.size()) || seen[p])
            return s.error("perm is not a permutation");
        seen[p] = true;
        out.push_back(x[p]);
    }
    return out;
}

Result<Shape> sliceShape(const NodeShapes& s) {
    const Node& node = s.node;
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(1));
    for (int64_t step : node.slice_steps)
        if (step == 0) return s.error("step 0");
    for (const SliceAxis& a : resolveSlice(node, s.in(0))) out.push_back(a.count);
    return out;
}

Result<Shape> padShape(const NodeShapes& s) {
    const Node& node = s.node;
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(1));
    const Shape& x = s.in(0);
    if (node.pad.pads_begin.size() != x.size() || node.pad.pads_end.size() != x.size())
        return s.error("pads do not match input rank");
    for (size_t i = 0; i < x.size(); ++i) {
        const __int128 wide = __int128(x[i]) + node.pad.pads_begin[i] + node.pad.pads_end[i];
        if (wide > kMaxDim) return s.error("pads make the output too large");
        const auto o = static_cast<int64_t>(wide);
        if (o <= 0) return s.error("output would be empty");
        if (node.pad.mode == PadAttrs::Mode::kReflect &&
            (node.pad.pads_begin[i] >= x[i] || node.pad.pads_end[i] >= x[i]))
            return s.error("reflect padding larger than the input");
        out.push_back(o);
    }
    return out;
}

Result<Shape> concatShape(const NodeShapes& s) {
    const Node& node = s.node;
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(1));
    out = s.in(0);
    if (node.axis < 0 || node.axis >= static_cast<int64_t>(out.size()))
        return s.error("axis " + std::to_string(node.axis) + " out of range");
    for (size_t i = 1; i < node.inputs.size(); ++i) {
        const Shape& part = s.in(i);
        if (part.size() != out.size()) return s.error("inputs have different ranks");
        for (size_t d = 0; d < part.size(); ++d) {
            if (static_cast<int64_t>(d) == node.axis) continue;
            if (part[d] != out[d])
                return s.error("input shapes " + shapeToString(s.in(0)) + " and " +
                               shapeToString(part) + " differ off axis " +
                               std::to_string(node.axis));
        }
        out[node.axis] += part[node.axis];
    }
    return out;
}

Result<Shape> expandShape(const NodeShapes& s) {
    const Node& node = s.node;
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(1));
    auto b = broadcastShapes(s.in(0), node.shape);
    if (!b) return s.error(b.status().message());
    out = *b;
    return out;
}

Result<Shape> tileShape(const NodeShapes& s) {
    const Node& node = s.node;
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(1));
    const Shape& x = s.in(0);
    if (node.repeats.size() != x.size())
        return s.error(std::to_string(node.repeats.size()) + " repeats for rank " +
                       std::to_string(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
        if (node.repeats[i] < 1) return s.error("repeats must be >= 1");
        if (node.repeats[i] > kMaxDim / std::max<int64_t>(x[i], 1))
            return s.error("repeats " + std::to_string(node.repeats[i]) + " along axis " +
                           std::to_string(i) + " of " + shapeToString(x) + " pass 2^40");
        out.push_back(x[i] * node.repeats[i]);
    }
    return out;
}

Result<Shape> rollShape(const NodeShapes& s) {
    const Node& node = s.node;
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(1));
    out = s.in(0);
    if (node.roll_shifts.size() != out.size())
        return s.error(std::to_string(node.roll_shifts.size()) + " shifts for rank " +
                       std::to_string(out.size()));
    for (size_t d = 0; d < out.size(); ++d)
        if (node.roll_shifts[d] < 0 || (node.roll_shifts[d] > 0 && node.roll_shifts[d] >= out[d]))
            return s.error("shift " + std::to_string(node.roll_shifts[d]) + " along axis " +
                           std::to_string(d) + " of " + shapeToString(out));
    return out;
}

}  // namespace voxseg::engine::shapes
