// Shape rules: InstanceNorm, BatchNorm, GroupNorm (per-channel parameters), LayerNorm,
// ChannelLayerNorm (engine/graph/shapes/shape_rules.h).
#include "engine/graph/shapes/shape_rules.h"

#include <string>

namespace voxseg::engine::shapes {

// InstanceNorm, GroupNorm, BatchNorm: one parameter per channel.
Result<Shape> channelNormShape(const NodeShapes& s) {
    const Node& node = s.node;
    Shape out;
    const size_t n = node.op == OpKind::kBatchNorm ? 5 : 3;
    VOXSEG_RETURN_IF_ERROR(s.need(n));
    out = s.in(0);
    if (out.size() < 2) return s.error("input must have a channel axis");
    for (size_t i = 1; i < n; ++i)
        if (numel(s.in(i)) != out[1])
            return s.error("parameter " + std::to_string(i) + " has " +
                           std::to_string(numel(s.in(i))) + " values for " +
                           std::to_string(out[1]) + " channels");
    if (node.op == OpKind::kGroupNorm &&
        (node.norm.num_groups <= 0 || out[1] % node.norm.num_groups))
        return s.error(std::to_string(out[1]) + " channels not divisible into " +
                       std::to_string(node.norm.num_groups) + " groups");
    return out;
}

// LayerNorm over the axes from node.axis on.
Result<Shape> layerNormShape(const NodeShapes& s) {
    const Node& node = s.node;
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(2));
    out = s.in(0);
    if (node.axis < 0 || node.axis >= static_cast<int64_t>(out.size()))
        return s.error("axis " + std::to_string(node.axis) + " out of range for " +
                       shapeToString(out));
    int64_t inner = 1;
    for (size_t i = static_cast<size_t>(node.axis); i < out.size(); ++i) inner *= out[i];
    for (size_t i = 1; i < node.inputs.size(); ++i)
        if (node.inputs[i] >= 0 && numel(s.in(i)) != inner)
            return s.error("scale/bias have " + std::to_string(numel(s.in(i))) +
                           " values for a normalised size of " + std::to_string(inner));
    return out;
}

// LayerNorm over the channel axis of [N, C, spatial...].
Result<Shape> channelLayerNormShape(const NodeShapes& s) {
    const Node& node = s.node;
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(2));
    out = s.in(0);
    if (out.size() < 3)
        return s.error("input " + shapeToString(out) + " needs rank >= 3 (N, C, spatial...)");
    for (size_t i = 1; i < node.inputs.size(); ++i)
        if (node.inputs[i] >= 0 && numel(s.in(i)) != out[1])
            return s.error("scale/bias have " + std::to_string(numel(s.in(i))) + " values for " +
                           std::to_string(out[1]) + " channels");
    return out;
}

}  // namespace voxseg::engine::shapes
