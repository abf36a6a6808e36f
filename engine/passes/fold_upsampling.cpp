// foldUpsampling() (engine/passes/fold_upsampling.h): Conv3(Concat(ConvT(x), s)) as
// SubpixelAdd(Conv(x) of the product kernels, Conv3(s)).
#include "engine/passes/fold_upsampling.h"

#include "engine/passes/passes.h"

#include <dnnl.h>

#include <algorithm>
#include <array>
#include <optional>

namespace voxseg::engine::passes {
namespace {

// One stage found: node indices and the values they join.
struct Stage {
    int conv = -1, concat = -1, transpose = -1;
    ValueId x = -1, s = -1;
    bool up_first = true;  // the up-sampled channels come first in the concat
};

bool allEqual(const std::vector<int64_t>& v, int64_t value, size_t n) {
    if (v.empty()) return value == 0 || value == 1;  // absent: ONNX's default
    return v.size() == n && std::all_of(v.begin(), v.end(), [&](int64_t e) { return e == value; });
}

bool noEpilogue(const Node& n) {
    return n.fused_activation == ActivationKind::kNone && n.fused_residual < 0 &&
           n.fused_prelu_slope < 0;
}

bool constantParams(const Graph& g, const Node& n) {
    return n.inputs.size() >= 2 && g.isConstant(n.inputs[1]) &&
           (n.inputs.size() < 3 || n.inputs[2] < 0 || g.isConstant(n.inputs[2]));
}

// The 3x3x3, stride 1, padding 1 convolution the stage ends with.
bool isStageConv(const Graph& g, const Node& n) {
    const ConvAttrs& c = n.conv;
    return n.op == OpKind::kConv && c.spatial_rank == 3 && c.group == 1 &&
           allEqual(c.kernel, 3, 3) && allEqual(c.strides, 1, 3) && allEqual(c.dilations, 1, 3) &&
           allEqual(c.pads_begin, 1, 3) && allEqual(c.pads_end, 1, 3) && noEpilogue(n) &&
           constantParams(g, n);
}

// A ConvTranspose whose kernel equals its stride, 1 or 2 per axis (at least one 2), unpadded.
bool isStageTranspose(const Graph& g, const Node& n) {
    const ConvAttrs& c = n.conv;
    if (n.op != OpKind::kConvTranspose || c.spatial_rank != 3 || c.group != 1 ||
        c.kernel.size() != 3 || c.strides != c.kernel || !allEqual(c.dilations, 1, 3) ||
        !allEqual(c.pads_begin, 0, 3) || !allEqual(c.pads_end, 0, 3) ||
        !allEqual(c.output_padding, 0, 3) || !noEpilogue(n) || !constantParams(g, n))
        return false;
    bool any2 = false;
    for (int64_t k : c.kernel) {
        if (k != 1 && k != 2) return false;
        any2 = any2 || k == 2;
    }
    return any2;
}

std::optional<Stage> stageAt(const Graph& g, const Usage& u, int ci) {
    const Node& conv = g.nodes[static_cast<size_t>(ci)];
    if (!isStageConv(g, conv)) return std::nullopt;
    const int k = singleProducer(g, u, conv.inputs[0], OpKind::kConcat);
    if (k < 0) return std::nullopt;
    const Node& cat = g.nodes[static_cast<size_t>(k)];
    if (cat.axis != 1 || cat.inputs.size() != 2 || !noEpilogue(cat)) return std::nullopt;
    for (int first = 0; first < 2; ++first) {
        const int t = singleProducer(g, u, cat.inputs[first], OpKind::kConvTranspose);
        if (t < 0 || !isStageTranspose(g, g.nodes[static_cast<size_t>(t)])) continue;
        Stage st{ci,        k, t, g.nodes[static_cast<size_t>(t)].inputs[0], cat.inputs[1 - first],
                 first == 0};
        if (st.x == st.s || g.isConstant(st.x) || g.isConstant(st.s)) return std::nullopt;
        return st;
    }
    return std::nullopt;
}

// Per axis of factor s: parity p and convolution tap k (-1..1) -> the parity kernel's tap t and
// the ConvTranspose's kernel offset `sub`.
struct Tap {
    int t, sub;
};
Tap tapOf(int64_t s, int p, int k) {
    if (s == 1) return {k + 1, 0};
    const int v = p + k;                   // the fine offset from the coarse voxel's first child
    const int delta = v < 0 ? -1 : v / 2;  // the coarse neighbour it falls in
    return {delta - p + 1, v - 2 * delta};
}

// A stage's sizes: channels of x (cx), of the up-sampled (cu) and skip (cs) halves, of the
// output (o); the factors f, the parity kernel kp per axis.
// Tap k (0..26) of a 3x3x3 kernel as its offsets -1..1 along z, y, x.
std::array<int, 3> tapOffsets(int64_t k) {
    return {static_cast<int>(k / 9) - 1, static_cast<int>(k / 3 % 3) - 1,
            static_cast<int>(k % 3) - 1};
}

struct Dims {
    int64_t cx = 0, cu = 0, cs = 0, o = 0, groups = 1, kpv = 1;
    std::vector<int64_t> f;
    std::array<int64_t, 3> kp{};
    int64_t mu = 0, ms = 0;  // where the up-sampled and the skip channels start in the Conv
};

Dims dimsOf(const Graph& g, const Stage& st) {
    const Node& conv = g.nodes[static_cast<size_t>(st.conv)];
    const Node& tr = g.nodes[static_cast<size_t>(st.transpose)];
    Dims d;
    d.cx = g.values[st.x].shape[1];
    d.cs = g.values[st.s].shape[1];
    d.cu = g.values[tr.outputs[0]].shape[1];
    d.o = g.values[conv.outputs[0]].shape[1];
    d.f = tr.conv.kernel;
    for (int a = 0; a < 3; ++a) {
        d.kp[a] = d.f[a] == 2 ? 2 : 3;
        d.groups *= d.f[a];
        d.kpv *= d.kp[a];
    }
    d.mu = st.up_first ? 0 : d.cs;
    d.ms = st.up_first ? d.cu : 0;
    return d;
}

// What the folded stage computes with: the parity convolution's weights [G * O, Cx, kp...], the
// skip convolution's weights [O, Cs, 3, 3, 3] and bias, the border correction [64, O].
struct Folded {
    std::vector<float> parity, skip, skip_bias, corr;
};

// a[k][o][m]: the Conv's weights on the up-sampled channel m, per tap k (27 * O rows of Cu).
std::vector<float> upRows(const Dims& d, const std::vector<float>& wc) {
    std::vector<float> a(static_cast<size_t>(27 * d.o * d.cu));
    for (int64_t o = 0; o < d.o; ++o)
        for (int64_t m = 0; m < d.cu; ++m)
            for (int64_t k = 0; k < 27; ++k)
                a[static_cast<size_t>((k * d.o + o) * d.cu + m)] =
                    wc[static_cast<size_t>((o * (d.cu + d.cs) + d.mu + m) * 27 + k)];
    return a;
}

// The parity kernels. Every (tap, kernel offset) product the parities need is a block of one
// matrix product prod = a * b^T ([27 * O, G * Cx]; b[sub][c][m] the ConvTranspose's weights;
// oneDNN's sgemm: 0.3 G multiply-adds for nnU-Net's 128^3 stage, 4.5 G for its 320-channel
// one), summed into the parity kernel's tap t. nullopt when the sgemm fails.
std::optional<std::vector<float>> parityWeights(const Dims& d, const std::vector<float>& a,
                                                const std::vector<float>& wt) {
    const int64_t kt = d.groups;  // the ConvTranspose's kernel volume
    std::vector<float> b(static_cast<size_t>(kt * d.cx * d.cu));
    for (int64_t c = 0; c < d.cx; ++c)
        for (int64_t m = 0; m < d.cu; ++m)
            for (int64_t sub = 0; sub < kt; ++sub)
                b[static_cast<size_t>((sub * d.cx + c) * d.cu + m)] =
                    wt[static_cast<size_t>((c * d.cu + m) * kt + sub)];
    const int64_t rows = 27 * d.o, cols = kt * d.cx;
    std::vector<float> prod(static_cast<size_t>(rows * cols));
    if (dnnl_sgemm('N', 'T', rows, cols, d.cu, 1.0f, a.data(), d.cu, b.data(), d.cu, 0.0f,
                   prod.data(), cols) != dnnl_success)
        return std::nullopt;
    const auto& f = d.f;
    std::vector<double> wp(static_cast<size_t>(d.groups * d.o * d.cx * d.kpv), 0.0);
    for (int pz = 0; pz < f[0]; ++pz)
        for (int py = 0; py < f[1]; ++py)
            for (int px = 0; px < f[2]; ++px)
                for (int64_t k = 0; k < 27; ++k) {
                    const std::array<int, 3> kk = tapOffsets(k);
                    const Tap tz = tapOf(f[0], pz, kk[0]), ty = tapOf(f[1], py, kk[1]),
                              tx = tapOf(f[2], px, kk[2]);
                    const int64_t grp = (pz * f[1] + py) * f[2] + px;
                    const int64_t sub = (tz.sub * f[1] + ty.sub) * f[2] + tx.sub;
                    const int64_t t = (tz.t * d.kp[1] + ty.t) * d.kp[2] + tx.t;
                    for (int64_t o = 0; o < d.o; ++o)
                        for (int64_t c = 0; c < d.cx; ++c)
                            wp[static_cast<size_t>(((grp * d.o + o) * d.cx + c) * d.kpv + t)] +=
                                prod[static_cast<size_t>((k * d.o + o) * cols + sub * d.cx + c)];
                }
    return std::vector<float>(wp.begin(), wp.end());
}

// The ConvTranspose's bias tb as the convolution sees it, bt[o][k] per tap: in the interior all
// 27 taps (into the skip convolution's bias, with the Conv's own cb), on the border without the
// taps that fall into the padding (the correction table, per border class).
void biasTerms(const Dims& d, const std::vector<float>& a, const std::vector<float>& tb,
               const std::vector<float>& cb, Folded& out) {
    std::vector<double> bt(static_cast<size_t>(d.o * 27), 0.0);
    for (int64_t o = 0; o < d.o && !tb.empty(); ++o)
        for (int64_t k = 0; k < 27; ++k)
            for (int64_t m = 0; m < d.cu; ++m)
                bt[static_cast<size_t>(o * 27 + k)] +=
                    static_cast<double>(a[static_cast<size_t>((k * d.o + o) * d.cu + m)]) *
                    tb[static_cast<size_t>(m)];
    out.skip_bias.assign(static_cast<size_t>(d.o), 0.0f);
    if (!tb.empty()) out.corr.assign(static_cast<size_t>(64 * d.o), 0.0f);  // else none
    for (int64_t o = 0; o < d.o; ++o) {
        double total = cb.empty() ? 0.0 : cb[static_cast<size_t>(o)];
        for (int64_t k = 0; k < 27; ++k) total += bt[static_cast<size_t>(o * 27 + k)];
        out.skip_bias[static_cast<size_t>(o)] = static_cast<float>(total);
        for (int cls = 0; cls < 64 && !tb.empty(); ++cls) {
            const int c3[3] = {cls >> 4, (cls >> 2) & 3, cls & 3};
            double outside_sum = 0;  // the taps in the padding for this border class
            for (int64_t k = 0; k < 27; ++k) {
                const std::array<int, 3> kk = tapOffsets(k);
                bool outside = false;
                for (int ax = 0; ax < 3; ++ax)
                    outside =
                        outside || (kk[ax] == -1 && (c3[ax] & 1)) || (kk[ax] == 1 && (c3[ax] & 2));
                if (outside) outside_sum += bt[static_cast<size_t>(o * 27 + k)];
            }
            out.corr[static_cast<size_t>(cls * d.o + o)] = static_cast<float>(-outside_sum);
        }
    }
}

std::optional<Folded> foldedWeights(const Graph& g, const Stage& st, const Dims& d) {
    const Node& conv = g.nodes[static_cast<size_t>(st.conv)];
    const Node& tr = g.nodes[static_cast<size_t>(st.transpose)];
    const std::vector<float> wc = g.constant(conv.inputs[1]).toFloats();
    const std::vector<float> a = upRows(d, wc);
    std::optional<std::vector<float>> parity =
        parityWeights(d, a, g.constant(tr.inputs[1]).toFloats());
    if (!parity) return std::nullopt;
    Folded out;
    out.parity = std::move(*parity);
    const bool has_tb = tr.inputs.size() > 2 && tr.inputs[2] >= 0;
    const bool has_cb = conv.inputs.size() > 2 && conv.inputs[2] >= 0;
    biasTerms(d, a, has_tb ? g.constant(tr.inputs[2]).toFloats() : std::vector<float>{},
              has_cb ? g.constant(conv.inputs[2]).toFloats() : std::vector<float>{}, out);
    out.skip.resize(static_cast<size_t>(d.o * d.cs * 27));
    for (int64_t o = 0; o < d.o; ++o)
        for (int64_t c = 0; c < d.cs; ++c)
            for (int64_t k = 0; k < 27; ++k)
                out.skip[static_cast<size_t>((o * d.cs + c) * 27 + k)] =
                    wc[static_cast<size_t>((o * (d.cu + d.cs) + d.ms + c) * 27 + k)];
    return out;
}

// The stage's three nodes in place of its Conv; its ConvTranspose and Concat removed.
void rewrite(Graph& g, const Stage& st, const Dims& d, const Folded& w) {
    const Node conv = g.nodes[static_cast<size_t>(st.conv)];
    const bool has_cb = conv.inputs.size() > 2 && conv.inputs[2] >= 0;
    const Shape xs = g.values[st.x].shape, ys = g.values[conv.outputs[0]].shape;
    const std::string yname = g.values[conv.outputs[0]].name;  // a copy: addValue reallocates
    auto constant = [&](const std::string& name, Shape shape, const std::vector<float>& v) {
        Value val;
        val.name = name;
        val.shape = shape;
        val.constant = Tensor::fromFloats(std::move(shape), v);
        return g.addValue(std::move(val));
    };
    Shape ps{xs[0], d.groups * d.o};
    for (int a = 0; a < 3; ++a) ps.push_back(xs[2 + a] + (d.f[a] == 2 ? 1 : 0));

    Node pn;
    pn.op = OpKind::kConv;
    pn.name = conv.name + kFoldedUpsamplingSuffix;
    pn.conv = conv.conv;
    pn.conv.kernel = {d.kp[0], d.kp[1], d.kp[2]};
    pn.conv.in_channels = d.cx;
    pn.conv.out_channels = d.groups * d.o;
    pn.conv.has_bias = false;
    pn.inputs = {st.x, constant(yname + "#up.weight",
                                {d.groups * d.o, d.cx, d.kp[0], d.kp[1], d.kp[2]}, w.parity)};
    pn.outputs = {g.addValue(Value{yname + "#up", ps, DType::kFloat32, std::nullopt})};

    Node sn;
    sn.op = OpKind::kConv;
    sn.name = conv.name;
    sn.conv = conv.conv;
    sn.conv.in_channels = d.cs;
    sn.conv.has_bias = true;
    sn.inputs = {st.s, constant(yname + "#skip.weight", {d.o, d.cs, 3, 3, 3}, w.skip),
                 constant(yname + "#skip.bias", {d.o}, w.skip_bias)};
    sn.outputs = {g.addValue(Value{yname + "#skip", ys, DType::kFloat32, std::nullopt})};

    Node an;
    an.op = OpKind::kSubpixelAdd;
    an.name = conv.name + "#add";
    an.subpixel = d.f;
    an.inputs = {pn.outputs[0], sn.outputs[0]};
    an.inputs.push_back(w.corr.empty() ? -1 : constant(yname + "#border", {64, d.o}, w.corr));
    if (has_cb) an.inputs.push_back(conv.inputs[2]);  // the Conv's own bias, already in Y
    an.outputs = conv.outputs;

    std::vector<Node> nodes;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
        const int ii = static_cast<int>(i);
        if (ii == st.transpose || ii == st.concat) continue;
        if (ii == st.conv) {
            nodes.push_back(std::move(pn));
            nodes.push_back(std::move(sn));
            nodes.push_back(std::move(an));
            continue;
        }
        nodes.push_back(std::move(g.nodes[i]));
    }
    g.nodes = std::move(nodes);
}

// Multiply-adds of the stage as it is and folded.
bool worthFolding(const Graph& g, const Stage& st, const Dims& d, double max_ratio) {
    const Shape& xs = g.values[st.x].shape;
    const Shape& ys = g.values[g.nodes[static_cast<size_t>(st.conv)].outputs[0]].shape;
    if (xs.size() != 5 || ys.size() != 5) return false;
    double fine = 1, parity = 1;  // fine voxels; parity convolution outputs per channel group
    for (size_t a = 0; a < 3; ++a) {
        fine *= static_cast<double>(ys[2 + a]);
        parity *= static_cast<double>((xs[2 + a] + (d.f[a] == 2 ? 1 : 0)) * d.f[a]);
    }
    const double now = fine * static_cast<double>(d.cu * (d.cx + 27 * d.o));
    const double folded = parity * static_cast<double>(d.o * d.cx * d.kpv);
    return folded <= max_ratio * now;
}

}  // namespace

std::string foldedLayerName(const std::string& node_name) {
    const std::string suffix = kFoldedUpsamplingSuffix;
    if (node_name.size() > suffix.size() &&
        node_name.compare(node_name.size() - suffix.size(), suffix.size(), suffix) == 0)
        return node_name.substr(0, node_name.size() - suffix.size());
    return node_name;
}

int foldUpsampling(Graph& g, double max_ratio) {
    int folded = 0;
    for (bool changed = true; changed;) {
        changed = false;
        const Usage u = computeUsage(g);
        for (size_t i = 0; i < g.nodes.size() && !changed; ++i) {
            const std::optional<Stage> st = stageAt(g, u, static_cast<int>(i));
            if (!st) continue;
            const Dims d = dimsOf(g, *st);
            if (!worthFolding(g, *st, d, max_ratio)) continue;
            const std::optional<Folded> w = foldedWeights(g, *st, d);
            if (!w) continue;  // the stage stays as it is
            rewrite(g, *st, d, *w);
            ++folded;
            changed = true;
        }
    }
    return folded;
}

}  // namespace voxseg::engine::passes
