// Normalisations that write their int8 readers' u8 source in their own pass (docs/int8.md,
// "Normalisations write u8"):
// - the kernel's u8 equals quant::quantizeActivation of its own float result, except where the
//   float lies within 1e-4 of a rounding tie (a fused multiply-add may round once instead of
//   twice there), and its float result equals affineActivation's bit for bit;
// - the policy marks a norm read by an int8 Conv, and keeps its float32 when another node reads
//   it or it is a graph output;
// (The plans they make: tests/engine/int8_graph_test.cpp.)
#include "engine/cpu/norm_kernels.h"
#include "engine/passes/optimize.h"
#include "engine/quant/int8_policy.h"
#include "tests/engine/op_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace voxseg::engine {
namespace {

using testing::GraphBuilder;

struct KernelCase {
    int64_t channels, lanes, spatial;
    ActivationKind act;
    bool residual, keep_f32;
};

// A layout of `spatial` positions and `channels` channels in groups of `lanes`.
cpu::LaneLayout layoutOf(const KernelCase& k) {
    cpu::LaneLayout L;
    L.batch = 2;
    L.channels = k.channels;
    L.spatial = k.spatial;
    L.lanes = k.lanes;
    L.groups = k.channels / k.lanes;
    L.spatial_stride = k.lanes;
    L.group_stride = k.spatial * k.lanes;
    L.n_stride = L.groups * L.group_stride;
    return L;
}

void checkKernel(const KernelCase& k) {
    const cpu::LaneLayout L = layoutOf(k);
    const size_t n = static_cast<size_t>(L.batch * L.n_stride);
    std::mt19937 rng(7);
    std::normal_distribution<float> d(0.3f, 2.0f);
    std::vector<float> x(n), r(n), scale(L.batch * L.channels), shift(scale.size());
    for (float& v : x) v = d(rng);
    for (float& v : r) v = d(rng);
    for (float& v : scale) v = 0.5f + 0.1f * d(rng);
    for (float& v : shift) v = 0.2f * d(rng);
    const quant::ActivationQuant q{0.021f, 37};
    const float* rp = k.residual ? r.data() : nullptr;

    std::vector<float> want(n);
    cpu::affineActivation(x.data(), want.data(), rp, false, L, scale.data(), shift.data(), k.act,
                          0.01f, nullptr);
    std::vector<float> y(k.keep_f32 ? n : 0);
    std::vector<uint8_t> u8(n);
    cpu::affineActivationU8(x.data(), k.keep_f32 ? y.data() : nullptr, u8.data(), rp, L,
                            scale.data(), shift.data(), k.act, 0.01f, nullptr, 1.0f / q.scale,
                            static_cast<float>(q.zero_point));
    if (k.keep_f32) EXPECT_EQ(y, want);
    size_t ties = 0, differ = 0, clamped = 0;
    for (size_t i = 0; i < n; ++i) {
        const uint8_t ref = quant::quantizeActivation(want[i], q);
        clamped += ref == 0 || ref == 255;
        if (u8[i] == ref) continue;
        const double t = static_cast<double>(want[i]) / q.scale + q.zero_point;
        const bool near_tie = std::abs(t - std::floor(t) - 0.5) < 1e-4;
        ties += near_tie;
        differ += !near_tie || std::abs(int(u8[i]) - int(ref)) > 1;
    }
    EXPECT_EQ(differ, 0u) << "channels " << k.channels << " lanes " << k.lanes;
    EXPECT_LT(ties, n / 1000 + 1);
    EXPECT_GT(clamped, 0u);  // the range clamps at both ends somewhere: the clamp is exercised
}

TEST(Int8Norm, KernelQuantisesItsOwnResult) {
    checkKernel({32, 32, 1000, ActivationKind::kLeakyRelu, false, false});  // channels-last
    checkKernel({32, 32, 999, ActivationKind::kLeakyRelu, true, true});     // + residual
    checkKernel({32, 16, 777, ActivationKind::kRelu, false, true});         // nCdhw16c
    checkKernel({5, 1, 1234, ActivationKind::kNone, true, false});          // plain
    checkKernel({24, 24, 333, ActivationKind::kSilu, false, true});
}

// x -> conv (float: the first) -> IN + LeakyReLU -> conv -> IN + LeakyReLU -> conv (float: the
// last) and, when `branch`, the second norm's result is also a graph output.
Graph stack(bool branch) {
    GraphBuilder b;
    auto normAct = [&](ValueId y, int64_t c) {
        y = b.norm(OpKind::kInstanceNorm, y, c);
        return b.node(OpKind::kLeakyRelu, {y}, [](Node& n) { n.alpha = 0.01f; });
    };
    ValueId y = b.input("x", {1, 2, 12, 11, 10});
    y = normAct(b.conv(y, 2, 16, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}), 16);
    y = normAct(b.conv(y, 16, 16, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}), 16);
    b.output(b.conv(y, 16, 3, {1, 1, 1}));
    if (branch) b.output(y);
    return b.graph();
}

std::shared_ptr<QuantizationRecord> recordFor(const Graph& g) {
    auto record = std::make_shared<QuantizationRecord>();
    record->calibration_cases = {"seeded"};
    for (const std::string& t : quant::int8CandidateTensors(g, {}))
        record->activations[t] = {0.02f, 10};
    return record;
}

TEST(Int8Norm, PolicyMarksNormsReadByInt8Convs) {
    for (bool branch : {false, true}) {
        const Graph g = optimize(stack(branch));
        const auto plan = quant::int8LayerPlan(g, *recordFor(stack(branch)));
        int norms = 0;
        for (size_t i = 0; i < g.nodes.size(); ++i) {
            if (g.nodes[i].op != OpKind::kInstanceNorm) continue;
            ++norms;
            EXPECT_TRUE(plan[i].dst_u8) << g.nodes[i].name;
            const bool last_norm = norms == 2;
            EXPECT_EQ(plan[i].keep_f32, branch && last_norm) << g.nodes[i].name;
        }
        EXPECT_EQ(norms, 2);
    }
}

}  // namespace
}  // namespace voxseg::engine
