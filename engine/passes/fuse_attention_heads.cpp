// optimize()'s head-layout fold (engine/passes/passes.h): torch exports multi-head attention as
// q = x Wq -> Reshape [B, T, H, D] -> Transpose (0, 2, 1, 3) [-> Rotary], the same for k plus
// a Transpose (0, 1, 3, 2) to K^T, v likewise, Attention on [B, H, T, D], and the output merged
// back by a Transpose (0, 2, 1, 3) and a Reshape. Every one of those Transposes copies a
// [T, H*D] tensor; MultiHeadAttention reads the heads in place from the packed [B, T, H*D]
// tensors and writes its output the same way (the cpu backend through strided matrices), so
// the copies go, and the Reshapes around it are views.
#include "engine/passes/passes.h"

#include <algorithm>
#include <optional>

namespace voxseg::engine::passes {
namespace {

const std::vector<int64_t> kSplitHeads{0, 2, 1, 3};  // [B, T, H, D] <-> [B, H, T, D]

// One operand of the attention before its head split: `x` [B, T, H, D], the Rotary that was
// applied after the split (-1: none) and the nodes that the fold removes.
struct HeadOperand {
    ValueId x = -1;
    int rotary = -1;
    std::vector<int> absorbed;
};

// `v` [B, H, T, D] = [Rotary](Transpose (0, 2, 1, 3) of x), each step read once.
std::optional<HeadOperand> splitHeads(const Graph& g, const Usage& u, ValueId v,
                                      bool allow_rotary) {
    HeadOperand op;
    const int r = allow_rotary ? singleProducer(g, u, v, OpKind::kRotary) : -1;
    if (r >= 0) {
        op.rotary = r;
        op.absorbed.push_back(r);
        v = g.nodes[r].inputs[0];
    }
    const int t = singleProducer(g, u, v, OpKind::kTranspose);
    if (t < 0 || g.nodes[t].perm != kSplitHeads) return std::nullopt;
    op.absorbed.push_back(t);
    op.x = g.nodes[t].inputs[0];
    return op;
}

// `v` [B, H, D, T] = Transpose (0, 1, 3, 2) of splitHeads(x), or Transpose (0, 2, 3, 1) of x.
std::optional<HeadOperand> splitHeadsTransposed(const Graph& g, const Usage& u, ValueId v) {
    const int t = singleProducer(g, u, v, OpKind::kTranspose);
    if (t < 0) return std::nullopt;
    const Node& tr = g.nodes[t];
    if (tr.perm == std::vector<int64_t>{0, 2, 3, 1}) return HeadOperand{tr.inputs[0], -1, {t}};
    if (tr.perm != std::vector<int64_t>{0, 1, 3, 2}) return std::nullopt;
    std::optional<HeadOperand> op = splitHeads(g, u, tr.inputs[0], true);
    if (op) op->absorbed.push_back(t);
    return op;
}

// The only node reading `v`, or -1.
int singleConsumer(const Graph& g, const Usage& u, ValueId v) {
    if (u.uses[v] != 1 || isGraphOutput(g, v)) return -1;
    for (size_t i = 0; i < g.nodes.size(); ++i)
        if (std::find(g.nodes[i].inputs.begin(), g.nodes[i].inputs.end(), v) !=
            g.nodes[i].inputs.end())
            return static_cast<int>(i);
    return -1;
}

// Tiled Rotary tables already made, by content: every block's attention has the same ones.
using TableCache = std::vector<std::pair<std::vector<float>, ValueId>>;

// Appends to `out` the nodes that give `op` packed as [B, T, H*D]: a Reshape (a view) and the
// Rotary on the packed rows, its [T, D] tables repeated for the H heads. Returns the value.
ValueId packed(Graph& g, const HeadOperand& op, const std::string& name, std::vector<Node>& out,
               TableCache& tables) {
    const Shape xs = g.values[op.x].shape;  // [B, T, H, D]
    const int64_t t = xs[1], h = xs[2], d = xs[3];
    const Shape ps{xs[0], t, h * d};
    Node reshape;
    reshape.op = OpKind::kReshape;
    reshape.name = name + "/packed";
    reshape.inputs = {op.x};
    reshape.shape = {0, 0, -1};
    reshape.outputs = {g.addValue({reshape.name, ps, DType::kFloat32, std::nullopt})};
    out.push_back(reshape);
    if (op.rotary < 0) return reshape.outputs[0];
    Node rot = g.nodes[op.rotary];
    rot.name += "/packed";
    for (size_t k = 1; k < 3; ++k) {
        const std::vector<float> table = g.constant(rot.inputs[k]).toFloats();  // [T, D]
        std::vector<float> tiled(static_cast<size_t>(t * h * d));
        for (int64_t i = 0; i < t; ++i)
            for (int64_t j = 0; j < h; ++j)
                std::copy_n(table.begin() + i * d, d, tiled.begin() + (i * h + j) * d);
        auto same = std::find_if(tables.begin(), tables.end(),
                                 [&](const auto& e) { return e.first == tiled; });
        if (same != tables.end()) {
            rot.inputs[k] = same->second;
            continue;
        }
        rot.inputs[k] = g.addValue({rot.name + (k == 1 ? "/cos" : "/sin"),
                                    {t, h * d},
                                    DType::kFloat32,
                                    Tensor::fromFloats({t, h * d}, tiled)});
        tables.emplace_back(std::move(tiled), rot.inputs[k]);
    }
    rot.inputs[0] = reshape.outputs[0];
    rot.outputs = {g.addValue({rot.name, ps, DType::kFloat32, std::nullopt})};
    out.push_back(rot);
    return rot.outputs[0];
}

// Folds one Attention node (index i); false when it is not the head-split pattern.
bool foldOne(Graph& g, const Usage& u, size_t i, TableCache& tables) {
    const Node& att = g.nodes[i];
    if (att.op != OpKind::kAttention || att.inputs.size() < 3 ||
        att.fused_activation != ActivationKind::kNone || att.fused_residual >= 0)
        return false;
    const Shape ys = g.values[att.outputs[0]].shape;  // [B, H, Tq, Dv]
    if (ys.size() != 4) return false;
    const int merge = singleConsumer(g, u, att.outputs[0]);
    if (merge < 0 || g.nodes[merge].op != OpKind::kTranspose || g.nodes[merge].perm != kSplitHeads)
        return false;
    const std::optional<HeadOperand> q = splitHeads(g, u, att.inputs[0], true);
    const std::optional<HeadOperand> k = splitHeadsTransposed(g, u, att.inputs[1]);
    const std::optional<HeadOperand> v = splitHeads(g, u, att.inputs[2], false);
    if (!q || !k || !v) return false;
    // Copies: addValue below may move the values.
    const Shape qs = g.values[q->x].shape, ks = g.values[k->x].shape, vs = g.values[v->x].shape;
    if (qs.size() != 4 || ks.size() != 4 || vs.size() != 4 || qs[2] != ys[1] || ks[2] != ys[1] ||
        vs[2] != ys[1] || qs[1] != ys[2] || vs[3] != ys[3])
        return false;
    const int64_t heads = ys[1];
    std::vector<Node> added;
    const ValueId pq = packed(g, *q, att.name + "/q", added, tables);
    const ValueId pk = packed(g, *k, att.name + "/k", added, tables);
    const ValueId pv = packed(g, *v, att.name + "/v", added, tables);
    Node mha;
    mha.op = OpKind::kMultiHeadAttention;
    mha.name = att.name + "/heads";
    mha.inputs = {pq, pk, pv};
    mha.inputs.insert(mha.inputs.end(), att.inputs.begin() + 3, att.inputs.end());  // biases
    mha.attention_scale = att.attention_scale;
    mha.attention_heads = heads;
    mha.outputs = {
        g.addValue({mha.name, {ys[0], qs[1], heads * ys[3]}, DType::kFloat32, std::nullopt})};
    added.push_back(mha);
    Node back;  // [B, Tq, H*Dv] seen as the merged [B, Tq, H, Dv] the graph continues with
    back.op = OpKind::kReshape;
    back.name = mha.name + "/split";
    back.inputs = mha.outputs;
    back.shape = {0, 0, heads, ys[3]};
    back.outputs = g.nodes[merge].outputs;
    added.push_back(back);

    std::vector<int> gone{static_cast<int>(i), merge};
    for (const HeadOperand* op : {&*q, &*k, &*v})
        gone.insert(gone.end(), op->absorbed.begin(), op->absorbed.end());
    std::sort(gone.begin(), gone.end());
    std::vector<Node> nodes;
    for (size_t n = 0; n < g.nodes.size(); ++n) {
        if (n == i) nodes.insert(nodes.end(), added.begin(), added.end());
        if (!std::binary_search(gone.begin(), gone.end(), static_cast<int>(n)))
            nodes.push_back(std::move(g.nodes[n]));
    }
    g.nodes = std::move(nodes);
    return true;
}

}  // namespace

void fuseAttentionHeads(Graph& g) {
    TableCache tables;
    bool changed = true;
    while (changed) {
        changed = false;
        for (size_t i = 0; i < g.nodes.size() && !changed; ++i)
            changed = g.nodes[i].op == OpKind::kAttention && foldOne(g, computeUsage(g), i, tables);
    }
}

}  // namespace voxseg::engine::passes
