// optimize()'s fold of copy chains (engine/passes/passes.h). torch exports torch.roll(x, s, d) as,
// per rolled axis, Concat(Slice(x, [n - s, n)), Slice(x, [0, n - s))): two slab copies and a copy
// of the whole. Swin's shifted windows roll three axes before the window attention and back
// after it, 9 copies of the feature map each time; a Swin block crops the window padding with a
// Slice per axis, 3 more. The pair becomes one Roll node, a Roll of a Roll one Roll, and a Slice
// of a Slice one Slice: one copy each.
#include "engine/passes/passes.h"

#include <algorithm>
#include <limits>

namespace voxseg::engine::passes {
namespace {

bool hasEpilogue(const Node& n) {
    return n.fused_activation != ActivationKind::kNone || n.fused_residual >= 0;
}

// Removes the nodes at `gone` (the chain's, before the node that replaced it).
void eraseNodes(Graph& g, std::vector<int> gone) {
    std::sort(gone.begin(), gone.end());
    for (size_t k = gone.size(); k-- > 0;) g.nodes.erase(g.nodes.begin() + gone[k]);
}

// Concat(Slice(x, [a, n)), Slice(x, [0, a))) along one axis, each Slice read once and cutting
// only that axis with step 1: Roll(x) by n - a along it.
bool foldRollPair(Graph& g, const Usage& u, size_t i) {
    const Node& cat = g.nodes[i];
    if (cat.op != OpKind::kConcat || cat.inputs.size() != 2 || hasEpilogue(cat)) return false;
    const int first = singleProducer(g, u, cat.inputs[0], OpKind::kSlice);
    const int second = singleProducer(g, u, cat.inputs[1], OpKind::kSlice);
    if (first < 0 || second < 0 || hasEpilogue(g.nodes[first]) || hasEpilogue(g.nodes[second]))
        return false;
    const ValueId x = g.nodes[first].inputs[0];
    if (g.nodes[second].inputs[0] != x) return false;
    const Shape& xs = g.values[x].shape;
    if (xs != g.values[cat.outputs[0]].shape) return false;
    const std::vector<SliceAxis> a = resolveSlice(g.nodes[first], xs);
    const std::vector<SliceAxis> b = resolveSlice(g.nodes[second], xs);
    const size_t axis = static_cast<size_t>(cat.axis);
    for (size_t d = 0; d < xs.size(); ++d) {
        if (d == axis) continue;
        const SliceAxis whole{0, 1, xs[d]};
        for (const SliceAxis& s : {a[d], b[d]})
            if (s.start != whole.start || s.step != whole.step || s.count != whole.count)
                return false;
    }
    const int64_t n = xs[axis], cut = a[axis].start;
    if (cut <= 0 || cut >= n || a[axis].step != 1 || a[axis].count != n - cut ||
        b[axis].start != 0 || b[axis].step != 1 || b[axis].count != cut)
        return false;
    Node roll;
    roll.op = OpKind::kRoll;
    roll.name = cat.name + "/roll";
    roll.inputs = {x};
    roll.outputs = cat.outputs;
    roll.roll_shifts.assign(xs.size(), 0);
    roll.roll_shifts[axis] = n - cut;
    g.nodes[i] = roll;
    eraseNodes(g, {first, second});
    return true;
}

// Roll(Roll(x)), the inner one read once: one Roll by the sum of the shifts.
bool foldRollChain(Graph& g, const Usage& u, size_t i) {
    Node& outer = g.nodes[i];
    if (outer.op != OpKind::kRoll || hasEpilogue(outer)) return false;
    const int inner = singleProducer(g, u, outer.inputs[0], OpKind::kRoll);
    if (inner < 0 || hasEpilogue(g.nodes[inner])) return false;
    const Shape& xs = g.values[outer.inputs[0]].shape;
    const std::vector<int64_t>& s = g.nodes[inner].roll_shifts;
    for (size_t d = 0; d < xs.size(); ++d)
        outer.roll_shifts[d] = (outer.roll_shifts[d] + s[d]) % std::max<int64_t>(xs[d], 1);
    outer.inputs = g.nodes[inner].inputs;
    eraseNodes(g, {inner});
    return true;
}

// Slice(Slice(x)) with positive steps, the inner one read once: one Slice taking, along each
// axis, every (outer step x inner step)-th element from inner start + outer start x inner step.
bool foldSliceChain(Graph& g, const Usage& u, size_t i) {
    const Node& outer = g.nodes[i];
    if (outer.op != OpKind::kSlice || hasEpilogue(outer)) return false;
    const int inner = singleProducer(g, u, outer.inputs[0], OpKind::kSlice);
    if (inner < 0 || hasEpilogue(g.nodes[inner])) return false;
    const ValueId x = g.nodes[inner].inputs[0];
    const std::vector<SliceAxis> a = resolveSlice(g.nodes[inner], g.values[x].shape);
    const std::vector<SliceAxis> b = resolveSlice(outer, g.values[outer.inputs[0]].shape);
    Node merged;
    merged.op = OpKind::kSlice;
    merged.name = outer.name;
    merged.inputs = {x};
    merged.outputs = outer.outputs;
    for (size_t d = 0; d < a.size(); ++d) {
        if (a[d].step < 1 || b[d].step < 1 || b[d].count < 1) return false;
        // In 128 bits: a file's steps may be near 2^63 (fuzz_onnx_import); one element: step 1.
        const __int128 step = b[d].count == 1 ? 1 : __int128(a[d].step) * b[d].step;
        const __int128 start = a[d].start + __int128(b[d].start) * a[d].step;
        const __int128 end = start + (b[d].count - 1) * step + 1;
        if (end > std::numeric_limits<int64_t>::max() / 2) return false;
        merged.slice_axes.push_back(static_cast<int64_t>(d));
        merged.slice_starts.push_back(static_cast<int64_t>(start));
        merged.slice_ends.push_back(static_cast<int64_t>(end));
        merged.slice_steps.push_back(static_cast<int64_t>(step));
    }
    g.nodes[i] = merged;
    eraseNodes(g, {inner});
    return true;
}

}  // namespace

void fuseCopies(Graph& g) {
    for (auto fold : {foldRollPair, foldRollChain, foldSliceChain}) {
        bool changed = true;
        while (changed) {
            changed = false;
            const Usage u = computeUsage(g);
            for (size_t i = 0; i < g.nodes.size() && !changed; ++i) changed = fold(g, u, i);
        }
    }
}

}  // namespace voxseg::engine::passes
