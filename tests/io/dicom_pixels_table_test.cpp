// Every file of pydicom-test-files and pydicom-data: either it decodes to exactly the values of an
// independent reference decode (GDCM via tools/gen_pixel_checksums.py, checksums committed in
// tests/io/data/pixel_checksums.tsv) or it fails with a clean Status naming the file. Colour,
// non-image and malformed files are in the table too and must never crash the reader.
#include "io/dicom_pixels.h"
#include "tests/test_data.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <vector>

namespace voxseg::io {
namespace {

using voxseg::testing::sharedData;

struct Expected {
    std::string path;
    bool has_reference = false;
    std::string reason;  // noref: why there is no reference
    int64_t rows = 0, columns = 0, frames = 0;
    uint64_t hash = 0;
    int64_t min = 0, max = 0;
};

std::vector<Expected> loadTable() {
    std::ifstream in(std::string(VOXSEG_SOURCE_DIR) + "/tests/io/data/pixel_checksums.tsv");
    std::vector<Expected> table;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::vector<std::string> f;
        std::stringstream ss(line);
        std::string cell;
        while (std::getline(ss, cell, '\t')) f.push_back(cell);
        Expected e;
        e.path = f.at(0);
        e.has_reference = f.at(1) == "ok";
        if (e.has_reference) {
            e.rows = std::stoll(f.at(3));
            e.columns = std::stoll(f.at(4));
            e.frames = std::stoll(f.at(5));
            e.hash = std::stoull(f.at(6), nullptr, 16);
            e.min = std::stoll(f.at(7));
            e.max = std::stoll(f.at(8));
        } else {
            e.reason = f.size() > 2 ? f[2] : "";
        }
        table.push_back(e);
    }
    return table;
}

// Files with a monochrome reference that voxseg refuses on purpose, with the reason.
const std::map<std::string, std::string>& expectedRefusals() {
    static const std::map<std::string, std::string> refusals = {
        // DCMTK 3.6.7's bundled CharLS rejects this 7-bit-in-8 JPEG-LS stream ("Invalid
        // compressed image data"); the error tells the user to convert with gdcmconv -w.
        {"pydicom-data/JLSL_08_07_0_1F.dcm", "DCMTK JPEG-LS decoder rejects 7-bit precision"},
    };
    return refusals;
}

uint64_t fnv1a(const std::vector<int32_t>& values) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (int32_t v : values) {
        const auto u = static_cast<uint32_t>(v);
        for (int b = 0; b < 4; ++b) {
            h ^= (u >> (8 * b)) & 0xFF;
            h *= 0x100000001B3ull;
        }
    }
    return h;
}

// Decodes all frames; returns the status of the first failure.
Status decodeAll(const std::string& path, PixelFormat* format, std::vector<int32_t>* values) {
    auto reader = DicomPixelReader::open(path);
    if (!reader.isOk()) return reader.status();
    *format = reader->format();
    const int64_t n = format->pixelsPerFrame();
    values->assign(static_cast<size_t>(n * format->frames), 0);
    for (int64_t f = 0; f < format->frames; ++f)
        VOXSEG_RETURN_IF_ERROR(reader->readFrame(f, std::span<int32_t>(*values).subspan(f * n, n)));
    return Status::ok();
}

TEST(DicomPixelsTable, EveryFileDecodesLikeTheReferenceOrFailsCleanly) {
    VOXSEG_REQUIRE_DATA("pydicom-test-files");
    VOXSEG_REQUIRE_DATA("pydicom-data");
    const auto table = loadTable();
    ASSERT_GT(table.size(), 150u) << "tests/io/data/pixel_checksums.tsv missing or short";
    int matched = 0, refused = 0, clean_errors = 0, decoded_without_reference = 0;
    for (const Expected& e : table) {
        const std::string path = sharedData(e.path).string();
        SCOPED_TRACE(e.path);
        PixelFormat format;
        std::vector<int32_t> values;
        const Status s = decodeAll(path, &format, &values);
        if (!s.isOk()) {
            EXPECT_EQ(s.subject(), path) << s.toString();
            EXPECT_FALSE(s.message().empty());
            if (e.has_reference) {
                EXPECT_TRUE(expectedRefusals().count(e.path))
                    << "the reference decodes this file but voxseg says: " << s.toString();
                ++refused;
            } else {
                ++clean_errors;
            }
            continue;
        }
        if (!e.has_reference) {
            ++decoded_without_reference;
            continue;
        }
        EXPECT_EQ(format.rows, e.rows);
        EXPECT_EQ(format.columns, e.columns);
        EXPECT_EQ(format.frames, e.frames);
        const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
        const uint64_t hash = fnv1a(values);
        EXPECT_EQ(hash, e.hash) << fmt::format("{} decoded min {} max {}, reference min {} max {}",
                                               format.transfer_syntax_uid, *lo, *hi, e.min, e.max);
        if (hash == e.hash) ++matched;
    }
    std::cout << fmt::format(
        "{} files: {} equal to the reference, {} refused on purpose, {} "
        "clean errors, {} decoded without a reference\n",
        table.size(), matched, refused, clean_errors, decoded_without_reference);
}

}  // namespace
}  // namespace voxseg::io
