// Image bombs (issue 35, "memory only after trust"): NIfTI (.nii, .nii.gz), NRRD (raw, gzip) and
// MetaImage (raw, zlib) files whose headers claim 1250^3 float64 voxels (15.6 GB, under
// --max-voxels) with a few bytes of data, a gzip stream that inflates far past its header's
// claim, a claim over the memory this process may use, and a claim over --max-inflated-bytes.
// Each read runs in a child process under a memory cap (tests/io/memory_cap.h: a memory cgroup
// where one can be made, else RLIMIT_AS) so that a reader that allocates what the header claims
// is stopped by the kernel, not the machine; the child's peak RSS and time are checked. Before
// the fix, the 1,376-byte .nii held 15.4 GB for 40 s before it was found truncated.
#include "core/limits.h"
#include "io/dicom_series.h"
#include "io/dicom_synth.h"
#include "io/image_io.h"
#include "tests/io/memory_cap.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace voxseg::io {
namespace {
namespace fs = std::filesystem;
using voxseg::testing::CappedRun;
using voxseg::testing::runCapped;
using voxseg::testing::TempDir;

constexpr uint64_t kMiB = uint64_t{1} << 20;
// The cap of every read here: far below the 15.6 GB the bombs claim, far above what refusing
// them takes.
constexpr uint64_t kCap = uint64_t{1} << 30;
// A refusal before allocation costs the test binary's own pages (ITK, DCMTK: about 50 MB).
constexpr int64_t kMostRssOfARefusal = 200 * kMiB;
constexpr int kBomb = 1250;  // 1250^3 float64 = 15.6 GB, 1.95e9 voxels < 2e9 (--max-voxels)

// A NIfTI-1 header (352 bytes: 348 and an empty extension flag) for nx x ny x nz voxels of
// `datatype` (2 uint8, 64 float64) and `bitpix` bits.
std::string niftiHeader(int nx, int ny, int nz, int16_t datatype, int16_t bitpix) {
    std::string h(352, '\0');
    auto put16 = [&](int off, int16_t v) { std::memcpy(&h[off], &v, 2); };
    auto put32 = [&](int off, int32_t v) { std::memcpy(&h[off], &v, 4); };
    auto putf = [&](int off, float v) { std::memcpy(&h[off], &v, 4); };
    put32(0, 348);
    put16(40, 3);
    put16(42, static_cast<int16_t>(nx));
    put16(44, static_cast<int16_t>(ny));
    put16(46, static_cast<int16_t>(nz));
    for (int d = 4; d <= 7; ++d) put16(40 + 2 * d, 1);
    put16(70, datatype);
    put16(72, bitpix);
    for (int d = 0; d <= 3; ++d) putf(76 + 4 * d, 1.0f);
    putf(108, 352.0f);
    putf(112, 1.0f);  // scl_slope
    h[123] = 10;      // xyzt_units: mm, s
    put16(252, 1);    // qform_code: scanner
    std::memcpy(&h[344], "n+1", 4);
    return h;
}

std::string write(const TempDir& dir, const std::string& name, const std::string& bytes) {
    const std::string path = dir / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}

std::string randomBytes(size_t n) {
    std::mt19937 rng(35);
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
}

// `windowBits` 31: gzip, 15: zlib. Random data stays about its own size.
std::string deflated(const std::string& data, int window_bits) {
    z_stream z{};
    EXPECT_EQ(deflateInit2(&z, 1, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY), Z_OK);
    std::string out(deflateBound(&z, data.size()) + 32, '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z.avail_in = static_cast<uInt>(data.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
    out.resize(z.total_out);
    deflateEnd(&z);
    return out;
}

// `prefix`, then `zeros` zero bytes, as one gzip stream written in pieces (never in memory).
std::string writeGzipZeros(const TempDir& dir, const std::string& name, const std::string& prefix,
                           uint64_t zeros) {
    const std::string path = dir / name;
    gzFile f = gzopen(path.c_str(), "wb1");
    EXPECT_NE(f, nullptr);
    gzwrite(f, prefix.data(), static_cast<unsigned>(prefix.size()));
    const std::vector<char> piece(4 * kMiB, 0);
    for (uint64_t left = zeros; left > 0;) {
        const auto n = static_cast<unsigned>(std::min<uint64_t>(left, piece.size()));
        gzwrite(f, piece.data(), n);
        left -= n;
    }
    gzclose(f);
    return path;
}

std::string nrrdHeader(const std::string& type, int n, const std::string& encoding) {
    const std::string s = std::to_string(n);
    return "NRRD0004\ntype: " + type + "\ndimension: 3\nsizes: " + s + " " + s + " " + s +
           "\nspacings: 1 1 1\nendian: little\nencoding: " + encoding + "\n\n";
}

std::string mhaHeader(const std::string& type, int n, const std::string& compressed_size) {
    const std::string s = std::to_string(n);
    std::string h =
        "ObjectType = Image\nNDims = 3\nBinaryData = True\n"
        "BinaryDataByteOrderMSB = False\nElementSpacing = 1 1 1\nDimSize = " +
        s + " " + s + " " + s + "\nElementType = " + type + "\n";
    if (!compressed_size.empty())
        h += "CompressedData = True\nCompressedDataSize = " + compressed_size + "\n";
    return h + "ElementDataFile = LOCAL\n";
}

struct CappedRead {
    CappedRun run;
    StatusCode code = StatusCode::kInternal;
    std::string message;
};

// `read` in a child under `cap`, with `limits` in force there; `name` for the log.
CappedRead runRead(const TempDir& dir, const std::string& name, uint64_t cap,
                   const ReadLimits& limits, const std::function<Status()>& read) {
    const std::string message_file = dir / ".message";
    CappedRead r;
    r.run = runCapped(cap, [&] {
        setReadLimits(limits);
        const Status st = read();
        std::ofstream(message_file) << st.toString();
        return static_cast<int>(st.code());
    });
    r.code =
        r.run.exit_code < 64 ? static_cast<StatusCode>(r.run.exit_code) : StatusCode::kInternal;
    std::ifstream in(message_file);
    std::getline(in, r.message, '\0');
    std::cerr << "  " << name << ": exit " << r.run.exit_code << ", peak RSS "
              << (r.run.peak_rss >> 20) << " MiB, " << r.run.seconds << " s: " << r.message << "\n";
    return r;
}

// readImage(path) in a child under kCap (or `cap`), with `limits` in force there.
CappedRead readCapped(const TempDir& dir, const std::string& path, uint64_t cap = kCap,
                      const ReadLimits& limits = {}) {
    return runRead(dir, fs::path(path).filename().string(), cap, limits,
                   [&] { return readImage(path).status(); });
}

// A refusal as `code` before anything of the claimed size was allocated: quick, small.
void expectRefusedEarly(const CappedRead& r, StatusCode code, const std::string& words) {
    EXPECT_EQ(r.run.exit_code, static_cast<int>(code))
        << "(137 = killed at the memory cap: the reader allocated the claim) " << r.message;
    EXPECT_NE(r.message.find(words), std::string::npos) << r.message;
    EXPECT_LT(r.run.peak_rss, kMostRssOfARefusal) << r.run.how;
    EXPECT_LT(r.run.seconds, 20.0);
}

TEST(ImageBombs, CraftedFilesReadWhenTheyHoldWhatTheyClaim) {
    // The bombs' headers are ones the readers accept: the same headers with their data read.
    TempDir dir;
    const std::string data(16 * 16 * 16, '\7');
    const std::vector<std::string> files = {
        write(dir, "ok.nii", niftiHeader(16, 16, 16, 2, 8) + data),
        write(dir, "ok.nii.gz", deflated(niftiHeader(16, 16, 16, 2, 8) + data, 31)),
        write(dir, "ok.nrrd", nrrdHeader("uchar", 16, "raw") + data),
        write(dir, "okgz.nrrd", nrrdHeader("uchar", 16, "gzip") + deflated(data, 31)),
        write(dir, "ok.mha", mhaHeader("MET_UCHAR", 16, "") + data),
        write(dir, "okz.mha",
              mhaHeader("MET_UCHAR", 16, std::to_string(deflated(data, 15).size())) +
                  deflated(data, 15)),
    };
    for (const auto& f : files) {
        const auto r = readCapped(dir, f);
        EXPECT_EQ(r.run.exit_code, 0) << f << ": " << r.message;
    }
}

// Issue 35's file: 1,376 bytes claiming 1250^3 float64. Before: ITK allocated and zero-filled
// 15.6 GB (15.4 GB RSS for 40 s) before the truncation check that ran beside it answered.
TEST(ImageBombs, NiftiClaimingMoreThanTheFileHoldsIsRefusedBeforeAllocating) {
    TempDir dir;
    const std::string bomb = niftiHeader(kBomb, kBomb, kBomb, 64, 64) + randomBytes(1376 - 352);
    ASSERT_EQ(bomb.size(), 1376u);
    expectRefusedEarly(readCapped(dir, write(dir, "bomb.nii", bomb)), StatusCode::kCorruptData,
                       "truncated");
}

TEST(ImageBombs, NiftiGzTooSmallToHoldItsClaimIsRefusedBeforeInflating) {
    TempDir dir;
    const std::string bomb =
        deflated(niftiHeader(kBomb, kBomb, kBomb, 64, 64) + randomBytes(64 * 1024), 31);
    const auto r = readCapped(dir, write(dir, "bomb.nii.gz", bomb));
    expectRefusedEarly(r, StatusCode::kCorruptData, "cannot inflate to more than");
}

TEST(ImageBombs, NrrdRawAndGzipClaimingMoreThanTheFileHoldsAreRefused) {
    TempDir dir;
    const auto raw = readCapped(
        dir, write(dir, "raw.nrrd", nrrdHeader("double", kBomb, "raw") + randomBytes(4096)));
    expectRefusedEarly(raw, StatusCode::kCorruptData, "truncated");
    const auto gz = readCapped(
        dir, write(dir, "gz.nrrd",
                   nrrdHeader("double", kBomb, "gzip") + deflated(randomBytes(4096), 31)));
    expectRefusedEarly(gz, StatusCode::kCorruptData, "cannot inflate to more than");
    // Detached header, raw data file of 4 KiB.
    write(dir, "bomb.raw", randomBytes(4096));
    const auto detached = readCapped(
        dir, write(dir, "bomb.nhdr",
                   "NRRD0004\ntype: double\ndimension: 3\nsizes: 1250 1250 1250\nspacings: 1 1 "
                   "1\nendian: little\nencoding: raw\ndata file: bomb.raw\n"));
    expectRefusedEarly(detached, StatusCode::kCorruptData, "truncated");
}

TEST(ImageBombs, MetaImageRawAndZlibClaimingMoreThanTheFileHoldsAreRefused) {
    TempDir dir;
    const auto raw = readCapped(
        dir, write(dir, "raw.mha", mhaHeader("MET_DOUBLE", kBomb, "") + randomBytes(4096)));
    expectRefusedEarly(raw, StatusCode::kCorruptData, "truncated");
    const std::string z = deflated(randomBytes(4096), 15);
    const auto zlib = readCapped(
        dir, write(dir, "z.mha", mhaHeader("MET_DOUBLE", kBomb, std::to_string(z.size())) + z));
    expectRefusedEarly(zlib, StatusCode::kCorruptData, "cannot inflate to more than");
}

// A stream that inflates to 512 MiB under a header claiming 32 KiB: only the claim is inflated
// (each reader stops one byte past it), so the read is quick and small and the volume the
// header's.
TEST(ImageBombs, GzipInflatingPastTheHeadersClaimStopsAtTheClaim) {
    TempDir dir;
    const uint64_t zeros = 512 * kMiB;
    const std::string nii =
        writeGzipZeros(dir, "long.nii.gz", niftiHeader(32, 32, 32, 2, 8), zeros);
    const std::string nrrd_body = writeGzipZeros(dir, "body.gz", "", zeros);
    std::ifstream in(nrrd_body, std::ios::binary);
    const std::string gz((std::istreambuf_iterator<char>(in)), {});
    const std::string nrrd = write(dir, "long.nrrd", nrrdHeader("uchar", 32, "gzip") + gz);
    for (const auto& f : {nii, nrrd}) {
        const auto r = readCapped(dir, f, 512 * kMiB);
        EXPECT_EQ(r.run.exit_code, 0) << f << ": " << r.message;
        EXPECT_LT(r.run.peak_rss, kMostRssOfARefusal) << f;
        EXPECT_LT(r.run.seconds, 20.0) << f;
    }
}

// A claim the data could hold (1 GiB of float64 from a 1.2 MB stream: within deflate's 1032:1)
// but more than the memory this process may use (the cap: a cgroup's limit or RLIMIT_AS, both
// of which core/memory_limit sees) is kOutOfMemory with advice, before anything is allocated.
// Before: ITK allocated twice the claim and the cgroup killed the process (exit 137).
TEST(ImageBombs, ClaimOverTheMemoryLimitIsOutOfMemoryBeforeAllocating) {
    if (!voxseg::testing::memoryCapAvailable(768 * kMiB))
        GTEST_SKIP() << "no memory cap here (AddressSanitizer build, no writable memory cgroup)";
    TempDir dir;
    const int n = 512;  // 512^3 float64 = 1 GiB
    const std::string body = randomBytes(1200 * 1000);
    const std::string nii =
        write(dir, "big.nii.gz", deflated(niftiHeader(n, n, n, 64, 64) + body, 31));
    const std::string nrrd =
        write(dir, "big.nrrd", nrrdHeader("double", n, "gzip") + deflated(body, 31));
    const std::string z = deflated(body, 15);
    const std::string mha =
        write(dir, "big.mha", mhaHeader("MET_DOUBLE", n, std::to_string(z.size())) + z);
    ReadLimits limits;
    limits.inflated_image_bytes = uint64_t{1} << 40;  // the memory check alone
    for (const auto& f : {nii, nrrd, mha}) {
        const auto r = readCapped(dir, f, 768 * kMiB, limits);
        expectRefusedEarly(r, StatusCode::kOutOfMemory, "more memory");
        EXPECT_NE(r.message.find("GiB of memory"), std::string::npos) << r.message;
    }
}

// --max-inflated-bytes bounds every format's compressed data, not only deflated DICOM: a
// 32 KiB claim under a 16 KiB limit is refused naming the option (before: read).
TEST(ImageBombs, MaxInflatedBytesAppliesToEveryCompressedFormat) {
    TempDir dir;
    const std::string data = randomBytes(32 * 32 * 32);
    const std::string z = deflated(data, 15);
    const std::vector<std::string> files = {
        write(dir, "a.nii.gz", deflated(niftiHeader(32, 32, 32, 2, 8) + data, 31)),
        write(dir, "a.nrrd", nrrdHeader("uchar", 32, "gzip") + deflated(data, 31)),
        write(dir, "a.mha", mhaHeader("MET_UCHAR", 32, std::to_string(z.size())) + z),
    };
    ReadLimits lower;
    lower.inflated_image_bytes = 16 * 1024;
    for (const auto& f : files) {
        const auto r = readCapped(dir, f, kCap, lower);
        expectRefusedEarly(r, StatusCode::kUnsupported, "--max-inflated-bytes");
        EXPECT_EQ(readCapped(dir, f).run.exit_code, 0) << f;  // the default limit: read
    }
}

// DICOM: a series within --max-voxels whose volume does not fit the memory this process may use
// is kOutOfMemory before decoding. Before: the float values were allocated and filled (403 MB
// here), and a cgroup's limit killed the process.
TEST(ImageBombs, DicomSeriesOverTheMemoryLimitIsOutOfMemoryBeforeDecoding) {
    if (!voxseg::testing::memoryCapAvailable(320 * kMiB))
        GTEST_SKIP() << "no memory cap here (AddressSanitizer build, no writable memory cgroup)";
    TempDir dir;
    SynthSeriesSpec spec;
    spec.columns = 1024;
    spec.rows = 1024;
    spec.slices = 48;
    spec.slope = 0.5;  // not integral: float32 values, then a float32 volume (8 bytes a voxel)
    spec.value = [](int i, int j, int k) { return (i + j + k) % 1000; };
    ASSERT_TRUE(writeSynthSeries(spec, dir / "ct").isOk());
    const std::string folder = dir / "ct";
    const auto r = runRead(dir, "ct (1024 x 1024 x 48)", 320 * kMiB, {}, [&]() -> Status {
        auto scan = scanDicom({folder}, DicomScanOptions{1});
        if (!scan.isOk()) return scan.status();
        if (scan->series.size() != 1) return internalError("expected one series", folder);
        return loadSeries(scan->series.front(), DicomLoadOptions{.threads = 1}).status();
    });
    expectRefusedEarly(r, StatusCode::kOutOfMemory, "refused before decoding");
    EXPECT_NE(r.message.find("1024 x 1024 x 48"), std::string::npos) << r.message;
    // Under a cap it fits, it loads.
    spec.slices = 4;
    ASSERT_TRUE(writeSynthSeries(spec, dir / "small").isOk());
    const std::string small = dir / "small";
    const auto fits = runRead(dir, "small (1024 x 1024 x 4)", 320 * kMiB, {}, [&]() -> Status {
        auto scan = scanDicom({small}, DicomScanOptions{1});
        if (!scan.isOk()) return scan.status();
        return loadSeries(scan->series.front(), DicomLoadOptions{.threads = 1}).status();
    });
    EXPECT_EQ(fits.run.exit_code, 0) << fits.message;
}

}  // namespace
}  // namespace voxseg::io
