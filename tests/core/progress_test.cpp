#include "core/progress.h"

#include <gtest/gtest.h>

#include <vector>

namespace voxseg {
namespace {

TEST(Progress, SubRangesMapIntoParentRange) {
    std::vector<double> seen;
    Progress p([&](double f, std::string_view) { seen.push_back(f); });
    Progress second_half = p.sub(0.5, 1.0);
    second_half.report(0.5, "x");
    second_half.sub(0.0, 0.5).report(1.0, "y");
    p.report(3, 4, "z");
    ASSERT_EQ(seen.size(), 3u);
    EXPECT_DOUBLE_EQ(seen[0], 0.75);
    EXPECT_DOUBLE_EQ(seen[1], 0.75);
    EXPECT_DOUBLE_EQ(seen[2], 0.75);
}

TEST(Progress, CancelIsSharedByCopies) {
    CancelToken token;
    Progress p(nullptr, token);
    Progress child = p.sub(0.2, 0.4);
    EXPECT_TRUE(child.checkCancelled().isOk());
    token.cancel();
    EXPECT_EQ(child.checkCancelled().code(), StatusCode::kCancelled);
}

}  // namespace
}  // namespace voxseg
