// loadSeries() on synthetic series: voxel values after rescale (signed/unsigned, slope and
// intercept, int16 vs float32), and resampling of tilted, gapped and unevenly spaced stacks
// (values that are linear in patient coordinates survive linear resampling exactly).
#include "io/dicom_series.h"
#include "io/dicom_synth.h"
#include "tests/io/acquired_sampling.h"
#include "tests/test_data.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

namespace voxseg::io {
namespace {

namespace fs = std::filesystem;
using voxseg::testing::TempDir;

const SeriesCandidate& only(const DicomScanResult& s) {
    EXPECT_EQ(s.series.size(), 1u);
    return s.series.front();
}

Result<DicomScanResult> scanFolder(const std::string& folder) {
    return scanDicom({folder}, DicomScanOptions{2});
}

template <typename T>
T at(const Volume& v, int64_t i, int64_t j, int64_t k) {
    const Geometry g = v.geometry();
    return v.data<T>()[(k * g.size[1] + j) * g.size[0] + i];
}

TEST(DicomLoad, UnsignedCtWithInterceptBecomesInt16Hu) {
    TempDir dir;
    SynthSeriesSpec spec;
    spec.is_signed = false;
    spec.bits_stored = 12;
    spec.intercept = -1024;
    spec.slice_spacing = -1.5;  // stacked against instance order
    spec.shuffle_names = true;
    spec.value = [](int i, int j, int k) { return 100 * k + 10 * j + i; };
    ASSERT_TRUE(writeSynthSeries(spec, dir / "ct").isOk());
    auto scan = scanFolder(dir / "ct");
    ASSERT_TRUE(scan.isOk()) << scan.status().toString();
    auto v = loadSeries(only(*scan), DicomLoadOptions{.threads = 2});
    ASSERT_TRUE(v.isOk()) << v.status().toString();
    ASSERT_EQ(v->pixelType(), PixelType::kInt16);
    EXPECT_TRUE(v->geometry().approxEqual(only(*scan).geometry));
    // Volume slice kz holds file k = slices-1-kz (offsets run against the normal).
    for (int kz = 0; kz < spec.slices; ++kz)
        for (int j = 0; j < spec.rows; j += 3)
            for (int i = 0; i < spec.columns; i += 5)
                ASSERT_EQ(at<int16_t>(*v, i, j, kz),
                          100 * (spec.slices - 1 - kz) + 10 * j + i - 1024)
                    << i << "," << j << "," << kz;
    EXPECT_EQ(v->info().modality, "CT");
    EXPECT_EQ(v->info().series_uid, only(*scan).series_uid);
}

TEST(DicomLoad, SignedTwelveBitValuesKeepTheirSign) {
    TempDir dir;
    SynthSeriesSpec spec;
    spec.modality = "MR";
    spec.bits_stored = 12;
    spec.value = [](int i, int j, int k) { return (i - 8) * 200 + j - k; };  // -1600..1400
    ASSERT_TRUE(writeSynthSeries(spec, dir / "s").isOk());
    auto scan = scanFolder(dir / "s");
    ASSERT_TRUE(scan.isOk());
    auto v = loadSeries(only(*scan));
    ASSERT_TRUE(v.isOk()) << v.status().toString();
    ASSERT_EQ(v->pixelType(), PixelType::kInt16);
    EXPECT_EQ(at<int16_t>(*v, 0, 3, 2), -1600 + 3 - 2);
    EXPECT_EQ(at<int16_t>(*v, 15, 0, 7), 1400 - 7);
}

TEST(DicomLoad, FractionalSlopeAndLargeUnsignedValuesGiveFloat32) {
    TempDir dir;
    SynthSeriesSpec frac;
    frac.modality = "MR";
    frac.is_signed = false;
    frac.slope = 0.5;
    frac.intercept = 10.25;
    ASSERT_TRUE(writeSynthSeries(frac, dir / "frac").isOk());
    auto scan = scanFolder(dir / "frac");
    ASSERT_TRUE(scan.isOk());
    auto v = loadSeries(only(*scan));
    ASSERT_TRUE(v.isOk()) << v.status().toString();
    ASSERT_EQ(v->pixelType(), PixelType::kFloat32);
    EXPECT_FLOAT_EQ(at<float>(*v, 4, 2, 3), (4 + 3 * 2 + 7 * 3) * 0.5f + 10.25f);

    SynthSeriesSpec big;
    big.modality = "MR";
    big.is_signed = false;
    big.value = [](int i, int, int k) { return 60000 + i + k; };
    ASSERT_TRUE(writeSynthSeries(big, dir / "big").isOk());
    auto scan_big = scanFolder(dir / "big");
    ASSERT_TRUE(scan_big.isOk());
    auto vb = loadSeries(only(*scan_big));
    ASSERT_TRUE(vb.isOk()) << vb.status().toString();
    ASSERT_EQ(vb->pixelType(), PixelType::kFloat32);  // exceeds int16: kept exact in float32
    EXPECT_FLOAT_EQ(at<float>(*vb, 5, 1, 6), 60011.0f);
}

// Stored value linear in patient coordinates, so linear resampling can be checked exactly.
int32_t linearValue(const SynthSeriesSpec& s, int i, int j, int k) {
    const Vec3 n = cross(s.row_dir, s.col_dir);
    Vec3 p;
    for (int a = 0; a < 3; ++a)
        p[a] = s.origin[a] + s.slice_offsets[k] * n[a] + k * s.tilt_shift[a] +
               i * s.column_spacing * s.row_dir[a] + j * s.row_spacing * s.col_dir[a];
    return static_cast<int32_t>(std::lround(1000 + 3 * p[0] + 5 * p[1] + 7 * p[2]));
}

// Every voxel holds the linear function of its position within `tol`, except voxels no slice
// covers, which hold the fill value (the smallest input value). Returns how many were filled.
int64_t expectLinearValues(const Volume& v, double tol) {
    const Geometry g = v.geometry();
    auto value = [&](int64_t i, int64_t j, int64_t k) -> double {
        return v.pixelType() == PixelType::kInt16 ? at<int16_t>(v, i, j, k) : at<float>(v, i, j, k);
    };
    double fill = 1e30;
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i) fill = std::min(fill, value(i, j, k));
    int64_t filled = 0;
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i) {
                const Vec3 p = g.indexToPhysical({double(i), double(j), double(k)});
                const double expected = 1000 + 3 * p[0] + 5 * p[1] + 7 * p[2];
                const double got = value(i, j, k);
                if (std::abs(got - expected) <= tol) continue;
                EXPECT_EQ(got, fill)
                    << "voxel " << i << "," << j << "," << k << " expected " << expected;
                if (got != fill) return -1;
                ++filled;
            }
    return filled;
}

TEST(DicomLoad, TiltedStackIsDeShearedInItsAcquiredOrientationOrRefused) {
    TempDir dir;
    SynthSeriesSpec spec;
    spec.columns = 20;
    spec.rows = 16;
    spec.slices = 10;
    spec.column_spacing = 1.0;
    spec.row_spacing = 1.0;
    // Gantry tilted 30 degrees about x: image columns run along (0, cos, -sin); the table
    // moves 2 mm along z per slice, so each slice drifts by 2 sin(30) = 1 row along its columns.
    const double t = 30 * M_PI / 180;
    spec.col_dir = {0, std::cos(t), -std::sin(t)};
    const Vec3 n = cross(spec.row_dir, spec.col_dir);
    const double dz = 2.0;
    for (int k = 0; k < spec.slices; ++k) spec.slice_offsets.push_back(k * dz * n[2]);
    for (int a = 0; a < 3; ++a) spec.tilt_shift[a] = dz * ((a == 2) - n[2] * n[a]);
    spec.value = [&](int i, int j, int k) { return linearValue(spec, i, j, k); };
    ASSERT_TRUE(writeSynthSeries(spec, dir / "tilt").isOk());
    auto scan = scanFolder(dir / "tilt");
    ASSERT_TRUE(scan.isOk());
    const SeriesCandidate& c = only(*scan);
    ASSERT_TRUE(c.tilted);
    EXPECT_NEAR(c.tilt_degrees, 30.0, 1e-3);

    auto refused = loadSeries(c, DicomLoadOptions{.tilt = IrregularPolicy::kRefuse});
    ASSERT_FALSE(refused.isOk());
    EXPECT_EQ(refused.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(refused.status().toString().find(c.series_uid), std::string::npos);

    auto v = loadSeries(c, DicomLoadOptions{.threads = 2});
    ASSERT_TRUE(v.isOk()) << v.status().toString();
    const Geometry g = v->geometry();
    // The acquired orientation: rows, columns, then the slice normal; planes are the slices.
    for (int a = 0; a < 3; ++a) {
        EXPECT_NEAR(g.axisDirection(0)[a], spec.row_dir[a], 1e-6);
        EXPECT_NEAR(g.axisDirection(1)[a], spec.col_dir[a], 1e-6);
        EXPECT_NEAR(g.axisDirection(2)[a], n[a], 1e-6);
    }
    EXPECT_NEAR(g.spacing[2], dz * std::cos(t), 1e-6);
    EXPECT_EQ(g.size[2], spec.slices);
    EXPECT_EQ(g.size[0], spec.columns);
    // The plane holds every slice: 16 rows plus the 9 rows the last slice drifted.
    EXPECT_EQ(g.size[1], spec.rows + spec.slices - 1);
    ASSERT_EQ(v->pixelType(), PixelType::kInt16);
    // Values exact (whole-row drift) where a slice lies; each plane has 9 rows no slice of its
    // own covers, which get the fill value (a few of them hold it as their linear value too).
    EXPECT_GE(expectLinearValues(*v, 1.0), 0);
    const std::string filled =
        std::to_string((spec.slices - 1) * spec.columns * spec.slices) + " voxels outside";
    bool warned = false;
    for (const std::string& w : v->info().warnings)
        warned |= w.find("resampled") != std::string::npos && w.find(filled) != std::string::npos;
    EXPECT_TRUE(warned) << filled;
}

// Regression (issue 16): the grid spanned the slice centres along the table axis, and the
// corners of the tilted end slices fell outside it. A fractional drift, uneven steps and a
// missing slice together; values vary at every pixel (hashed), so a fill or an extrapolation
// from the wrong place shows.
TEST(DicomLoad, EveryAcquiredPixelOfATiltedUnevenGappedStackIsOnTheGrid) {
    TempDir dir;
    SynthSeriesSpec spec;
    spec.columns = 23;
    spec.rows = 19;
    spec.slices = 12;
    spec.column_spacing = 0.9;
    spec.row_spacing = 0.8;
    const double t = 17 * M_PI / 180;
    spec.col_dir = {0, std::cos(t), -std::sin(t)};
    spec.value = [](int i, int j, int k) {
        const uint32_t h = static_cast<uint32_t>(i * 73856093) ^
                           static_cast<uint32_t>(j * 19349663) ^
                           static_cast<uint32_t>(k * 83492791);
        return static_cast<int32_t>(h % 2000) - 1000;
    };
    // The table moves along z by uneven steps, with one slice missing after the fifth: the
    // slices drift along their columns by -sin(t) per mm of table travel.
    double z = 0;
    for (int k = 0; k < spec.slices; ++k) {
        spec.slice_positions.push_back({0, 0, z});
        z += k == 4 ? 6.0 : (k % 3 == 0 ? 1.3 : 2.9);
    }
    ASSERT_TRUE(writeSynthSeries(spec, dir / "irregular").isOk());
    auto scan = scanFolder(dir / "irregular");
    ASSERT_TRUE(scan.isOk());
    const SeriesCandidate& c = only(*scan);
    ASSERT_TRUE(c.tilted && c.uneven_spacing && c.has_gaps);
    auto v = loadSeries(c, DicomLoadOptions{.threads = 2});
    ASSERT_TRUE(v.isOk()) << v.status().toString();
    const Volume acquired = voxseg::testing::loadAcquired(c);
    const auto s = voxseg::testing::sampleAcquiredPixels(c, acquired, *v, 0.5 + 1e-3);
    EXPECT_EQ(s.pixels, int64_t{spec.columns} * spec.rows * spec.slices);
    EXPECT_EQ(s.outside, 0);
    EXPECT_EQ(s.out_of_range, 0) << "worst excess " << s.worst_excess;
}

// Issue 19: a header claiming 65535 x 65535 pixels per slice ended in "internal error: ...
// Failed to allocate memory for image". It is refused before anything is allocated, naming the
// file, the claim and the limit; a lowered limit refuses a normal series the same way.
TEST(DicomLoad, SeriesClaimingMoreVoxelsThanTheLimitIsRefusedBeforeAllocating) {
    TempDir dir;
    SynthSeriesSpec spec;
    spec.slices = 4;
    auto paths = writeSynthSeries(spec, dir / "huge");
    ASSERT_TRUE(paths.isOk());
    for (const std::string& path : *paths) {  // the pixel data stays 16 x 12
        DcmFileFormat f;
        ASSERT_TRUE(f.loadFile(path.c_str()).good());
        f.getDataset()->putAndInsertUint16(DCM_Rows, 65535);
        f.getDataset()->putAndInsertUint16(DCM_Columns, 65535);
        ASSERT_TRUE(f.saveFile(path.c_str()).good());
    }
    auto scan = scanFolder(dir / "huge");
    ASSERT_TRUE(scan.isOk()) << scan.status().toString();
    auto refused = loadSeries(only(*scan));
    ASSERT_FALSE(refused.isOk());
    const std::string message = refused.status().toString();
    EXPECT_EQ(refused.status().code(), StatusCode::kUnsupported) << message;
    EXPECT_NE(message.find("claims 65535 x 65535 x 4 voxels (1.7e+10) > limit 2e+09"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find(fs::path(paths->front()).filename().string()), std::string::npos)
        << message;
    EXPECT_NE(message.find("--max-voxels"), std::string::npos) << message;

    auto normal = writeSynthSeries(spec, dir / "normal");
    ASSERT_TRUE(normal.isOk());
    auto scan2 = scanFolder(dir / "normal");
    ASSERT_TRUE(scan2.isOk());
    DicomLoadOptions tight;
    tight.max_voxels = 16 * 12 * 4 - 1;
    EXPECT_EQ(loadSeries(only(*scan2), tight).status().code(), StatusCode::kUnsupported);
    tight.max_voxels = 16 * 12 * 4;
    EXPECT_TRUE(loadSeries(only(*scan2), tight).isOk());
}

// A header claiming 1e8 frames made the scan build a per-frame list until memory ran out
// (std::bad_alloc under a 4 GB ulimit, an OOM kill without one). It is skipped with the claim.
TEST(DicomLoad, FileClaimingMoreFramesThanTheLimitIsSkippedWithTheReason) {
    TempDir dir;
    SynthSeriesSpec spec;
    spec.slices = 3;
    auto paths = writeSynthSeries(spec, dir / "study");
    ASSERT_TRUE(paths.isOk());
    const std::string bomb = (dir / "study") + "/bomb.dcm";
    {
        DcmFileFormat f;
        ASSERT_TRUE(f.loadFile(paths->front().c_str()).good());
        f.getDataset()->putAndInsertString(DCM_NumberOfFrames, "100000000");
        ASSERT_TRUE(f.saveFile(bomb.c_str()).good());
    }
    auto scan = scanFolder(dir / "study");
    ASSERT_TRUE(scan.isOk()) << scan.status().toString();
    EXPECT_EQ(only(*scan).slices.size(), 3u);  // the real series is still found
    bool reported = false;
    for (const SkippedFile& f : scan->skipped)
        reported |= f.path == bomb && f.reason.find("claims 100000000 frames") != std::string::npos;
    EXPECT_TRUE(reported);
}

TEST(DicomLoad, MissingSlicesAreInterpolatedWhenFewFilledWhenManyOrRefused) {
    TempDir dir;
    SynthSeriesSpec spec;
    spec.slices = 10;
    for (int k = 0; k < spec.slices; ++k) spec.slice_offsets.push_back(2.0 * k);
    spec.value = [&](int i, int j, int k) { return linearValue(spec, i, j, k); };
    auto paths = writeSynthSeries(spec, dir / "one");
    ASSERT_TRUE(paths.isOk());
    fs::remove((*paths)[6]);
    auto scan = scanFolder(dir / "one");
    ASSERT_TRUE(scan.isOk());
    const SeriesCandidate& c = only(*scan);
    ASSERT_TRUE(c.has_gaps);
    EXPECT_EQ(loadSeries(c, DicomLoadOptions{.allow_gaps = false}).status().code(),
              StatusCode::kUnsupported);
    auto v = loadSeries(c);
    ASSERT_TRUE(v.isOk()) << v.status().toString();
    EXPECT_EQ(v->geometry().size[2], 10);
    EXPECT_NEAR(v->geometry().spacing[2], 2.0, 1e-9);
    EXPECT_EQ(expectLinearValues(*v, 1.0), 0);  // one missing slice: interpolated

    auto wide = writeSynthSeries(spec, dir / "three");
    ASSERT_TRUE(wide.isOk());
    for (int k : {3, 4, 5}) fs::remove((*wide)[k]);
    auto scan3 = scanFolder(dir / "three");
    ASSERT_TRUE(scan3.isOk());
    auto v3 = loadSeries(only(*scan3));
    ASSERT_TRUE(v3.isOk()) << v3.status().toString();
    EXPECT_EQ(v3->geometry().size[2], 10);
    // Three missing slices are not invented: output slices 3..5 get the fill value.
    const Geometry g = v3->geometry();
    EXPECT_EQ(expectLinearValues(*v3, 1.0), 3 * g.size[0] * g.size[1]);
}

TEST(DicomLoad, UnevenSpacingIsResampledToTheMedianStep) {
    TempDir dir;
    SynthSeriesSpec spec;
    spec.modality = "MR";
    spec.slices = 7;
    spec.slice_offsets = {0, 2, 4, 6.6, 8.6, 10.6, 12.6};
    spec.value = [&](int i, int j, int k) { return linearValue(spec, i, j, k); };
    ASSERT_TRUE(writeSynthSeries(spec, dir / "u").isOk());
    auto scan = scanFolder(dir / "u");
    ASSERT_TRUE(scan.isOk());
    const SeriesCandidate& c = only(*scan);
    ASSERT_TRUE(c.uneven_spacing);
    EXPECT_FALSE(
        loadSeries(c, DicomLoadOptions{.uneven_spacing = IrregularPolicy::kRefuse}).isOk());
    auto v = loadSeries(c);
    ASSERT_TRUE(v.isOk()) << v.status().toString();
    // 12.6 mm / median 2 mm rounds to 6 steps: 2.1 mm puts the last slice on the last plane.
    EXPECT_NEAR(v->geometry().spacing[2], 2.1, 1e-9);
    EXPECT_EQ(v->geometry().size[2], 7);
    expectLinearValues(*v, 1.0);
}

}  // namespace
}  // namespace voxseg::io
