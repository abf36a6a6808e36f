// image_io: every writer -> reader round trip keeps geometry and voxels; .nii.gz is written as
// parallel multi-member gzip that zlib, ITK and nibabel read back; writes are atomic.
#include "io/image_io.h"
#include "io/nifti_gz_writer.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <zlib.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <type_traits>

namespace voxseg::io {
namespace {
namespace fs = std::filesystem;
using voxseg::testing::TempDir;

// NIfTI-1 stores pixdim, quatern and srow as float32 (relative precision 6e-8): geometry must come
// back within 1e-6 of max(1, |value|). NRRD and MetaImage write 17 digits and meet it trivially.
constexpr double kGeomRelTol = 1e-6;
constexpr uint32_t kSeed = 20261130;

bool close(double a, double b) {
    return std::abs(a - b) <= kGeomRelTol * std::max(1.0, std::abs(a));
}

// Oblique (rotated 30 degrees about (1,2,3)), left-handed (one axis flipped), anisotropic grid
// with negative cosines and an origin far from zero.
Geometry obliqueGeometry(std::array<int64_t, 3> size) {
    const double angle = 30.0 * M_PI / 180.0;
    Vec3 u{1, 2, 3};
    const double n = norm(u);
    for (auto& x : u) x /= n;
    const double c = std::cos(angle), s = std::sin(angle), t = 1 - c;
    Mat3 r{t * u[0] * u[0] + c,        t * u[0] * u[1] - s * u[2], t * u[0] * u[2] + s * u[1],
           t * u[0] * u[1] + s * u[2], t * u[1] * u[1] + c,        t * u[1] * u[2] - s * u[0],
           t * u[0] * u[2] - s * u[1], t * u[1] * u[2] + s * u[0], t * u[2] * u[2] + c};
    for (int row = 0; row < 3; ++row) r[row * 3 + 1] = -r[row * 3 + 1];
    Geometry g;
    g.size = size;
    g.spacing = {0.7031249, 0.83, 2.5};
    g.origin = {-123.456789, 87.654321, -301.5};
    g.direction = r;
    return g;
}

template <typename T>
Volume randomVolume(const Geometry& g, uint32_t seed) {
    Volume v = Volume::allocate<T>(g);
    std::mt19937_64 rng(seed);
    T* p = v.data<T>();
    for (int64_t i = 0; i < g.voxelCount(); ++i) {
        if constexpr (std::is_floating_point_v<T>) {
            p[i] = static_cast<T>(std::normal_distribution<double>(0.0, 1000.0)(rng));
        } else {
            p[i] = static_cast<T>(std::uniform_int_distribution<int64_t>(
                std::numeric_limits<T>::min(), std::numeric_limits<T>::max())(rng));
        }
    }
    return v;
}

void expectSameGeometry(const Geometry& a, const Geometry& b, const std::string& what) {
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(a.size[i], b.size[i]) << what << " size[" << i << "]";
        EXPECT_PRED2(close, a.spacing[i], b.spacing[i]) << what << " spacing[" << i << "]";
        EXPECT_PRED2(close, a.origin[i], b.origin[i]) << what << " origin[" << i << "]";
    }
    for (int i = 0; i < 9; ++i)
        EXPECT_PRED2(close, a.direction[i], b.direction[i]) << what << " direction[" << i << "]";
}

template <typename T>
void expectSameVoxels(const Volume& a, const Volume& b, const std::string& what) {
    ASSERT_EQ(b.pixelType(), a.pixelType())
        << what << ": read back as " << pixelTypeName(b.pixelType());
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    int64_t mismatches = 0;
    for (int64_t i = 0; i < a.geometry().voxelCount(); ++i) mismatches += (pa[i] != pb[i]);
    EXPECT_EQ(mismatches, 0) << what;
}

const std::vector<std::string> kExtensions = {".nii", ".nii.gz", ".nrrd", ".nhdr", ".mha", ".mhd"};

template <typename T>
class RoundTripTest : public ::testing::Test {};
using PixelTypes =
    ::testing::Types<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, double>;
TYPED_TEST_SUITE(RoundTripTest, PixelTypes);

TYPED_TEST(RoundTripTest, EveryWriterKeepsGeometryAndVoxels) {
    TempDir dir;
    const Geometry g = obliqueGeometry({13, 11, 7});
    const Volume v = randomVolume<TypeParam>(g, kSeed);
    for (const auto& ext : kExtensions) {
        const std::string path = dir / ("vol" + ext);
        const std::string what = std::string(pixelTypeName(v.pixelType())) + " " + ext;
        ASSERT_TRUE(writeImage(v, path).isOk()) << what;
        auto back = readImage(path);
        ASSERT_TRUE(back.isOk()) << what << ": " << back.status().toString();
        expectSameGeometry(g, back->geometry(), what);
        expectSameVoxels<TypeParam>(v, *back, what);
        EXPECT_EQ(back->info().source, path);
        auto header = readImageHeader(path);
        ASSERT_TRUE(header.isOk()) << what << ": " << header.status().toString();
        expectSameGeometry(back->geometry(), header->geometry, what + " header only");
        EXPECT_EQ(header->pixel_type, v.pixelType()) << what;
        EXPECT_EQ(header->format, imageFormatFromPath(path)) << what;
    }
    // Nothing but the outputs (and detached data files) is left: no temporaries.
    for (const auto& e : fs::directory_iterator(dir.path()))
        EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u) << e.path();
}

TEST(ImageFormat, FromPath) {
    EXPECT_EQ(imageFormatFromPath("a/b.nii.gz"), ImageFormat::kNiftiGz);
    EXPECT_EQ(imageFormatFromPath("A.NII.GZ"), ImageFormat::kNiftiGz);
    EXPECT_EQ(imageFormatFromPath("a.nii"), ImageFormat::kNifti);
    EXPECT_EQ(imageFormatFromPath("a.nhdr"), ImageFormat::kNrrd);
    EXPECT_EQ(imageFormatFromPath("a.nrrd"), ImageFormat::kNrrd);
    EXPECT_EQ(imageFormatFromPath("a.mhd"), ImageFormat::kMetaImage);
    EXPECT_EQ(imageFormatFromPath("a.mha"), ImageFormat::kMetaImage);
    EXPECT_EQ(imageFormatFromPath("a.dcm"), ImageFormat::kUnknown);
    EXPECT_EQ(imageFormatFromPath("a.gz"), ImageFormat::kUnknown);
}

TEST(ImageFormat, ExtensionListIsWhatFromPathDecides) {
    const std::vector<std::string>& list = imageExtensions();
    EXPECT_EQ(list,
              (std::vector<std::string>{".nii.gz", ".nii", ".nrrd", ".nhdr", ".mha", ".mhd"}));
    for (const std::string& ext : list) {
        EXPECT_NE(imageFormatFromPath("a" + ext), ImageFormat::kUnknown) << ext;
        EXPECT_EQ(imageExtension("dir.x/a" + ext), ext);
    }
    EXPECT_EQ(imageExtension("A.NII.GZ"), ".nii.gz");  // as listed, whatever the name's case
    EXPECT_EQ(imageExtension("a.nii.gz.dcm"), "");
    EXPECT_EQ(imageExtension("a.gz"), "");
}

// Decompresses with zlib's gzread, which (like ITK's znzlib) continues across gzip members.
std::vector<uint8_t> gunzip(const std::string& path) {
    std::vector<uint8_t> out;
    gzFile f = gzopen(path.c_str(), "rb");
    if (!f) return out;
    std::vector<uint8_t> buf(1 << 16);
    int n = 0;
    while ((n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()))) > 0)
        out.insert(out.end(), buf.begin(), buf.begin() + n);
    gzclose(f);
    return out;
}

// Counts gzip member headers (1f 8b 08) at member boundaries by walking with zlib's inflate.
int countGzipMembers(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)), {});
    size_t pos = 0;
    int members = 0;
    std::vector<uint8_t> sink(1 << 16);
    while (pos < data.size()) {
        z_stream zs{};
        if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return -1;
        zs.next_in = data.data() + pos;
        zs.avail_in = static_cast<uInt>(data.size() - pos);
        int rc = Z_OK;
        while (rc == Z_OK) {
            zs.next_out = sink.data();
            zs.avail_out = static_cast<uInt>(sink.size());
            rc = inflate(&zs, Z_NO_FLUSH);
        }
        const size_t consumed = zs.total_in;
        inflateEnd(&zs);
        if (rc != Z_STREAM_END) return -1;
        pos += consumed;
        ++members;
    }
    return members;
}

TEST(ParallelGzip, MultiMemberStreamDecompressesToTheInput) {
    TempDir dir;
    std::vector<uint8_t> data(1'000'003);
    std::mt19937 rng(kSeed);
    // Compressible but not trivial: a noisy ramp, like image rows.
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>((i / 7) + rng() % 4);
    const std::string src = dir / "src.bin";
    std::ofstream(src, std::ios::binary)
        .write(reinterpret_cast<const char*>(data.data()),
               static_cast<std::streamsize>(data.size()));
    ParallelGzipOptions opt;
    opt.chunk_bytes = 65536;
    opt.threads = 3;
    const std::string dst = dir / "src.bin.gz";
    ASSERT_TRUE(gzipFileParallel(src, dst, opt).isOk());
    EXPECT_EQ(countGzipMembers(dst), 16);  // ceil(1000003 / 65536)
    EXPECT_EQ(gunzip(dst), data);
    EXPECT_LT(fs::file_size(dst), data.size());
}

TEST(ParallelGzip, EmptyFileGivesValidGzip) {
    TempDir dir;
    const std::string src = dir / "empty";
    std::ofstream(src).close();
    ASSERT_TRUE(gzipFileParallel(src, dir / "empty.gz").isOk());
    EXPECT_EQ(countGzipMembers(dir / "empty.gz"), 1);
    EXPECT_TRUE(gunzip(dir / "empty.gz").empty());
}

TEST(ParallelGzip, MissingInputNamesIt) {
    TempDir dir;
    const Status st = gzipFileParallel(dir / "nope", dir / "out.gz");
    EXPECT_EQ(st.code(), StatusCode::kIoError);
    EXPECT_NE(st.toString().find("nope"), std::string::npos);
}

Volume ctLikeVolume() {
    Geometry g = obliqueGeometry({160, 150, 40});  // 1.9 MB int16 -> 2 gzip members
    Volume v = Volume::allocate<int16_t>(g);
    std::mt19937 rng(kSeed);
    int16_t* p = v.data<int16_t>();
    for (int64_t i = 0; i < g.voxelCount(); ++i)
        p[i] = static_cast<int16_t>(-1000 + static_cast<int>((i % 160) * 8) + int(rng() % 40));
    return v;
}

TEST(NiftiGz, ReadBackByZlibAndItkAsMultipleMembers) {
    TempDir dir;
    const Volume v = ctLikeVolume();
    const std::string path = dir / "ct.nii.gz";
    ImageWriteOptions opt;
    opt.threads = 2;
    ASSERT_TRUE(writeImage(v, path, opt).isOk());
    EXPECT_GE(countGzipMembers(path), 2);
    const auto raw = gunzip(path);
    EXPECT_EQ(raw.size(), 352u + static_cast<size_t>(v.geometry().voxelCount()) * 2);
    auto back = readImage(path);
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    expectSameGeometry(v.geometry(), back->geometry(), "ct.nii.gz");
    expectSameVoxels<int16_t>(v, *back, "ct.nii.gz");
}

// --max-voxels reaches the image readers (it used to apply to DICOM series only): a file that
// claims more is refused naming the file, the claim, the limit and the option; at the limit it
// reads.
TEST(ImageLimits, MaxVoxelsRefusesImageFilesThatClaimMore) {
    TempDir dir;
    const Volume v = ctLikeVolume();  // 160 x 150 x 40 = 960000 voxels
    for (const char* name : {"ct.nii.gz", "ct.nrrd", "ct.mha"}) {
        const std::string path = dir / name;
        ASSERT_TRUE(writeImage(v, path).isOk()) << name;
        const auto refused = readImage(path, {}, 959'999);
        ASSERT_FALSE(refused.isOk()) << name;
        const std::string message = refused.status().toString();
        EXPECT_NE(message.find(name), std::string::npos) << message;
        EXPECT_NE(message.find("160 x 150 x 40"), std::string::npos) << message;
        EXPECT_NE(message.find("--max-voxels"), std::string::npos) << message;
        EXPECT_TRUE(readImage(path, {}, 960'000).isOk()) << name;
    }
}

TEST(NiftiGz, NibabelReadsTheMultiMemberFile) {
#ifndef VOXSEG_PYTHON3
    GTEST_SKIP() << "python3 not found at configure time";
#else
    TempDir dir;
    const Volume v = ctLikeVolume();
    const std::string path = dir / "ct.nii.gz";
    ASSERT_TRUE(writeImage(v, path).isOk());
    const std::string cmd =
        std::string(VOXSEG_PYTHON3) + " " + VOXSEG_SOURCE_DIR + "/tests/io/nib_inspect.py " + path;
    FILE* pipe = ::popen(cmd.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string out;
    char buf[4096];
    while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
    const int rc = ::pclose(pipe);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 3) GTEST_SKIP() << "nibabel is not installed";
    ASSERT_EQ(rc, 0) << out;
    const auto j = nlohmann::json::parse(out);
    const Geometry g = v.geometry();
    EXPECT_EQ(j["shape"], nlohmann::json({g.size[0], g.size[1], g.size[2]}));
    EXPECT_EQ(j["dtype"], "int16");
    int64_t sum = 0;
    for (int64_t i = 0; i < g.voxelCount(); ++i) sum += v.data<int16_t>()[i];
    EXPECT_EQ(j["sum"].get<int64_t>(), sum);
    // nibabel's affine is RAS: rows 0 and 1 of LPS negated.
    for (int r = 0; r < 3; ++r) {
        const double flip = r < 2 ? -1.0 : 1.0;
        for (int c = 0; c < 3; ++c)
            EXPECT_PRED2(close, j["affine"][r][c].get<double>(),
                         flip * g.direction[r * 3 + c] * g.spacing[c])
                << "affine " << r << "," << c;
        EXPECT_PRED2(close, j["affine"][r][3].get<double>(), flip * g.origin[r]) << "origin " << r;
    }
#endif
}

TEST(WriteImage, UnwritableFolderFailsAndLeavesNothing) {
    TempDir dir;
    const Volume v = ctLikeVolume();
    const std::string path = dir / "missing-folder/out.nii.gz";
    const Status st = writeImage(v, path);
    EXPECT_EQ(st.code(), StatusCode::kIoError);
    EXPECT_NE(st.toString().find("missing-folder"), std::string::npos) << st.toString();
    EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(WriteImage, RefusesToOverwriteWhenAsked) {
    TempDir dir;
    const Volume v = ctLikeVolume();
    const std::string path = dir / "out.nrrd";
    ASSERT_TRUE(writeImage(v, path).isOk());
    ImageWriteOptions opt;
    opt.overwrite = false;
    EXPECT_EQ(writeImage(v, path, opt).code(), StatusCode::kFailedPrecondition);
}

TEST(WriteImage, UnknownExtensionIsAUsageError) {
    TempDir dir;
    const Status st = writeImage(ctLikeVolume(), dir / "out.png");
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find(".nii.gz"), std::string::npos);
    EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(WriteImage, CancelledBeforeStartWritesNothing) {
    TempDir dir;
    CancelToken token;
    token.cancel();
    const Status st = writeImage(ctLikeVolume(), dir / "out.nii.gz", {}, Progress({}, token));
    EXPECT_EQ(st.code(), StatusCode::kCancelled);
    EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(ReadImage, MissingFileIsNotFoundAndNamed) {
    auto r = readImage("/nonexistent/voxseg/brain.nii.gz");
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
    EXPECT_NE(r.status().toString().find("brain.nii.gz"), std::string::npos);
}

TEST(ReadImage, GarbageIsAnErrorNotACrash) {
    TempDir dir;
    const std::string path = dir / "junk.nii";
    std::ofstream(path) << "this is not a nifti file at all";
    auto r = readImage(path);
    EXPECT_FALSE(r.isOk());
    EXPECT_NE(r.status().toString().find("junk.nii"), std::string::npos);
}

// Regression: ITK 5.2's NIfTI reader returned a volume (missing voxels zero-filled) for a
// truncated file instead of failing.
TEST(ReadImage, TruncatedNiftiIsAnErrorNamingTheFile) {
    TempDir dir;
    for (const char* name : {"ct.nii.gz", "ct.nii"}) {
        const std::string path = dir / name;
        ASSERT_TRUE(writeImage(ctLikeVolume(), path).isOk());
        fs::resize_file(path, fs::file_size(path) / 2);
        auto r = readImage(path);
        EXPECT_EQ(r.status().code(), StatusCode::kCorruptData) << name;
        EXPECT_NE(r.status().toString().find(name), std::string::npos) << r.status().toString();
    }
}

// Issue 19: a NIfTI header claiming 30000^3 voxels is refused before the reader allocates,
// naming the file and the claim.
TEST(ReadImage, HeaderClaimingMoreVoxelsThanTheLimitIsRefused) {
    TempDir dir;
    const std::string path = dir / "huge.nii";
    ASSERT_TRUE(writeImage(ctLikeVolume(), path).isOk());
    {
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        const int16_t dims[3] = {30000, 30000, 30000};  // dim[1..3], bytes 42-47 of the header
        f.seekp(42);
        f.write(reinterpret_cast<const char*>(dims), sizeof(dims));
    }
    auto r = readImage(path);
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().toString();
    EXPECT_NE(r.status().toString().find("huge.nii claims 30000 x 30000 x 30000 voxels"),
              std::string::npos)
        << r.status().toString();
}

}  // namespace
}  // namespace voxseg::io
