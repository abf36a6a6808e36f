// Shape rules: Conv and ConvTranspose, and SubpixelAdd, the folded up-sampling's last step
// (engine/graph/shapes/shape_rules.h).
#include "engine/graph/shapes/shape_rules.h"

#include <string>

namespace voxseg::engine::shapes {

Result<Shape> convShape(const NodeShapes& s) {
    const Node& node = s.node;
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(2));
    const Shape& x = s.in(0);
    const Shape& w = s.in(1);
    const ConvAttrs& a = node.conv;
    const size_t sr = static_cast<size_t>(a.spatial_rank);
    if (x.size() != sr + 2 || w.size() != sr + 2)
        return s.error("input " + shapeToString(x) + " / weight " + shapeToString(w) +
                       " do not match spatial rank " + std::to_string(sr));
    if (a.kernel.size() != sr || a.strides.size() != sr || a.dilations.size() != sr ||
        a.pads_begin.size() != sr || a.pads_end.size() != sr)
        return s.error("attribute lengths do not match spatial rank");
    const bool transpose = node.op == OpKind::kConvTranspose;
    const int64_t in_ch = transpose ? w[0] : w[1] * a.group;
    const int64_t out_ch = transpose ? w[1] * a.group : w[0];
    if (x[1] != in_ch)
        return s.error("input has " + std::to_string(x[1]) + " channels, weight expects " +
                       std::to_string(in_ch));
    if (a.group <= 0 || in_ch % a.group || out_ch % a.group)
        return s.error("channels not divisible by group " + std::to_string(a.group));
    if (node.inputs.size() > 2 && node.inputs[2] >= 0 && numel(s.in(2)) != out_ch)
        return s.error("bias has " + std::to_string(numel(s.in(2))) + " values for " +
                       std::to_string(out_ch) + " channels");
    out = {x[0], out_ch};
    for (size_t i = 0; i < sr; ++i) {
        int64_t o;
        if (transpose) {  // in 128 bits: strides and kernels up to 2^31, axes 2^40
            using Wide = __int128;
            const int64_t op = i < a.output_padding.size() ? a.output_padding[i] : 0;
            const Wide w = Wide(a.strides[i]) * (x[2 + i] - 1) + op +
                           (Wide(a.kernel[i]) - 1) * a.dilations[i] + 1 - a.pads_begin[i] -
                           a.pads_end[i];
            if (w > kMaxDim)
                return s.error("output along axis " + std::to_string(i) + " passes 2^40");
            o = static_cast<int64_t>(w);
        } else {
            o = windowOutput(x[2 + i], a.kernel[i], a.strides[i], a.dilations[i], a.pads_begin[i],
                             a.pads_end[i], false);
        }
        if (o <= 0) return s.error("input " + shapeToString(x) + " is too small for the kernel");
        out.push_back(o);
    }
    return out;
}

// SubpixelAdd (op_kind.h): the output is Y's shape; P must hold G * O channels and, per spatial
// axis, Y's size / s + (s == 2) positions.
Result<Shape> subpixelAddShape(const NodeShapes& s) {
    VOXSEG_RETURN_IF_ERROR(s.need(2));
    const Shape& p = s.in(0);
    const Shape& y = s.in(1);
    const std::vector<int64_t>& f = s.node.subpixel;
    if (y.size() < 3 || p.size() != y.size() || f.size() != y.size() - 2 || p[0] != y[0])
        return s.error("parity " + shapeToString(p) + " and skip " + shapeToString(y) +
                       " do not match " + std::to_string(f.size()) + " factors");
    int64_t groups = 1;
    for (size_t i = 0; i < f.size(); ++i) {
        if ((f[i] != 1 && f[i] != 2) || y[2 + i] % f[i] != 0 ||
            p[2 + i] != y[2 + i] / f[i] + (f[i] == 2 ? 1 : 0))
            return s.error("parity " + shapeToString(p) + " does not fit skip " + shapeToString(y));
        groups *= f[i];
    }
    if (p[1] != groups * y[1])
        return s.error("parity has " + std::to_string(p[1]) + " channels, expected " +
                       std::to_string(groups * y[1]));
    if (s.node.inputs.size() > 2 && s.node.inputs[2] >= 0 && numel(s.in(2)) != 64 * y[1])
        return s.error("border correction has " + std::to_string(numel(s.in(2))) + " values");
    if (s.node.inputs.size() > 3 && s.node.inputs[3] >= 0 && numel(s.in(3)) != y[1])
        return s.error("bias has " + std::to_string(numel(s.in(3))) + " values");
    return y;
}

}  // namespace voxseg::engine::shapes
