#include "tests/cuda/int8_cases.h"

#include "engine/cpu/cpu_backend.h"
#include "engine/passes/optimize.h"
#include "engine/quant/int8_conv_reference.h"
#include "engine/quant/int8_policy.h"
#include "tests/engine/op_cases.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace voxseg::cuda::testing {

using engine::OpKind;
using engine::ValueId;
using E = Int8Case::Epilogue;

std::vector<Int8Case> int8Cases() {
    std::vector<Int8Case> c;
    c.push_back({"k3_p1", {1, 5, 9, 8, 7}, 8});
    c.push_back({"k3_p1_zp_relu",
                 {1, 8, 7, 9, 6},
                 12,
                 {3, 3, 3},
                 {1, 1, 1},
                 {1, 1, 1, 1, 1, 1},
                 37,
                 true,
                 E::kRelu});
    c.push_back({"k3_s2_p1_leaky",
                 {2, 6, 11, 10, 9},
                 16,
                 {3, 3, 3},
                 {2, 2, 2},
                 {1, 1, 1, 1, 1, 1},
                 120,
                 true,
                 E::kLeakyRelu});
    c.push_back(
        {"k1_nobias", {1, 32, 6, 5, 7}, 5, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, 3, false});
    c.push_back(
        {"k133_s122", {1, 7, 5, 12, 11}, 20, {1, 3, 3}, {1, 2, 2}, {0, 1, 1, 0, 1, 1}, 255});
    c.push_back({"k5_pads_210", {1, 4, 8, 9, 10}, 6, {5, 5, 5}, {1, 1, 1}, {2, 1, 0, 2, 1, 0}, 64});
    c.push_back(
        {"k2_s2_nopad", {1, 16, 12, 12, 12}, 32, {2, 2, 2}, {2, 2, 2}, {0, 0, 0, 0, 0, 0}, 10});
    c.push_back({"k3_residual_leaky",
                 {1, 8, 6, 7, 8},
                 8,
                 {3, 3, 3},
                 {1, 1, 1},
                 {1, 1, 1, 1, 1, 1},
                 90,
                 true,
                 E::kResidualLeakyRelu});
    return c;
}

Int8Prepared prepareInt8Case(const Int8Case& c) {
    namespace quant = engine::quant;
    Int8Prepared out;
    engine::testing::GraphBuilder b;
    const int64_t cin = c.input[1];
    const ValueId x = b.input("x", c.input);
    ValueId y = b.conv(x, cin, c.out_channels, c.kernel, c.strides, c.pads, {}, 1, c.bias);
    engine::Shape ys;
    {
        engine::Graph probe = b.graph();
        probe.outputs = {y};
        EXPECT_TRUE(probe.inferShapes({c.input}).isOk());
        ys = probe.values[y].shape;
    }
    ValueId r = -1;
    if (c.epilogue == E::kResidualLeakyRelu) {
        r = b.input("r", ys);
        y = b.node(OpKind::kAdd, {y, r});
    }
    if (c.epilogue == E::kRelu) y = b.node(OpKind::kRelu, {y});
    if (c.epilogue == E::kLeakyRelu || c.epilogue == E::kResidualLeakyRelu)
        y = b.node(OpKind::kLeakyRelu, {y}, [](engine::Node& n) { n.alpha = 0.05f; });
    b.output(y);
    engine::Graph imported = b.graph();
    EXPECT_TRUE(imported
                    .inferShapes(r >= 0 ? std::vector<engine::Shape>{c.input, ys}
                                        : std::vector<engine::Shape>{c.input})
                    .isOk());
    out.graph = engine::optimize(imported);

    const quant::ActivationQuant src{1.0f / 16.0f, c.zero_point};
    out.record.weight_bits = 8;
    out.record.method = engine::RangeMethod::kMinMax;
    out.record.activations["x"] = src;

    std::mt19937 rng(1234u + uint32_t(c.zero_point));
    std::uniform_int_distribution<int> byte(0, 255);
    std::vector<uint8_t> q(size_t(engine::numel(c.input)));
    std::vector<float> xf(q.size());
    for (size_t i = 0; i < q.size(); ++i) {
        q[i] = uint8_t(byte(rng));
        xf[i] = quant::dequantizeActivation(q[i], src);
    }
    out.inputs.push_back(engine::Tensor::fromFloats(c.input, xf));
    std::vector<float> rf;
    if (r >= 0) {
        // Exact in every storage type the plans use (bf16 and fp16: 8 significant bits, nothing
        // below fp16's normal range), as the source is: the GPU stores the residual before adding.
        rf = engine::testing::seededTensor(ys, 77, -2.0f, 2.0f).toFloats();
        for (float& f : rf)
            f = std::fabs(f) < 0x1p-14f ? 0.0f
                                        : engine::bfloat16ToFloat(engine::floatToBFloat16(f));
        out.inputs.push_back(engine::Tensor::fromFloats(ys, rf));
    }

    const engine::Node& conv = out.graph.nodes.front();
    quant::Int8ConvSpec spec = quant::int8ConvGeometry(conv, c.input);
    spec.activation = quant::Int8Activation::kNone;  // applied below, after the residual
    spec.dst_f32 = true;
    const auto w = quant::quantizeWeightsPerChannel(out.graph.constant(conv.inputs[1]).toFloats(),
                                                    c.out_channels, 127);
    const std::vector<float> bias =
        c.bias ? out.graph.constant(conv.inputs[2]).toFloats() : std::vector<float>{};
    quant::setRequantisation(spec, src, w.scales, {1.0f, 0}, bias);
    auto ref = quant::int8ConvReference(spec, q, w.values, {});
    EXPECT_TRUE(ref.isOk()) << ref.status().toString();
    if (!ref.isOk()) return out;
    out.expected = ref->unrounded;
    for (size_t i = 0; i < out.expected.size(); ++i) {
        float f = out.expected[i];
        if (r >= 0) f = f + rf[i];
        if (c.epilogue == E::kRelu) f = f > 0.0f ? f : 0.0f;
        if (c.epilogue == E::kLeakyRelu || c.epilogue == E::kResidualLeakyRelu) {
            const float neg = f * 0.05f;
            f = f > 0.0f ? f : neg;
        }
        out.expected[i] = f;
    }
    return out;
}

std::vector<float> cpuFp32(const engine::Graph& g, const std::vector<engine::Tensor>& inputs) {
    std::vector<engine::Shape> shapes;
    for (const auto& t : inputs) shapes.push_back(t.shape());
    auto exe = engine::makeCpuBackend()->compile(g, shapes, {});
    EXPECT_TRUE(exe.isOk()) << exe.status().toString();
    if (!exe.isOk()) return {};
    std::vector<engine::Tensor> out;
    EXPECT_TRUE((*exe)->run(inputs, out).isOk());
    return out.empty() ? std::vector<float>{} : out[0].toFloats();
}

Int8ConvPlan packingPlan() {
    Int8ConvPlan plan;
    plan.cout = 3;
    math::Int8Geometry& g = plan.geometry;
    g.n = 1;
    g.cin = 2;
    g.kernel[0] = g.kernel[1] = 1;
    g.kernel[2] = 3;
    g.k = 6;
    g.kp = 16;
    return plan;
}

}  // namespace voxseg::cuda::testing
