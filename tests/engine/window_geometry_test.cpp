// The sliding window's shared geometry (engine/inference/window_geometry.h), which the host and
// the CUDA window both run: the grid covers the (padded) volume with edge windows flush against
// the border, volumes smaller than a patch are padded centred, the mirrored copies come in the
// stated order, and bad options are refused with their messages. Expected values are worked out
// by hand here, not by calling the code under test.
#include "engine/inference/window_geometry.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace voxseg::engine {
namespace {

SlidingWindowOptions withPatch(std::vector<int64_t> patch, double overlap = 0.5,
                               WindowConvention convention = WindowConvention::kNnUNet) {
    SlidingWindowOptions o;
    o.patch_size = std::move(patch);
    o.overlap = overlap;
    o.convention = convention;
    return o;
}

std::string messageOf(const SlidingWindowOptions& o, const Shape& image = {}) {
    const Status st = validateSlidingWindowOptions(o, image);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.toString();
    return st.message();
}

TEST(WindowGeometry, KnownGridsOfBothConventions) {
    // nnU-Net: 4 steps over 300 - 128 = 172 voxels, round(172 / 3 * i); 256: steps of 64.
    WindowGrid g = windowGrid(withPatch({128, 128, 128}), {300, 128, 256});
    EXPECT_EQ(g.starts[0], (std::vector<int64_t>{0, 57, 115, 172}));
    EXPECT_EQ(g.starts[1], (std::vector<int64_t>{0}));
    EXPECT_EQ(g.starts[2], (std::vector<int64_t>{0, 64, 128}));
    EXPECT_EQ(g.num_windows, 12);
    EXPECT_FALSE(g.needs_pad);
    EXPECT_EQ(g.voxels, 300 * 128 * 256);
    EXPECT_EQ(gridOrigin(g, 0), (std::array<int64_t, 3>{0, 0, 0}));
    EXPECT_EQ(gridOrigin(g, 1), (std::array<int64_t, 3>{0, 0, 64}));  // last axis fastest
    EXPECT_EQ(gridOrigin(g, 3), (std::array<int64_t, 3>{57, 0, 0}));
    EXPECT_EQ(gridOrigin(g, 11), (std::array<int64_t, 3>{172, 0, 128}));
    // MONAI: interval 64, the fourth window (192) pulled back to end at the border (172).
    g = windowGrid(withPatch({128, 128, 128}, 0.5, WindowConvention::kMonai), {300, 128, 128});
    EXPECT_EQ(g.starts[0], (std::vector<int64_t>{0, 64, 128, 172}));
    EXPECT_EQ(g.num_windows, 4);
}

TEST(WindowGeometry, GridCoversTheVolumeWithEdgeWindowsFlush) {
    for (auto convention : {WindowConvention::kNnUNet, WindowConvention::kMonai}) {
        for (double overlap : {0.0, 0.25, 0.5, 0.8}) {
            for (const Shape& spatial : {Shape{13, 9, 20}, Shape{7, 17, 5}, Shape{24, 8, 11}}) {
                const SlidingWindowOptions o = withPatch({6, 8, 5}, overlap, convention);
                const WindowGrid g = windowGrid(o, spatial);
                SCOPED_TRACE(shapeToString(spatial) + " overlap " + std::to_string(overlap) + " " +
                             windowConventionName(convention));
                std::vector<int> covered(static_cast<size_t>(g.voxels), 0);
                std::set<std::array<int64_t, 3>> seen;
                int64_t last_z = 0;
                for (int64_t w = 0; w < g.num_windows; ++w) {
                    const auto o3 = gridOrigin(g, w);
                    // nnU-Net repeats a start where its step rounds below one voxel (patch 5,
                    // overlap 0.8: 6 / 7 voxels), as nnU-Net does; MONAI never does.
                    const bool fresh = seen.insert(o3).second;
                    if (convention == WindowConvention::kMonai)
                        EXPECT_TRUE(fresh) << "window " << w << " repeated";
                    EXPECT_GE(o3[0], last_z) << "z decreases at window " << w;
                    last_z = o3[0];
                    for (size_t a = 0; a < 3; ++a) {
                        EXPECT_GE(o3[a], 0);
                        EXPECT_LE(o3[a] + g.patch[a], g.padded[a]) << "window past the border";
                    }
                    for (int64_t z = 0; z < g.patch[0]; ++z)
                        for (int64_t y = 0; y < g.patch[1]; ++y)
                            for (int64_t x = 0; x < g.patch[2]; ++x)
                                ++covered[static_cast<size_t>(
                                    ((o3[0] + z) * g.padded[1] + o3[1] + y) * g.padded[2] + o3[2] +
                                    x)];
                }
                EXPECT_EQ(std::count(covered.begin(), covered.end(), 0), 0) << "voxels left out";
                for (size_t a = 0; a < 3; ++a) {
                    ASSERT_FALSE(g.starts[a].empty());
                    EXPECT_EQ(g.starts[a].front(), 0);
                    EXPECT_EQ(g.starts[a].back(), g.padded[a] - g.patch[a]) << "axis " << a;
                }
                EXPECT_EQ(g.num_windows,
                          static_cast<int64_t>(g.starts[0].size() * g.starts[1].size() *
                                               g.starts[2].size()));
            }
        }
    }
}

TEST(WindowGeometry, VolumesSmallerThanThePatchArePaddedCentred) {
    // Axis 0: 5 -> 8, 3 zeros, 1 before (rounded down) and 2 after; axis 1 is larger than the
    // patch; axis 2: 9 -> 12, 1 before.
    const WindowGrid g = windowGrid(withPatch({8, 16, 12}), {5, 20, 9});
    EXPECT_TRUE(g.needs_pad);
    EXPECT_EQ(g.dims, (std::array<int64_t, 3>{5, 20, 9}));
    EXPECT_EQ(g.padded, (std::array<int64_t, 3>{8, 20, 12}));
    EXPECT_EQ(g.pad_before, (std::array<int64_t, 3>{1, 0, 1}));
    EXPECT_EQ(g.voxels, 8 * 20 * 12);
    EXPECT_EQ(g.starts[0], (std::vector<int64_t>{0}));
    EXPECT_EQ(g.starts[1], (std::vector<int64_t>{0, 4}));
    EXPECT_EQ(g.starts[2], (std::vector<int64_t>{0}));
    // Rank 2 runs as 3D with a leading 1.
    const WindowGrid flat = windowGrid(withPatch({6, 6}), {4, 10});
    EXPECT_EQ(flat.patch, (std::array<int64_t, 3>{1, 6, 6}));
    EXPECT_EQ(flat.padded, (std::array<int64_t, 3>{1, 6, 10}));
    EXPECT_EQ(flat.pad_before, (std::array<int64_t, 3>{0, 1, 0}));
    EXPECT_EQ(padTo3D({7}), (std::array<int64_t, 3>{1, 1, 7}));
    // Exactly one patch: nothing to pad, one window.
    const WindowGrid exact = windowGrid(withPatch({4, 4, 4}), {4, 4, 4});
    EXPECT_FALSE(exact.needs_pad);
    EXPECT_EQ(exact.num_windows, 1);
}

TEST(WindowGeometry, FlipSetsPerMirrorSetting) {
    using Sets = std::vector<unsigned>;
    for (bool nnunet : {false, true}) {
        EXPECT_EQ(flipSets({}, 3, nnunet), Sets{0}) << "no mirroring: the patch itself";
        EXPECT_EQ(flipSets({1}, 3, nnunet), (Sets{0, 2}));
        EXPECT_EQ(flipSets({0, 2}, 3, nnunet), (Sets{0, 1, 4, 5}));
        // Rank 2 (patch [H, W]): spatial axis 0 is grid axis 1.
        EXPECT_EQ(flipSets({0, 1}, 2, nnunet), (Sets{0, 2, 4, 6}));
        EXPECT_EQ(flipSets({0}, 1, nnunet), (Sets{0, 4}));
    }
    // Normalized: ascending bit sets; nnU-Net: one axis, then two, then three, in the order the
    // axes are listed (itertools.combinations).
    EXPECT_EQ(flipSets({0, 1, 2}, 3, false), (Sets{0, 1, 2, 3, 4, 5, 6, 7}));
    EXPECT_EQ(flipSets({0, 1, 2}, 3, true), (Sets{0, 1, 2, 4, 3, 5, 6, 7}));
    EXPECT_EQ(flipSets({2, 0}, 3, true), (Sets{0, 4, 1, 5}));
    EXPECT_EQ(flipSets({2, 0}, 3, false), (Sets{0, 1, 4, 5}));
}

TEST(WindowGeometry, BadOptionsAreRefusedWithTheirMessage) {
    EXPECT_TRUE(validateSlidingWindowOptions(withPatch({4, 4, 4}), {1, 9, 9, 9}).isOk());
    EXPECT_EQ(messageOf(withPatch({})), "patch_size must have 1 to 3 spatial axes, got []");
    EXPECT_EQ(messageOf(withPatch({4, 0, 4})), "patch_size must be positive, got [4, 0, 4]");
    EXPECT_EQ(messageOf(withPatch({4, 4, 4}, 1.0)), "overlap must be in [0, 1), got 1.000000");
    EXPECT_EQ(messageOf(withPatch({4, 4, 4}, -0.25)), "overlap must be in [0, 1), got -0.250000");
    SlidingWindowOptions o = withPatch({4, 4, 4});
    o.sigma_scale = 0.0;
    EXPECT_EQ(messageOf(o), "gaussian sigma scale must be > 0, got 0.000000");
    o = withPatch({4, 4, 4});
    o.batch = 0;
    EXPECT_EQ(messageOf(o), "batch must be at least 1, got 0");
    o = withPatch({4, 4});
    o.mirror_axes = {2};
    EXPECT_EQ(messageOf(o), "mirror axis 2 is not a spatial axis (0..1)");
    o.mirror_axes = {1, 1};
    EXPECT_EQ(messageOf(o), "mirror axis 1 is listed twice");
    EXPECT_EQ(messageOf(withPatch({4, 4}), {1, 8, 8, 8}),
              "image [1, 8, 8, 8] must be [channels, spatial...] with 2 spatial axes to match "
              "patch_size [4, 4]");
}

}  // namespace
}  // namespace voxseg::engine
