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
        !(c.output_padding.empty() || allEqual(c.output_padding, 0, 3)) || !noEpilogue(n) ||
        !constantParams(g, n))
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

int64_t product(const Shape& s, size_t from) {
    int64_t p = 1;
    for (size_t i = from; i < s.size(); ++i) p *= s[i];
    return p;
}

void fold(Graph& g, const Stage& st) {
    const Node conv = g.nodes[static_cast<size_t>(st.conv)];
    const Node tr = g.nodes[static_cast<size_t>(st.transpose)];
    const Shape xs = g.values[st.x].shape, ss = g.values[st.s].shape;
    const Shape ys = g.values[conv.outputs[0]].shape;
    const int64_t cx = xs[1], cs = ss[1], o = ys[1];
    const std::vector<int64_t> f = tr.conv.kernel;
    const int64_t cu = g.values[tr.outputs[0]].shape[1], groups = f[0] * f[1] * f[2];
    const int64_t mu = st.up_first ? 0 : cs, ms = st.up_first ? cu : 0;  // channel offsets in C
    const std::vector<float> wc = g.constant(conv.inputs[1]).toFloats();
    const std::vector<float> wt = g.constant(tr.inputs[1]).toFloats();
    const int64_t kt = groups;    // the ConvTranspose's kernel volume
    std::array<int64_t, 3> kp{};  // the parity kernel per axis
    for (int a = 0; a < 3; ++a) kp[a] = f[a] == 2 ? 2 : 3;
    const int64_t kpv = kp[0] * kp[1] * kp[2];

    // Rows with the up-sampled channel m contiguous: a[k][o][m] (27 * O rows), b[sub][c][m]
    // (kt * Cx rows). Every (tap, offset) product the parities need is a block of one matrix
    // product prod = a * b^T ([27 * O, kt * Cx], oneDNN's sgemm: 0.3 G multiply-adds for
    // nnU-Net's 128^3 stage, 4.5 G for its 320-channel one).
    std::vector<float> a(static_cast<size_t>(27 * o * cu)), b(static_cast<size_t>(kt * cx * cu));
    for (int64_t oo = 0; oo < o; ++oo)
        for (int64_t m = 0; m < cu; ++m)
            for (int64_t k = 0; k < 27; ++k)
                a[static_cast<size_t>((k * o + oo) * cu + m)] =
                    wc[static_cast<size_t>((oo * (cu + cs) + mu + m) * 27 + k)];
    for (int64_t c = 0; c < cx; ++c)
        for (int64_t m = 0; m < cu; ++m)
            for (int64_t sub = 0; sub < kt; ++sub)
                b[static_cast<size_t>((sub * cx + c) * cu + m)] =
                    wt[static_cast<size_t>((c * cu + m) * kt + sub)];
    const int64_t rows = 27 * o, cols = kt * cx;
    std::vector<float> prod(static_cast<size_t>(rows * cols));
    dnnl_sgemm('N', 'T', rows, cols, cu, 1.0f, a.data(), cu, b.data(), cu, 0.0f, prod.data(), cols);

    std::vector<double> wp(static_cast<size_t>(groups * o * cx * kpv), 0.0);
    for (int pz = 0; pz < f[0]; ++pz)
        for (int py = 0; py < f[1]; ++py)
            for (int px = 0; px < f[2]; ++px) {
                const int64_t grp = (pz * f[1] + py) * f[2] + px;
                for (int kz = -1; kz <= 1; ++kz)
                    for (int ky = -1; ky <= 1; ++ky)
                        for (int kx = -1; kx <= 1; ++kx) {
                            const Tap tz = tapOf(f[0], pz, kz), ty = tapOf(f[1], py, ky),
                                      tx = tapOf(f[2], px, kx);
                            const int64_t k = ((kz + 1) * 3 + ky + 1) * 3 + kx + 1;
                            const int64_t sub = (tz.sub * f[1] + ty.sub) * f[2] + tx.sub;
                            const int64_t t = (tz.t * kp[1] + ty.t) * kp[2] + tx.t;
                            for (int64_t oo = 0; oo < o; ++oo)
                                for (int64_t c = 0; c < cx; ++c)
                                    wp[static_cast<size_t>(((grp * o + oo) * cx + c) * kpv + t)] +=
                                        prod[static_cast<size_t>((k * o + oo) * cols + sub * cx +
                                                                 c)];
                        }
            }

    // The ConvTranspose's bias as the convolution sees it: bt[o][k] for each tap, in the
    // interior all 27 (into the skip convolution's bias), on the border without the taps that
    // fall into the padding (the correction table).
    const bool has_tb = tr.inputs.size() > 2 && tr.inputs[2] >= 0;
    const bool has_cb = conv.inputs.size() > 2 && conv.inputs[2] >= 0;
    std::vector<double> bt(static_cast<size_t>(o * 27), 0.0);
    if (has_tb) {
        const std::vector<float> tb = g.constant(tr.inputs[2]).toFloats();
        for (int64_t oo = 0; oo < o; ++oo)
            for (int64_t k = 0; k < 27; ++k)
                for (int64_t m = 0; m < cu; ++m)
                    bt[static_cast<size_t>(oo * 27 + k)] +=
                        static_cast<double>(a[static_cast<size_t>((k * o + oo) * cu + m)]) *
                        tb[static_cast<size_t>(m)];
    }
    std::vector<float> skip_bias(static_cast<size_t>(o), 0.0f);
    const std::vector<float> cb = has_cb ? g.constant(conv.inputs[2]).toFloats() : skip_bias;
    std::vector<float> corr(static_cast<size_t>(64 * o), 0.0f);
    for (int64_t oo = 0; oo < o; ++oo) {
        double total = 0;
        for (int64_t k = 0; k < 27; ++k) total += bt[static_cast<size_t>(oo * 27 + k)];
        skip_bias[static_cast<size_t>(oo)] =
            static_cast<float>(cb[static_cast<size_t>(oo)] + total);
        for (int cls = 0; cls < 64; ++cls) {
            const int c3[3] = {cls >> 4, (cls >> 2) & 3, cls & 3};
            double out = 0;  // the taps in the padding for this border class
            for (int64_t k = 0; k < 27; ++k) {
                const int kk[3] = {static_cast<int>(k / 9) - 1, static_cast<int>(k / 3 % 3) - 1,
                                   static_cast<int>(k % 3) - 1};
                bool outside = false;
                for (int ax = 0; ax < 3; ++ax)
                    outside =
                        outside || (kk[ax] == -1 && (c3[ax] & 1)) || (kk[ax] == 1 && (c3[ax] & 2));
                if (outside) out += bt[static_cast<size_t>(oo * 27 + k)];
            }
            corr[static_cast<size_t>(cls * o + oo)] = static_cast<float>(-out);
        }
    }

    // The skip half's weights.
    std::vector<float> ws(static_cast<size_t>(o * cs * 27));
    for (int64_t oo = 0; oo < o; ++oo)
        for (int64_t c = 0; c < cs; ++c)
            for (int64_t k = 0; k < 27; ++k)
                ws[static_cast<size_t>((oo * cs + c) * 27 + k)] =
                    wc[static_cast<size_t>((oo * (cu + cs) + ms + c) * 27 + k)];
    std::vector<float> wpf(wp.begin(), wp.end());

    auto constant = [&](const std::string& name, Shape shape, const std::vector<float>& v) {
        Value val;
        val.name = name;
        val.shape = shape;
        val.constant = Tensor::fromFloats(std::move(shape), v);
        return g.addValue(std::move(val));
    };
    const std::string yname = g.values[conv.outputs[0]].name;  // a copy: addValue reallocates
    Shape ps{xs[0], groups * o};
    for (int a2 = 0; a2 < 3; ++a2) ps.push_back(xs[2 + a2] + (f[a2] == 2 ? 1 : 0));

    Node pn;
    pn.op = OpKind::kConv;
    pn.name = conv.name + kFoldedUpsamplingSuffix;
    pn.conv = conv.conv;
    pn.conv.kernel = {kp[0], kp[1], kp[2]};
    pn.conv.in_channels = cx;
    pn.conv.out_channels = groups * o;
    pn.conv.has_bias = false;
    pn.inputs = {st.x, constant(yname + "#up.weight", {groups * o, cx, kp[0], kp[1], kp[2]}, wpf)};
    pn.outputs = {g.addValue(Value{yname + "#up", ps, DType::kFloat32, std::nullopt})};

    Node sn;
    sn.op = OpKind::kConv;
    sn.name = conv.name;
    sn.conv = conv.conv;
    sn.conv.in_channels = cs;
    sn.conv.has_bias = true;
    sn.inputs = {st.s, constant(yname + "#skip.weight", {o, cs, 3, 3, 3}, ws),
                 constant(yname + "#skip.bias", {o}, skip_bias)};
    sn.outputs = {g.addValue(Value{yname + "#skip", ys, DType::kFloat32, std::nullopt})};

    Node an;
    an.op = OpKind::kSubpixelAdd;
    an.name = conv.name + "#add";
    an.subpixel = f;
    an.inputs = {pn.outputs[0], sn.outputs[0]};
    an.inputs.push_back(has_tb ? constant(yname + "#border", {64, o}, corr) : -1);
    if (has_cb) an.inputs.push_back(conv.inputs[2]);  // the Conv's own bias, already in Y
    an.outputs = conv.outputs;

    // The three nodes take the Conv's place; the ConvTranspose and the Concat go.
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
bool worthFolding(const Graph& g, const Stage& st, double max_ratio) {
    const Node& tr = g.nodes[static_cast<size_t>(st.transpose)];
    const Shape& xs = g.values[st.x].shape;
    const Shape& ys = g.values[g.nodes[static_cast<size_t>(st.conv)].outputs[0]].shape;
    if (xs.size() != 5 || ys.size() != 5) return false;
    const double cx = static_cast<double>(xs[1]), o = static_cast<double>(ys[1]);
    const double cu = static_cast<double>(g.values[tr.outputs[0]].shape[1]);
    const double fine = static_cast<double>(product(ys, 2));
    double parity = 1, kernel = 1;
    for (int a = 0; a < 3; ++a) {
        const bool two = tr.conv.kernel[static_cast<size_t>(a)] == 2;
        parity *=
            static_cast<double>(xs[2 + static_cast<size_t>(a)] + (two ? 1 : 0)) * (two ? 2 : 1);
        kernel *= two ? 2 : 3;
    }
    const double now = fine * cu * (cx + 27 * o);
    const double folded = parity * o * cx * kernel;
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
            if (!st || !worthFolding(g, *st, max_ratio)) continue;
            fold(g, *st);
            ++folded;
            changed = true;
        }
    }
    return folded;
}

}  // namespace voxseg::engine::passes
