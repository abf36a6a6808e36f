// The CUDA window's plan (cuda/cuda_sliding_window.h planCudaWindow), on the CPU: for the same
// engine::SlidingWindowOptions it pads, places and mirrors its patches as the host window's
// geometry (engine/inference/window_geometry.h) does, in an order whose z never decreases (the
// early download of finished slices relies on it), and refuses options with the host's messages.
#include "cuda/cuda_sliding_window.h"
#include "engine/inference/window_geometry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace voxseg::cuda {
namespace {

using engine::Shape;
using engine::SlidingWindowOptions;
using engine::WindowConvention;

SlidingWindowOptions options(std::vector<int64_t> patch, double overlap,
                             WindowConvention convention, std::vector<int> mirror_axes = {}) {
    SlidingWindowOptions o;
    o.patch_size = std::move(patch);
    o.overlap = overlap;
    o.convention = convention;
    o.mirror_axes = std::move(mirror_axes);
    return o;
}

TEST(CudaWindowPlan, KnownGridZMajor) {
    auto plan = planCudaWindow(options({128, 128, 128}, 0.5, WindowConvention::kNnUNet),
                               {1, 300, 128, 256});
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    // nnU-Net: round(172 / 3 * i) along z, steps of 64 along x.
    ASSERT_EQ(plan->origins.size(), 4u * 1u * 3u);
    EXPECT_EQ(plan->origins[0], (std::array<int64_t, 3>{0, 0, 0}));
    EXPECT_EQ(plan->origins[1], (std::array<int64_t, 3>{0, 0, 64}));
    EXPECT_EQ(plan->origins[3], (std::array<int64_t, 3>{57, 0, 0}));
    EXPECT_EQ(plan->origins.back(), (std::array<int64_t, 3>{172, 0, 128}));
    EXPECT_EQ(plan->flips, (std::vector<int>{0}));
    EXPECT_FALSE(plan->grid.needs_pad);
}

TEST(CudaWindowPlan, IsTheHostGeometry) {
    struct Case {
        Shape image;
        SlidingWindowOptions o;
    };
    const std::vector<Case> cases = {
        {{1, 44, 40, 36}, options({32, 32, 32}, 0.5, WindowConvention::kNnUNet, {0, 2})},
        {{2, 20, 40, 33}, options({32, 32, 32}, 0.5, WindowConvention::kNnUNet)},  // padded
        {{1, 300, 128, 128}, options({128, 128, 128}, 0.5, WindowConvention::kMonai, {2, 1})},
        {{1, 9, 70, 5}, options({8, 16, 12}, 0.25, WindowConvention::kMonai, {0, 1, 2})},
        {{1, 31, 17, 64}, options({16, 16, 16}, 0.75, WindowConvention::kNnUNet, {1})},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE("image " + engine::shapeToString(c.image) + " patch " +
                     engine::shapeToString(c.o.patch_size));
        auto plan = planCudaWindow(c.o, c.image);
        ASSERT_TRUE(plan.isOk()) << plan.status().toString();
        const engine::WindowGrid host =
            engine::windowGrid(c.o, {c.image.begin() + 1, c.image.end()});
        EXPECT_EQ(plan->grid.dims, host.dims);
        EXPECT_EQ(plan->grid.padded, host.padded);
        EXPECT_EQ(plan->grid.pad_before, host.pad_before);
        EXPECT_EQ(plan->grid.starts, host.starts);
        ASSERT_EQ(static_cast<int64_t>(plan->origins.size()), host.num_windows);
        for (int64_t w = 0; w < host.num_windows; ++w) {
            EXPECT_EQ(plan->origins[size_t(w)], engine::gridOrigin(host, w)) << "window " << w;
            if (w > 0) EXPECT_LE(plan->origins[size_t(w) - 1][0], plan->origins[size_t(w)][0]);
            for (size_t a = 0; a < 3; ++a)
                EXPECT_LE(plan->origins[size_t(w)][a] + host.patch[a], host.padded[a]);
        }
        // The device sums in float32 as the host's normalized accumulation does, in its order.
        const std::vector<unsigned> host_flips = engine::flipSets(c.o.mirror_axes, 3, false);
        EXPECT_EQ(plan->flips, std::vector<int>(host_flips.begin(), host_flips.end()));
        EXPECT_EQ(plan->flips.size(), size_t(1) << c.o.mirror_axes.size());
    }
}

TEST(CudaWindowPlan, RefusesWhatTheHostRefusesWithItsMessage) {
    std::vector<SlidingWindowOptions> bad(6, options({32, 32, 32}, 0.5, WindowConvention::kNnUNet));
    bad[0].overlap = 1.0;
    bad[1].patch_size = {32, 0, 32};
    bad[2].mirror_axes = {3};
    bad[3].mirror_axes = {1, 1};
    bad[4].batch = 0;
    bad[5].sigma_scale = -1.0;
    for (const SlidingWindowOptions& o : bad) {
        const Status host = engine::validateSlidingWindowOptions(o, {});
        ASSERT_FALSE(host.isOk());
        const Status device = validateCudaWindowOptions(o);
        EXPECT_EQ(device.code(), host.code());
        EXPECT_EQ(device.message(), host.message());
        EXPECT_EQ(planCudaWindow(o, {1, 40, 40, 40}).status().message(), host.message());
    }
    const Status flat =
        validateCudaWindowOptions(options({32, 32}, 0.5, WindowConvention::kNnUNet));
    EXPECT_EQ(flat.code(), StatusCode::kUnsupported);
    EXPECT_NE(flat.message().find("3D"), std::string::npos) << flat.message();
    const auto wrong_rank =
        planCudaWindow(options({32, 32, 32}, 0.5, WindowConvention::kNnUNet), {1, 40, 40});
    EXPECT_EQ(wrong_rank.status().message(),
              engine::validateSlidingWindowOptions(
                  options({32, 32, 32}, 0.5, WindowConvention::kNnUNet), {1, 40, 40})
                  .message());
}

}  // namespace
}  // namespace voxseg::cuda
