// The ONNX importer's graph-level rewrites (engine/passes/import_patterns.h).
#include "engine/passes/import_patterns.h"

#include "engine/graph/broadcast.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace voxseg::engine::passes {

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

namespace {

// Which node produces each value (-1: graph input or constant).
std::vector<int> producers(const Graph& g) {
    std::vector<int> p(g.values.size(), -1);
    for (size_t i = 0; i < g.nodes.size(); ++i) p[g.nodes[i].outputs[0]] = static_cast<int>(i);
    return p;
}

// The single value of a constant scalar-like value (nullopt otherwise).
std::optional<double> constScalar(const Graph& g, ValueId v) {
    if (!g.isConstant(v)) return std::nullopt;
    return scalarOf(g.constant(v));
}

bool near(std::optional<double> v, double want, double tol = 1e-4) {
    return v && std::abs(*v - want) <= tol * std::max(1.0, std::abs(want));
}

// The node producing `v` when it is `op` (nullptr otherwise).
const Node* producedBy(const Graph& g, const std::vector<int>& prod, ValueId v, OpKind op) {
    if (v < 0 || prod[v] < 0) return nullptr;
    const Node& n = g.nodes[prod[v]];
    return n.op == op ? &n : nullptr;
}

// The operand of binary `n` that is not `v` (-1 when `v` is not an operand).
ValueId otherOperand(const Node& n, ValueId v) {
    if (n.inputs.size() != 2) return -1;
    if (n.inputs[0] == v) return n.inputs[1];
    if (n.inputs[1] == v) return n.inputs[0];
    return -1;
}

// Nodes that read `v`.
std::vector<int> consumers(const Graph& g, ValueId v) {
    std::vector<int> c;
    for (size_t i = 0; i < g.nodes.size(); ++i)
        if (std::find(g.nodes[i].inputs.begin(), g.nodes[i].inputs.end(), v) !=
            g.nodes[i].inputs.end())
            c.push_back(static_cast<int>(i));
    return c;
}

bool isOutput(const Graph& g, ValueId v) {
    return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

// Values of a constant broadcast to `target` (numpy rules), or empty when it does not
// broadcast to exactly `target`.
std::vector<float> broadcastConstant(const Graph& g, ValueId v, const Shape& target) {
    if (!g.isConstant(v)) return {};
    const Shape& s = g.values[v].shape;
    auto b = broadcastShapes(s, target);
    if (!b || *b != target) return {};
    return broadcastValues(g.constant(v).toFloats(), s, target);
}

}  // namespace

// ReduceMean -> Sub -> Mul(d, d) (Pow 2) -> ReduceMean -> Add eps -> Sqrt -> Div [-> Mul gamma
// [-> Add beta]] over trailing axes: one LayerNorm node in the place of the last one; over the
// channel axis alone (axis 1 of rank >= 3): one ChannelLayerNorm node. Nodes of
// the chain that nothing else reads become dead (pruneDeadNodes); those that are read elsewhere
// stay, so the rewrite is correct whatever the chain's other uses.
void fuseLayerNormPattern(Graph& g) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
        const std::vector<int> prod = producers(g);
        const Node& div = g.nodes[i];
        if (div.op != OpKind::kDiv || div.inputs.size() != 2) continue;
        const ValueId d = div.inputs[0];
        const Node* sqrt = producedBy(g, prod, div.inputs[1], OpKind::kSqrt);
        const Node* sub = producedBy(g, prod, d, OpKind::kSub);
        if (!sqrt || !sub) continue;
        const Node* add_eps = producedBy(g, prod, sqrt->inputs[0], OpKind::kAdd);
        if (!add_eps) continue;
        ValueId var = add_eps->inputs[0];
        std::optional<double> eps = constScalar(g, add_eps->inputs[1]);
        if (!eps) {
            var = add_eps->inputs[1];
            eps = constScalar(g, add_eps->inputs[0]);
        }
        const Node* rm_var = producedBy(g, prod, var, OpKind::kReduceMean);
        if (!eps || !rm_var) continue;
        const Node* sq = producedBy(g, prod, rm_var->inputs[0], OpKind::kMul);
        if (!sq || sq->inputs[0] != d || sq->inputs[1] != d) continue;
        const ValueId x = sub->inputs[0];
        const Node* rm_mean = producedBy(g, prod, sub->inputs[1], OpKind::kReduceMean);
        if (!rm_mean || rm_mean->inputs[0] != x || rm_mean->reduce_axes != rm_var->reduce_axes ||
            !rm_mean->keepdims || !rm_var->keepdims)
            continue;
        const Shape& xs = g.values[x].shape;
        const std::vector<int64_t>& axes = rm_mean->reduce_axes;
        bool trailing = !axes.empty();
        for (size_t k = 0; k < axes.size(); ++k)
            trailing &= axes[k] == static_cast<int64_t>(xs.size() - axes.size() + k);
        // Over the channel axis of [N, C, spatial...] (LayerNormNd): a ChannelLayerNorm, whose
        // affine parameters broadcast as [1, C, 1, ...].
        const bool channel = !trailing && xs.size() >= 3 && axes == std::vector<int64_t>{1};
        if ((!trailing && !channel) || g.values[div.outputs[0]].shape != xs) continue;
        const int64_t axis = axes.front();
        Shape normalised(xs.begin() + axis, xs.end());
        if (channel) {
            normalised.assign(xs.size(), 1);
            normalised[1] = xs[1];
        }
        const int64_t inner = numel(normalised);
        std::vector<float> gamma(static_cast<size_t>(inner), 1.0f), beta;
        int last = static_cast<int>(i);
        ValueId out = div.outputs[0];
        // Affine part, when the normalised value is read only by it.
        const std::vector<int> c1 = consumers(g, out);
        if (c1.size() == 1 && !isOutput(g, out) && g.nodes[c1[0]].op == OpKind::kMul) {
            auto gv = broadcastConstant(g, otherOperand(g.nodes[c1[0]], out), normalised);
            if (!gv.empty() && g.values[g.nodes[c1[0]].outputs[0]].shape == xs) {
                gamma = gv;
                last = c1[0];
                out = g.nodes[last].outputs[0];
                const std::vector<int> c2 = consumers(g, out);
                if (c2.size() == 1 && !isOutput(g, out) && g.nodes[c2[0]].op == OpKind::kAdd) {
                    auto bv = broadcastConstant(g, otherOperand(g.nodes[c2[0]], out), normalised);
                    if (!bv.empty() && g.values[g.nodes[c2[0]].outputs[0]].shape == xs) {
                        beta = bv;
                        last = c2[0];
                        out = g.nodes[last].outputs[0];
                    }
                }
            }
        }
        Node ln;
        ln.op = channel ? OpKind::kChannelLayerNorm : OpKind::kLayerNorm;
        ln.name = div.name + (channel ? "/channel_layernorm" : "/layernorm");
        ln.axis = axis;
        ln.norm.epsilon = static_cast<float>(*eps);
        if (channel) normalised = {inner};
        const ValueId sv = g.addValue({ln.name + "/scale", normalised, DType::kFloat32,
                                       Tensor::fromFloats(normalised, gamma)});
        ln.inputs = {x, sv};
        if (!beta.empty())
            ln.inputs.push_back(g.addValue({ln.name + "/bias", normalised, DType::kFloat32,
                                            Tensor::fromFloats(normalised, beta)}));
        ln.outputs = {out};
        g.nodes[last] = ln;
        if (last != static_cast<int>(i)) {
            // The Div's output now has no reader: drop its node now so the scan stays simple.
            g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(i));
        }
    }
}

// x * 0.5 * (1 + erf(x / sqrt(2))) (PyTorch's exported nn.GELU before opset 20), in either
// association, with Div by sqrt(2) or Mul by 1/sqrt(2): one Gelu node.
void fuseGeluPattern(Graph& g) {
    const double kSqrt2 = std::sqrt(2.0);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
        const std::vector<int> prod = producers(g);
        const Node& top = g.nodes[i];
        if (top.op != OpKind::kMul || top.inputs.size() != 2) continue;
        // a = 1 + erf(x / sqrt2) with its x.
        auto erfPart = [&](ValueId a, ValueId& x) -> bool {
            const Node* add = producedBy(g, prod, a, OpKind::kAdd);
            if (!add) return false;
            for (int k = 0; k < 2; ++k) {
                if (!near(constScalar(g, add->inputs[1 - k]), 1.0)) continue;
                const Node* erf = producedBy(g, prod, add->inputs[k], OpKind::kErf);
                if (!erf) continue;
                const ValueId t = erf->inputs[0];
                if (const Node* dv = producedBy(g, prod, t, OpKind::kDiv)) {
                    if (near(constScalar(g, dv->inputs[1]), kSqrt2)) {
                        x = dv->inputs[0];
                        return true;
                    }
                }
                if (const Node* ml = producedBy(g, prod, t, OpKind::kMul)) {
                    for (int j = 0; j < 2; ++j)
                        if (near(constScalar(g, ml->inputs[1 - j]), 1.0 / kSqrt2)) {
                            x = ml->inputs[j];
                            return true;
                        }
                }
            }
            return false;
        };
        ValueId x = -1;
        bool match = false;
        for (int k = 0; k < 2 && !match; ++k) {
            const ValueId p = top.inputs[k], q = top.inputs[1 - k];
            // (x * a) * 0.5
            if (near(constScalar(g, q), 0.5)) {
                if (const Node* m = producedBy(g, prod, p, OpKind::kMul))
                    for (int j = 0; j < 2 && !match; ++j) {
                        ValueId xe = -1;
                        if (erfPart(m->inputs[1 - j], xe) && xe == m->inputs[j]) {
                            x = xe;
                            match = true;
                        }
                    }
            }
            // (x * 0.5) * a
            if (!match) {
                const Node* h = producedBy(g, prod, p, OpKind::kMul);
                ValueId xe = -1;
                if (h && erfPart(q, xe))
                    for (int j = 0; j < 2 && !match; ++j)
                        if (h->inputs[j] == xe && near(constScalar(g, h->inputs[1 - j]), 0.5)) {
                            x = xe;
                            match = true;
                        }
            }
        }
        if (!match || g.values[x].shape != g.values[top.outputs[0]].shape) continue;
        Node gelu;
        gelu.op = OpKind::kGelu;
        gelu.name = top.name + "/gelu";
        gelu.inputs = {x};
        gelu.outputs = top.outputs;
        g.nodes[i] = gelu;
    }
}

// Mul(x, Sigmoid(x)) (SiLU / Swish, SwiGLU's gate): one SiLU node.
void fuseSiluPattern(Graph& g) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
        const std::vector<int> prod = producers(g);
        const Node& m = g.nodes[i];
        if (m.op != OpKind::kMul || m.inputs.size() != 2) continue;
        for (int k = 0; k < 2; ++k) {
            const Node* sg = producedBy(g, prod, m.inputs[k], OpKind::kSigmoid);
            if (!sg || sg->inputs[0] != m.inputs[1 - k]) continue;
            Node silu;
            silu.op = OpKind::kSilu;
            silu.name = m.name + "/silu";
            silu.inputs = {m.inputs[1 - k]};
            silu.outputs = m.outputs;
            g.nodes[i] = silu;
            break;
        }
    }
}

}  // namespace voxseg::engine::passes
