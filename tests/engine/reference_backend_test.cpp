// The reference backend against values worked out by hand (it is the oracle for every other
// backend, so it is checked against something independent of its own code).
#include "engine/backend.h"
#include "tests/engine/op_cases.h"

#include <gtest/gtest.h>

#include <cmath>

namespace voxseg::engine {
namespace {

using testing::GraphBuilder;

constexpr float kTol = 1e-5f;

// Runs a one-output graph on the reference backend.
std::vector<float> runRef(Graph g, const std::vector<Tensor>& inputs) {
    std::vector<Shape> shapes;
    for (const Tensor& t : inputs) shapes.push_back(t.shape());
    auto exe = makeReferenceBackend()->compile(g, shapes, {});
    EXPECT_TRUE(exe.isOk()) << exe.status().toString();
    if (!exe) return {};
    std::vector<Tensor> out;
    const Status s = (*exe)->run(inputs, out);
    EXPECT_TRUE(s.isOk()) << s.toString();
    return s.isOk() ? out[0].toFloats() : std::vector<float>{};
}

void expectNear(const std::vector<float>& got, const std::vector<float>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], kTol) << "element " << i;
}

TEST(ReferenceBackend, ConvOnesKernelCountsNeighbours) {
    GraphBuilder b;
    const ValueId x = b.input("x", {1, 1, 3, 3, 3});
    const ValueId w =
        b.constant("w", Tensor::fromFloats({1, 1, 3, 3, 3}, std::vector<float>(27, 1)));
    const ValueId bias = b.constant("b", Tensor::fromFloats({1}, {0.5f}));
    b.output(b.node(OpKind::kConv, {x, w, bias}, [](Node& n) {
        n.conv.kernel = {3, 3, 3};
        n.conv.strides = {1, 1, 1};
        n.conv.dilations = {1, 1, 1};
        n.conv.pads_begin = {1, 1, 1};
        n.conv.pads_end = {1, 1, 1};
    }));
    const auto y =
        runRef(b.graph(), {Tensor::fromFloats({1, 1, 3, 3, 3}, std::vector<float>(27, 1))});
    ASSERT_EQ(y.size(), 27u);
    EXPECT_NEAR(y[0], 8.5f, kTol);    // corner: 2x2x2 neighbourhood
    EXPECT_NEAR(y[1], 12.5f, kTol);   // edge: 2x2x3
    EXPECT_NEAR(y[4], 18.5f, kTol);   // face centre: 2x3x3
    EXPECT_NEAR(y[13], 27.5f, kTol);  // centre
}

TEST(ReferenceBackend, ConvTransposeScattersKernel) {
    GraphBuilder b;
    const ValueId x = b.input("x", {1, 1, 2});
    const ValueId w = b.constant("w", Tensor::fromFloats({1, 1, 2}, {3, 4}));
    const ValueId bias = b.constant("b", Tensor::fromFloats({1}, {1}));
    b.output(b.node(OpKind::kConvTranspose, {x, w, bias}, [](Node& n) {
        n.conv.spatial_rank = 1;
        n.conv.kernel = {2};
        n.conv.strides = {2};
        n.conv.dilations = {1};
        n.conv.pads_begin = {0};
        n.conv.pads_end = {0};
    }));
    expectNear(runRef(b.graph(), {Tensor::fromFloats({1, 1, 2}, {1, 2})}), {4, 5, 7, 9});
}

TEST(ReferenceBackend, ConvTransposeOverlapAndPadding) {
    // k3 s2 p1 on [1, 2]: full output [1,1,1+2,2,2] -> crop 1 each side, output_padding 1 adds one.
    GraphBuilder b;
    const ValueId x = b.input("x", {1, 1, 2});
    const ValueId w = b.constant("w", Tensor::fromFloats({1, 1, 3}, {1, 1, 1}));
    b.output(b.node(OpKind::kConvTranspose, {x, w}, [](Node& n) {
        n.conv.spatial_rank = 1;
        n.conv.kernel = {3};
        n.conv.strides = {2};
        n.conv.dilations = {1};
        n.conv.pads_begin = {1};
        n.conv.pads_end = {1};
        n.conv.output_padding = {1};
    }));
    expectNear(runRef(b.graph(), {Tensor::fromFloats({1, 1, 2}, {1, 2})}), {1, 3, 2, 2});
}

TEST(ReferenceBackend, InstanceNormMatchesHandComputation) {
    GraphBuilder b;
    const ValueId x = b.input("x", {1, 1, 4});
    const ValueId s = b.constant("s", Tensor::fromFloats({1}, {2}));
    const ValueId bi = b.constant("b", Tensor::fromFloats({1}, {1}));
    b.output(b.node(OpKind::kInstanceNorm, {x, s, bi}, [](Node& n) { n.norm.epsilon = 0; }));
    const float inv = 1.0f / std::sqrt(1.25f);  // mean 2.5, biased variance 1.25
    expectNear(runRef(b.graph(), {Tensor::fromFloats({1, 1, 4}, {1, 2, 3, 4})}),
               {1 - 3 * inv, 1 - inv, 1 + inv, 1 + 3 * inv});
}

TEST(ReferenceBackend, GroupNormPoolsStatisticsOverGroupChannels) {
    GraphBuilder b;
    const ValueId x = b.input("x", {1, 4, 1});
    const ValueId s = b.constant("s", Tensor::fromFloats({4}, {1, 1, 1, 2}));
    const ValueId bi = b.constant("b", Tensor::fromFloats({4}, {0, 0, 0, 0}));
    b.output(b.node(OpKind::kGroupNorm, {x, s, bi}, [](Node& n) {
        n.norm.epsilon = 0;
        n.norm.num_groups = 2;
    }));
    // Group {0, 4}: mean 2, std 2 -> -1, 1. Group {1, 3}: mean 2, std 1 -> -1, 1 (scale 2 -> 2).
    expectNear(runRef(b.graph(), {Tensor::fromFloats({1, 4, 1}, {0, 4, 1, 3})}), {-1, 1, -1, 2});
}

TEST(ReferenceBackend, SoftmaxOverChannels) {
    GraphBuilder b;
    b.output(b.node(OpKind::kSoftmax, {b.input("x", {1, 2, 1})}, [](Node& n) { n.axis = 1; }));
    expectNear(runRef(b.graph(), {Tensor::fromFloats({1, 2, 1}, {0, std::log(2.0f)})}),
               {1.0f / 3, 2.0f / 3});
}

TEST(ReferenceBackend, ResizeCoordinateModes) {
    auto resize1d = [](ResizeMode mode, ResizeCoord coord, NearestRounding r) {
        GraphBuilder b;
        b.output(b.node(OpKind::kResize, {b.input("x", {1, 1, 2})}, [&](Node& n) {
            n.resize.mode = mode;
            n.resize.coord = coord;
            n.resize.nearest = r;
            n.resize.scales = {1, 1, 2};
        }));
        return runRef(b.graph(), {Tensor::fromFloats({1, 1, 2}, {0, 3})});
    };
    const auto f = NearestRounding::kFloor;
    expectNear(resize1d(ResizeMode::kLinear, ResizeCoord::kAlignCorners, f), {0, 1, 2, 3});
    expectNear(resize1d(ResizeMode::kLinear, ResizeCoord::kHalfPixel, f), {0, 0.75f, 2.25f, 3});
    expectNear(resize1d(ResizeMode::kLinear, ResizeCoord::kAsymmetric, f), {0, 1.5f, 3, 3});
    expectNear(resize1d(ResizeMode::kNearest, ResizeCoord::kAsymmetric, f), {0, 0, 3, 3});
    // half_pixel coords -0.25, 0.25, 0.75, 1.25; round_prefer_floor -> 0, 0, 1, 1.
    expectNear(
        resize1d(ResizeMode::kNearest, ResizeCoord::kHalfPixel, NearestRounding::kRoundPreferFloor),
        {0, 0, 3, 3});
}

TEST(ReferenceBackend, PoolsHandlePaddingAndCeilMode) {
    auto pool1d = [](OpKind op, int64_t k, int64_t s, int64_t p, bool ceil, bool incl,
                     const std::vector<float>& x) {
        GraphBuilder b;
        const Shape shape{1, 1, static_cast<int64_t>(x.size())};
        b.output(b.node(op, {b.input("x", shape)}, [&](Node& n) {
            n.pool.kernel = {k};
            n.pool.strides = {s};
            n.pool.pads_begin = {p};
            n.pool.pads_end = {p};
            n.pool.dilations = {1};
            n.pool.ceil_mode = ceil;
            n.pool.count_include_pad = incl;
        }));
        return runRef(b.graph(), {Tensor::fromFloats(shape, x)});
    };
    expectNear(pool1d(OpKind::kAveragePool, 3, 1, 1, false, false, {1, 2, 3}), {1.5f, 2, 2.5f});
    expectNear(pool1d(OpKind::kAveragePool, 3, 1, 1, false, true, {1, 2, 3}), {1, 2, 5.0f / 3});
    expectNear(pool1d(OpKind::kMaxPool, 2, 2, 0, true, false, {1, 5, 2, 4, 3}), {5, 4, 3});
    expectNear(pool1d(OpKind::kMaxPool, 2, 2, 0, false, false, {1, 5, 2, 4, 3}), {5, 4});
}

TEST(ReferenceBackend, PadModes) {
    auto pad1d = [](PadAttrs::Mode mode) {
        GraphBuilder b;
        b.output(b.node(OpKind::kPad, {b.input("x", {1, 1, 3})}, [&](Node& n) {
            n.pad.mode = mode;
            n.pad.pads_begin = {0, 0, 2};
            n.pad.pads_end = {0, 0, 1};
            n.pad.value = 9;
        }));
        return runRef(b.graph(), {Tensor::fromFloats({1, 1, 3}, {1, 2, 3})});
    };
    expectNear(pad1d(PadAttrs::Mode::kConstant), {9, 9, 1, 2, 3, 9});
    expectNear(pad1d(PadAttrs::Mode::kReflect), {3, 2, 1, 2, 3, 2});
    expectNear(pad1d(PadAttrs::Mode::kEdge), {1, 1, 1, 2, 3, 3});
}

TEST(ReferenceBackend, SliceTransposeBroadcastPRelu) {
    {
        GraphBuilder b;
        b.output(b.node(OpKind::kSlice, {b.input("x", {1, 1, 6})}, [](Node& n) {
            n.slice_starts = {-1};
            n.slice_ends = {-100};
            n.slice_axes = {2};
            n.slice_steps = {-2};
        }));
        expectNear(runRef(b.graph(), {Tensor::fromFloats({1, 1, 6}, {0, 1, 2, 3, 4, 5})}),
                   {5, 3, 1});
    }
    {
        GraphBuilder b;
        b.output(b.node(OpKind::kTranspose, {b.input("x", {2, 3})}, [](Node& n) {
            n.perm = {1, 0};
        }));
        expectNear(runRef(b.graph(), {Tensor::fromFloats({2, 3}, {0, 1, 2, 3, 4, 5})}),
                   {0, 3, 1, 4, 2, 5});
    }
    {
        GraphBuilder b;
        const ValueId x = b.input("x", {2, 3});
        const ValueId c = b.constant("c", Tensor::fromFloats({2, 1}, {10, 20}));
        b.output(b.node(OpKind::kSub, {x, c}));
        expectNear(runRef(b.graph(), {Tensor::fromFloats({2, 3}, {0, 1, 2, 3, 4, 5})}),
                   {-10, -9, -8, -17, -16, -15});
    }
    {
        GraphBuilder b;
        const ValueId x = b.input("x", {1, 2, 2});
        const ValueId slope = b.constant("s", Tensor::fromFloats({2, 1}, {0.5f, 0.25f}));
        b.output(b.node(OpKind::kPRelu, {x, slope}));
        expectNear(runRef(b.graph(), {Tensor::fromFloats({1, 2, 2}, {-2, 2, -4, 4})}),
                   {-1, 2, -1, 4});
    }
}

TEST(ReferenceBackend, RejectsReducedPrecision) {
    GraphBuilder b;
    b.output(b.node(OpKind::kRelu, {b.input("x", {1, 2})}));
    CompileOptions o;
    o.precision = Precision::kBFloat16;
    auto exe = makeReferenceBackend()->compile(b.graph(), {{1, 2}}, o);
    ASSERT_FALSE(exe.isOk());
    EXPECT_EQ(exe.status().code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace voxseg::engine
