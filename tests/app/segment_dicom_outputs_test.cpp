// `voxseg segment --outputs nifti,seg,rtstruct` on a gantry-tilted, unevenly spaced CT (issue
// 16): the label map stays on the regular grid, the DICOM SEG and the RTSTRUCT lie on the
// acquired images and hold exactly the label map's labels at the acquired pixels, and run.json
// says which grid each output is on; `voxseg batch` writes the same objects.
#include "io/acquired_labels.h"
#include "io/dicom_series.h"
#include "io/dicom_synth.h"
#include "io/image_io.h"
#include "io/rtstruct_reader.h"
#include "io/seg_reader.h"
#include "tests/app/run_voxseg.h"
#include "tests/pipeline/test_model_package.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace voxseg::app {
namespace {
namespace fs = std::filesystem;
using clitest::runVoxseg;
using voxseg::testing::TempDir;

// 18 degrees of tilt, the table moving 2.5 / 1.5 mm per slice: a ball of soft tissue in air.
std::string writeTiltedCt(const TempDir& dir) {
    io::SynthSeriesSpec spec;
    spec.columns = 48;
    spec.rows = 40;
    spec.slices = 16;
    spec.column_spacing = spec.row_spacing = 1.5;
    spec.ct_image_iod = true;
    spec.intercept = -1024;
    const double t = 18 * M_PI / 180;
    spec.col_dir = {0, std::cos(t), -std::sin(t)};
    double z = 0;
    for (int k = 0; k < spec.slices; ++k) {
        spec.slice_positions.push_back({0, 0, z});
        z += k % 3 == 0 ? 1.5 : 2.5;
    }
    spec.value = [&](int i, int j, int k) {
        const double dx = i - 24.0, dy = j - 20.0, dz = (k - 8.0) * 1.4;
        return dx * dx + dy * dy + dz * dz < 150 ? 1064 + (i * 13 + j * 7) % 40 : 24;
    };
    const std::string folder = dir / "ct";
    EXPECT_TRUE(io::writeSynthSeries(spec, folder).isOk());
    return folder;
}

int64_t differences(const io::AcquiredLabels& a, const io::AcquiredLabels& b) {
    const int64_t n = a.labels.geometry().voxelCount();
    EXPECT_EQ(n, b.labels.geometry().voxelCount());
    int64_t d = 0;
    for (int64_t i = 0; i < n; ++i) d += a.labels.data<uint8_t>()[i] != b.labels.data<uint8_t>()[i];
    return d;
}

TEST(SegmentDicomOutputs, TiltedSeriesGetsSegAndRtstructOnItsAcquiredImages) {
    TempDir dir;
    const std::string ct = writeTiltedCt(dir);
    const std::string model = testing::writeTinyModelPackage(dir.path() / "model", "CT", 2.0);
    const fs::path out = dir.path() / "out";
    auto r = runVoxseg(
        {"segment", ct, "-m", model, "-o", out.string(), "--outputs", "nifti,seg,rtstruct,stats"},
        dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* f : {"segmentation.nii.gz", "segmentation.dcm", "rtstruct.dcm", "run.json"})
        EXPECT_TRUE(fs::exists(out / f)) << f;

    std::ifstream in(out / "run.json");
    const nlohmann::json grids = nlohmann::json::parse(in)["grids"];
    EXPECT_TRUE(grids["volume"]["resampled"].get<bool>());
    EXPECT_EQ(grids["volume"]["why"], "gantry tilt, uneven");
    EXPECT_TRUE(grids["acquired_images"]["mapped_back"].get<bool>());
    EXPECT_EQ(grids["acquired_images"]["slices"], 16);
    EXPECT_EQ(grids["outputs"]["segmentation.nii.gz"], "volume");
    EXPECT_EQ(grids["outputs"]["segmentation.dcm"], "acquired_images");
    EXPECT_EQ(grids["outputs"]["rtstruct.dcm"], "acquired_images");

    auto scan = io::scanDicom({ct});
    ASSERT_TRUE(scan.isOk());
    const io::SeriesCandidate& c = scan->series.at(0);
    auto labels = io::readImage((out / "segmentation.nii.gz").string());
    ASSERT_TRUE(labels.isOk()) << labels.status().toString();
    Volume map =
        labels->pixelType() == PixelType::kUInt8 ? *labels : labels->castTo(PixelType::kUInt8);
    // segment pre-processed the grid loadSeries gives (every acquired pixel inside, tested in
    // tests/io): the label map is on it.
    auto loaded = io::loadSeries(c);
    ASSERT_TRUE(loaded.isOk());
    EXPECT_TRUE(map.geometry().approxEqual(loaded->geometry(), 1e-3, 1e-5, 1e-5));
    auto expected = io::labelsOnAcquiredImages(map, c);
    ASSERT_TRUE(expected.isOk()) << expected.status().toString();
    ASSERT_TRUE(expected->resampled);
    int64_t labelled = 0;
    for (int64_t i = 0; i < expected->labels.geometry().voxelCount(); ++i)
        labelled += expected->labels.data<uint8_t>()[i] != 0;
    ASSERT_GT(labelled, 0) << "the model labelled nothing: the test would prove nothing";

    io::SegReadOptions seg_options;
    seg_options.source = &c;
    seg_options.label_values = {{"one", 1}, {"two", 2}};
    auto seg = io::readDicomSeg((out / "segmentation.dcm").string(), seg_options);
    ASSERT_TRUE(seg.isOk()) << seg.status().toString();
    ASSERT_TRUE(seg->acquired.has_value());
    EXPECT_EQ(differences(*seg->acquired, *expected), 0);

    io::RtStructReadOptions rt_options;
    rt_options.label_values = {{"one", 1}, {"two", 2}};
    auto rt = io::readRtStruct((out / "rtstruct.dcm").string(), c, rt_options);
    ASSERT_TRUE(rt.isOk()) << rt.status().toString();
    EXPECT_TRUE(rt->warnings.empty()) << rt->warnings.front();
    EXPECT_EQ(differences(rt->acquired, *expected), 0);

    // voxseg batch writes the same DICOM objects (a folder of one case folder).
    fs::create_directories(dir.path() / "cases");
    fs::copy(ct, dir.path() / "cases" / "tilted", fs::copy_options::recursive);
    const fs::path batch_out = dir.path() / "batch";
    r = runVoxseg({"batch", (dir.path() / "cases").string(), "-m", model, "-o", batch_out.string(),
                   "--outputs", "seg,rtstruct"},
                  dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto batch_seg =
        io::readDicomSeg((batch_out / "tilted" / "segmentation.dcm").string(), seg_options);
    ASSERT_TRUE(batch_seg.isOk()) << batch_seg.status().toString();
    EXPECT_EQ(differences(*batch_seg->acquired, *expected), 0);
    auto batch_rt =
        io::readRtStruct((batch_out / "tilted" / "rtstruct.dcm").string(), c, rt_options);
    ASSERT_TRUE(batch_rt.isOk()) << batch_rt.status().toString();
    EXPECT_EQ(differences(batch_rt->acquired, *expected), 0);
}

}  // namespace
}  // namespace voxseg::app
