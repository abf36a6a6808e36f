#include "core/status.h"

#include <gtest/gtest.h>

namespace voxseg {
namespace {

Result<int> parsePositive(int v) {
    if (v <= 0) return invalidArgument("must be positive", "value");
    return v;
}

Result<int> doubled(int v) {
    VOXSEG_ASSIGN_OR_RETURN(int x, parsePositive(v));
    return 2 * x;
}

Status check(int v) {
    VOXSEG_RETURN_IF_ERROR(parsePositive(v).status());
    return Status::ok();
}

TEST(Status, OkAndErrorCarryCodeMessageSubject) {
    EXPECT_TRUE(Status::ok().isOk());
    Status s = corruptData("truncated", "/data/a.dcm");
    EXPECT_FALSE(s.isOk());
    EXPECT_EQ(s.code(), StatusCode::kCorruptData);
    EXPECT_EQ(s.toString(), "/data/a.dcm: truncated");
    EXPECT_EQ(s.withContext("reading series 2").toString(),
              "/data/a.dcm: reading series 2: truncated");
}

// Issue 35 item 7: ten callers passed a context ending in ": " ("loading NAME: ",
// "DICOM SEG PATH: ", "channel T2: "), and withContext added its own: "loading x: : truncated".
TEST(Status, ContextEndingInAColonGetsNoSecondOne) {
    const Status s = corruptData("truncated", "/data/a.dcm");
    EXPECT_EQ(s.withContext("loading series 1.2.3: ").toString(),
              "/data/a.dcm: loading series 1.2.3: truncated");
    EXPECT_EQ(s.withContext("channel T2:").message(), "channel T2: truncated");
    EXPECT_EQ(s.withContext(": ").message(), "truncated");
    EXPECT_EQ(corruptData("", "x").withContext("reading: ").message(), "reading");
}

TEST(Result, PropagatesErrorsThroughMacros) {
    EXPECT_EQ(*doubled(4), 8);
    auto r = doubled(-1);
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().subject(), "value");
    EXPECT_TRUE(check(3).isOk());
    EXPECT_EQ(check(0).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace voxseg
