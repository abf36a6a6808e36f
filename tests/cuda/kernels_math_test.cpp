// CPU tests of cuda/kernels_math.h: the per-element math every CUDA kernel calls, plus the
// no-device error path (which runs here, where there is no GPU). The window's patch grid:
// cuda_window_plan_test.cpp.
#include "cuda/kernels_math.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_graph.h"
#include "engine/inference/sliding_window.h"
#include "tests/engine/op_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace voxseg::cuda {
namespace {

using math::Act;

constexpr float kTol = 1e-6f;

TEST(KernelsMath, Activations) {
    EXPECT_EQ(math::activate(-2.0f, Act::kNone, 0, 0, 0), -2.0f);
    EXPECT_EQ(math::activate(-2.0f, Act::kRelu, 0, 0, 0), 0.0f);
    EXPECT_EQ(math::activate(3.0f, Act::kRelu, 0, 0, 0), 3.0f);
    EXPECT_NEAR(math::activate(-2.0f, Act::kLeakyRelu, 0.01f, 0, 0), -0.02f, kTol);
    EXPECT_EQ(math::activate(2.0f, Act::kLeakyRelu, 0.01f, 0, 0), 2.0f);
    EXPECT_NEAR(math::activate(-2.0f, Act::kPRelu, 0.25f, 0, 0), -0.5f, kTol);
    EXPECT_NEAR(math::activate(0.0f, Act::kSigmoid, 0, 0, 0), 0.5f, kTol);
    EXPECT_NEAR(math::activate(2.0f, Act::kSigmoid, 0, 0, 0), 1.0f / (1.0f + std::exp(-2.0f)),
                kTol);
    EXPECT_NEAR(math::activate(0.5f, Act::kTanh, 0, 0, 0), std::tanh(0.5f), kTol);
    EXPECT_NEAR(math::activate(-1.5f, Act::kSilu, 0, 0, 0), -1.5f / (1.0f + std::exp(1.5f)), kTol);
    EXPECT_EQ(math::activate(-1.0f, Act::kClip, 0, -0.3f, 0.6f), -0.3f);
    EXPECT_EQ(math::activate(1.0f, Act::kClip, 0, -0.3f, 0.6f), 0.6f);
    EXPECT_EQ(math::activate(0.1f, Act::kClip, 0, -0.3f, 0.6f), 0.1f);
}

// The tensor kernels' element-wise math against the standard library (float64 where exact).
TEST(KernelsMath, TensorElementwiseOps) {
    using math::EltOp;
    for (float x : {-3.0f, -0.7f, 0.0f, 0.4f, 2.5f}) {
        const double gelu = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
        EXPECT_NEAR(math::eltwise(EltOp::kGeluExact, x, 0, 0, 0, 0, 0), gelu, 2e-6);
        const double k = std::sqrt(2.0 / 3.14159265358979323846);
        const double tanh_gelu = 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
        EXPECT_NEAR(math::eltwise(EltOp::kGeluTanh, x, 0, 0, 0, 0, 0), tanh_gelu, 2e-6);
        EXPECT_NEAR(math::eltwise(EltOp::kSilu, x, 0, 0, 0, 0, 0), x / (1.0 + std::exp(-x)), 2e-6);
        using engine::UnaryFn;
        EXPECT_NEAR(math::eltwise(math::unaryMathOp(UnaryFn::kErf), x, 0, 0, 0, 0, 0), std::erf(x),
                    1e-6);
        EXPECT_NEAR(math::eltwise(math::unaryMathOp(UnaryFn::kSin), x, 0, 0, 0, 0, 0), std::sin(x),
                    1e-6);
        EXPECT_NEAR(math::eltwise(math::unaryMathOp(UnaryFn::kCos), x, 0, 0, 0, 0, 0), std::cos(x),
                    1e-6);
        // The shared formulas reach the kernel with both parameters: alpha, and beta in lo.
        const double selu = 1.2 * (x > 0 ? x : 0.8 * std::expm1(double(x)));
        EXPECT_NEAR(math::eltwise(math::unaryMathOp(UnaryFn::kSelu), x, 0, 0, 0.8f, 1.2f, 0), selu,
                    2e-6);
        const double hard_sigmoid = std::clamp(0.25 * x + 0.4, 0.0, 1.0);
        EXPECT_NEAR(
            math::eltwise(math::unaryMathOp(UnaryFn::kHardSigmoid), x, 0, 0, 0.25f, 0.4f, 0),
            hard_sigmoid, 2e-6);
        EXPECT_EQ(math::eltwise(EltOp::kPRelu, x, 0.25f, 0, 0, 0, 0), x >= 0 ? x : 0.25f * x);
    }
    EXPECT_EQ(math::eltwise(EltOp::kWhere, 1.0f, 2.0f, 3.0f, 0, 0, 0), 2.0f);
    EXPECT_EQ(math::eltwise(EltOp::kWhere, 0.0f, 2.0f, 3.0f, 0, 0, 0), 3.0f);
    EXPECT_EQ(math::eltwise(EltOp::kDiv, 3.0f, 4.0f, 0, 0, 0, 0), 0.75f);
    EXPECT_EQ(math::eltwise(EltOp::kClip, 5.0f, 0, 0, 0, -1.0f, 1.0f), 1.0f);
    EXPECT_EQ(math::eltArity(EltOp::kWhere), 3);
    EXPECT_EQ(math::eltArity(EltOp::kSub), 2);
    EXPECT_EQ(math::eltArity(EltOp::kGeluExact), 1);
}

// Strided addressing: a transpose, a broadcast axis and a repeated (tiled) axis.
TEST(KernelsMath, StridedOffsetTransposeBroadcastTile) {
    // x [2, 3] row-major, read as its transpose [3, 2]: element (i, j) of y is x[j][i].
    const int64_t shape_t[] = {3, 2}, mod_t[] = {3, 2}, strides_t[] = {1, 3};
    for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 2; ++j)
            EXPECT_EQ(math::stridedOffset(i * 2 + j, 2, shape_t, mod_t, strides_t), j * 3 + i);
    // x [1, 4] broadcast to [3, 4]: every row reads x's only row.
    const int64_t shape_b[] = {3, 4}, mod_b[] = {1, 4}, strides_b[] = {0, 1};
    EXPECT_EQ(math::stridedOffset(2 * 4 + 3, 2, shape_b, mod_b, strides_b), 3);
    // x [2, 3] tiled to [4, 6]: y[i][j] = x[i % 2][j % 3].
    const int64_t shape_r[] = {4, 6}, mod_r[] = {2, 3}, strides_r[] = {3, 1};
    EXPECT_EQ(math::stridedOffset(3 * 6 + 5, 2, shape_r, mod_r, strides_r), 1 * 3 + 2);
}

// Rotary embedding of interleaved pairs: y = x * cos + rot(x) * sin, rot(x)[2i] = -x[2i+1],
// rot(x)[2i+1] = x[2i]; tables repeat every T * D elements.
TEST(KernelsMath, RotaryInterleavedPairs) {
    const float x[] = {1, 2, 3, 4, 5, 6, 7, 8};  // two rows of [T=1, D=4]
    const float c[] = {0.5f, 0.25f, 1.0f, 2.0f}, s[] = {0.1f, 0.2f, 0.3f, 0.4f};
    EXPECT_FLOAT_EQ(math::rotary(x, 0, 4, c, s, 4), 1 * 0.5f - 2 * 0.1f);
    EXPECT_FLOAT_EQ(math::rotary(x, 1, 4, c, s, 4), 2 * 0.25f + 1 * 0.2f);
    EXPECT_FLOAT_EQ(math::rotary(x, 6, 4, c, s, 4), 7 * 1.0f - 8 * 0.3f);
    EXPECT_FLOAT_EQ(math::rotary(x, 7, 4, c, s, 4), 8 * 2.0f + 7 * 0.4f);
}

// Pool windows clipped to the input, and the count with padding (ONNX count_include_pad).
TEST(KernelsMath, PoolWindowClipsAndCountsPadding) {
    // in 5, kernel 3, stride 2, pad 1 / 1: output 0 covers [-1, 2) -> valid [0, 2), padded 3.
    math::PoolWindow w = math::poolWindow(0, 5, 3, 2, 1, 1);
    EXPECT_EQ(w.begin, 0);
    EXPECT_EQ(w.end, 2);
    EXPECT_EQ(w.padded, 3);
    // output 2 covers [3, 6): valid [3, 5); position 5 is inside in + pad_end (6): padded 3.
    w = math::poolWindow(2, 5, 3, 2, 1, 1);
    EXPECT_EQ(w.begin, 3);
    EXPECT_EQ(w.end, 5);
    EXPECT_EQ(w.padded, 3);
    // ceil mode past the padding: [5, 8) with pad_end 1 counts only position 5.
    w = math::poolWindow(3, 5, 3, 2, 1, 1);
    EXPECT_EQ(w.end - w.begin, 0);
    EXPECT_EQ(w.padded, 1);
}

TEST(KernelsMath, EpilogueAddsResidualBeforeActivation) {
    // act(x * scale + shift + residual): 1 * 2 - 3 + 0.5 = -0.5 -> leaky 0.1 -> -0.05.
    EXPECT_NEAR(math::epilogue(1.0f, 2.0f, -3.0f, 0.5f, Act::kLeakyRelu, 0.1f, 0, 0), -0.05f, kTol);
    EXPECT_NEAR(math::epilogue(1.0f, 2.0f, -3.0f, 1.5f, Act::kRelu, 0, 0, 0), 0.5f, kTol);
}

// Chunked moments combined with Chan's formula match a float64 two-pass computation, also for
// a channel with a large mean and a small spread (where E[x^2] - E[x]^2 in float32 fails).
TEST(KernelsMath, CombinedMomentsMatchTwoPassReference) {
    std::mt19937 rng(7);
    std::normal_distribution<float> noise(0.0f, 0.01f);
    for (float offset : {0.0f, 1000.0f}) {
        std::vector<float> x(100003);
        for (float& v : x) v = offset + noise(rng);
        double mean = 0;
        for (float v : x) mean += v;
        mean /= double(x.size());
        double m2 = 0;
        for (float v : x) m2 += (v - mean) * (v - mean);
        const double var = m2 / double(x.size());

        math::Moments total{0, 0, 0};
        const size_t chunk = 2048;
        for (size_t b = 0; b < x.size(); b += chunk) {
            math::Moments m{0, 0, 0};
            for (size_t i = b; i < std::min(x.size(), b + chunk); ++i) {
                // The kernel's per-lane Welford update.
                m.count += 1;
                const float d = x[i] - m.mean;
                m.mean += d / m.count;
                m.m2 += d * (x[i] - m.mean);
            }
            total = math::combineMoments(total, m);
        }
        EXPECT_EQ(total.count, float(x.size()));
        EXPECT_NEAR(total.mean, mean, 1e-3 + 1e-6 * offset) << "offset " << offset;
        // Float32 Welford at a mean of 1000 keeps the variance within 1 %; the textbook float32
        // E[x^2] - E[x]^2 is off by far more than the variance itself there.
        const double rel = offset == 0.0f ? 2e-3 : 1e-2;
        EXPECT_NEAR(total.m2 / total.count, var, rel * var) << "offset " << offset;
        if (offset != 0.0f) {
            float sum = 0, sum_sq = 0;
            for (float v : x) sum += v, sum_sq += v * v;
            const float naive =
                sum_sq / float(x.size()) - (sum / float(x.size())) * (sum / float(x.size()));
            EXPECT_GT(std::abs(naive - var), 10 * var) << "the naive formula should fail here";
        }
    }
}

TEST(KernelsMath, CombineWithEmptyIsIdentity) {
    const math::Moments a{3, 1.5f, 2.0f}, empty{0, 0, 0};
    const auto r1 = math::combineMoments(a, empty), r2 = math::combineMoments(empty, a);
    EXPECT_EQ(r1.count, 3);
    EXPECT_EQ(r2.mean, 1.5f);
    EXPECT_EQ(r2.m2, 2.0f);
}

TEST(KernelsMath, NormAffineFoldsMeanVarianceGammaBeta) {
    const math::Moments m{4, 2.0f, 8.0f};  // variance 2
    const auto a = math::normAffine(m, 3.0f, 0.5f, 1e-5f);
    const float rstd = 1.0f / std::sqrt(2.0f + 1e-5f);
    EXPECT_NEAR(a.scale, 3.0f * rstd, kTol);
    EXPECT_NEAR(a.shift, 0.5f - 2.0f * 3.0f * rstd, kTol);
    // x = mean maps to beta.
    EXPECT_NEAR(2.0f * a.scale + a.shift, 0.5f, 1e-5f);
}

TEST(KernelsMath, ArgmaxFirstWinsTiesAndSkipsNaN) {
    const float v[] = {1.0f, 3.0f, 3.0f, 2.0f};
    EXPECT_EQ(math::argmaxStrided(v, 4, 1), 1);
    const float strided[] = {0.0f, 9.0f, 5.0f, 9.0f, 7.0f, 9.0f};
    EXPECT_EQ(math::argmaxStrided(strided, 3, 2), 2);  // 0, 5, 7
    const float with_nan[] = {NAN, 1.0f, 0.5f};
    EXPECT_EQ(math::argmaxStrided(with_nan, 3, 1), 1);
}

TEST(KernelsMath, ChannelsLastOffsetsAndPadding) {
    // Image 1, voxel 2 of 10, channel 3 of a 8-channel slice at offset 16 of 32-channel rows.
    EXPECT_EQ(math::channelsLastOffset(1, 2, 3, 10, 32, 16), (1 * 10 + 2) * 32 + 16 + 3);
    EXPECT_EQ(math::paddedChannels(1, true), 8);
    EXPECT_EQ(math::paddedChannels(13, true), 16);
    EXPECT_EQ(math::paddedChannels(32, true), 32);
    EXPECT_EQ(math::paddedChannels(1, false), 1);
}

// On machines without a usable GPU (CI, this build host) the backend must refuse with a
// kDeviceError that names the cause, never crash; with a GPU it must work.
TEST(CudaDevice, NoDeviceIsAClearDeviceError) {
    auto backend = makeCudaBackend();
    if (backend.isOk()) {
        EXPECT_EQ((*backend)->name(), "cuda");
        EXPECT_FALSE((*backend)->deviceDescription().empty());
        const engine::PrecisionChoice choice = (*backend)->autoPrecision();
        EXPECT_TRUE((*backend)->supportsPrecision(choice.precision)) << choice.reason;
        return;
    }
    EXPECT_EQ(backend.status().code(), StatusCode::kDeviceError) << backend.status().toString();
    EXPECT_NE(backend.status().message().find("GPU"), std::string::npos)
        << backend.status().toString();
}

// The cuda backend's "auto" (Backend::autoPrecision), per compute capability; no GPU needed.
TEST(CudaDevice, AutoPrecisionFollowsTheComputeCapability) {
    EXPECT_EQ(cudaAutoPrecision(90).precision, engine::Precision::kBFloat16);
    EXPECT_EQ(cudaAutoPrecision(80).precision, engine::Precision::kBFloat16);
    EXPECT_EQ(cudaAutoPrecision(75).precision, engine::Precision::kFloat16);
    EXPECT_EQ(cudaAutoPrecision(70).precision, engine::Precision::kFloat16);
    EXPECT_EQ(cudaAutoPrecision(61).precision, engine::Precision::kFloat32);
    EXPECT_NE(cudaAutoPrecision(86).reason.find("sm_86"), std::string::npos);
}

// What the cuda backend says it runs (Backend::supportsNode, the parity tests' skip list) needs
// no GPU: the U-Net ops and the transformer ops (issue 14) are accepted; what is refused
// (GroupNorm, 2D convolutions, ...) is refused with kUnsupported naming the node.
TEST(CudaSupports, UNetAndTransformerOpsAcceptedRefusalsNameTheNode) {
    using engine::OpKind;
    size_t accepted = 0, refused = 0;
    for (const auto& c : engine::testing::allOpCases()) {
        engine::Graph g = c.graph;
        ASSERT_TRUE(g.inferShapes(c.input_shapes).isOk()) << c.name;
        for (const engine::Node& node : g.nodes) {
            const Status s = cudaSupportsNode(g, node);
            const bool transformer = node.op == OpKind::kMatMul || node.op == OpKind::kLayerNorm ||
                                     node.op == OpKind::kAttention || node.op == OpKind::kErf ||
                                     node.op == OpKind::kGelu || node.op == OpKind::kSoftmax ||
                                     node.op == OpKind::kRotary || node.op == OpKind::kReduceMean ||
                                     node.op == OpKind::kWhere || node.op == OpKind::kTranspose;
            const bool plain_unet_op = (node.op == OpKind::kInstanceNorm ||
                                        node.op == OpKind::kRelu || node.op == OpKind::kSigmoid) &&
                                       g.values[node.inputs[0]].shape.size() == 5 &&
                                       node.fused_residual < 0;
            if (transformer || plain_unet_op)
                EXPECT_TRUE(s.isOk()) << c.name << ": " << s.toString();
            if (s.isOk()) {
                ++accepted;
                continue;
            }
            ++refused;
            EXPECT_EQ(s.code(), StatusCode::kUnsupported) << c.name << ": " << s.toString();
            EXPECT_NE(s.message().find(node.name), std::string::npos) << s.toString();
        }
    }
    std::cout << "[          ] cuda supportsNode over the op cases: " << accepted
              << " nodes accepted, " << refused << " refused\n";
    EXPECT_GT(accepted, 0u);
    EXPECT_GT(refused, 0u);
}

// Mirroring in the GPU window: a flipped axis reads index n - 1 - i; others are unchanged, and
// mirroring twice is the identity (the accumulate kernel undoes the gather's flip).
TEST(KernelsMath, MirroredIndexFlipsOnlyTheAxesInTheMask) {
    EXPECT_EQ(math::mirrored(0, 5, 0b001, 0), 4);
    EXPECT_EQ(math::mirrored(4, 5, 0b001, 0), 0);
    EXPECT_EQ(math::mirrored(1, 5, 0b001, 1), 1);  // axis 1 not in the mask
    EXPECT_EQ(math::mirrored(1, 6, 0b110, 1), 4);
    EXPECT_EQ(math::mirrored(2, 6, 0b110, 2), 3);
    for (int flip = 0; flip < 8; ++flip)
        for (int axis = 0; axis < 3; ++axis)
            for (int64_t i = 0; i < 7; ++i)
                EXPECT_EQ(math::mirrored(math::mirrored(i, 7, flip, axis), 7, flip, axis), i);
}

TEST(CudaDevice, MissingDeviceIndexIsNotFoundOrDeviceError) {
    auto backend = makeCudaBackend(4096);
    ASSERT_FALSE(backend.isOk());
    const StatusCode code = backend.status().code();
    EXPECT_TRUE(code == StatusCode::kNotFound || code == StatusCode::kDeviceError)
        << backend.status().toString();
}

}  // namespace
}  // namespace voxseg::cuda
