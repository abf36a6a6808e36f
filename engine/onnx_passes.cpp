// Graph-level passes of the ONNX importer that run after every node was converted.
#include "engine/onnx_internal.h"

#include <algorithm>

namespace voxseg::engine::onnx_detail {

namespace {

bool allEqual(const Tensor& t, float v) {
    for (float x : t.toFloats())
        if (x != v) return false;
    return true;
}

}  // namespace

// PyTorch (opset < 18) exports GroupNorm as Reshape [N, G, -1] -> InstanceNorm(ones, zeros) ->
// Reshape back -> Mul(gamma) -> Add(beta). Collapses it into one GroupNorm node.
void fuseGroupNormPattern(Graph& g) {
    std::vector<int> producer(g.values.size(), -1), uses(g.values.size(), 0);
    auto recount = [&] {
        producer.assign(g.values.size(), -1);
        uses.assign(g.values.size(), 0);
        for (size_t i = 0; i < g.nodes.size(); ++i) {
            producer[g.nodes[i].outputs[0]] = static_cast<int>(i);
            for (ValueId v : g.nodes[i].inputs)
                if (v >= 0) ++uses[v];
        }
        for (ValueId v : g.outputs) ++uses[v];
    };
    recount();
    std::vector<bool> dead(g.nodes.size(), false);
    auto singleConsumer = [&](ValueId v, OpKind op) -> int {
        if (uses[v] != 1) return -1;
        for (size_t i = 0; i < g.nodes.size(); ++i)
            if (!dead[i] && g.nodes[i].op == op &&
                std::find(g.nodes[i].inputs.begin(), g.nodes[i].inputs.end(), v) !=
                    g.nodes[i].inputs.end())
                return static_cast<int>(i);
        return -1;
    };
    // Per-channel values of a constant shaped [C], [C,1,..] or [1,C,1,..] (empty otherwise).
    auto perChannel = [&](ValueId v, int64_t c, size_t rank) -> std::vector<float> {
        if (!g.isConstant(v)) return {};
        const Shape& s = g.values[v].shape;
        if (numel(s) != c || s.size() > rank) return {};
        const size_t channel_axis_from_end = rank - 2;  // [.., C, spatial...]
        if (c > 1) {
            size_t axis = s.size();
            for (size_t i = 0; i < s.size(); ++i)
                if (s[i] == c) axis = i;
            if (axis == s.size() || s.size() - 1 - axis != channel_axis_from_end) return {};
        }
        return g.constant(v).toFloats();
    };
    for (size_t i = 0; i < g.nodes.size(); ++i) {
        const Node& r1 = g.nodes[i];
        if (dead[i] || r1.op != OpKind::kReshape) continue;
        const Shape& x = g.values[r1.inputs[0]].shape;
        const Shape& y = g.values[r1.outputs[0]].shape;
        if (x.size() < 3 || y.size() != 3 || y[0] != x[0] || x[1] % y[1]) continue;
        const int64_t c = x[1], groups = y[1];
        const int in_idx = singleConsumer(r1.outputs[0], OpKind::kInstanceNorm);
        if (in_idx < 0) continue;
        const Node& inorm = g.nodes[in_idx];
        if (inorm.inputs[0] != r1.outputs[0] || !g.isConstant(inorm.inputs[1]) ||
            !g.isConstant(inorm.inputs[2]) || !allEqual(g.constant(inorm.inputs[1]), 1.0f) ||
            !allEqual(g.constant(inorm.inputs[2]), 0.0f))
            continue;
        const int r2_idx = singleConsumer(inorm.outputs[0], OpKind::kReshape);
        if (r2_idx < 0 || g.values[g.nodes[r2_idx].outputs[0]].shape != x) continue;
        ValueId out = g.nodes[r2_idx].outputs[0];
        std::vector<float> gamma(c, 1.0f), beta(c, 0.0f);
        std::vector<int> absorbed = {static_cast<int>(i), in_idx, r2_idx};
        const int mul_idx = singleConsumer(out, OpKind::kMul);
        if (mul_idx >= 0) {
            const Node& m = g.nodes[mul_idx];
            const ValueId other = m.inputs[0] == out ? m.inputs[1] : m.inputs[0];
            auto v = perChannel(other, c, x.size());
            if (!v.empty() && g.values[m.outputs[0]].shape == x) {
                gamma = v;
                if (gamma.size() == 1) gamma.assign(c, v[0]);
                out = m.outputs[0];
                absorbed.push_back(mul_idx);
                const int add_idx = singleConsumer(out, OpKind::kAdd);
                if (add_idx >= 0) {
                    const Node& ad = g.nodes[add_idx];
                    const ValueId o2 = ad.inputs[0] == out ? ad.inputs[1] : ad.inputs[0];
                    auto b = perChannel(o2, c, x.size());
                    if (!b.empty() && g.values[ad.outputs[0]].shape == x) {
                        beta = b;
                        if (beta.size() == 1) beta.assign(c, b[0]);
                        out = ad.outputs[0];
                        absorbed.push_back(add_idx);
                    }
                }
            }
        }
        Node gn;
        gn.op = OpKind::kGroupNorm;
        gn.name = inorm.name;
        gn.norm.epsilon = inorm.norm.epsilon;
        gn.norm.num_groups = groups;
        const ValueId sv =
            g.addValue({gn.name + "/gamma", {c}, DType::kFloat32, Tensor::fromFloats({c}, gamma)});
        const ValueId bv =
            g.addValue({gn.name + "/beta", {c}, DType::kFloat32, Tensor::fromFloats({c}, beta)});
        gn.inputs = {g.nodes[i].inputs[0], sv, bv};
        gn.outputs = {out};
        // The GroupNorm takes the place of the last absorbed node (its consumers follow it).
        const int last = *std::max_element(absorbed.begin(), absorbed.end());
        for (int k : absorbed) dead[k] = true;
        g.nodes[last] = gn;
        dead[last] = false;
        producer.resize(g.values.size(), -1);
        uses.resize(g.values.size(), 0);
        std::vector<Node> kept;
        for (size_t k = 0; k < g.nodes.size(); ++k)
            if (!dead[k]) kept.push_back(g.nodes[k]);
        g.nodes = std::move(kept);
        dead.assign(g.nodes.size(), false);
        recount();
        i = 0;  // restart the scan on the rewritten list (patterns are few)
    }
}

// Removes nodes whose outputs reach no graph output.
void pruneDeadNodes(Graph& g) {
    std::vector<bool> live(g.values.size(), false);
    for (ValueId v : g.outputs) live[v] = true;
    std::vector<bool> keep(g.nodes.size(), false);
    for (size_t i = g.nodes.size(); i-- > 0;) {
        const Node& n = g.nodes[i];
        if (!live[n.outputs[0]]) continue;
        keep[i] = true;
        for (ValueId v : n.inputs)
            if (v >= 0) live[v] = true;
        if (n.fused_residual >= 0) live[n.fused_residual] = true;
        if (n.fused_prelu_slope >= 0) live[n.fused_prelu_slope] = true;
    }
    std::vector<Node> kept;
    for (size_t i = 0; i < g.nodes.size(); ++i)
        if (keep[i]) kept.push_back(std::move(g.nodes[i]));
    g.nodes = std::move(kept);
}

}  // namespace voxseg::engine::onnx_detail
