// Frame-to-fragment mapping on synthetic layouts (DICOM PS3.5 A.4).
#include "io/dicom_codec_fragments.h"

#include <gtest/gtest.h>

namespace voxseg::io::detail {
namespace {

FragmentInfo fragment(uint64_t length, std::initializer_list<uint8_t> head = {}) {
    FragmentInfo f;
    f.length = length;
    for (uint8_t b : head) f.head[f.head_size++] = b;
    return f;
}

bool same(const std::vector<FrameFragments>& a, const std::vector<FrameFragments>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].first != b[i].first || a[i].count != b[i].count) return false;
    return true;
}

TEST(FragmentMap, SingleFrameTakesAllFragments) {
    std::vector<FragmentInfo> f{fragment(10), fragment(20), fragment(4)};
    auto r = mapFramesToFragments(1, {}, f, StartMarker::kNone, "x");
    ASSERT_TRUE(r.isOk());
    EXPECT_TRUE(same(*r, {{0, 3}}));
}

TEST(FragmentMap, OffsetTableSplitsFrames) {
    // Frame 1: fragments 0,1 (8+10 + 8+20 = 46 bytes); frame 2: fragment 2; frame 3: 3,4.
    std::vector<FragmentInfo> f{fragment(10), fragment(20), fragment(4), fragment(2), fragment(6)};
    std::vector<uint64_t> offsets{0, 46, 58};
    auto r = mapFramesToFragments(3, offsets, f, StartMarker::kNone, "x");
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_TRUE(same(*r, {{0, 2}, {2, 1}, {3, 2}}));
}

TEST(FragmentMap, OffsetTableNotOnItemBoundaryIsCorrupt) {
    std::vector<FragmentInfo> f{fragment(10), fragment(20), fragment(4)};
    std::vector<uint64_t> offsets{0, 17};
    auto r = mapFramesToFragments(2, offsets, f, StartMarker::kNone, "file.dcm");
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kCorruptData);
    EXPECT_EQ(r.status().subject(), "file.dcm");
}

TEST(FragmentMap, OneFragmentPerFrameWithoutTable) {
    std::vector<FragmentInfo> f{fragment(10), fragment(20)};
    auto r = mapFramesToFragments(2, {}, f, StartMarker::kNone, "x");
    ASSERT_TRUE(r.isOk());
    EXPECT_TRUE(same(*r, {{0, 1}, {1, 1}}));
}

TEST(FragmentMap, ScansForJpeg2000Starts) {
    std::vector<FragmentInfo> f{
        fragment(100, {0xFF, 0x4F, 0xFF, 0x51}), fragment(100, {1, 2}),
        fragment(100, {0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50, 0x20, 0x20, 0x0D, 0x0A, 0x87, 0x0A}),
        fragment(100, {0xFF, 0x4F, 0xFF, 0x51}), fragment(10, {3})};
    auto r = mapFramesToFragments(3, {}, f, StartMarker::kJpeg2000, "x");
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_TRUE(same(*r, {{0, 2}, {2, 1}, {3, 2}}));
}

TEST(FragmentMap, ScanCountMismatchIsCorrupt) {
    std::vector<FragmentInfo> f{fragment(100, {0xFF, 0xD8}), fragment(100, {1}),
                                fragment(100, {2})};
    auto r = mapFramesToFragments(2, {}, f, StartMarker::kJpeg, "x");
    EXPECT_EQ(r.status().code(), StatusCode::kCorruptData);
    auto rle = mapFramesToFragments(2, {}, f, StartMarker::kNone, "x");
    EXPECT_EQ(rle.status().code(), StatusCode::kCorruptData);
}

TEST(FragmentMap, TooFewFragmentsIsCorrupt) {
    std::vector<FragmentInfo> f{fragment(10)};
    EXPECT_EQ(mapFramesToFragments(2, {}, f, StartMarker::kJpeg, "x").status().code(),
              StatusCode::kCorruptData);
    EXPECT_EQ(mapFramesToFragments(1, {}, {}, StartMarker::kJpeg, "x").status().code(),
              StatusCode::kCorruptData);
}

}  // namespace
}  // namespace voxseg::io::detail
