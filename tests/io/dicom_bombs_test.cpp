// Crafted bombs against the DICOM readers (issue 19 part 3): a deflated file that inflates far
// beyond its size, an encapsulated JPEG 2000 frame whose header claims far more than the file
// holds. Each is refused with a message naming the file, the claim and the limit (core/limits.h),
// before anything of the claimed size is allocated. The files are written byte by byte here
// (explicit VR little endian), so nothing of the claimed size exists on disk either.
#include "core/limits.h"
#include "io/dicom_header.h"
#include "io/dicom_inflate_guard.h"
#include "io/dicom_pixels.h"
#include "io/dicom_series.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <sys/resource.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace voxseg::io {
namespace {
using voxseg::testing::TempDir;

std::string le16(uint16_t v) { return {char(v & 0xff), char(v >> 8)}; }
std::string le32(uint32_t v) { return le16(v & 0xffff) + le16(v >> 16); }

// One explicit VR little endian element (short or long length form by VR).
std::string element(uint16_t group, uint16_t elem, const std::string& vr, std::string value) {
    if (value.size() % 2) value += vr == "UI" || vr == "OB" ? '\0' : ' ';
    const bool long_form = vr == "OB" || vr == "OW" || vr == "SQ" || vr == "UN";
    return le16(group) + le16(elem) + vr +
           (long_form ? le16(0) + le32(uint32_t(value.size())) : le16(uint16_t(value.size()))) +
           value;
}
std::string us(uint16_t group, uint16_t elem, uint16_t v) {
    return element(group, elem, "US", le16(v));
}

struct Spec {
    std::string syntax = "1.2.840.10008.1.2.1";
    uint16_t rows = 64, columns = 64;
};

std::string meta(const Spec& s) {
    std::string m = element(2, 1, "OB", std::string("\0\1", 2)) +
                    element(2, 2, "UI", "1.2.840.10008.5.1.4.1.1.2") +
                    element(2, 3, "UI", "1.2.3.4.5.6.7") + element(2, 0x10, "UI", s.syntax);
    return std::string(128, '\0') + "DICM" + element(2, 0, "UL", le32(uint32_t(m.size()))) + m;
}

// The image attributes up to (not including) Pixel Data, in ascending tag order.
std::string imageHeader(const Spec& s) {
    return element(8, 0x16, "UI", "1.2.840.10008.5.1.4.1.1.2") +
           element(8, 0x18, "UI", "1.2.3.4.5.6.7") + element(8, 0x60, "CS", "CT") +
           element(0x20, 0xd, "UI", "1.2.3.4") + element(0x20, 0xe, "UI", "1.2.3.4.1") +
           element(0x20, 0x13, "IS", "1") + element(0x20, 0x32, "DS", "0\\0\\0") +
           element(0x20, 0x37, "DS", "1\\0\\0\\0\\1\\0") + us(0x28, 2, 1) +
           element(0x28, 4, "CS", "MONOCHROME2") + us(0x28, 0x10, s.rows) +
           us(0x28, 0x11, s.columns) + element(0x28, 0x30, "DS", "1\\1") + us(0x28, 0x100, 16) +
           us(0x28, 0x101, 16) + us(0x28, 0x102, 15) + us(0x28, 0x103, 1);
}

// A deflated file whose private element (0029,1010) holds `filler` zero bytes before a 64x64
// frame: a few hundred bytes of header, `filler` / ~1000 bytes on disk.
std::string writeDeflated(const TempDir& dir, const std::string& name, uint64_t filler) {
    Spec s;
    s.syntax = "1.2.840.10008.1.2.1.99";
    const std::string path = dir / name;
    std::ofstream out(path, std::ios::binary);
    out << meta(s);
    z_stream z{};
    deflateInit2(&z, 9, Z_DEFLATED, -MAX_WBITS, 9, Z_DEFAULT_STRATEGY);
    std::vector<char> buf(1 << 20);
    auto feed = [&](const std::string& bytes, int flush) {
        z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
        z.avail_in = uInt(bytes.size());
        do {
            z.next_out = reinterpret_cast<Bytef*>(buf.data());
            z.avail_out = uInt(buf.size());
            deflate(&z, flush);
            out.write(buf.data(), std::streamsize(buf.size() - z.avail_out));
        } while (z.avail_out == 0);
    };
    const std::string zeros(1 << 22, '\0');
    auto feedZeros = [&](uint64_t n) {
        for (; n > 0; n -= std::min<uint64_t>(n, zeros.size()))
            feed(zeros.substr(0, std::min<uint64_t>(n, zeros.size())), Z_NO_FLUSH);
    };
    feed(imageHeader(s) + element(0x29, 0x10, "LO", "BOMB"), Z_NO_FLUSH);
    if (filler > 0) {
        feed(le16(0x29) + le16(0x1010) + "OB" + le16(0) + le32(uint32_t(filler)), Z_NO_FLUSH);
        feedZeros(filler);
    }
    feed(le16(0x7fe0) + le16(0x10) + "OW" + le16(0) + le32(64 * 64 * 2), Z_NO_FLUSH);
    feedZeros(64 * 64 * 2);
    feed({}, Z_FINISH);
    deflateEnd(&z);
    return path;
}

long maxRssMb() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss / 1024;
}

TEST(DicomBombs, SmallDeflatedFileStillDecodes) {
    TempDir dir;
    const std::string path = writeDeflated(dir, "ok.dcm", 0);
    EXPECT_TRUE(checkInflatedSize(path).isOk());
    auto reader = DicomPixelReader::open(path);
    ASSERT_TRUE(reader.isOk()) << reader.status().toString();
    std::vector<int32_t> frame(64 * 64, 7);
    ASSERT_TRUE(reader->readFrame(0, frame).isOk());
    EXPECT_EQ(frame[100], 0);
    // The same file against a limit below its 8 KB of pixels: the check can fail.
    const Status small = checkInflatedSize(path, 4096);
    EXPECT_FALSE(small.isOk());
    EXPECT_NE(small.toString().find("limit 4096 bytes"), std::string::npos) << small.toString();
}

// The limits in force (readLimits(), set from --max-inflated-bytes and --max-frame-bytes by the
// command line) are the ones the readers apply, and their refusals name the options.
TEST(DicomBombs, LimitsInForceApplyAndTheRefusalNamesTheOption) {
    TempDir dir;
    const std::string path = writeDeflated(dir, "ok.dcm", 0);
    const ReadLimits defaults = readLimits();
    ReadLimits lower = defaults;
    lower.inflated_bytes_per_file = 4096;
    setReadLimits(lower);
    auto inflated = DicomPixelReader::open(path);
    lower = defaults;
    lower.frame_bytes = 1000;  // a 64 x 64 x 16-bit frame holds 8192
    setReadLimits(lower);
    auto frame = DicomPixelReader::open(path);
    setReadLimits(defaults);
    ASSERT_FALSE(inflated.isOk());
    EXPECT_NE(inflated.status().toString().find("limit 4096 bytes per file"), std::string::npos);
    EXPECT_NE(inflated.status().toString().find("--max-inflated-bytes"), std::string::npos)
        << inflated.status().toString();
    ASSERT_FALSE(frame.isOk());
    EXPECT_NE(frame.status().toString().find("(8192 bytes) > limit 1000 bytes per frame"),
              std::string::npos)
        << frame.status().toString();
    EXPECT_NE(frame.status().toString().find("--max-frame-bytes"), std::string::npos);
    EXPECT_TRUE(DicomPixelReader::open(path).isOk());  // the defaults again
}

TEST(DicomBombs, DeflateBombRefusedBeforeInflatingIntoMemory) {
    TempDir dir;
    const uint64_t claim = kMaxInflatedBytesPerFile + (uint64_t{64} << 20);
    const std::string path = writeDeflated(dir, "bomb.dcm", claim);
    const auto size = std::filesystem::file_size(path);
    EXPECT_LT(size, claim / 500) << "not a bomb";
    const long rss_before = maxRssMb();
    auto reader = DicomPixelReader::open(path);
    ASSERT_FALSE(reader.isOk());
    const std::string msg = reader.status().toString();
    EXPECT_NE(msg.find("bomb.dcm"), std::string::npos) << msg;
    EXPECT_NE(msg.find("limit " + std::to_string(kMaxInflatedBytesPerFile)), std::string::npos)
        << msg;
    // The header scan skips it with the same reason.
    const FileHeaders h = readDicomHeaders(path);
    EXPECT_TRUE(h.frames.empty());
    EXPECT_NE(h.skip_reason.find("inflates to more than"), std::string::npos) << h.skip_reason;
    EXPECT_LT(maxRssMb() - rss_before, 100) << "inflated into memory";
    std::cout << size << " bytes on disk, refused (" << msg << ")\n";
}

// An encapsulated JPEG 2000 file claiming one 65535 x 65535 frame (8.6 GB decoded) in a few
// hundred bytes: refused from the header, before OpenJPEG sees the codestream.
TEST(DicomBombs, Jpeg2000FrameClaimRefusedBeforeDecoding) {
    TempDir dir;
    Spec s;
    s.syntax = "1.2.840.10008.1.2.4.90";
    s.rows = s.columns = 65535;
    const std::string codestream("\xff\x4f\xff\x51\x00\x29", 6);  // SOC, SIZ...: never read
    const std::string pixels = le16(0x7fe0) + le16(0x10) + "OB" + le16(0) + le32(0xffffffff) +
                               le16(0xfffe) + le16(0xe000) + le32(0) + le16(0xfffe) + le16(0xe000) +
                               le32(uint32_t(codestream.size())) + codestream + le16(0xfffe) +
                               le16(0xe0dd) + le32(0);
    const std::string path = dir / "j2k-bomb.dcm";
    std::ofstream(path, std::ios::binary) << meta(s) << imageHeader(s) << pixels;
    const long rss_before = maxRssMb();
    auto reader = DicomPixelReader::open(path);
    ASSERT_FALSE(reader.isOk());
    const std::string msg = reader.status().toString();
    EXPECT_NE(msg.find("j2k-bomb.dcm"), std::string::npos) << msg;
    EXPECT_NE(msg.find("65535 x 65535"), std::string::npos) << msg;
    EXPECT_NE(msg.find("limit " + std::to_string(kMaxFrameBytes)), std::string::npos) << msg;
    EXPECT_LT(maxRssMb() - rss_before, 100);
}

// A native file whose header promises 4096 x 4096 pixels but whose Pixel Data holds 8 bytes:
// refused naming both sizes, nothing of the promised size allocated.
TEST(DicomBombs, HeaderPromisingMoreThanTheFileHoldsRefused) {
    TempDir dir;
    Spec s;
    s.rows = s.columns = 4096;
    const std::string path = dir / "short.dcm";
    std::ofstream(path, std::ios::binary)
        << meta(s) << imageHeader(s) << element(0x7fe0, 0x10, "OW", std::string(8, '\0'));
    const long rss_before = maxRssMb();
    auto reader = DicomPixelReader::open(path);
    ASSERT_FALSE(reader.isOk());
    const std::string msg = reader.status().toString();
    EXPECT_NE(msg.find("short.dcm"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Pixel Data holds 8 bytes but 1 frame(s) of 4096x4096 at 16 bits need "
                       "33554432"),
              std::string::npos)
        << msg;
    EXPECT_LT(maxRssMb() - rss_before, 30);
}

// A folder with more files than the scan's limit is refused while listing, naming the folder
// and the limit; at the limit it is scanned (and holds no DICOM here).
TEST(DicomBombs, TooManyFilesRefusedWhileListing) {
    TempDir dir;
    std::filesystem::create_directories(dir.path() / "study" / "sub");
    for (int i = 0; i < 31; ++i)
        std::ofstream(dir / ("study/" + std::string(i % 2 ? "sub/" : "") + std::to_string(i)))
            << "x";
    DicomScanOptions options;
    options.max_files = 30;
    auto scan = scanDicom({dir / "study"}, options);
    ASSERT_FALSE(scan.isOk());
    const std::string msg = scan.status().toString();
    EXPECT_NE(msg.find("study"), std::string::npos) << msg;
    EXPECT_NE(msg.find("limit 30 files"), std::string::npos) << msg;
    options.max_files = 31;
    scan = scanDicom({dir / "study"}, options);
    ASSERT_FALSE(scan.isOk());
    EXPECT_EQ(scan.status().toString().find("limit 31"), std::string::npos);
}

}  // namespace
}  // namespace voxseg::io
