// Shape rules: MatMul, Attention, MultiHeadAttention, Rotary (engine/graph/shapes/shape_rules.h).
#include "engine/graph/shapes/shape_rules.h"

#include <algorithm>
#include <string>

namespace voxseg::engine::shapes {

namespace {

// The optional 4th and 5th inputs of the attention ops: biases or masks that broadcast to the
// scores, their batch axes also as tiles (an axis of P items on one of P*k).
Status attentionBiasFits(const NodeShapes& s, const Shape& scores) {
    const Node& node = s.node;
    for (size_t i = 3; i < std::min<size_t>(node.inputs.size(), 5); ++i) {
        if (node.inputs[i] < 0) continue;
        const Shape& bias = s.in(i);
        bool fits = bias.size() <= scores.size();
        for (size_t back = 0; fits && back < bias.size(); ++back) {
            const int64_t b = bias[bias.size() - 1 - back];
            const int64_t sc = scores[scores.size() - 1 - back];
            fits = b == 1 || b == sc || (back >= 2 && b > 0 && sc % b == 0);
        }
        if (!fits)
            return s.error("bias " + shapeToString(bias) + " does not broadcast to the scores " +
                           shapeToString(scores));
    }
    if (node.inputs.size() > 5) return s.error("takes at most two biases");
    return Status::ok();
}

}  // namespace

// Batched, broadcasting MatMul with an optional bias of the last axis.
Result<Shape> matMulShape(const NodeShapes& s) {
    const Node& node = s.node;
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(2));
    const Shape& a = s.in(0);
    const Shape& b = s.in(1);
    if (a.size() < 2 || b.size() < 2)
        return s.error("operands " + shapeToString(a) + " x " + shapeToString(b) +
                       " need rank >= 2 (rank-1 operands are reshaped at "
                       "import)");
    if (a.back() != b[b.size() - 2])
        return s.error("inner dims differ: " + shapeToString(a) + " x " + shapeToString(b));
    auto batch = broadcastShapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
    if (!batch) return s.error("batch dims: " + batch.status().message());
    out = *batch;
    out.push_back(a[a.size() - 2]);
    out.push_back(b.back());
    if (node.inputs.size() > 2 && node.inputs[2] >= 0 && numel(s.in(2)) != b.back())
        return s.error("bias " + shapeToString(s.in(2)) + " does not have the " +
                       std::to_string(b.back()) + " values of the last axis");
    return out;
}

// Attention on [..., T, D] operands, K given transposed.
Result<Shape> attentionShape(const NodeShapes& s) {
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(3));
    const Shape& q = s.in(0);
    const Shape& kt = s.in(1);
    const Shape& v = s.in(2);
    const size_t r = q.size();
    if (r < 2 || kt.size() != r || v.size() != r ||
        !std::equal(q.begin(), q.end() - 2, kt.begin()) ||
        !std::equal(q.begin(), q.end() - 2, v.begin()) || q[r - 1] != kt[r - 2] ||
        kt[r - 1] != v[r - 2])
        return s.error("Q " + shapeToString(q) + ", K^T " + shapeToString(kt) + ", V " +
                       shapeToString(v) + " do not fit attention");
    out = q;
    out[r - 1] = v[r - 1];
    Shape scores = q;
    scores[r - 1] = kt[r - 1];
    VOXSEG_RETURN_IF_ERROR(attentionBiasFits(s, scores));
    return out;
}

// MultiHeadAttention on packed [B, T, H*D] operands.
Result<Shape> multiHeadAttentionShape(const NodeShapes& s) {
    const Node& node = s.node;
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(3));
    const Shape& q = s.in(0);
    const Shape& k = s.in(1);
    const Shape& v = s.in(2);
    const int64_t h = node.attention_heads;
    if (q.size() != 3 || k.size() != 3 || v.size() != 3 || h < 1 || q[0] != k[0] || q[0] != v[0] ||
        k[1] != v[1] || q[2] != k[2] || q[2] % h != 0 || v[2] % h != 0)
        return s.error("Q " + shapeToString(q) + ", K " + shapeToString(k) + ", V " +
                       shapeToString(v) + " do not fit " + std::to_string(h) + "-head attention");
    out = {q[0], q[1], v[2]};
    VOXSEG_RETURN_IF_ERROR(attentionBiasFits(s, {q[0], h, q[1], k[1]}));
    return out;
}

Result<Shape> rotaryShape(const NodeShapes& s) {
    Shape out;
    VOXSEG_RETURN_IF_ERROR(s.need(3));
    out = s.in(0);
    if (out.size() < 2 || out.back() % 2 != 0)
        return s.error("input " + shapeToString(out) + " needs rank >= 2 and an even last dim");
    const int64_t table = out[out.size() - 2] * out.back();
    if (numel(s.in(1)) != table || numel(s.in(2)) != table)
        return s.error("cos " + shapeToString(s.in(1)) + " and sin " + shapeToString(s.in(2)) +
                       " need " + std::to_string(table) + " values (tokens x dim)");
    return out;
}

}  // namespace voxseg::engine::shapes
