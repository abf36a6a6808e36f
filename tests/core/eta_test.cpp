// The time-left estimate and its text (core/eta.h): what the viewer's progress bar shows.
#include "core/eta.h"

#include <gtest/gtest.h>

#include <cmath>

namespace voxseg {
namespace {

constexpr double kSeconds = 1e-9;

TEST(Eta, LinearFromTheElapsedTimeAndTheFraction) {
    EtaEstimator eta;
    // 43 % after 9 s: 9 * 0.57 / 0.43 = 11.93 s left.
    auto left = eta.update(0.43, 9.0);
    ASSERT_TRUE(left);
    EXPECT_NEAR(*left, 9.0 * 0.57 / 0.43, kSeconds);
    EXPECT_EQ(progressText(0.43, left), "43 % - about 12 s left");
    left = eta.update(0.5, 20.0);
    ASSERT_TRUE(left);
    EXPECT_NEAR(*left, 20.0, kSeconds);
    left = eta.update(1.0, 30.0);
    ASSERT_TRUE(left);
    EXPECT_NEAR(*left, 0.0, kSeconds);
}

TEST(Eta, NoEstimateTooEarlyOrWhenTheFractionGoesBack) {
    EtaEstimator eta;
    EXPECT_FALSE(eta.update(0.30, 0.5));  // under kMinSeconds: an import's first burst
    EXPECT_FALSE(eta.update(0.01, 5.0));  // under kMinFraction
    EXPECT_TRUE(eta.update(0.40, 2.0));
    EXPECT_FALSE(eta.update(0.20, 3.0));  // a stage restarted its count
    EXPECT_FALSE(eta.update(0.35, 4.0));
    EXPECT_TRUE(eta.update(0.45, 5.0));  // past its old high mark again
    EXPECT_FALSE(eta.update(std::nan(""), 5.0));
    eta.reset();
    EXPECT_TRUE(eta.update(0.20, 3.0));
    EXPECT_EQ(progressText(0.2, std::nullopt), "20 %");
}

TEST(Eta, TextRoundsSecondsMinutesAndHoursAndThePercentageDown) {
    EXPECT_EQ(formatTimeLeft(0.2), "about 1 s left");
    EXPECT_EQ(formatTimeLeft(11.6), "about 12 s left");
    EXPECT_EQ(formatTimeLeft(59.4), "about 59 s left");
    EXPECT_EQ(formatTimeLeft(59.6), "about 1 min left");
    EXPECT_EQ(formatTimeLeft(200), "about 3 min left");
    EXPECT_EQ(formatTimeLeft(3600), "about 1 h left");
    EXPECT_EQ(formatTimeLeft(3900), "about 1 h 5 min left");
    EXPECT_EQ(formatTimeLeft(-3), "about 1 s left");
    EXPECT_EQ(progressText(0.999, std::nullopt), "99 %");
    EXPECT_EQ(progressText(0.29, std::nullopt), "29 %");
    EXPECT_EQ(progressText(1.0, 0.0), "100 %");
    EXPECT_EQ(progressText(-0.5, std::nullopt), "0 %");
}

}  // namespace
}  // namespace voxseg
