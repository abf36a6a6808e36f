#include "engine/graph/graph.h"

#include "engine/graph/shapes/shape_rules.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace voxseg::engine {

Result<Shape> broadcastShapes(const Shape& a, const Shape& b) {
    const size_t rank = std::max(a.size(), b.size());
    Shape out(rank);
    for (size_t i = 0; i < rank; ++i) {
        const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
        const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
        if (da != db && da != 1 && db != 1)
            return invalidArgument("shapes " + shapeToString(a) + " and " + shapeToString(b) +
                                   " do not broadcast");
        out[i] = da == 1 ? db : da;
    }
    return out;
}

std::vector<SliceAxis> resolveSlice(const Node& node, const Shape& input) {
    std::vector<SliceAxis> axes(input.size());
    for (size_t i = 0; i < input.size(); ++i) axes[i] = {0, 1, input[i]};
    for (size_t k = 0; k < node.slice_starts.size(); ++k) {
        int64_t axis = k < node.slice_axes.size() ? node.slice_axes[k] : static_cast<int64_t>(k);
        if (axis < 0) axis += static_cast<int64_t>(input.size());
        if (axis < 0 || axis >= static_cast<int64_t>(input.size())) continue;
        const int64_t dim = input[axis];
        const int64_t step = k < node.slice_steps.size() ? node.slice_steps[k] : 1;
        int64_t start = node.slice_starts[k];
        int64_t end = k < node.slice_ends.size() ? node.slice_ends[k] : dim;
        if (start < 0) start += dim;
        if (end < 0 && end > std::numeric_limits<int64_t>::min() / 2) end += dim;
        // ONNX clamping: [0, dim] for positive steps, [-1, dim-1] for negative ones.
        if (step > 0) {
            start = std::clamp<int64_t>(start, 0, dim);
            end = std::clamp<int64_t>(end, 0, dim);
        } else {
            start = std::clamp<int64_t>(start, -1, dim - 1);
            end = std::clamp<int64_t>(end, -1, dim - 1);
        }
        int64_t count = 0;
        // In 128 bits: a step of the file's may be near +-2^63 (fuzz_onnx_import).
        if (step > 0 && end > start)
            count = static_cast<int64_t>((__int128(end) - start - 1) / step + 1);
        if (step < 0 && end < start)
            count = static_cast<int64_t>((__int128(start) - end - 1) / -__int128(step) + 1);
        axes[axis] = {start, step, count};
    }
    return axes;
}

namespace {

Status nodeError(const Node& node, const std::string& what) {
    return invalidArgument(std::string(opKindName(node.op)) + " node '" + node.name + "': " + what);
}

// One node's output shape: its op's rule (engine/graph/shapes/), then what every output must
// satisfy.
Status inferNode(Graph& g, const Node& node) {
    const auto valid = [&](ValueId v) {
        return v >= -1 && v < static_cast<ValueId>(g.values.size());
    };
    if (node.outputs.empty() || node.outputs[0] < 0 || !valid(node.outputs[0]) ||
        !std::all_of(node.inputs.begin(), node.inputs.end(), valid) ||
        !valid(node.fused_residual) || !valid(node.fused_prelu_slope))
        return internalError(std::string(opKindName(node.op)) + " node '" + node.name +
                             "' refers to a value that does not exist");
    const shapes::ShapeRule rule = shapes::shapeRule(node.op);
    if (!rule) return internalError(nodeError(node, "no shape rule").message());
    VOXSEG_ASSIGN_OR_RETURN(Shape out, rule(shapes::NodeShapes(g, node)));
    // Every value stays inside kMaxDim elements, whatever the file's constants say (Expand's
    // target, Tile's repeats, ...): later sizes and byte counts are computed in int64.
    __int128 elements = 1;
    for (int64_t d : out) {
        elements *= std::max<int64_t>(d, 0);
        if (d < 0 || elements > shapes::kMaxDim)
            return nodeError(node, "output " + shapeToString(out) + " has " +
                                       (d < 0 ? "a negative axis" : "more than 2^40 elements"));
    }
    if (node.fused_residual >= 0 && g.values[node.fused_residual].shape != out)
        return nodeError(node, "fused residual shape " +
                                   shapeToString(g.values[node.fused_residual].shape) +
                                   " differs from output " + shapeToString(out));
    g.values[node.outputs[0]].shape = std::move(out);
    return Status::ok();
}

}  // namespace

Status Graph::inferShapes(const std::vector<Shape>& input_shapes) {
    if (input_shapes.size() != inputs.size())
        return invalidArgument("graph has " + std::to_string(inputs.size()) + " inputs, got " +
                               std::to_string(input_shapes.size()) + " shapes");
    for (size_t i = 0; i < inputs.size(); ++i) {
        const Shape& old = values[inputs[i]].shape;
        const Shape& s = input_shapes[i];
        if (!old.empty() && old.size() != s.size())
            return invalidArgument("input '" + values[inputs[i]].name + "' has rank " +
                                   std::to_string(old.size()) + ", got shape " + shapeToString(s));
        for (int64_t d : s)
            if (d <= 0)
                return invalidArgument("input '" + values[inputs[i]].name +
                                       "': non-positive dim in " + shapeToString(s));
        values[inputs[i]].shape = s;
    }
    for (const Node& node : nodes) VOXSEG_RETURN_IF_ERROR(inferNode(*this, node));
    return Status::ok();
}

Status Graph::inferNodeShape(size_t index) {
    if (index >= nodes.size())
        return internalError("inferNodeShape: no node " + std::to_string(index));
    return inferNode(*this, nodes[index]);
}

double Graph::convFlops() const {
    double flops = 0;
    for (const Node& node : nodes) {
        if (node.op != OpKind::kConv && node.op != OpKind::kConvTranspose) continue;
        const Shape& x = values[node.inputs[0]].shape;
        const Shape& w = values[node.inputs[1]].shape;
        const Shape& y = values[node.outputs[0]].shape;
        double kernel = 1;
        for (size_t i = 2; i < w.size(); ++i) kernel *= static_cast<double>(w[i]);
        // Conv: every output element costs (C_in / group) * kernel MACs; ConvTranspose: every
        // input element scatters into (C_out / group) * kernel outputs.
        if (node.op == OpKind::kConv)
            flops += 2.0 * static_cast<double>(numel(y)) * static_cast<double>(w[1]) * kernel;
        else
            flops += 2.0 * static_cast<double>(numel(x)) * static_cast<double>(w[1]) * kernel;
    }
    return flops;
}

}  // namespace voxseg::engine
