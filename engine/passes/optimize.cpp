// optimize() (engine/passes/optimize.h): the rewrites every backend compiles after, and the
// helpers the passes with a file of their own share (engine/passes/passes.h).
#include "engine/passes/optimize.h"

#include "engine/passes/passes.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

namespace voxseg::engine {

namespace passes {

Usage computeUsage(const Graph& g) {
    Usage u;
    u.producer.assign(g.values.size(), -1);
    u.uses.assign(g.values.size(), 0);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
        const Node& n = g.nodes[i];
        for (ValueId v : n.outputs)
            if (v >= 0) u.producer[v] = static_cast<int>(i);
        for (ValueId v : n.inputs)
            if (v >= 0) ++u.uses[v];
        if (n.fused_residual >= 0) ++u.uses[n.fused_residual];
        if (n.fused_prelu_slope >= 0) ++u.uses[n.fused_prelu_slope];
    }
    for (ValueId v : g.outputs) ++u.uses[v];
    return u;
}

bool isGraphOutput(const Graph& g, ValueId v) {
    return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

int singleProducer(const Graph& g, const Usage& u, ValueId v, OpKind op) {
    if (v < 0 || u.producer[v] < 0 || u.uses[v] != 1 || isGraphOutput(g, v)) return -1;
    return g.nodes[u.producer[v]].op == op ? u.producer[v] : -1;
}

}  // namespace passes

namespace {

using passes::computeUsage;
using passes::isGraphOutput;
using passes::singleProducer;
using passes::Usage;

void replaceUses(Graph& g, ValueId from, ValueId to) {
    for (Node& n : g.nodes) {
        for (ValueId& v : n.inputs)
            if (v == from) v = to;
        if (n.fused_residual == from) n.fused_residual = to;
    }
    for (ValueId& v : g.outputs)
        if (v == from) v = to;
}

bool canTakeEpilogue(OpKind op) {
    return op == OpKind::kConv || op == OpKind::kConvTranspose || op == OpKind::kInstanceNorm ||
           op == OpKind::kBatchNorm || op == OpKind::kGroupNorm || op == OpKind::kMatMul;
}

// Removes Identity nodes, rewiring their consumers to the identity's input.
void dropIdentities(Graph& g) {
    std::vector<Node> kept;
    for (Node& n : g.nodes) {
        if (n.op == OpKind::kIdentity && n.inputs.size() == 1 && n.inputs[0] >= 0) {
            const ValueId src = n.inputs[0];
            const ValueId dst = n.outputs[0];
            const bool src_is_io =
                std::find(g.inputs.begin(), g.inputs.end(), src) != g.inputs.end() ||
                isGraphOutput(g, src) || g.isConstant(src);
            // Identity between a graph input and a graph output must stay: outputs need a node.
            if (isGraphOutput(g, dst) && src_is_io) {
                kept.push_back(std::move(n));
                continue;
            }
            if (isGraphOutput(g, dst)) g.values[src].name = g.values[dst].name;
            replaceUses(g, dst, src);
            for (Node& k : kept)  // earlier nodes cannot use dst, but keep this total
                for (ValueId& v : k.inputs)
                    if (v == dst) v = src;
            continue;
        }
        kept.push_back(std::move(n));
    }
    g.nodes = std::move(kept);
}

// Conv -> BatchNorm with constant parameters: scale the weights, fold the shift into the bias.
void foldBatchNorm(Graph& g) {
    Usage u = computeUsage(g);
    std::vector<bool> remove(g.nodes.size(), false);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
        Node& bn = g.nodes[i];
        if (bn.op != OpKind::kBatchNorm || bn.inputs.size() < 5) continue;
        const ValueId x = bn.inputs[0];
        const int p = u.producer[x];
        if (p < 0 || remove[p]) continue;
        Node& conv = g.nodes[p];
        if (conv.op != OpKind::kConv && conv.op != OpKind::kConvTranspose) continue;
        if (u.uses[x] != 1 || conv.fused_activation != ActivationKind::kNone ||
            conv.fused_residual >= 0 || !g.isConstant(conv.inputs[1]))
            continue;
        bool constant_params = true;
        for (size_t k = 1; k < 5; ++k) constant_params &= g.isConstant(bn.inputs[k]);
        if (!constant_params) continue;
        const std::vector<float> scale = g.constant(bn.inputs[1]).toFloats();
        const std::vector<float> shift = g.constant(bn.inputs[2]).toFloats();
        const std::vector<float> mean = g.constant(bn.inputs[3]).toFloats();
        const std::vector<float> var = g.constant(bn.inputs[4]).toFloats();
        const Tensor& w = g.constant(conv.inputs[1]);
        const bool transpose = conv.op == OpKind::kConvTranspose;
        const int64_t out_ch = transpose ? w.dim(1) * conv.conv.group : w.dim(0);
        if (static_cast<int64_t>(scale.size()) != out_ch) continue;
        std::vector<double> mult(out_ch);
        for (int64_t c = 0; c < out_ch; ++c)
            mult[c] = scale[c] / std::sqrt(static_cast<double>(var[c]) + bn.norm.epsilon);
        Tensor nw(DType::kFloat32, w.shape());
        const std::vector<float> wv = w.toFloats();
        float* nwp = nw.data<float>();
        const int64_t kernel = w.numel() / (w.dim(0) * w.dim(1));
        for (int64_t a = 0; a < w.dim(0); ++a)
            for (int64_t b = 0; b < w.dim(1); ++b) {
                // Conv weight [Cout, Cin/g, k]; ConvTranspose weight [Cin, Cout/g, k].
                const int64_t oc =
                    transpose ? (a / (w.dim(0) / conv.conv.group)) * w.dim(1) + b : a;
                for (int64_t k = 0; k < kernel; ++k) {
                    const int64_t idx = (a * w.dim(1) + b) * kernel + k;
                    nwp[idx] = static_cast<float>(wv[idx] * mult[oc]);
                }
            }
        std::vector<float> bias(out_ch, 0.0f);
        if (conv.inputs.size() > 2 && conv.inputs[2] >= 0) {
            if (!g.isConstant(conv.inputs[2])) continue;
            bias = g.constant(conv.inputs[2]).toFloats();
        }
        std::vector<float> nb(out_ch);
        for (int64_t c = 0; c < out_ch; ++c)
            nb[c] = static_cast<float>((bias[c] - mean[c]) * mult[c] + shift[c]);
        Value wv_val{g.values[conv.inputs[1]].name + "_bnfolded", w.shape(), DType::kFloat32, nw};
        Value bv_val{conv.name + "_bnfolded_bias",
                     {out_ch},
                     DType::kFloat32,
                     Tensor::fromFloats({out_ch}, nb)};
        const ValueId wid = g.addValue(std::move(wv_val));
        const ValueId bid = g.addValue(std::move(bv_val));
        Node& c2 = g.nodes[p];  // addValue does not touch nodes; re-take the reference anyway
        c2.inputs.resize(3);
        c2.inputs[1] = wid;
        c2.inputs[2] = bid;
        c2.conv.has_bias = true;
        const ValueId bn_out = g.nodes[i].outputs[0];
        c2.outputs[0] = bn_out;
        remove[i] = true;
        u = computeUsage(g);
    }
    std::vector<Node> kept;
    for (size_t i = 0; i < g.nodes.size(); ++i)
        if (!remove[i]) kept.push_back(std::move(g.nodes[i]));
    g.nodes = std::move(kept);
}

// The n values of a constant that broadcasts along the last axis of an [..., n] tensor only
// (shape [n], [1, .., n], [1] or a scalar), empty otherwise.
std::vector<float> lastAxisVector(const Graph& g, ValueId v, int64_t n) {
    if (!g.isConstant(v)) return {};
    const Shape& s = g.values[v].shape;
    for (size_t i = 0; i + 1 < s.size(); ++i)
        if (s[i] != 1) return {};
    const std::vector<float> c = g.constant(v).toFloats();
    if (static_cast<int64_t>(c.size()) == n) return c;
    if (c.size() == 1) return std::vector<float>(static_cast<size_t>(n), c[0]);
    return {};
}

// MatMul -> Add(constant along the last axis) -> Mul(constant along the last axis), each
// intermediate read once (nn.Linear's bias, then a LayerScale gamma): the bias becomes the
// MatMul's third input and the scale is folded into a constant weight and the bias,
// (x W + b) * s = x (W s) + b s, so no elementwise pass is left between the projection and the
// residual Add that fuseEpilogues() then fuses as well.
void fuseMatMulBiasScale(Graph& g) {
    bool changed = true;
    while (changed) {
        changed = false;
        const Usage u = computeUsage(g);
        for (size_t i = 0; i < g.nodes.size() && !changed; ++i) {
            const Node& c = g.nodes[i];
            const bool is_add = c.op == OpKind::kAdd;
            if ((!is_add && c.op != OpKind::kMul) || c.inputs.size() != 2) continue;
            for (size_t k = 0; k < 2 && !changed; ++k) {
                const ValueId x = c.inputs[k], other = c.inputs[1 - k];
                if (x < 0 || other < 0 || x == other) continue;
                const int p = u.producer[x];
                if (p < 0 || u.uses[x] != 1 || isGraphOutput(g, x)) continue;
                const Node& mm = g.nodes[p];
                // Constant weights only (projections): attention's Q Kt MatMul stays for
                // fuseAttention.
                if (mm.op != OpKind::kMatMul || !g.isConstant(mm.inputs[1]) ||
                    mm.fused_residual >= 0 || mm.fused_activation != ActivationKind::kNone)
                    continue;
                const Shape& ys = g.values[x].shape;
                if (ys.empty() || g.values[c.outputs[0]].shape != ys) continue;
                const int64_t n = ys.back();
                const std::vector<float> vec = lastAxisVector(g, other, n);
                if (vec.empty()) continue;
                const bool has_bias = mm.inputs.size() > 2 && mm.inputs[2] >= 0;
                std::vector<float> bias =
                    has_bias ? g.constant(mm.inputs[2]).toFloats() : std::vector<float>();
                ValueId weight = mm.inputs[1];
                if (is_add) {
                    if (!has_bias) bias.assign(static_cast<size_t>(n), 0.0f);
                    for (int64_t j = 0; j < n; ++j) bias[j] += vec[j];
                } else {
                    std::vector<float> w = g.constant(weight).toFloats();
                    for (size_t j = 0; j < w.size(); ++j) w[j] *= vec[j % n];
                    for (size_t j = 0; j < bias.size(); ++j) bias[j] *= vec[j];
                    const Shape ws = g.values[weight].shape;
                    weight = g.addValue({c.name + "/scaled_weight", ws, DType::kFloat32,
                                         Tensor::fromFloats(ws, w)});
                }
                const ValueId out = c.outputs[0];
                ValueId bias_v = -1;
                if (!bias.empty())
                    bias_v = g.addValue({c.name + "/matmul_bias",
                                         {n},
                                         DType::kFloat32,
                                         Tensor::fromFloats({n}, bias)});
                Node& m = g.nodes[p];
                m.inputs.resize(3);
                m.inputs[1] = weight;
                m.inputs[2] = bias_v;
                if (bias_v < 0) m.inputs.resize(2);
                m.outputs[0] = out;
                g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(i));
                changed = true;
            }
        }
    }
}

// Fuses `producer -> Add(residual)` and `producer -> activation` into producer epilogues.
void fuseEpilogues(Graph& g, bool shapes_known) {
    bool changed = true;
    while (changed) {
        changed = false;
        const Usage u = computeUsage(g);
        for (size_t i = 0; i < g.nodes.size() && !changed; ++i) {
            const Node& consumer = g.nodes[i];
            if (consumer.inputs.empty() || consumer.inputs[0] < 0) continue;
            const bool is_act = consumer.op == OpKind::kRelu || consumer.op == OpKind::kLeakyRelu ||
                                consumer.op == OpKind::kSigmoid || consumer.op == OpKind::kSilu ||
                                (consumer.op == OpKind::kPRelu && consumer.inputs.size() > 1 &&
                                 g.isConstant(consumer.inputs[1]));
            const bool is_add = consumer.op == OpKind::kAdd && consumer.inputs.size() == 2;
            if (!is_act && !is_add) continue;
            // Candidate producer inputs: the activation's input, or either Add operand.
            for (size_t k = 0; k < (is_add ? 2u : 1u) && !changed; ++k) {
                const ValueId x = consumer.inputs[k];
                if (x < 0) continue;
                const int p = u.producer[x];
                if (p < 0 || u.uses[x] != 1 || isGraphOutput(g, x)) continue;
                Node& prod = g.nodes[p];
                if (!canTakeEpilogue(prod.op) || prod.fused_activation != ActivationKind::kNone)
                    continue;
                if (is_add) {
                    if (prod.fused_residual >= 0 || !shapes_known) continue;
                    const ValueId other = consumer.inputs[1 - k];
                    if (other < 0 || g.isConstant(other) || other == x) continue;
                    // The residual must exist when the producer runs and match its shape.
                    if (u.producer[other] >= p) continue;
                    if (g.values[other].shape != g.values[x].shape) continue;
                    prod.fused_residual = other;
                } else {
                    switch (consumer.op) {
                        case OpKind::kRelu:
                            prod.fused_activation = ActivationKind::kRelu;
                            break;
                        case OpKind::kLeakyRelu:
                            prod.fused_activation = ActivationKind::kLeakyRelu;
                            prod.fused_alpha = consumer.alpha;
                            break;
                        case OpKind::kSigmoid:
                            prod.fused_activation = ActivationKind::kSigmoid;
                            break;
                        case OpKind::kSilu:
                            prod.fused_activation = ActivationKind::kSilu;
                            break;
                        default:
                            prod.fused_activation = ActivationKind::kPRelu;
                            prod.fused_prelu_slope = consumer.inputs[1];
                            break;
                    }
                }
                prod.outputs[0] = consumer.outputs[0];
                g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(i));
                changed = true;
            }
        }
    }
}

// Concat inputs with no elements (EVA's slice of zero prefix tokens) dropped; a Concat left
// with one input becomes an Identity, and an empty input's producer read nowhere else goes.
void dropEmptyConcatInputs(Graph& g) {
    const Usage u = computeUsage(g);
    std::vector<bool> dead(g.nodes.size(), false);
    for (Node& n : g.nodes) {
        if (n.op != OpKind::kConcat || n.inputs.size() < 2) continue;
        std::vector<ValueId> kept;
        for (ValueId v : n.inputs) {
            if (numel(g.values[v].shape) > 0) {
                kept.push_back(v);
            } else if (u.producer[v] >= 0 && u.uses[v] == 1 && !isGraphOutput(g, v)) {
                dead[u.producer[v]] = true;
            }
        }
        if (kept.empty() || kept.size() == n.inputs.size()) continue;
        n.inputs = kept;
        if (kept.size() == 1) n.op = OpKind::kIdentity;
    }
    std::vector<Node> live;
    for (size_t i = 0; i < g.nodes.size(); ++i)
        if (!dead[i]) live.push_back(std::move(g.nodes[i]));
    g.nodes = std::move(live);
}

// The [T, D] values of a constant that broadcasts to the trailing [T, D] of a tensor only.
std::vector<float> tokenTable(const Graph& g, ValueId v, int64_t t, int64_t d) {
    if (!g.isConstant(v)) return {};
    const Shape& s = g.values[v].shape;
    if (s.size() < 2 || s[s.size() - 2] != t || s.back() != d) return {};
    for (size_t i = 0; i + 2 < s.size(); ++i)
        if (s[i] != 1) return {};
    return g.constant(v).toFloats();
}

// Index of the Slice x[..., start::2] (last axis only) producing `v`, read once; -1 otherwise.
int everyOtherSlice(const Graph& g, const Usage& u, ValueId v, ValueId x, int64_t start) {
    const int p = singleProducer(g, u, v, OpKind::kSlice);
    if (p < 0 || g.nodes[p].inputs[0] != x) return -1;
    const Shape& xs = g.values[x].shape;
    const std::vector<SliceAxis> axes = resolveSlice(g.nodes[p], xs);
    for (size_t i = 0; i + 1 < xs.size(); ++i)
        if (axes[i].start != 0 || axes[i].step != 1 || axes[i].count != xs[i]) return -1;
    const SliceAxis& last = axes.back();
    return last.start == start && last.step == 2 && last.count == xs.back() / 2 ? p : -1;
}

// Nodes of rot(x) = Reshape(Concat(Unsqueeze(-x[..., 1::2]), Unsqueeze(x[..., 0::2]), axis -1))
// producing `r` (EVA's rotate_half of interleaved pairs), or empty when `r` is not that.
std::vector<int> rotateHalfNodes(const Graph& g, const Usage& u, ValueId r, ValueId x) {
    const Shape& xs = g.values[x].shape;
    const int reshape = singleProducer(g, u, r, OpKind::kReshape);
    if (reshape < 0 || g.values[r].shape != xs) return {};
    const int cat = singleProducer(g, u, g.nodes[reshape].inputs[0], OpKind::kConcat);
    if (cat < 0) return {};
    const Node& c = g.nodes[cat];
    Shape pairs(xs.begin(), xs.end() - 1);
    pairs.push_back(xs.back() / 2);
    pairs.push_back(2);
    if (c.inputs.size() != 2 || c.axis != static_cast<int64_t>(xs.size()) ||
        g.values[c.outputs[0]].shape != pairs)
        return {};
    const int u0 = singleProducer(g, u, c.inputs[0], OpKind::kReshape);
    const int u1 = singleProducer(g, u, c.inputs[1], OpKind::kReshape);
    if (u0 < 0 || u1 < 0) return {};
    const int neg = singleProducer(g, u, g.nodes[u0].inputs[0], OpKind::kMul);
    if (neg < 0) return {};
    const Node& m = g.nodes[neg];
    const int k = g.isConstant(m.inputs[1]) ? 1 : 0;
    const auto minus = g.isConstant(m.inputs[k]) && g.constant(m.inputs[k]).numel() == 1
                           ? g.constant(m.inputs[k]).toFloats()[0]
                           : 0.0f;
    if (minus != -1.0f) return {};
    const int odd = everyOtherSlice(g, u, m.inputs[1 - k], x, 1);
    const int even = everyOtherSlice(g, u, g.nodes[u1].inputs[0], x, 0);
    if (odd < 0 || even < 0) return {};
    return {reshape, cat, u0, u1, neg, odd, even};
}

// Add(Mul(x, cos), Mul(rot(x), sin)) with constant [T, D] tables: one Rotary node in the place
// of the Add; then a Mul of its output by a constant scalar (the attention scale on q) folded
// into the tables.
void fuseRotaryEmbedding(Graph& g) {
    dropEmptyConcatInputs(g);
    dropIdentities(g);
    bool changed = true;
    while (changed) {
        changed = false;
        const Usage u = computeUsage(g);
        for (size_t i = 0; i < g.nodes.size() && !changed; ++i) {
            const Node& n = g.nodes[i];
            if (n.op == OpKind::kMul && n.inputs.size() == 2) {
                for (size_t k = 0; k < 2 && !changed; ++k) {
                    const int p = singleProducer(g, u, n.inputs[k], OpKind::kRotary);
                    const ValueId c = n.inputs[1 - k];
                    if (p < 0 || !g.isConstant(c) || g.constant(c).numel() != 1) continue;
                    const float scale = g.constant(c).toFloats()[0];
                    Node& rot = g.nodes[p];
                    for (size_t t = 1; t < 3; ++t) {
                        std::vector<float> v = g.constant(rot.inputs[t]).toFloats();
                        for (float& e : v) e *= scale;
                        const Shape ts = g.values[rot.inputs[t]].shape;
                        rot.inputs[t] = g.addValue({n.name + (t == 1 ? "/cos" : "/sin"), ts,
                                                    DType::kFloat32, Tensor::fromFloats(ts, v)});
                    }
                    rot.outputs[0] = n.outputs[0];
                    g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(i));
                    changed = true;
                }
                continue;
            }
            if (n.op != OpKind::kAdd || n.inputs.size() != 2) continue;
            for (size_t k = 0; k < 2 && !changed; ++k) {
                const int ma = singleProducer(g, u, n.inputs[k], OpKind::kMul);
                const int mb = singleProducer(g, u, n.inputs[1 - k], OpKind::kMul);
                if (ma < 0 || mb < 0) continue;
                const Node& a = g.nodes[ma];
                const Node& b = g.nodes[mb];
                const size_t ja = g.isConstant(a.inputs[1]) ? 0 : 1;
                const size_t jb = g.isConstant(b.inputs[1]) ? 0 : 1;
                const ValueId x = a.inputs[ja];
                const Shape& xs = g.values[x].shape;
                if (g.isConstant(x) || xs.size() < 2 || xs.back() % 2 != 0 ||
                    g.values[n.outputs[0]].shape != xs)
                    continue;
                const int64_t t = xs[xs.size() - 2], d = xs.back();
                const std::vector<float> cos = tokenTable(g, a.inputs[1 - ja], t, d);
                const std::vector<float> sin = tokenTable(g, b.inputs[1 - jb], t, d);
                std::vector<int> absorbed = rotateHalfNodes(g, u, b.inputs[jb], x);
                if (cos.empty() || sin.empty() || absorbed.empty()) continue;
                absorbed.push_back(ma);
                absorbed.push_back(mb);
                Node rot;
                rot.op = OpKind::kRotary;
                rot.name = n.name + "/rotary";
                rot.inputs = {x,
                              g.addValue({rot.name + "/cos",
                                          {t, d},
                                          DType::kFloat32,
                                          Tensor::fromFloats({t, d}, cos)}),
                              g.addValue({rot.name + "/sin",
                                          {t, d},
                                          DType::kFloat32,
                                          Tensor::fromFloats({t, d}, sin)})};
                rot.outputs = g.nodes[i].outputs;
                g.nodes[i] = rot;
                std::sort(absorbed.begin(), absorbed.end());
                for (size_t e = absorbed.size(); e-- > 0;)
                    g.nodes.erase(g.nodes.begin() + absorbed[e]);
                changed = true;
            }
        }
    }
}

// Swin's shifted windows between the scores `s` (shape `ss`, [B*nW, ...]) and the Softmax: a
// Reshape to [B, nW, ...], the Add of a constant mask [1, nW, ...], a Reshape back, each read
// once. The mask becomes the Attention's second bias, [nW, ...], tiling every nW windows.
struct WindowMask {
    ValueId mask = -1;       // the constant
    ValueId scores = -1;     // the scores before the first Reshape
    Shape shape;             // the mask's without its leading 1
    std::vector<int> nodes;  // the Reshape, Add and Reshape
};

std::optional<WindowMask> windowMask(const Graph& g, const Usage& u, ValueId s, const Shape& ss) {
    const int back = singleProducer(g, u, s, OpKind::kReshape);
    if (back < 0) return std::nullopt;
    const ValueId x = g.nodes[back].inputs[0];
    const Shape& xs = g.values[x].shape;
    const int add = singleProducer(g, u, x, OpKind::kAdd);
    if (add < 0 || xs.size() != ss.size() + 1 || xs[0] * xs[1] != ss[0] ||
        !std::equal(ss.begin() + 1, ss.end(), xs.begin() + 2))
        return std::nullopt;
    const Node& a = g.nodes[add];
    const int k = g.isConstant(a.inputs[1]) ? 0 : 1;  // the scores' side
    const int split = singleProducer(g, u, a.inputs[k], OpKind::kReshape);
    if (!g.isConstant(a.inputs[1 - k]) || split < 0 || g.values[a.inputs[k]].shape != xs ||
        g.values[g.nodes[split].inputs[0]].shape != ss)
        return std::nullopt;
    Shape ms = g.values[a.inputs[1 - k]].shape;
    if (ms.size() > xs.size()) return std::nullopt;
    ms.insert(ms.begin(), xs.size() - ms.size(), 1);
    if (ms[0] != 1) return std::nullopt;
    return WindowMask{a.inputs[1 - k],
                      g.nodes[split].inputs[0],
                      Shape(ms.begin() + 1, ms.end()),
                      {back, add, split}};
}

// MatMul(Q, Kt) -> [Mul/Div by a constant scalar] -> [Add bias] -> Softmax(last axis) ->
// MatMul(., V), each intermediate read once: one Attention node in the place of the last MatMul.
void fuseAttention(Graph& g) {
    bool changed = true;
    while (changed) {
        changed = false;
        const Usage u = computeUsage(g);
        auto single = [&](ValueId v, OpKind op) { return singleProducer(g, u, v, op); };
        for (size_t i = 0; i < g.nodes.size() && !changed; ++i) {
            const Node& pv = g.nodes[i];
            if (pv.op != OpKind::kMatMul || pv.inputs.size() != 2 || pv.fused_residual >= 0 ||
                pv.fused_activation != ActivationKind::kNone)
                continue;
            const int sm = single(pv.inputs[0], OpKind::kSoftmax);
            if (sm < 0) continue;
            const Shape ss = g.values[pv.inputs[0]].shape;  // (a copy: addValue below)
            if (g.nodes[sm].axis != static_cast<int64_t>(ss.size()) - 1) continue;
            std::vector<int> absorbed{sm, static_cast<int>(i)};
            ValueId s = g.nodes[sm].inputs[0];
            ValueId bias = -1;
            const std::optional<WindowMask> window = windowMask(g, u, s, ss);
            if (window) {
                s = window->scores;
                absorbed.insert(absorbed.end(), window->nodes.begin(), window->nodes.end());
            }
            float scale = 1.0f;
            int p = single(s, OpKind::kAdd);
            if (p >= 0) {
                const Node& add = g.nodes[p];
                const int k = single(add.inputs[0], OpKind::kMatMul) >= 0 ||
                                      single(add.inputs[0], OpKind::kMul) >= 0 ||
                                      single(add.inputs[0], OpKind::kDiv) >= 0
                                  ? 0
                                  : 1;
                bias = add.inputs[1 - k];
                s = add.inputs[k];
                if (g.values[s].shape != ss) continue;
                absorbed.push_back(p);
            }
            for (OpKind op : {OpKind::kMul, OpKind::kDiv}) {
                const int q = single(s, op);
                if (q < 0) continue;
                const Node& m = g.nodes[q];
                const int k = op == OpKind::kDiv ? 0 : (g.isConstant(m.inputs[1]) ? 0 : 1);
                const ValueId c = m.inputs[1 - k];
                if (!g.isConstant(c) || g.constant(c).numel() != 1) continue;
                const float cv = g.constant(c).toFloats()[0];
                scale = op == OpKind::kDiv ? 1.0f / cv : cv;
                s = m.inputs[k];
                absorbed.push_back(q);
                break;
            }
            const int qk = single(s, OpKind::kMatMul);
            if (qk < 0) continue;
            const Node& mm = g.nodes[qk];
            if (mm.inputs.size() != 2 || mm.fused_activation != ActivationKind::kNone) continue;
            const Shape& qs = g.values[mm.inputs[0]].shape;
            const Shape& ks = g.values[mm.inputs[1]].shape;
            const Shape& vs = g.values[pv.inputs[1]].shape;
            const size_t r = qs.size();
            if (ks.size() != r || vs.size() != r || ss.size() != r || r < 2 ||
                !std::equal(qs.begin(), qs.end() - 2, ks.begin()) ||
                !std::equal(qs.begin(), qs.end() - 2, vs.begin()))
                continue;  // broadcast batch dims stay unfused
            absorbed.push_back(qk);
            Node att;
            att.op = OpKind::kAttention;
            att.name = pv.name + "/attention";
            att.inputs = {mm.inputs[0], mm.inputs[1], pv.inputs[1]};
            if (bias >= 0 || window) att.inputs.push_back(bias);
            if (window) {  // [nW, ...] without the leading 1, sharing the constant's storage
                const Tensor& m = g.constant(window->mask);
                Tensor windows = m.dtype() == DType::kFloat32
                                     ? m.reshaped(window->shape)
                                     : Tensor::fromFloats(window->shape, m.toFloats());
                const std::string name = g.values[window->mask].name + "/windows";
                att.inputs.push_back(
                    g.addValue({name, window->shape, DType::kFloat32, std::move(windows)}));
            }
            att.attention_scale = scale;
            att.outputs = pv.outputs;
            // Inputs exist before the earliest absorbed node; the last one's place keeps the
            // order for its readers.
            g.nodes[i] = att;
            std::sort(absorbed.begin(), absorbed.end());
            for (size_t k = absorbed.size(); k-- > 0;)
                if (absorbed[k] != static_cast<int>(i))
                    g.nodes.erase(g.nodes.begin() + absorbed[k]);
            changed = true;
        }
    }
}

}  // namespace

Graph optimize(const Graph& graph) {
    Graph g = graph;
    dropIdentities(g);
    foldBatchNorm(g);
    // Residual fusion needs shapes (no broadcasting in an epilogue); infer them for the shapes
    // the inputs have now, and skip that fusion when they are not known.
    std::vector<Shape> input_shapes;
    for (ValueId v : g.inputs) input_shapes.push_back(g.values[v].shape);
    Graph probe = g;
    const bool shapes_known = probe.inferShapes(input_shapes).isOk();
    if (shapes_known) g = std::move(probe);
    if (shapes_known) {
        fuseMatMulBiasScale(g);
        fuseRotaryEmbedding(g);
        passes::fuseCopies(g);
    }
    fuseEpilogues(g, shapes_known);
    if (shapes_known) {
        fuseAttention(g);
        passes::fuseAttentionHeads(g);
    }
    return g;
}

}  // namespace voxseg::engine
