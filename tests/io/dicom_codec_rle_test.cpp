// RLE Lossless decoding (PS3.5 Annex G) on hand-built segments, including the damaged headers that
// made DCMTK 3.6.7's decoder read out of bounds (found by fuzz_dicom_pixels).
#include "io/dicom_codec_rle.h"

#include <gtest/gtest.h>

#include <vector>

namespace voxseg::io::detail {
namespace {

std::vector<uint8_t> header(std::vector<uint32_t> offsets) {
    std::vector<uint8_t> h(64, 0);
    const auto put = [&](size_t at, uint32_t v) {
        for (int b = 0; b < 4; ++b) h[at + b] = static_cast<uint8_t>(v >> (8 * b));
    };
    put(0, static_cast<uint32_t>(offsets.size()));
    for (size_t i = 0; i < offsets.size(); ++i) put(4 + 4 * i, offsets[i]);
    return h;
}

TEST(RleDecoder, LiteralAndRepeatRunsAcrossTwoBytePlanes) {
    // 5 pixels of 16 bits: high bytes {1,1,1,2,3} = repeat(3 x 1) + literal(2,3);
    // low bytes {9,8,7,6,5} = literal(5).
    std::vector<uint8_t> high{static_cast<uint8_t>(-2), 1, 1, 2, 3};
    std::vector<uint8_t> low{4, 9, 8, 7, 6, 5};
    auto data = header({64, static_cast<uint32_t>(64 + high.size())});
    data.insert(data.end(), high.begin(), high.end());
    data.insert(data.end(), low.begin(), low.end());
    std::vector<uint32_t> out(5);
    ASSERT_TRUE(decodeRleFrame(data, 5, 2, out, "x").isOk());
    EXPECT_EQ(out, (std::vector<uint32_t>{0x0109, 0x0108, 0x0107, 0x0206, 0x0305}));
}

TEST(RleDecoder, NoOpCodeAndPaddingAreIgnored) {
    std::vector<uint8_t> seg{0x80, 2, 10, 11, 12, 0x00};  // no-op, literal(3), trailing pad byte
    auto data = header({64});
    data.insert(data.end(), seg.begin(), seg.end());
    std::vector<uint32_t> out(3);
    ASSERT_TRUE(decodeRleFrame(data, 3, 1, out, "x").isOk());
    EXPECT_EQ(out, (std::vector<uint32_t>{10, 11, 12}));
}

// Regression: a segment offset beyond the fragment (fuzz_dicom_pixels crash in
// DcmRLEDecoder::decompress) must be reported, not followed.
TEST(RleDecoder, SegmentOffsetOutsideTheFrameIsCorrupt) {
    auto data = header({64, 0xC500});
    data.resize(64 + 20, 0);
    std::vector<uint32_t> out(4);
    const Status s = decodeRleFrame(data, 4, 2, out, "bad.dcm");
    EXPECT_EQ(s.code(), StatusCode::kCorruptData);
    EXPECT_EQ(s.subject(), "bad.dcm");
}

TEST(RleDecoder, ShortOrInconsistentDataIsCorrupt) {
    std::vector<uint32_t> out(8);
    EXPECT_EQ(decodeRleFrame(std::vector<uint8_t>(10, 0), 8, 1, out, "x").code(),
              StatusCode::kCorruptData);
    auto wrong_count = header({64, 70});
    wrong_count.resize(80, 0);
    EXPECT_EQ(decodeRleFrame(wrong_count, 8, 1, out, "x").code(), StatusCode::kCorruptData);
    auto short_segment = header({64});
    short_segment.push_back(1);  // literal of 2 bytes, only 1 present
    short_segment.push_back(7);
    EXPECT_EQ(decodeRleFrame(short_segment, 8, 1, out, "x").code(), StatusCode::kCorruptData);
    auto too_few = header({64});
    too_few.push_back(static_cast<uint8_t>(-2));  // 3 pixels of 8 wanted
    too_few.push_back(7);
    EXPECT_EQ(decodeRleFrame(too_few, 8, 1, out, "x").code(), StatusCode::kCorruptData);
    auto backwards = header({64, 64});
    backwards.resize(80, 0);
    EXPECT_EQ(decodeRleFrame(backwards, 8, 2, out, "x").code(), StatusCode::kCorruptData);
}

}  // namespace
}  // namespace voxseg::io::detail
