// io/multipart_related.h: the boundary from a WADO-RS Content-Type (and refusals naming what
// came instead), and bodies split into parts whatever the chunking, with truncated and
// malformed bodies refused.
#include "io/multipart_related.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace voxseg::io {
namespace {

struct Collect : MultipartReader::Handler {
    std::vector<std::string> parts;
    std::vector<std::string> types;
    Status beginPart(const std::map<std::string, std::string>& h) override {
        parts.emplace_back();
        auto it = h.find("content-type");
        types.push_back(it == h.end() ? "" : it->second);
        return Status::ok();
    }
    Status partData(std::string_view b) override {
        parts.back().append(b);
        return Status::ok();
    }
    Status endPart() override { return Status::ok(); }
};

TEST(MultipartBoundary, ReadsQuotedAndPlainBoundaries) {
    auto a = multipartBoundary("multipart/related; type=\"application/dicom\"; boundary=\"a;b c\"",
                               "application/dicom", "u");
    ASSERT_TRUE(a.isOk()) << a.status().toString();
    EXPECT_EQ(*a, "a;b c");
    auto b = multipartBoundary("Multipart/Related;boundary=XyZ", "application/dicom", "u");
    ASSERT_TRUE(b.isOk());
    EXPECT_EQ(*b, "XyZ");
}

TEST(MultipartBoundary, RefusesOtherContentWithAClearMessage) {
    auto json = multipartBoundary("application/json", "application/dicom", "http://x/studies");
    ASSERT_FALSE(json.isOk());
    EXPECT_EQ(json.status().subject(), "http://x/studies");
    EXPECT_NE(json.status().message().find("application/json"), std::string::npos);
    EXPECT_NE(json.status().message().find("multipart/related"), std::string::npos);
    auto other = multipartBoundary("multipart/related; type=\"image/jpeg\"; boundary=b",
                                   "application/dicom", "u");
    ASSERT_FALSE(other.isOk());
    EXPECT_NE(other.status().message().find("image/jpeg"), std::string::npos);
    auto none = multipartBoundary("multipart/related; type=\"application/dicom\"",
                                  "application/dicom", "u");
    ASSERT_FALSE(none.isOk());
    EXPECT_NE(none.status().message().find("boundary"), std::string::npos);
}

const std::string kBody =
    "preamble\r\n--BND\r\nContent-Type: application/dicom\r\n\r\nDICM\r\n--BN\r\n-0"
    "\r\n--BND  \r\nContent-Type: application/dicom; transfer-syntax=1.2\r\n\r\n"
    "\r\n--BN\r\n--BND--\r\nepilogue";

TEST(MultipartReader, SplitsPartsWhateverTheChunks) {
    // Every split point of the body into two chunks, and one byte at a time.
    for (size_t cut = 0; cut <= kBody.size(); ++cut) {
        Collect c;
        MultipartReader r("BND", &c, "u");
        ASSERT_TRUE(r.feed(std::string_view(kBody).substr(0, cut)).isOk());
        ASSERT_TRUE(r.feed(std::string_view(kBody).substr(cut)).isOk());
        ASSERT_TRUE(r.finish().isOk()) << cut;
        ASSERT_EQ(c.parts.size(), 2u) << cut;
        EXPECT_EQ(c.parts[0], "DICM\r\n--BN\r\n-0") << cut;
        EXPECT_EQ(c.parts[1], "\r\n--BN") << cut;
        EXPECT_EQ(c.types[1], "application/dicom; transfer-syntax=1.2");
    }
    Collect c;
    MultipartReader r("BND", &c, "u");
    for (char ch : kBody) ASSERT_TRUE(r.feed(std::string_view(&ch, 1)).isOk());
    EXPECT_TRUE(r.finish().isOk());
    EXPECT_EQ(c.parts.size(), 2u);
    // The first boundary at the very start of the body (no preamble, no CRLF before it).
    Collect d;
    MultipartReader s("B", &d, "u");
    ASSERT_TRUE(s.feed("--B\r\n\r\nxy\r\n--B--").isOk());
    EXPECT_TRUE(s.finish().isOk());
    ASSERT_EQ(d.parts.size(), 1u);
    EXPECT_EQ(d.parts[0], "xy");
}

TEST(MultipartReader, RefusesTruncatedAndMalformedBodies) {
    {
        Collect c;
        MultipartReader r("BND", &c, "http://x");
        ASSERT_TRUE(r.feed(kBody.substr(0, kBody.find("--BND--"))).isOk());
        const Status s = r.finish();
        ASSERT_FALSE(s.isOk());
        EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.toString();
        EXPECT_EQ(s.subject(), "http://x");
    }
    {
        Collect c;
        MultipartReader r("BND", &c, "u");
        ASSERT_TRUE(r.feed("{\"not\": \"multipart\"}").isOk());
        EXPECT_FALSE(r.finish().isOk());
    }
    {
        Collect c;
        MultipartReader r("BND", &c, "u");
        EXPECT_FALSE(r.feed("--BNDgarbage\r\n\r\nx\r\n--BND--").isOk());
    }
    {
        Collect c;
        MultipartReader r("BND", &c, "u");
        EXPECT_FALSE(r.feed("--BND\r\nno colon here\r\n\r\nx\r\n--BND--").isOk());
    }
    {
        Collect c;
        MultipartReader r("BND", &c, "u");
        const Status s = r.feed("--BND\r\n" + std::string(20000, 'h'));
        EXPECT_FALSE(s.isOk());
    }
}

}  // namespace
}  // namespace voxseg::io
