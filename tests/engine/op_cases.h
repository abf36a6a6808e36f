// Op parity framework (in the spirit of ggml's test-backend-ops): a table of single-op and small
// multi-op graphs with odd shapes (11x10x9, 13 channels) and fixed seeds, and a checker that runs
// one case on a backend and on the reference backend and compares with the case's tolerance for
// the precision used. Every parameter of the case is printed on failure.
//
// Use from any backend's tests:
//     for (const auto& c : voxseg::engine::testing::allOpCases())
//         voxseg::engine::testing::expectParity(*my_backend, c, Precision::kBFloat16);
// Header-only; single-threaded use.
#pragma once

#include "engine/backend.h"
#include "engine/graph/graph.h"
#include "engine/passes/optimize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace voxseg::engine::testing {

// |backend - reference| <= atol + rtol * |reference| for every element.
struct Tolerance {
    double atol = 0;
    double rtol = 0;
};

// Named tolerances, per kind of op and precision. Reductions over many inputs (conv, norms) lose
// more in reduced precision than elementwise ops.
struct Tolerances {
    Tolerance fp32, fp16, bf16;
    const Tolerance& at(Precision p) const {
        return p == Precision::kFloat32 ? fp32 : p == Precision::kFloat16 ? fp16 : bf16;
    }
};
inline const Tolerances kElementwiseTol{{1e-6, 1e-6}, {2e-3, 2e-3}, {1.6e-2, 1.6e-2}};
inline const Tolerances kReductionTol{{2e-5, 1e-5}, {1e-2, 1e-2}, {6e-2, 3e-2}};
inline const Tolerances kConvTol{{5e-5, 1e-5}, {1.5e-2, 1e-2}, {8e-2, 4e-2}};
inline const Tolerances kNetworkTol{{1e-4, 1e-4}, {4e-2, 2e-2}, {2e-1, 6e-2}};
// Dot products of up to a few hundred terms (MatMul, Gemm, Einsum lowered to MatMul).
inline const Tolerances kMatMulTol{{2e-5, 1e-5}, {1e-2, 1e-2}, {6e-2, 3e-2}};
// erf / gelu / sin / cos: oneDNN and libm use different polynomial approximations.
inline const Tolerances kTranscendentalTol{{5e-6, 5e-6}, {2e-3, 2e-3}, {1.6e-2, 1.6e-2}};

// Deterministic uniform floats in [lo, hi) (std::uniform_real_distribution is not portable).
inline std::vector<float> seededFloats(int64_t n, uint32_t seed, float lo = -1, float hi = 1) {
    std::mt19937 rng(seed);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = lo + (hi - lo) * static_cast<float>(rng() >> 8) * (1.0f / 16777216.0f);
    return v;
}

inline Tensor seededTensor(const Shape& shape, uint32_t seed, float lo = -1, float hi = 1) {
    return Tensor::fromFloats(shape, seededFloats(numel(shape), seed, lo, hi));
}

// Builds graphs by hand for tests (the importer builds them from ONNX).
class GraphBuilder {
  public:
    ValueId input(const std::string& name, const Shape& shape) {
        const ValueId id = g_.addValue({name, shape, DType::kFloat32, std::nullopt});
        g_.inputs.push_back(id);
        return id;
    }
    ValueId constant(const std::string& name, Tensor t) {
        Shape s = t.shape();
        return g_.addValue({name, s, t.dtype(), std::move(t)});
    }
    ValueId weights(const std::string& name, const Shape& shape, float scale = 1.0f) {
        return constant(name, seededTensor(shape, seed_++, -scale, scale));
    }
    // Adds a node with one output; `configure` sets its attributes.
    ValueId node(OpKind op, std::vector<ValueId> inputs,
                 const std::function<void(Node&)>& configure = {}) {
        Node n;
        n.op = op;
        n.name = std::string(opKindName(op)) + "_" + std::to_string(g_.nodes.size());
        n.inputs = std::move(inputs);
        n.outputs = {g_.addValue({n.name + "_out", {}, DType::kFloat32, std::nullopt})};
        if (configure) configure(n);
        g_.nodes.push_back(std::move(n));
        return g_.nodes.back().outputs[0];
    }
    ValueId conv(ValueId x, int64_t in_ch, int64_t out_ch, std::vector<int64_t> kernel,
                 std::vector<int64_t> strides = {}, std::vector<int64_t> pads = {},
                 std::vector<int64_t> dilations = {}, int64_t group = 1, bool bias = true) {
        const size_t sr = kernel.size();
        if (strides.empty()) strides.assign(sr, 1);
        if (pads.empty()) pads.assign(2 * sr, 0);
        if (dilations.empty()) dilations.assign(sr, 1);
        Shape ws{out_ch, in_ch / group};
        int64_t fan_in = in_ch / group;
        for (int64_t k : kernel) ws.push_back(k), fan_in *= k;
        const float scale = 1.0f / std::sqrt(static_cast<float>(fan_in));
        std::vector<ValueId> in{x, weights("w" + std::to_string(seed_), ws, scale)};
        if (bias) in.push_back(weights("b" + std::to_string(seed_), {out_ch}, 0.5f));
        return node(OpKind::kConv, in, [&](Node& n) {
            n.conv.spatial_rank = static_cast<int>(sr);
            n.conv.kernel = kernel;
            n.conv.strides = strides;
            n.conv.dilations = dilations;
            n.conv.pads_begin.assign(pads.begin(), pads.begin() + sr);
            n.conv.pads_end.assign(pads.begin() + sr, pads.end());
            n.conv.group = group;
            n.conv.in_channels = in_ch;
            n.conv.out_channels = out_ch;
            n.conv.has_bias = bias;
        });
    }
    ValueId convTranspose(ValueId x, int64_t in_ch, int64_t out_ch, std::vector<int64_t> kernel,
                          std::vector<int64_t> strides, std::vector<int64_t> pads = {},
                          std::vector<int64_t> output_padding = {}, int64_t group = 1,
                          bool bias = true) {
        const size_t sr = kernel.size();
        if (pads.empty()) pads.assign(2 * sr, 0);
        Shape ws{in_ch, out_ch / group};
        int64_t fan = in_ch / group;
        for (int64_t k : kernel) ws.push_back(k), fan *= k;
        const float scale = 1.0f / std::sqrt(static_cast<float>(fan));
        std::vector<ValueId> in{x, weights("w" + std::to_string(seed_), ws, scale)};
        if (bias) in.push_back(weights("b" + std::to_string(seed_), {out_ch}, 0.5f));
        return node(OpKind::kConvTranspose, in, [&](Node& n) {
            n.conv.spatial_rank = static_cast<int>(sr);
            n.conv.kernel = kernel;
            n.conv.strides = strides;
            n.conv.dilations.assign(sr, 1);
            n.conv.pads_begin.assign(pads.begin(), pads.begin() + sr);
            n.conv.pads_end.assign(pads.begin() + sr, pads.end());
            n.conv.output_padding = output_padding;
            n.conv.group = group;
            n.conv.in_channels = in_ch;
            n.conv.out_channels = out_ch;
            n.conv.has_bias = bias;
        });
    }
    // InstanceNorm / GroupNorm with random affine parameters (scale around 1).
    ValueId norm(OpKind op, ValueId x, int64_t channels, int64_t groups = 1, float eps = 1e-5f) {
        const uint32_t seed = seed_++;  // one statement each: argument order is unspecified
        const ValueId s =
            constant("scale" + std::to_string(seed), seededTensor({channels}, seed, 0.5f, 1.5f));
        const ValueId b = weights("bias" + std::to_string(seed_), {channels}, 0.5f);
        return node(op, {x, s, b}, [&](Node& n) {
            n.norm.epsilon = eps;
            n.norm.num_groups = groups;
        });
    }
    void output(ValueId v) { g_.outputs.push_back(v); }
    Graph& graph() { return g_; }
    Node& last() { return g_.nodes.back(); }

  private:
    Graph g_;
    uint32_t seed_ = 1000;
};

struct OpCase {
    std::string name;    // unique, usable as a gtest parameter name ([A-Za-z0-9_])
    std::string params;  // every parameter, printed on failure
    Graph graph;
    std::vector<Shape> input_shapes;
    Tolerances tol;
};

// Formats a vector for the params string.
inline std::string vecStr(const std::vector<int64_t>& v) { return shapeToString(v); }

inline std::vector<OpCase> allOpCases() {
    std::vector<OpCase> cases;
    auto add = [&](std::string name, std::string params, GraphBuilder& b, std::vector<Shape> shapes,
                   const Tolerances& tol) {
        Graph g = b.graph();
        const Status s = g.inferShapes(shapes);
        // A case that does not even infer is a bug in this table: fail loudly in the test.
        if (!s.isOk()) params += " [inferShapes failed: " + s.toString() + "]";
        cases.push_back({std::move(name), std::move(params), std::move(g), std::move(shapes), tol});
    };
    const Shape odd{1, 13, 11, 10, 9};

    // --- Conv ---
    struct ConvSpec {
        const char* name;
        int64_t in_ch, out_ch;
        std::vector<int64_t> k, s, p, d;
        int64_t group;
        bool bias;
        Shape input;
    };
    const std::vector<ConvSpec> convs = {
        {"conv_k3_p1", 13, 7, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, {1, 1, 1}, 1, true, odd},
        {"conv_k3_s2_p1", 13, 8, {3, 3, 3}, {2, 2, 2}, {1, 1, 1, 1, 1, 1}, {1, 1, 1}, 1, true, odd},
        {"conv_k1_nobias",
         13,
         5,
         {1, 1, 1},
         {1, 1, 1},
         {0, 0, 0, 0, 0, 0},
         {1, 1, 1},
         1,
         false,
         odd},
        {"conv_k3_dil2_p2",
         13,
         6,
         {3, 3, 3},
         {1, 1, 1},
         {2, 2, 2, 2, 2, 2},
         {2, 2, 2},
         1,
         true,
         odd},
        {"conv_group",
         12,
         9,
         {3, 3, 3},
         {1, 1, 1},
         {1, 1, 1, 1, 1, 1},
         {1, 1, 1},
         3,
         true,
         {1, 12, 7, 9, 8}},
        {"conv_depthwise",
         13,
         13,
         {3, 3, 3},
         {1, 1, 1},
         {1, 1, 1, 1, 1, 1},
         {1, 1, 1},
         13,
         true,
         odd},
        {"conv_asym_pads_k2_s2",
         13,
         4,
         {2, 3, 2},
         {2, 1, 2},
         {0, 1, 1, 1, 0, 0},
         {1, 1, 1},
         1,
         true,
         odd},
        {"conv_1ch_in_batch2",
         1,
         8,
         {3, 3, 3},
         {1, 1, 1},
         {1, 1, 1, 1, 1, 1},
         {1, 1, 1},
         1,
         true,
         {2, 1, 11, 10, 9}},
        {"conv2d_k3", 13, 7, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, {1, 13, 11, 10}},
    };
    for (const ConvSpec& c : convs) {
        GraphBuilder b;
        const ValueId x = b.input("x", c.input);
        b.output(b.conv(x, c.in_ch, c.out_ch, c.k, c.s, c.p, c.d, c.group, c.bias));
        add(c.name,
            "input " + vecStr(c.input) + " out_ch " + std::to_string(c.out_ch) + " kernel " +
                vecStr(c.k) + " strides " + vecStr(c.s) + " pads " + vecStr(c.p) + " dilations " +
                vecStr(c.d) + " group " + std::to_string(c.group) + " bias " +
                std::to_string(c.bias),
            b, {c.input}, kConvTol);
    }

    // --- ConvTranspose ---
    struct ConvTSpec {
        const char* name;
        int64_t in_ch, out_ch;
        std::vector<int64_t> k, s, p, op;
        int64_t group;
        Shape input;
    };
    const std::vector<ConvTSpec> convts = {
        {"convtranspose_k2_s2", 13, 7, {2, 2, 2}, {2, 2, 2}, {}, {}, 1, odd},
        {"convtranspose_k3_s2_p1_op1",
         13,
         5,
         {3, 3, 3},
         {2, 2, 2},
         {1, 1, 1, 1, 1, 1},
         {1, 1, 1},
         1,
         odd},
        {"convtranspose_k3_s1_group",
         12,
         6,
         {3, 3, 3},
         {1, 1, 1},
         {1, 1, 1, 1, 1, 1},
         {},
         3,
         {1, 12, 5, 6, 7}},
        {"convtranspose_aniso_k122_s122", 13, 6, {1, 2, 2}, {1, 2, 2}, {}, {}, 1, odd},
        // kernel == stride runs on the CPU as a 1x1 conv + scatter, in blocks of 16, 8 or 1
        // channels (the cases above: 7 and 6 channels, plain).
        {"convtranspose_k2_s2_oc16_blocked",
         24,
         16,
         {2, 2, 2},
         {2, 2, 2},
         {},
         {},
         1,
         {1, 24, 5, 6, 7}},
        {"convtranspose_k2_s2_oc8_batch2",
         13,
         8,
         {2, 2, 2},
         {2, 2, 2},
         {},
         {},
         1,
         {2, 13, 5, 4, 3}},
        {"convtranspose_k213_s213_oc32", 16, 32, {2, 1, 3}, {2, 1, 3}, {}, {}, 1, {1, 16, 3, 5, 4}},
        {"convtranspose_2d_k2_s2_oc16", 16, 16, {2, 2}, {2, 2}, {}, {}, 1, {1, 16, 9, 7}},
    };
    for (const ConvTSpec& c : convts) {
        GraphBuilder b;
        const ValueId x = b.input("x", c.input);
        b.output(b.convTranspose(x, c.in_ch, c.out_ch, c.k, c.s, c.p, c.op, c.group));
        add(c.name,
            "input " + vecStr(c.input) + " out_ch " + std::to_string(c.out_ch) + " kernel " +
                vecStr(c.k) + " strides " + vecStr(c.s) + " pads " + vecStr(c.p) +
                " output_padding " + vecStr(c.op) + " group " + std::to_string(c.group),
            b, {c.input}, kConvTol);
    }

    // --- Norms ---
    {
        GraphBuilder b;
        b.output(b.norm(OpKind::kInstanceNorm, b.input("x", odd), 13));
        add("instancenorm", "input " + vecStr(odd) + " eps 1e-5", b, {odd}, kReductionTol);
    }
    {
        GraphBuilder b;
        const Shape s{2, 12, 7, 6, 5};
        b.output(b.norm(OpKind::kGroupNorm, b.input("x", s), 12, 4));
        add("groupnorm_g4", "input " + vecStr(s) + " groups 4 eps 1e-5", b, {s}, kReductionTol);
    }
    {
        GraphBuilder b;
        const ValueId x = b.input("x", odd);
        const ValueId sc = b.constant("s", seededTensor({13}, 7, 0.5f, 1.5f));
        const ValueId bi = b.weights("b", {13});
        const ValueId mean = b.weights("m", {13});
        const ValueId var = b.constant("v", seededTensor({13}, 8, 0.2f, 2.0f));
        b.output(b.node(OpKind::kBatchNorm, {x, sc, bi, mean, var},
                        [](Node& n) { n.norm.epsilon = 1e-3f; }));
        add("batchnorm", "input " + vecStr(odd) + " eps 1e-3", b, {odd}, kElementwiseTol);
    }

    // --- Activations and elementwise ---
    auto unary = [&](const char* name, OpKind op, const std::function<void(Node&)>& cfg) {
        GraphBuilder b;
        b.output(b.node(op, {b.input("x", odd)}, cfg));
        add(name, std::string("input ") + vecStr(odd), b, {odd}, kElementwiseTol);
    };
    unary("relu", OpKind::kRelu, {});
    unary("leakyrelu_0p01", OpKind::kLeakyRelu, [](Node& n) { n.alpha = 0.01f; });
    unary("leakyrelu_0p2", OpKind::kLeakyRelu, [](Node& n) { n.alpha = 0.2f; });
    unary("sigmoid", OpKind::kSigmoid, {});
    unary("tanh", OpKind::kTanh, {});
    unary("clip", OpKind::kClip, [](Node& n) {
        n.clip_min = -0.3f;
        n.clip_max = 0.6f;
    });
    unary("identity", OpKind::kIdentity, {});
    unary("softmax_axis1", OpKind::kSoftmax, [](Node& n) { n.axis = 1; });
    unary("softmax_axis4", OpKind::kSoftmax, [](Node& n) { n.axis = 4; });
    {
        GraphBuilder b;
        const ValueId x = b.input("x", odd);
        b.output(b.node(OpKind::kPRelu, {x, b.weights("slope", {13, 1, 1, 1}, 0.5f)}));
        add("prelu_per_channel", "input " + vecStr(odd) + " slope [13,1,1,1]", b, {odd},
            kElementwiseTol);
    }
    {
        GraphBuilder b;
        const ValueId x = b.input("x", odd);
        b.output(b.node(OpKind::kPRelu, {x, b.weights("slope", {1}, 0.5f)}));
        add("prelu_shared", "input " + vecStr(odd) + " slope [1]", b, {odd}, kElementwiseTol);
    }
    const std::vector<std::pair<const char*, OpKind>> binaries = {
        {"add", OpKind::kAdd}, {"sub", OpKind::kSub}, {"mul", OpKind::kMul}, {"div", OpKind::kDiv}};
    for (const auto& [name, op] : binaries) {
        {
            GraphBuilder b;
            const ValueId x = b.input("x", odd);
            const ValueId y = b.input("y", odd);
            b.output(b.node(op, {x, y}));
            add(std::string(name) + "_same", "inputs " + vecStr(odd) + " x2", b, {odd, odd},
                kElementwiseTol);
        }
        {
            GraphBuilder b;
            const ValueId x = b.input("x", odd);
            const ValueId c = b.constant("c", seededTensor({13, 1, 1, 1}, 11, 0.5f, 1.5f));
            b.output(b.node(op, {x, c}));
            add(std::string(name) + "_bcast_const", "input " + vecStr(odd) + " constant [13,1,1,1]",
                b, {odd}, kElementwiseTol);
        }
        {
            GraphBuilder b;
            const Shape s2{1, 1, 11, 1, 9};
            const ValueId x = b.input("x", odd);
            const ValueId y = b.input("y", s2);
            b.output(b.node(op, {y, x}));
            add(std::string(name) + "_bcast_both", "inputs " + vecStr(s2) + ", " + vecStr(odd), b,
                {odd, s2}, kElementwiseTol);
        }
    }
    {
        // A run-time operand of lower rank (a computed scale or bias): regression test for the
        // cpu backend, which tried a reorder from the operand's rank-1 layout to rank 5.
        GraphBuilder b;
        const ValueId x = b.input("x", odd);
        const ValueId c = b.input("c", {9});
        b.output(b.node(OpKind::kMul, {x, c}));
        add("mul_runtime_lower_rank", "inputs " + vecStr(odd) + ", [9]", b, {odd, {9}},
            kElementwiseTol);
    }
    {
        GraphBuilder b;
        const Shape s1{1, 5, 11, 10, 9}, s2{1, 8, 11, 10, 9};
        const ValueId x = b.input("x", s1);
        const ValueId y = b.input("y", s2);
        b.output(b.node(OpKind::kConcat, {x, y}, [](Node& n) { n.axis = 1; }));
        add("concat_axis1", "inputs " + vecStr(s1) + ", " + vecStr(s2), b, {s1, s2},
            kElementwiseTol);
    }
    {
        GraphBuilder b;
        const Shape s1{1, 3, 11, 10, 9}, s2{1, 3, 4, 10, 9};
        const ValueId x = b.input("x", s1);
        const ValueId y = b.input("y", s2);
        b.output(b.node(OpKind::kConcat, {x, y, x}, [](Node& n) { n.axis = 2; }));
        add("concat_axis2_three", "inputs " + vecStr(s1) + ", " + vecStr(s2) + ", x", b, {s1, s2},
            kElementwiseTol);
    }

    // --- Resize ---
    struct ResizeSpec {
        const char* name;
        ResizeMode mode;
        ResizeCoord coord;
        NearestRounding nearest;
        float scale;
    };
    const std::vector<ResizeSpec> resizes = {
        {"resize_nearest_asym_floor_x2", ResizeMode::kNearest, ResizeCoord::kAsymmetric,
         NearestRounding::kFloor, 2.0f},
        {"resize_nearest_halfpixel_x1p5", ResizeMode::kNearest, ResizeCoord::kHalfPixel,
         NearestRounding::kRoundPreferFloor, 1.5f},
        {"resize_linear_halfpixel_x2", ResizeMode::kLinear, ResizeCoord::kHalfPixel,
         NearestRounding::kFloor, 2.0f},
        {"resize_linear_pytorch_halfpixel_x2", ResizeMode::kLinear, ResizeCoord::kPytorchHalfPixel,
         NearestRounding::kFloor, 2.0f},
        {"resize_linear_aligncorners_x2", ResizeMode::kLinear, ResizeCoord::kAlignCorners,
         NearestRounding::kFloor, 2.0f},
        {"resize_linear_asym_x0p5", ResizeMode::kLinear, ResizeCoord::kAsymmetric,
         NearestRounding::kFloor, 0.5f},
    };
    for (const ResizeSpec& r : resizes) {
        GraphBuilder b;
        const Shape s{1, 5, 11, 10, 9};
        b.output(b.node(OpKind::kResize, {b.input("x", s)}, [&](Node& n) {
            n.resize.mode = r.mode;
            n.resize.coord = r.coord;
            n.resize.nearest = r.nearest;
            n.resize.scales = {1, 1, r.scale, r.scale, r.scale};
        }));
        add(r.name,
            "input " + vecStr(s) + " mode " + std::to_string(int(r.mode)) + " coord " +
                std::to_string(int(r.coord)) + " nearest " + std::to_string(int(r.nearest)) +
                " scale " + std::to_string(r.scale),
            b, {s}, kElementwiseTol);
    }

    // --- Pools ---
    struct PoolSpec {
        const char* name;
        OpKind op;
        std::vector<int64_t> k, s, p;
        bool ceil, include_pad;
    };
    const std::vector<PoolSpec> pools = {
        {"maxpool_k2_s2", OpKind::kMaxPool, {2, 2, 2}, {2, 2, 2}, {0, 0, 0, 0, 0, 0}, false, false},
        {"maxpool_k3_s2_p1_ceil",
         OpKind::kMaxPool,
         {3, 3, 3},
         {2, 2, 2},
         {1, 1, 1, 1, 1, 1},
         true,
         false},
        {"avgpool_k2_s2",
         OpKind::kAveragePool,
         {2, 2, 2},
         {2, 2, 2},
         {0, 0, 0, 0, 0, 0},
         false,
         false},
        {"avgpool_k3_s1_p1_exclpad",
         OpKind::kAveragePool,
         {3, 3, 3},
         {1, 1, 1},
         {1, 1, 1, 1, 1, 1},
         false,
         false},
        {"avgpool_k3_s2_p1_inclpad_ceil",
         OpKind::kAveragePool,
         {3, 3, 3},
         {2, 2, 2},
         {1, 1, 1, 1, 1, 1},
         true,
         true},
    };
    for (const PoolSpec& p : pools) {
        GraphBuilder b;
        b.output(b.node(p.op, {b.input("x", odd)}, [&](Node& n) {
            n.pool.kernel = p.k;
            n.pool.strides = p.s;
            n.pool.pads_begin.assign(p.p.begin(), p.p.begin() + 3);
            n.pool.pads_end.assign(p.p.begin() + 3, p.p.end());
            n.pool.dilations = {1, 1, 1};
            n.pool.ceil_mode = p.ceil;
            n.pool.count_include_pad = p.include_pad;
        }));
        add(p.name,
            "input " + vecStr(odd) + " kernel " + vecStr(p.k) + " strides " + vecStr(p.s) +
                " pads " + vecStr(p.p) + " ceil " + std::to_string(p.ceil) + " include_pad " +
                std::to_string(p.include_pad),
            b, {odd}, kReductionTol);
    }
    {
        GraphBuilder b;
        b.output(b.node(OpKind::kGlobalAveragePool, {b.input("x", odd)}));
        add("globalavgpool", "input " + vecStr(odd), b, {odd}, kReductionTol);
    }

    // --- Data movement ---
    const std::vector<std::pair<const char*, PadAttrs::Mode>> pads = {
        {"pad_constant", PadAttrs::Mode::kConstant},
        {"pad_reflect", PadAttrs::Mode::kReflect},
        {"pad_edge", PadAttrs::Mode::kEdge}};
    for (const auto& [name, pad_mode] : pads) {
        const PadAttrs::Mode mode = pad_mode;  // a lambda may not capture a binding (clang 14)
        GraphBuilder b;
        b.output(b.node(OpKind::kPad, {b.input("x", odd)}, [&](Node& n) {
            n.pad.mode = mode;
            n.pad.pads_begin = {0, 0, 1, 2, 0};
            n.pad.pads_end = {0, 0, 2, 0, 3};
            n.pad.value = 0.25f;
        }));
        add(name, "input " + vecStr(odd) + " pads [0,0,1,2,0]/[0,0,2,0,3] value 0.25", b, {odd},
            kElementwiseTol);
    }
    // Both ends of the last (contiguous) axis padded, and ONNX's negative pads (crops) on it
    // and on an outer axis: the row kernels' border arithmetic.
    for (const auto& [name, pad_mode] : pads) {
        const PadAttrs::Mode mode = pad_mode;
        const bool constant = mode == PadAttrs::Mode::kConstant;
        GraphBuilder b;
        b.output(b.node(OpKind::kPad, {b.input("x", odd)}, [&](Node& n) {
            n.pad.mode = mode;
            n.pad.pads_begin = {0, 1, constant ? -1 : 0, 0, 3};
            n.pad.pads_end = {0, 0, 1, 0, constant ? -2 : 2};
            n.pad.value = -1.5f;
        }));
        add(std::string(name) + "_last_axis",
            "input " + vecStr(odd) +
                (constant ? " pads [0,1,-1,0,3]/[0,0,1,0,-2]" : " pads [0,1,0,0,3]/[0,0,1,0,2]") +
                " value -1.5",
            b, {odd}, kElementwiseTol);
    }
    {
        GraphBuilder b;
        b.output(b.node(OpKind::kReshape, {b.input("x", odd)}, [](Node& n) {
            n.shape = {0, 13, -1};
        }));
        add("reshape_0_13_m1", "input " + vecStr(odd) + " target [0,13,-1]", b, {odd},
            kElementwiseTol);
    }
    {
        GraphBuilder b;
        b.output(b.node(OpKind::kTranspose, {b.input("x", odd)}, [](Node& n) {
            n.perm = {0, 4, 2, 1, 3};
        }));
        add("transpose_04213", "input " + vecStr(odd) + " perm [0,4,2,1,3]", b, {odd},
            kElementwiseTol);
    }
    {
        GraphBuilder b;
        b.output(b.node(OpKind::kSlice, {b.input("x", odd)}, [](Node& n) {
            n.slice_starts = {1, -9, 100};
            n.slice_ends = {12, -1, -100};
            n.slice_axes = {1, 3, 4};
            n.slice_steps = {3, 2, -2};
        }));
        add("slice_steps",
            "input " + vecStr(odd) +
                " starts [1,-9,100] ends [12,-1,-100] axes [1,3,4] steps [3,2,-2]",
            b, {odd}, kElementwiseTol);
    }

    // --- Fused epilogues (as optimize() produces them) ---
    {
        GraphBuilder b;
        const ValueId x = b.input("x", odd);
        b.output(b.conv(x, 13, 7, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}));
        b.last().fused_activation = ActivationKind::kLeakyRelu;
        b.last().fused_alpha = 0.01f;
        add("fused_conv_leakyrelu", "conv 13->7 k3 p1 + leakyrelu 0.01, input " + vecStr(odd), b,
            {odd}, kConvTol);
    }
    {
        GraphBuilder b;
        const ValueId x = b.input("x", odd);
        const ValueId r = b.input("residual", {1, 7, 11, 10, 9});
        b.output(b.conv(x, 13, 7, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}));
        b.last().fused_residual = r;
        b.last().fused_activation = ActivationKind::kRelu;
        add("fused_conv_residual_relu", "conv 13->7 k3 p1 + residual + relu, input " + vecStr(odd),
            b, {odd, {1, 7, 11, 10, 9}}, kConvTol);
    }
    {
        GraphBuilder b;
        const ValueId x = b.input("x", odd);
        const ValueId slope = b.weights("slope", {7, 1, 1, 1}, 0.5f);
        b.output(b.conv(x, 13, 7, {3, 3, 3}, {2, 2, 2}, {1, 1, 1, 1, 1, 1}));
        b.last().fused_activation = ActivationKind::kPRelu;
        b.last().fused_prelu_slope = slope;
        add("fused_conv_s2_prelu", "conv 13->7 k3 s2 p1 + prelu [7,1,1,1], input " + vecStr(odd), b,
            {odd}, kConvTol);
    }
    {
        GraphBuilder b;
        b.output(b.conv(b.input("x", odd), 13, 7, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}));
        b.last().fused_activation = ActivationKind::kSilu;
        add("fused_conv_silu", "conv 13->7 k3 p1 + silu, input " + vecStr(odd), b, {odd}, kConvTol);
    }
    {
        GraphBuilder b;
        const ValueId x = b.input("x", odd);
        b.output(b.convTranspose(x, 13, 6, {2, 2, 2}, {2, 2, 2}));
        b.last().fused_activation = ActivationKind::kSigmoid;
        add("fused_convtranspose_sigmoid", "convT 13->6 k2 s2 + sigmoid, input " + vecStr(odd), b,
            {odd}, kConvTol);
    }
    {
        // Sub-pixel ConvTranspose (16 channels: blocked) with a residual and an activation, both
        // applied after the scatter.
        GraphBuilder b;
        const Shape in{1, 13, 5, 6, 7}, out{1, 16, 10, 12, 14};
        const ValueId x = b.input("x", in), skip = b.input("skip", out);
        const ValueId up = b.convTranspose(x, 13, 16, {2, 2, 2}, {2, 2, 2});
        b.last().fused_residual = skip;
        b.last().fused_activation = ActivationKind::kLeakyRelu;
        b.last().fused_alpha = 0.01f;
        b.output(up);
        add("fused_convtranspose_k2_residual_leakyrelu",
            "convT 13->16 k2 s2 + residual + leaky relu, input " + vecStr(in), b, {in, out},
            kConvTol);
    }
    {
        GraphBuilder b;
        b.output(b.norm(OpKind::kInstanceNorm, b.input("x", odd), 13));
        b.last().fused_activation = ActivationKind::kLeakyRelu;
        b.last().fused_alpha = 0.01f;
        add("fused_instancenorm_leakyrelu", "instancenorm + leakyrelu 0.01, input " + vecStr(odd),
            b, {odd}, kReductionTol);
    }
    {
        GraphBuilder b;
        b.output(b.norm(OpKind::kInstanceNorm, b.input("x", odd), 13));
        b.last().fused_activation = ActivationKind::kSilu;
        add("fused_instancenorm_silu", "instancenorm + silu, input " + vecStr(odd), b, {odd},
            kReductionTol);
    }
    {
        GraphBuilder b;
        const Shape s{1, 12, 7, 6, 5};
        const ValueId x = b.input("x", s);
        const ValueId r = b.input("residual", s);
        b.output(b.norm(OpKind::kGroupNorm, x, 12, 3));
        b.last().fused_residual = r;
        b.last().fused_activation = ActivationKind::kRelu;
        add("fused_groupnorm_residual_relu", "groupnorm g3 + residual + relu, input " + vecStr(s),
            b, {s, s}, kReductionTol);
    }

    // --- Transformer / attention ops (issue 14) ---
    struct MatMulSpec {
        const char* name;
        Shape a, b;
        bool b_constant;
    };
    const std::vector<MatMulSpec> matmuls = {
        {"matmul_2d", {11, 13}, {13, 9}, false},
        {"matmul_3d_batched", {2, 11, 13}, {2, 13, 9}, false},
        {"matmul_linear_const_weight", {1, 3, 11, 13}, {13, 10}, true},
        {"matmul_bcast_batch_both", {2, 1, 7, 13}, {1, 3, 13, 5}, false},
        {"matmul_attention_qk", {1, 3, 11, 8}, {1, 3, 8, 11}, false},
    };
    {
        // A constant first operand (learned queries times activations).
        GraphBuilder b;
        const Shape xs{2, 13, 9};
        const ValueId q = b.weights("queries", {7, 13}, 0.3f);
        b.output(b.node(OpKind::kMatMul, {q, b.input("x", xs)}));
        add("matmul_const_a", "a [7,13] (constant) b " + vecStr(xs), b, {xs}, kMatMulTol);
    }
    for (const MatMulSpec& m : matmuls) {
        GraphBuilder b;
        const ValueId x = b.input("a", m.a);
        const ValueId y = m.b_constant ? b.weights("w", m.b, 0.3f) : b.input("b", m.b);
        b.output(b.node(OpKind::kMatMul, {x, y}));
        std::vector<Shape> shapes{m.a};
        if (!m.b_constant) shapes.push_back(m.b);
        add(m.name, "a " + vecStr(m.a) + " b " + vecStr(m.b) + (m.b_constant ? " (constant)" : ""),
            b, shapes, kMatMulTol);
    }
    {
        // A projection with bias (Add(bias, MatMul), the order torch exports), LayerScale gamma
        // and residual (Primus / EVA blocks): optimize() folds the gamma into the weights and
        // bias and fuses bias and residual into the MatMul.
        GraphBuilder b;
        const Shape s{1, 11, 12};
        const ValueId x = b.input("x", s);
        ValueId y = b.node(OpKind::kMatMul, {x, b.weights("w", {12, 12}, 0.3f)});
        y = b.node(OpKind::kAdd, {b.weights("bias", {12}, 0.2f), y});
        y = b.node(OpKind::kMul, {b.constant("gamma", seededTensor({12}, 7, 0.05f, 0.2f)), y});
        b.output(b.node(OpKind::kAdd, {x, y}));
        add("matmul_bias_layerscale_residual",
            "x " + vecStr(s) + " + gamma [12] * (x W [12,12] + bias [12])", b, {s}, kMatMulTol);
    }
    {
        // SwiGLU as Primus / EVA and LLaMA-style MLPs export it, SiLU(x Wg) * (x Wx): optimize()
        // fuses the SiLU into the gate's MatMul (oneDNN's swish post-op on the CPU).
        GraphBuilder b;
        const Shape s{1, 11, 12};
        const ValueId x = b.input("x", s);
        const ValueId gate =
            b.node(OpKind::kSilu, {b.node(OpKind::kMatMul, {x, b.weights("wg", {12, 20}, 0.3f)})});
        const ValueId up = b.node(OpKind::kMatMul, {x, b.weights("wx", {12, 20}, 0.3f)});
        b.output(b.node(OpKind::kMul, {gate, up}));
        add("swiglu", "SiLU(x Wg) * (x Wx), x " + vecStr(s) + " W [12,20]", b, {s}, kMatMulTol);
    }
    {
        // A MatMul of two run-time operands with SiLU already fused (no weights to pack).
        GraphBuilder b;
        const Shape a{2, 9, 13}, w{2, 13, 10};
        b.output(b.node(OpKind::kMatMul, {b.input("a", a), b.input("b", w)}));
        b.last().fused_activation = ActivationKind::kSilu;
        add("fused_matmul_silu", "a " + vecStr(a) + " b " + vecStr(w) + " + silu", b, {a, w},
            kMatMulTol);
    }
    {
        // Rotary embedding of interleaved pairs, direct, on an odd token count.
        GraphBuilder b;
        const Shape s{1, 3, 13, 10};
        b.output(
            b.node(OpKind::kRotary, {b.input("x", s), b.constant("cos", seededTensor({13, 10}, 11)),
                                     b.constant("sin", seededTensor({13, 10}, 12))}));
        add("rotary_direct", "x " + vecStr(s) + " cos/sin [13,10]", b, {s}, kElementwiseTol);
    }
    {
        // The chain torch exports for EVA's rotary embedding (Primus): a zero-token prefix slice
        // concatenated back, x * cos + rotate_half(x) * sin with rotate_half of interleaved pairs
        // as Slice/Neg/Unsqueeze/Concat/Reshape, then q * scale; optimize() makes it one Rotary.
        GraphBuilder b;
        const Shape s{1, 3, 13, 10};
        const ValueId x = b.input("x", s);
        auto every_other = [&](int64_t start) {
            return b.node(OpKind::kSlice, {x}, [&](Node& n) {
                n.slice_starts = {start};
                n.slice_ends = {std::numeric_limits<int64_t>::max()};
                n.slice_axes = {3};
                n.slice_steps = {2};
            });
        };
        auto unsqueeze = [&](ValueId v) {
            return b.node(OpKind::kReshape, {v}, [](Node& n) { n.shape = {1, 3, 13, 5, 1}; });
        };
        const ValueId prefix = b.node(OpKind::kSlice, {x}, [](Node& n) {
            n.slice_starts = {0};
            n.slice_ends = {0};
            n.slice_axes = {2};
            n.slice_steps = {1};
        });
        const ValueId neg =
            b.node(OpKind::kMul, {every_other(1), b.constant("m1", Tensor::fromFloats({}, {-1}))});
        ValueId r = b.node(OpKind::kConcat, {unsqueeze(neg), unsqueeze(every_other(0))},
                           [](Node& n) { n.axis = 4; });
        r = b.node(OpKind::kReshape, {r}, [](Node& n) { n.shape = {1, 3, 13, 10}; });
        const ValueId xc = b.node(OpKind::kMul, {x, b.constant("cos", seededTensor({13, 10}, 13))});
        const ValueId rs = b.node(OpKind::kMul, {r, b.constant("sin", seededTensor({13, 10}, 14))});
        ValueId y = b.node(OpKind::kAdd, {xc, rs});
        y = b.node(OpKind::kConcat, {prefix, y}, [](Node& n) { n.axis = 2; });
        b.output(b.node(OpKind::kMul, {y, b.constant("scale", Tensor::fromFloats({}, {0.3f}))}));
        add("rotary_pattern_eva",
            "x " + vecStr(s) +
                ": Concat(x[:, :, :0], x * cos + rotate_half(x) * sin) * 0.3, cos/sin [13,10]",
            b, {s}, kElementwiseTol);
    }
    struct LayerNormSpec {
        const char* name;
        Shape x;
        int64_t axis;
        bool bias;
        float eps;
    };
    const std::vector<LayerNormSpec> lns = {
        {"layernorm_last_axis", {2, 11, 13}, 2, true, 1e-5f},
        {"layernorm_two_axes_nobias", {1, 7, 11, 13}, 2, false, 1e-6f},
        {"layernorm_axis1_5d", {1, 13, 5, 4, 3}, 1, true, 1e-5f},
    };
    for (const LayerNormSpec& l : lns) {
        GraphBuilder b;
        const ValueId x = b.input("x", l.x);
        const Shape norm_shape(l.x.begin() + l.axis, l.x.end());
        std::vector<ValueId> in{x, b.constant("scale", seededTensor(norm_shape, 5, 0.5f, 1.5f))};
        if (l.bias) in.push_back(b.weights("bias", norm_shape, 0.5f));
        b.output(b.node(OpKind::kLayerNorm, in, [&](Node& n) {
            n.axis = l.axis;
            n.norm.epsilon = l.eps;
        }));
        add(l.name,
            "input " + vecStr(l.x) + " axis " + std::to_string(l.axis) + " bias " +
                std::to_string(l.bias) + " eps " + std::to_string(l.eps),
            b, {l.x}, kReductionTol);
    }
    // LayerNorm over the channels at each position (Primus' decoder LayerNormNd): on a graph
    // input (plain layout on the cpu), after a Conv (20 channels: blocked by 16 with 12 padding
    // lanes) and after a kernel == stride ConvTranspose (24 channels, Primus' second decoder
    // stage), inputs offset from zero so that the moments are not those of centred data.
    struct ChannelNormSpec {
        const char* name;
        Shape x;
        OpKind producer;  // kIdentity: the input itself
        int64_t channels;
        bool bias;
        float eps;
    };
    const std::vector<ChannelNormSpec> cnorms = {
        {"channel_layernorm_plain", odd, OpKind::kIdentity, 13, true, 1e-6f},
        {"channel_layernorm_after_conv_c20", {2, 13, 5, 4, 3}, OpKind::kConv, 20, true, 1e-6f},
        {"channel_layernorm_after_convt_c24_nobias",
         {1, 13, 5, 6, 7},
         OpKind::kConvTranspose,
         24,
         false,
         1e-5f},
    };
    for (const ChannelNormSpec& c : cnorms) {
        GraphBuilder b;
        ValueId x = b.input("x", c.x);
        x = b.node(OpKind::kAdd, {x, b.constant("offset", Tensor::fromFloats({}, {3.0f}))});
        if (c.producer == OpKind::kConv) x = b.conv(x, c.x[1], c.channels, {1, 1, 1});
        if (c.producer == OpKind::kConvTranspose)
            x = b.convTranspose(x, c.x[1], c.channels, {2, 2, 2}, {2, 2, 2});
        std::vector<ValueId> in{x, b.constant("scale", seededTensor({c.channels}, 5, 0.5f, 1.5f))};
        if (c.bias) in.push_back(b.weights("bias", {c.channels}, 0.5f));
        b.output(b.node(OpKind::kChannelLayerNorm, in, [&](Node& n) { n.norm.epsilon = c.eps; }));
        add(c.name,
            "input " + vecStr(c.x) + " + 3, " +
                (c.producer == OpKind::kIdentity ? std::string("")
                                                 : std::string(opKindName(c.producer)) + " to " +
                                                       std::to_string(c.channels) + " channels, ") +
                "channel LayerNorm bias " + std::to_string(c.bias) + " eps " +
                std::to_string(c.eps),
            b, {c.x}, c.producer == OpKind::kIdentity ? kReductionTol : kConvTol);
    }
    // Unary math on inputs scaled to [-3, 3) (sqrt: shifted to [0.5, 6.5)).
    struct UnarySpec {
        const char* name;
        OpKind op;
        bool gelu_tanh;
        float scale, shift;
        Tolerances tol;
        float alpha = 0.0f, beta = 0.0f;
    };
    const std::vector<UnarySpec> unaries = {
        {"erf", OpKind::kErf, false, 3.0f, 0.0f, kTranscendentalTol},
        {"gelu_exact", OpKind::kGelu, false, 3.0f, 0.0f, kTranscendentalTol},
        {"gelu_tanh", OpKind::kGelu, true, 3.0f, 0.0f, kTranscendentalTol},
        {"silu", OpKind::kSilu, false, 3.0f, 0.0f, kTranscendentalTol},
        {"sqrt", OpKind::kSqrt, false, 3.0f, 3.5f, kElementwiseTol},
        {"sin", OpKind::kSin, false, 3.0f, 0.0f, kTranscendentalTol},
        {"cos", OpKind::kCos, false, 3.0f, 0.0f, kTranscendentalTol},
        // The shared formulas of engine/graph/unary_math.h, on [-6, 6) (softplus: [-30, 30)).
        {"elu_alpha0p7", OpKind::kElu, false, 6.0f, 0.0f, kTranscendentalTol, 0.7f},
        {"selu", OpKind::kSelu, false, 6.0f, 0.0f, kTranscendentalTol, 1.6732632f, 1.0507010f},
        {"celu_alpha1p3", OpKind::kCelu, false, 6.0f, 0.0f, kTranscendentalTol, 1.3f},
        {"softplus", OpKind::kSoftplus, false, 30.0f, 0.0f, kTranscendentalTol},
        {"mish", OpKind::kMish, false, 6.0f, 0.0f, kTranscendentalTol},
        {"hardsigmoid", OpKind::kHardSigmoid, false, 6.0f, 0.0f, kElementwiseTol, 0.25f, 0.4f},
        {"hardswish", OpKind::kHardSwish, false, 6.0f, 0.0f, kElementwiseTol},
    };
    for (const UnarySpec& u : unaries) {
        GraphBuilder b;
        ValueId x = b.input("x", odd);
        x = b.node(OpKind::kMul, {x, b.constant("scale", Tensor::fromFloats({}, {u.scale}))});
        if (u.shift != 0.0f)
            x = b.node(OpKind::kAdd, {x, b.constant("shift", Tensor::fromFloats({}, {u.shift}))});
        b.output(b.node(u.op, {x}, [&](Node& n) {
            n.gelu_tanh = u.gelu_tanh;
            n.alpha = u.alpha;
            n.beta = u.beta;
        }));
        add(u.name,
            "input " + vecStr(odd) + " * " + std::to_string(u.scale) + " + " +
                std::to_string(u.shift) + " alpha " + std::to_string(u.alpha) + " beta " +
                std::to_string(u.beta),
            b, {odd}, u.tol);
    }
    {
        const Shape s{1, 3, 11, 10};
        for (int64_t axis : {3, 2}) {
            GraphBuilder b;
            b.output(b.node(OpKind::kSoftmax, {b.input("x", s)}, [&](Node& n) { n.axis = axis; }));
            add("softmax_rank4_axis" + std::to_string(axis),
                "input " + vecStr(s) + " axis " + std::to_string(axis), b, {s}, kElementwiseTol);
        }
    }
    struct ReduceSpec {
        const char* name;
        OpKind op;
        std::vector<int64_t> axes;
        bool keepdims;
    };
    const std::vector<ReduceSpec> reduces = {
        {"reducemean_last_keep", OpKind::kReduceMean, {4}, true},
        {"reducesum_axes13_nokeep", OpKind::kReduceSum, {1, 3}, false},
        {"reducemax_spatial_keep", OpKind::kReduceMax, {2, 3, 4}, true},
        {"reducemean_all_nokeep", OpKind::kReduceMean, {0, 1, 2, 3, 4}, false},
    };
    for (const ReduceSpec& r : reduces) {
        GraphBuilder b;
        b.output(b.node(r.op, {b.input("x", odd)}, [&](Node& n) {
            n.reduce_axes = r.axes;
            n.keepdims = r.keepdims;
        }));
        add(r.name,
            "input " + vecStr(odd) + " axes " + vecStr(r.axes) + " keepdims " +
                std::to_string(r.keepdims),
            b, {odd}, kReductionTol);
    }
    {
        // Attention mask: a constant 0/1 condition broadcast over heads.
        GraphBuilder b;
        const Shape s{1, 3, 11, 10}, cs{1, 1, 11, 10};
        std::vector<float> mask(static_cast<size_t>(numel(cs)));
        for (size_t i = 0; i < mask.size(); ++i) mask[i] = (i * 7) % 5 < 3 ? 1.0f : 0.0f;
        const ValueId x = b.input("x", s);
        b.output(b.node(OpKind::kWhere, {b.constant("mask", Tensor::fromFloats(cs, mask)), x,
                                         b.constant("fill", Tensor::fromFloats({}, {-100.0f}))}));
        add("where_const_mask", "x " + vecStr(s) + " mask " + vecStr(cs) + " fill -100", b, {s},
            kElementwiseTol);
    }
    {
        GraphBuilder b;
        const Shape s{2, 1, 11, 10}, ys{2, 3, 11, 10};
        const ValueId x = b.input("x", s), y = b.input("y", {1, 3, 1, 10});
        const ValueId c = b.node(OpKind::kSigmoid, {b.input("c", s)});
        b.output(b.node(OpKind::kWhere, {c, x, y}));
        add("where_runtime_float_cond",
            "cond sigmoid " + vecStr(s) + " x " + vecStr(s) + " y [1,3,1,10] -> " + vecStr(ys), b,
            {s, {1, 3, 1, 10}, s}, kElementwiseTol);
    }
    {
        GraphBuilder b;
        const Shape s{1, 13, 1, 3};
        b.output(b.node(OpKind::kExpand, {b.input("x", s)}, [](Node& n) {
            n.shape = {2, 1, 5, 3};
        }));
        add("expand_bcast", "input " + vecStr(s) + " to [2,1,5,3]", b, {s}, kElementwiseTol);
    }
    {
        GraphBuilder b;
        const Shape s{1, 3, 5, 4};
        b.output(b.node(OpKind::kTile, {b.input("x", s)}, [](Node& n) {
            n.repeats = {2, 1, 3, 1};
        }));
        add("tile_2131", "input " + vecStr(s) + " repeats [2,1,3,1]", b, {s}, kElementwiseTol);
    }
    // Roll: direct, the last axis rolled too (two pieces per row); and torch.roll over three
    // axes as torch exports it (per axis Concat(Slice(x, -s:), Slice(x, :-s))) followed by
    // Swin's crop, a Slice per axis (optimize() makes them one Roll and one Slice).
    {
        GraphBuilder b;
        const Shape s{2, 7, 6, 5};
        b.output(b.node(OpKind::kRoll, {b.input("x", s)}, [](Node& n) {
            n.roll_shifts = {0, 3, 0, 4};
        }));
        add("roll_direct", "input " + vecStr(s) + " shifts [0,3,0,4]", b, {s}, kElementwiseTol);
    }
    {
        GraphBuilder b;
        const Shape s{1, 9, 8, 7, 5};
        ValueId x = b.input("x", s);
        auto slice = [&](ValueId v, int64_t axis, int64_t start, int64_t end) {
            return b.node(OpKind::kSlice, {v}, [&](Node& n) {
                n.slice_starts = {start};
                n.slice_ends = {end};
                n.slice_axes = {axis};
                n.slice_steps = {1};
            });
        };
        const int64_t kEnd = std::numeric_limits<int64_t>::max();
        for (const auto& roll : std::vector<std::pair<int64_t, int64_t>>{{1, 3}, {2, -2}, {3, 6}}) {
            const int64_t axis = roll.first, shift = roll.second;
            const ValueId v = x;  // torch: Concat(x[-s:], x[:-s]) along the axis
            x = b.node(OpKind::kConcat, {slice(v, axis, -shift, kEnd), slice(v, axis, 0, -shift)},
                       [&](Node& n) { n.axis = axis; });
        }
        x = slice(slice(slice(x, 1, 0, 7), 2, 1, 8), 3, 0, 6);
        b.output(x);
        add("roll_pattern_torch",
            "input " + vecStr(s) +
                " torch.roll shifts (3, -2, 6) on axes (1, 2, 3), then crop "
                "[0:7, 1:8, 0:6]",
            b, {s}, kElementwiseTol);
    }
    // Fused attention (optimize() builds it from MatMul/Mul/Add/Softmax/MatMul): direct cases,
    // one long enough for the CPU's query blocks (256 KiB of scores: 218 rows of 300) to have a
    // tail, and the unfused pattern with a broadcast mask (compared as imported and optimized).
    struct AttentionSpec {
        const char* name;
        int64_t heads, tq, tk, d, dv;
        float scale;
        bool bias;
    };
    const std::vector<AttentionSpec> attentions = {
        {"attention_fused", 3, 11, 13, 8, 5, 0.35f, false},
        {"attention_fused_bias", 3, 11, 13, 8, 5, 0.35f, true},
        {"attention_fused_blocked_tail", 2, 300, 300, 8, 7, 0.35f, true},
    };
    for (const AttentionSpec& a : attentions) {
        GraphBuilder b;
        const Shape qs{1, a.heads, a.tq, a.d}, ks{1, a.heads, a.d, a.tk},
            vs{1, a.heads, a.tk, a.dv};
        std::vector<ValueId> in{b.input("q", qs), b.input("kt", ks), b.input("v", vs)};
        if (a.bias) {
            const Shape bs{1, 1, a.tq, a.tk};
            std::vector<float> mask(static_cast<size_t>(numel(bs)));
            for (size_t i = 0; i < mask.size(); ++i) mask[i] = (i * 7) % 5 == 0 ? -100.0f : 0.0f;
            in.push_back(b.constant("mask", Tensor::fromFloats(bs, mask)));
        }
        b.output(b.node(OpKind::kAttention, in, [&](Node& n) { n.attention_scale = a.scale; }));
        add(a.name,
            "q " + vecStr(qs) + " kt " + vecStr(ks) + " v " + vecStr(vs) + " scale " +
                std::to_string(a.scale) + " bias " + std::to_string(a.bias),
            b, {qs, ks, vs}, kMatMulTol);
    }
    {
        GraphBuilder b;
        const Shape qs{2, 3, 11, 8}, ks{2, 3, 8, 13}, vs{2, 3, 13, 5}, bs{2, 1, 1, 13};
        const ValueId q = b.input("q", qs), kt = b.input("kt", ks), v = b.input("v", vs);
        const ValueId bias = b.input("bias", bs);
        ValueId s2 = b.node(OpKind::kMatMul, {q, kt});
        s2 = b.node(OpKind::kDiv, {s2, b.constant("sqrt_d", Tensor::fromFloats({}, {2.83f}))});
        s2 = b.node(OpKind::kAdd, {s2, bias});
        s2 = b.node(OpKind::kSoftmax, {s2}, [](Node& n) { n.axis = 3; });
        b.output(b.node(OpKind::kMatMul, {s2, v}));
        add("attention_pattern_div_bias",
            "MatMul q " + vecStr(qs) + " kt " + vecStr(ks) + " / 2.83 + bias " + vecStr(bs) +
                " softmax -1, MatMul v " + vecStr(vs),
            b, {qs, ks, vs, bs}, kMatMulTol);
    }
    // Swin's shifted-window attention: 2 images x 3 windows of 40 tokens, 2 heads, a constant
    // relative-position bias [1, H, N, N] and window mask [3, 1, N, N] that tiles every 3
    // windows; direct, and as MONAI exports it (the scores of B*nW windows reshaped to
    // [B, nW, H, N, N], the mask [1, nW, 1, N, N] added, reshaped back), which optimize() folds
    // into one Attention.
    {
        const int64_t images = 2, windows = 3, heads = 2, n = 40, d = 8;
        const Shape qs{images * windows, heads, n, d}, ks{images * windows, heads, d, n};
        const Shape bias_shape{1, heads, n, n}, split{images, windows, heads, n, n};
        std::vector<float> mask(static_cast<size_t>(windows * n * n));
        for (size_t i = 0; i < mask.size(); ++i)  // window w masks every (w + 2)-th score
            mask[i] = (i % n) % (i / (n * n) + 2) == 0 ? -100.0f : 0.0f;
        auto pattern = [&](bool exported) {
            GraphBuilder b;
            std::vector<ValueId> in{b.input("q", qs), b.input("kt", ks), b.input("v", qs)};
            const ValueId bias = b.constant("rel_bias", seededTensor(bias_shape, 31, -2, 2));
            if (!exported) {
                in.push_back(bias);
                in.push_back(b.constant("mask", Tensor::fromFloats({windows, 1, n, n}, mask)));
                b.output(
                    b.node(OpKind::kAttention, in, [](Node& a) { a.attention_scale = 0.35f; }));
                return b;
            }
            ValueId sc = b.node(OpKind::kMatMul, {in[0], in[1]});
            sc = b.node(OpKind::kAdd, {sc, bias});
            sc = b.node(OpKind::kReshape, {sc}, [&](Node& r) { r.shape = split; });
            sc = b.node(OpKind::kAdd,
                        {b.constant("mask", Tensor::fromFloats({1, windows, 1, n, n}, mask)), sc});
            sc = b.node(OpKind::kReshape, {sc}, [&](Node& r) { r.shape = {-1, heads, n, n}; });
            sc = b.node(OpKind::kSoftmax, {sc}, [](Node& m) { m.axis = 3; });
            b.output(b.node(OpKind::kMatMul, {sc, in[2]}));
            return b;
        };
        GraphBuilder direct = pattern(false), exported = pattern(true);
        add("attention_fused_window_mask",
            "q, v " + vecStr(qs) + " kt " + vecStr(ks) + " scale 0.35, bias " + vecStr(bias_shape) +
                ", mask [3,1,40,40] tiled over 6 windows",
            direct, {qs, ks, qs}, kMatMulTol);
        add("attention_pattern_swin_shifted",
            "MatMul q " + vecStr(qs) + " kt " + vecStr(ks) + " + bias " + vecStr(bias_shape) +
                ", Reshape " + vecStr(split) +
                " + mask [1,3,1,40,40], Reshape back, softmax -1, "
                "MatMul v",
            exported, {qs, ks, qs}, kMatMulTol);
    }
    // MultiHeadAttention on packed [B, T, H*D] operands (optimize() folds the head Transposes
    // into it): direct, batch 2, and one of 300 x 300 with a mask whose query blocks have a
    // tail and whose work items spread over the threads.
    struct MhaSpec {
        const char* name;
        int64_t batch, heads, tq, tk, d, dv;
        bool bias;
    };
    const std::vector<MhaSpec> mhas = {
        {"mha_packed_heads", 2, 3, 11, 13, 8, 5, false},
        {"mha_packed_heads_bias_blocked_tail", 1, 2, 300, 300, 8, 7, true},
    };
    for (const MhaSpec& a : mhas) {
        GraphBuilder b;
        const Shape qs{a.batch, a.tq, a.heads * a.d}, ks{a.batch, a.tk, a.heads * a.d},
            vs{a.batch, a.tk, a.heads * a.dv};
        std::vector<ValueId> in{b.input("q", qs), b.input("k", ks), b.input("v", vs)};
        if (a.bias) {
            const Shape bs{1, 1, a.tq, a.tk};
            std::vector<float> mask(static_cast<size_t>(numel(bs)));
            for (size_t i = 0; i < mask.size(); ++i) mask[i] = (i * 7) % 5 == 0 ? -100.0f : 0.0f;
            in.push_back(b.constant("mask", Tensor::fromFloats(bs, mask)));
        }
        b.output(b.node(OpKind::kMultiHeadAttention, in, [&](Node& n) {
            n.attention_scale = 0.35f;
            n.attention_heads = a.heads;
        }));
        add(a.name,
            "q " + vecStr(qs) + " k " + vecStr(ks) + " v " + vecStr(vs) + " heads " +
                std::to_string(a.heads) + " scale 0.35 bias " + std::to_string(a.bias),
            b, {qs, ks, vs}, kMatMulTol);
    }
    {
        // Primus' attention as torch exports it (13 tokens, 3 heads of 10): q/k/v projections,
        // Reshape [1, T, H, D], Transpose (0, 2, 1, 3), Rotary on q and k, K^T by a Transpose
        // (0, 1, 3, 2), MatMul * scale, Softmax, MatMul, Transpose back, Reshape, projection;
        // optimize() makes it one MultiHeadAttention with no Transpose left.
        GraphBuilder b;
        const int64_t T = 13, H = 3, Dh = 10, D = H * Dh;
        const Shape s{1, T, D};
        const ValueId x = b.input("x", s);
        auto heads = [&](ValueId v, bool rotary) {
            v = b.node(OpKind::kMatMul, {v, b.weights("w", {D, D}, 0.2f)});
            v = b.node(OpKind::kReshape, {v}, [&](Node& n) { n.shape = {0, T, H, Dh}; });
            v = b.node(OpKind::kTranspose, {v}, [](Node& n) { n.perm = {0, 2, 1, 3}; });
            if (rotary)
                v = b.node(OpKind::kRotary,
                           {v, b.weights("cos", {T, Dh}), b.weights("sin", {T, Dh})});
            return v;
        };
        const ValueId q = heads(x, true), k = heads(x, true), v = heads(x, false);
        const ValueId kt = b.node(OpKind::kTranspose, {k}, [](Node& n) { n.perm = {0, 1, 3, 2}; });
        ValueId att = b.node(OpKind::kMatMul, {q, kt});
        att = b.node(OpKind::kMul, {att, b.constant("scale", Tensor::fromFloats({}, {0.3f}))});
        att = b.node(OpKind::kSoftmax, {att}, [](Node& n) { n.axis = 3; });
        ValueId o = b.node(OpKind::kMatMul, {att, v});
        o = b.node(OpKind::kTranspose, {o}, [](Node& n) { n.perm = {0, 2, 1, 3}; });
        o = b.node(OpKind::kReshape, {o}, [&](Node& n) { n.shape = {0, T, D}; });
        b.output(b.node(OpKind::kMatMul, {o, b.weights("proj", {D, D}, 0.2f)}));
        add("attention_heads_pattern_primus",
            "x " + vecStr(s) +
                ", 3 heads of 10: projections, head-split Transposes, Rotary on q and k, K^T, "
                "softmax attention * 0.3, merge Transpose, Reshape, projection",
            b, {s}, kMatMulTol);
    }
    {
        // A pre-norm transformer block on 11 tokens of width 12 (3 heads of 4): LayerNorm, QKV
        // projections, attention with softmax, output projection, residual, LayerNorm, GELU MLP,
        // residual.
        GraphBuilder b;
        const int64_t T = 11, D = 12, H = 3, Dh = 4;
        const Shape s{1, T, D};
        const ValueId x = b.input("x", s);
        auto ln = [&](ValueId v) {
            return b.node(OpKind::kLayerNorm,
                          {v, b.constant("g", seededTensor({D}, 3, 0.5f, 1.5f)),
                           b.weights("beta", {D}, 0.2f)},
                          [](Node& n) { n.axis = 2; });
        };
        auto linear = [&](ValueId v, int64_t in, int64_t out) {
            const ValueId mm = b.node(OpKind::kMatMul,
                                      {v, b.weights("w", {in, out}, 1.0f / std::sqrt(float(in)))});
            return b.node(OpKind::kAdd, {mm, b.weights("bias", {out}, 0.1f)});
        };
        auto heads = [&](ValueId v) {  // [1, T, D] -> [1, H, T, Dh]
            const ValueId r = b.node(OpKind::kReshape, {v}, [&](Node& n) {
                n.shape = {0, T, H, Dh};
            });
            return b.node(OpKind::kTranspose, {r}, [](Node& n) { n.perm = {0, 2, 1, 3}; });
        };
        const ValueId h = ln(x);
        const ValueId q = heads(linear(h, D, D)), k = heads(linear(h, D, D)),
                      v = heads(linear(h, D, D));
        const ValueId kt = b.node(OpKind::kTranspose, {k}, [](Node& n) { n.perm = {0, 1, 3, 2}; });
        ValueId att = b.node(OpKind::kMatMul, {q, kt});
        att = b.node(OpKind::kMul, {att, b.constant("scale", Tensor::fromFloats({}, {0.5f}))});
        att = b.node(OpKind::kSoftmax, {att}, [](Node& n) { n.axis = 3; });
        ValueId o = b.node(OpKind::kMatMul, {att, v});
        o = b.node(OpKind::kTranspose, {o}, [](Node& n) { n.perm = {0, 2, 1, 3}; });
        o = b.node(OpKind::kReshape, {o}, [&](Node& n) { n.shape = {0, T, D}; });
        const ValueId r1 = b.node(OpKind::kAdd, {x, linear(o, D, D)});
        ValueId m = b.node(OpKind::kGelu, {linear(ln(r1), D, 2 * D)});
        b.output(b.node(OpKind::kAdd, {r1, linear(m, 2 * D, D)}));
        add("net_transformer_block",
            "pre-norm block: 11 tokens x 12, 3 heads, LayerNorm, MatMul+bias, softmax attention, "
            "GELU MLP, residuals; input " +
                vecStr(s),
            b, {s}, kNetworkTol);
    }

    // --- Small networks (a U-Net level: conv-norm-act, down, up, skip concat, head, softmax) ---
    {
        GraphBuilder b;
        const Shape s{1, 2, 11, 10, 9};
        const ValueId x = b.input("x", s);
        ValueId h = b.conv(x, 2, 6, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1});
        h = b.norm(OpKind::kInstanceNorm, h, 6);
        const ValueId skip = b.node(OpKind::kLeakyRelu, {h}, [](Node& n) { n.alpha = 0.01f; });
        ValueId d = b.conv(skip, 6, 12, {3, 3, 3}, {2, 2, 2}, {1, 1, 1, 1, 1, 1});
        d = b.norm(OpKind::kInstanceNorm, d, 12);
        d = b.node(OpKind::kLeakyRelu, {d}, [](Node& n) { n.alpha = 0.01f; });
        ValueId u = b.convTranspose(d, 12, 6, {2, 2, 2}, {2, 2, 2});
        u = b.node(OpKind::kSlice, {u}, [](Node& n) {
            n.slice_starts = {0, 0, 0};
            n.slice_ends = {11, 10, 9};
            n.slice_axes = {2, 3, 4};
        });
        const ValueId cat = b.node(OpKind::kConcat, {skip, u}, [](Node& n) { n.axis = 1; });
        ValueId head = b.conv(cat, 12, 3, {1, 1, 1});
        b.output(b.node(OpKind::kSoftmax, {head}, [](Node& n) { n.axis = 1; }));
        add("net_unet_level",
            "conv/instnorm/lrelu, strided conv, convT, slice, concat, 1x1 head, "
            "softmax; input " +
                vecStr(s),
            b, {s}, kNetworkTol);
    }
    return cases;
}

// Max abs error between two tensors and the worst element relative to a tolerance.
struct Comparison {
    double max_abs = 0;
    double worst_ratio = 0;  // max over elements of |a-b| / (atol + rtol*|b|); <= 1 passes
    int64_t worst_index = -1;
    bool shape_ok = true;
};

inline Comparison compareTensors(const Tensor& got, const Tensor& want, const Tolerance& tol) {
    Comparison c;
    if (got.shape() != want.shape()) {
        c.shape_ok = false;
        return c;
    }
    const std::vector<float> a = got.toFloats(), b = want.toFloats();
    for (size_t i = 0; i < a.size(); ++i) {
        const double diff = std::isnan(a[i]) != std::isnan(b[i])
                                ? std::numeric_limits<double>::infinity()
                                : std::abs(double(a[i]) - double(b[i]));
        const double ratio = diff / (tol.atol + tol.rtol * std::abs(double(b[i])));
        c.max_abs = std::max(c.max_abs, diff);
        if (ratio > c.worst_ratio || std::isnan(ratio)) {
            c.worst_ratio = std::isnan(ratio) ? std::numeric_limits<double>::infinity() : ratio;
            c.worst_index = static_cast<int64_t>(i);
        }
    }
    return c;
}

// Runs `c` on `backend` at `precision` and on the reference backend (fp32) with the same seeded
// inputs, and checks every output against the case's tolerance. Set `optimized` to run the
// graph through optimize() first for the backend under test.
inline void expectParity(Backend& backend, const OpCase& c, Precision precision,
                         bool optimized = false) {
    SCOPED_TRACE("case " + c.name + " on " + backend.name() + " " + precisionName(precision) +
                 (optimized ? " (optimized graph)" : "") + ": " + c.params);
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < c.input_shapes.size(); ++i)
        inputs.push_back(seededTensor(c.input_shapes[i], 42u + static_cast<uint32_t>(i)));

    auto reference = makeReferenceBackend();
    auto ref_exe = reference->compile(c.graph, c.input_shapes, {});
    ASSERT_TRUE(ref_exe.isOk()) << ref_exe.status().toString();
    std::vector<Tensor> want;
    const Status rs = (*ref_exe)->run(inputs, want);
    ASSERT_TRUE(rs.isOk()) << rs.toString();

    CompileOptions options;
    options.precision = precision;
    const Graph g = optimized ? optimize(c.graph) : c.graph;
    // The backend says which ops it runs (Backend::supportsNode; cuda refuses GroupNorm, Resize
    // and reflect/edge Pad, docs/gpu-machine.md): a case it refuses is a skip, and one it
    // accepts must compile and match.
    if (const Status why = backend.supportsGraph(g, c.input_shapes); !why.isOk()) {
        EXPECT_EQ(why.code(), StatusCode::kUnsupported) << why.toString();
        EXPECT_FALSE(why.message().empty());
        GTEST_SKIP() << backend.name() << " does not run this case: " << why.toString();
    }
    auto exe = backend.compile(g, c.input_shapes, options);
    ASSERT_TRUE(exe.isOk()) << exe.status().toString();
    std::vector<Tensor> got;
    const Status s = (*exe)->run(inputs, got);
    ASSERT_TRUE(s.isOk()) << s.toString();
    ASSERT_EQ(got.size(), want.size());
    const Tolerance& tol = c.tol.at(precision);
    for (size_t i = 0; i < got.size(); ++i) {
        const Comparison cmp = compareTensors(got[i], want[i], tol);
        ASSERT_TRUE(cmp.shape_ok) << "output " << i << " shape " << shapeToString(got[i].shape())
                                  << ", reference " << shapeToString(want[i].shape());
        EXPECT_LE(cmp.worst_ratio, 1.0)
            << "output " << i << " shape " << shapeToString(want[i].shape()) << ": max abs error "
            << cmp.max_abs << "; worst element " << cmp.worst_index << " got "
            << got[i].toFloats()[cmp.worst_index] << " want " << want[i].toFloats()[cmp.worst_index]
            << " (atol " << tol.atol << ", rtol " << tol.rtol
            << ")\n  kernels: " << (*exe)->describe();
    }
}

}  // namespace voxseg::engine::testing
