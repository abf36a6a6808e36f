// End-to-end GPU sliding window (label gpu) against the host sliding window
// (engine::slidingWindowInference) on the reference backend: label maps must agree on >= 99.9 % of
// voxels in fp32 and
// >= 99.5 % in fp16/bf16, and the averaged logits must match within a stated tolerance. Volumes
// are not multiples of the patch, and one is smaller than the patch (padding path).
#include "cuda/cuda_sliding_window.h"
#include "backends/registry.h"
#include "cuda/cuda_backend.h"
#include "cuda/kernels_math.h"
#include "engine/inference/sliding_window.h"
#include "engine/inference/window_geometry.h"
#include "tests/engine/op_cases.h"

#include <gtest/gtest.h>

namespace voxseg::cuda {
namespace {

using engine::OpKind;
using engine::Precision;
using engine::Tensor;
using engine::ValueId;
using engine::testing::GraphBuilder;

constexpr double kMinAgreementFp32 = 0.999;
constexpr double kMinAgreementHalf = 0.995;
constexpr double kLogitTolFp32 = 1e-3;  // averaged logits, max abs

// A two-level U-Net of the nnU-Net kind: conv-IN-LReLU x2, strided conv down, convT up,
// skip concat, 1x1x1 head with 3 classes.
engine::Graph smallUNet() {
    GraphBuilder b;
    const ValueId x = b.input("x", {1, 1, 32, 32, 32});
    auto block = [&](ValueId in, int64_t cin, int64_t cout, int64_t stride) {
        ValueId h = b.conv(in, cin, cout, {3, 3, 3}, {stride, stride, stride}, {1, 1, 1, 1, 1, 1});
        h = b.norm(OpKind::kInstanceNorm, h, cout);
        return b.node(OpKind::kLeakyRelu, {h}, [](engine::Node& n) { n.alpha = 0.01f; });
    };
    const ValueId e0 = block(block(x, 1, 8, 1), 8, 8, 1);
    const ValueId e1 = block(block(e0, 8, 16, 2), 16, 16, 1);
    const ValueId up = b.convTranspose(e1, 16, 8, {2, 2, 2}, {2, 2, 2});
    const ValueId cat = b.node(OpKind::kConcat, {up, e0}, [](engine::Node& n) { n.axis = 1; });
    const ValueId d0 = block(block(cat, 16, 8, 1), 8, 8, 1);
    b.output(b.conv(d0, 8, 3, {1, 1, 1}));
    return b.graph();
}

// Host oracle: the engine's sliding window with the same options (same grid, importance map and
// padding: engine/inference/window_geometry.h) on the reference backend (plain fp32 loops), one
// patch per batch.
Tensor hostWindow(const engine::Graph& graph, const Tensor& image,
                  engine::SlidingWindowOptions options) {
    auto reference = engine::makeReferenceBackend();
    options.batch = 1;
    options.compile = {};
    auto result = engine::slidingWindowInference(*reference, graph, image, options);
    EXPECT_TRUE(result.isOk()) << result.status().toString();
    return result.isOk() ? std::move(result).value() : Tensor();
}

struct WindowCase {
    engine::Shape image;  // C, D, H, W
    Precision precision;
    int batch;
};

class CudaSlidingWindowTest : public ::testing::TestWithParam<WindowCase> {};

TEST_P(CudaSlidingWindowTest, MatchesHostWindowOnReferenceBackend) {
    auto backend = makeCudaBackend();
    if (!backend.isOk()) GTEST_SKIP() << "no usable GPU: " << backend.status().toString();
    const WindowCase& wc = GetParam();
    const engine::Graph graph = smallUNet();
    const Tensor image = engine::testing::seededTensor(wc.image, 99, -2.0f, 2.0f);
    engine::SlidingWindowOptions options;
    options.patch_size = {32, 32, 32};
    options.batch = wc.batch;
    options.compile.precision = wc.precision;
    auto gpu = slidingWindowCuda(graph, image, options, {}, /*return_probabilities=*/true);
    ASSERT_TRUE(gpu.isOk()) << gpu.status().toString();
    // The device ran the shared geometry's grid for this image.
    const engine::WindowGrid grid =
        engine::windowGrid(options, {wc.image.begin() + 1, wc.image.end()});
    EXPECT_EQ(gpu->grid.starts, grid.starts);
    EXPECT_EQ(gpu->grid.pad_before, grid.pad_before);
    const Tensor host = hostWindow(graph, image, options);

    const int64_t voxels = wc.image[1] * wc.image[2] * wc.image[3];
    ASSERT_EQ(int64_t(gpu->labels.size()), voxels);
    ASSERT_EQ(gpu->probabilities.shape(), host.shape());
    const float* h = host.data<float>();
    const float* g = gpu->probabilities.data<float>();
    int64_t agree = 0;
    double max_abs = 0;
    for (int64_t v = 0; v < voxels; ++v) {
        const int want = math::argmaxStrided(h + v, 3, voxels);
        agree += gpu->labels[size_t(v)] == want;
        for (int k = 0; k < 3; ++k)
            max_abs = std::max(max_abs, double(std::abs(h[k * voxels + v] - g[k * voxels + v])));
    }
    const double agreement = double(agree) / double(voxels);
    const double need = wc.precision == Precision::kFloat32 ? kMinAgreementFp32 : kMinAgreementHalf;
    EXPECT_GE(agreement, need) << engine::precisionName(wc.precision) << " max abs logit diff "
                               << max_abs;
    if (wc.precision == Precision::kFloat32) EXPECT_LE(max_abs, kLogitTolFp32);
    std::cout << "[          ] " << engine::precisionName(wc.precision) << " image "
              << engine::shapeToString(wc.image) << " batch " << gpu->batch << ": "
              << gpu->grid.num_windows << " patches, label agreement " << agreement * 100
              << " %, max abs logit diff " << max_abs << "\n";
}

INSTANTIATE_TEST_SUITE_P(Volumes, CudaSlidingWindowTest,
                         ::testing::Values(WindowCase{{1, 44, 40, 36}, Precision::kFloat32, 2},
                                           WindowCase{{1, 44, 40, 36}, Precision::kFloat16, 3},
                                           WindowCase{{1, 44, 40, 36}, Precision::kBFloat16, 4},
                                           WindowCase{{1, 20, 40, 33}, Precision::kFloat32, 1}),
                         [](const ::testing::TestParamInfo<WindowCase>& info) {
                             return std::string(engine::precisionName(info.param.precision)) + "_" +
                                    std::to_string(info.index);
                         });

// The product path (`voxseg segment --device cuda`): the cuda backend's makeSlidingWindow is the
// GPU window, and with an ensemble and mirroring it matches the host window (reference backend,
// same members, same flips) on the weighted-mean logits.
TEST(CudaSlidingWindow, BackendWindowWithEnsembleAndMirroringMatchesHost) {
    auto backend = engine::createBackend("cuda");
    if (!backend.isOk()) GTEST_SKIP() << "no usable GPU: " << backend.status().toString();
    const engine::Graph a = smallUNet();
    engine::Graph b = smallUNet();
    for (auto& v : b.values)  // a second member with other weights
        if (v.constant && v.constant->numel() > 1)
            v.constant = engine::testing::seededTensor(v.constant->shape(), 7, -0.3f, 0.3f);
    engine::SlidingWindowOptions options;
    options.patch_size = {32, 32, 32};
    options.batch = 2;
    options.mirror_axes = {0, 2};
    options.compile.precision = Precision::kFloat32;
    auto gpu = (*backend)->makeSlidingWindow({&a, &b}, 1, options);
    ASSERT_TRUE(gpu.isOk()) << gpu.status().toString();
    EXPECT_NE((*gpu)->describe().find("cuda sliding window"), std::string::npos)
        << (*gpu)->describe();
    EXPECT_EQ((*gpu)->accumulator(), engine::DType::kFloat32);
    const Tensor image = engine::testing::seededTensor({1, 44, 40, 36}, 5, -2.0f, 2.0f);
    engine::SlidingWindowStats stats;
    auto got = (*gpu)->run(image, {}, &stats);
    ASSERT_TRUE(got.isOk()) << got.status().toString();
    EXPECT_EQ(stats.forward_passes % 8, 0);  // 2 members x 4 flips per batch

    auto reference = engine::makeReferenceBackend();
    auto host = engine::SlidingWindow::create(*reference, {&a, &b}, 1, options);
    ASSERT_TRUE(host.isOk()) << host.status().toString();
    auto want = (*host)->run(image);
    ASSERT_TRUE(want.isOk()) << want.status().toString();
    ASSERT_EQ(got->shape(), want->shape());
    const float* g = got->data<float>();
    const float* h = want->data<float>();
    double max_abs = 0;
    for (int64_t i = 0; i < want->numel(); ++i)
        max_abs = std::max(max_abs, static_cast<double>(std::abs(g[i] - h[i])));
    EXPECT_LE(max_abs, kLogitTolFp32);
    std::cout << "[          ] ensemble of 2, mirror axes {0, 2}: max abs logit diff " << max_abs
              << "\n";
}

TEST(CudaSlidingWindow, RejectsWrongImage) {
    auto backend = makeCudaBackend();
    if (!backend.isOk()) GTEST_SKIP() << "no usable GPU: " << backend.status().toString();
    engine::SlidingWindowOptions options;
    options.patch_size = {32, 32, 32};
    auto r = slidingWindowCuda(smallUNet(), engine::testing::seededTensor({1, 10, 10}, 1), options);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().toString();
    // Options are checked by the host window's rules, with its messages, before any GPU work.
    options.mirror_axes = {3};
    auto window = CudaSlidingWindow::create(smallUNet(), 1, options);
    ASSERT_FALSE(window.isOk());
    EXPECT_EQ(window.status().message(),
              engine::validateSlidingWindowOptions(options, {}).message());
}

}  // namespace
}  // namespace voxseg::cuda
