// The simulated user (edit/interactive/simulated_clicks.h): the deepest voxel against a brute
// force Euclidean distance on random masks, the largest error component, include/exclude, Dice.
#include "edit/interactive/simulated_clicks.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

namespace voxseg::edit::interactive {
namespace {

size_t at(Index3 n, int64_t z, int64_t y, int64_t x) {
    return static_cast<size_t>((z * n[1] + y) * n[2] + x);
}

// Squared distance of every voxel to the nearest voxel outside the mask (the outside of the
// volume included), by brute force; the first voxel in (z, y, x) order among the largest.
Index3 bruteDeepest(const std::vector<uint8_t>& mask, Index3 n) {
    int64_t best = -1;
    Index3 arg{};
    for (int64_t z = 0; z < n[0]; ++z)
        for (int64_t y = 0; y < n[1]; ++y)
            for (int64_t x = 0; x < n[2]; ++x) {
                if (!mask[at(n, z, y, x)]) continue;
                int64_t d = std::numeric_limits<int64_t>::max();
                for (int64_t c = -1; c <= n[0]; ++c)
                    for (int64_t b = -1; b <= n[1]; ++b)
                        for (int64_t a = -1; a <= n[2]; ++a) {
                            const bool outside = c < 0 || b < 0 || a < 0 || c >= n[0] ||
                                                 b >= n[1] || a >= n[2] || !mask[at(n, c, b, a)];
                            if (outside)
                                d = std::min(
                                    d, (z - c) * (z - c) + (y - b) * (y - b) + (x - a) * (x - a));
                        }
                if (d > best) best = d, arg = {z, y, x};
            }
    return arg;
}

TEST(SimulatedClicks, DeepestVoxelIsTheExactEuclideanOne) {
    std::mt19937 rng(38);
    const Index3 n{7, 9, 11};
    for (int trial = 0; trial < 40; ++trial) {
        std::vector<uint8_t> mask(static_cast<size_t>(n[0] * n[1] * n[2]));
        // a random ellipsoid plus noise, so that ties and holes occur
        std::uniform_real_distribution<double> u(0.0, 1.0);
        const double cz = 1 + 5 * u(rng), cy = 1 + 7 * u(rng), cx = 1 + 9 * u(rng);
        const double rz = 1 + 4 * u(rng), ry = 1 + 5 * u(rng), rx = 1 + 6 * u(rng);
        for (int64_t z = 0; z < n[0]; ++z)
            for (int64_t y = 0; y < n[1]; ++y)
                for (int64_t x = 0; x < n[2]; ++x) {
                    const double e = (z - cz) * (z - cz) / (rz * rz) +
                                     (y - cy) * (y - cy) / (ry * ry) +
                                     (x - cx) * (x - cx) / (rx * rx);
                    mask[at(n, z, y, x)] = (e < 1.0) != (u(rng) < 0.05);
                }
        const auto got = deepestVoxel(mask, n);
        bool any = false;
        for (uint8_t m : mask) any = any || m;
        if (!any) {
            EXPECT_FALSE(got.has_value());
            continue;
        }
        ASSERT_TRUE(got.has_value());
        EXPECT_EQ(*got, bruteDeepest(mask, n)) << "trial " << trial;
    }
}

TEST(SimulatedClicks, CorrectsTheLargestErrorWithTheRightSign) {
    const Index3 n{6, 10, 10};
    std::vector<uint8_t> truth(static_cast<size_t>(6 * 10 * 10), 0), pred = truth;
    for (int64_t z = 1; z < 5; ++z)  // truth: a 4 x 6 x 6 block
        for (int64_t y = 2; y < 8; ++y)
            for (int64_t x = 2; x < 8; ++x) truth[at(n, z, y, x)] = 1;
    pred = truth;
    pred[at(n, 0, 0, 0)] = 1;  // a one-voxel false positive
    for (int64_t y = 2; y < 8; ++y)
        for (int64_t x = 5; x < 8; ++x)  // a 1 x 6 x 3 miss: the largest error
            for (int64_t z = 3; z < 4; ++z) pred[at(n, z, y, x)] = 0;
    auto c = correctiveClick(pred, truth, n);
    ASSERT_TRUE(c.has_value());
    EXPECT_TRUE(c->include);
    EXPECT_EQ(c->voxel[0], 3);
    EXPECT_TRUE(truth[at(n, c->voxel[0], c->voxel[1], c->voxel[2])]);
    EXPECT_FALSE(pred[at(n, c->voxel[0], c->voxel[1], c->voxel[2])]);

    // Only a false positive left: an exclude click on it.
    pred = truth;
    for (int64_t x = 0; x < 4; ++x) pred[at(n, 0, 0, x)] = 1;
    c = correctiveClick(pred, truth, n);
    ASSERT_TRUE(c.has_value());
    EXPECT_FALSE(c->include);
    EXPECT_EQ(c->voxel[0], 0);
    EXPECT_EQ(c->voxel[1], 0);

    EXPECT_FALSE(correctiveClick(truth, truth, n).has_value());
}

TEST(SimulatedClicks, Dice) {
    const std::vector<uint8_t> a{1, 1, 0, 0}, b{1, 0, 1, 0}, none{0, 0, 0, 0};
    EXPECT_DOUBLE_EQ(diceScore(a, b), 0.5);
    EXPECT_DOUBLE_EQ(diceScore(a, a), 1.0);
    EXPECT_DOUBLE_EQ(diceScore(none, none), 1.0);
    EXPECT_DOUBLE_EQ(diceScore(a, none), 0.0);
}

}  // namespace
}  // namespace voxseg::edit::interactive
