// DICOM SEG of a resampled series (gantry tilt and uneven spacing): the label map on the regular
// grid goes back onto the acquired images. Every frame lies on a source slice and names it
// (per-frame ReferencedSOPInstanceUID, plane position of that image), checked by reading the
// file's attributes with DCMTK directly; the labels at the acquired pixels agree with the
// analytic shapes; voxseg's reader puts them back on the source slices voxel for voxel and onto
// the grid; dciodvfy reports no error. Regression: the writer put frames on the regular grid and
// referenced the series only ("without per-frame sources").
#include "io/acquired_labels.h"
#include "io/dicom_series.h"
#include "io/dicom_synth.h"
#include "io/seg_reader.h"
#include "io/seg_writer.h"
#include "tests/io/dicom_tools.h"
#include "tests/test_data.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcitem.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

namespace voxseg::io {
namespace {

using voxseg::testing::TempDir;

// Tilted 20 degrees about x, the table moving by uneven steps along z.
SynthSeriesSpec tiltedSpec() {
    SynthSeriesSpec spec;
    spec.columns = 40;
    spec.rows = 36;
    spec.slices = 14;
    spec.column_spacing = 0.9;
    spec.row_spacing = 0.9;
    spec.ct_image_iod = true;
    const double t = 20 * M_PI / 180;
    spec.col_dir = {0, std::cos(t), -std::sin(t)};
    double z = 0;
    for (int k = 0; k < spec.slices; ++k) {
        spec.slice_positions.push_back({0, 0, z});
        z += k % 4 == 1 ? 1.4 : 2.0;
    }
    spec.value = [](int i, int j, int k) { return (i * 7 + j * 3 + k * 11) % 400 - 1000; };
    return spec;
}

// Label 1: a ball; label 2: a slab; in patient coordinates (mm).
int analyticLabel(const Vec3& p) {
    const double dx = p[0] - 18, dy = p[1] - 14, dz = p[2] - 12;
    if (dx * dx + dy * dy + dz * dz <= 7.0 * 7.0) return 1;
    if (p[0] > 28 && p[0] < 33 && p[2] > 4 && p[2] < 20) return 2;
    return 0;
}

Volume labelsOn(const Geometry& g) {
    Volume v = Volume::allocate<uint8_t>(g);
    uint8_t* p = v.data<uint8_t>();
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i)
                p[(k * g.size[1] + j) * g.size[0] + i] = static_cast<uint8_t>(
                    analyticLabel(g.indexToPhysical({double(i), double(j), double(k)})));
    return v;
}

std::vector<SegmentDescription> twoSegments() {
    SegmentDescription ball, slab;
    ball.value = 1;
    ball.name = "ball";
    slab.value = 2;
    slab.name = "slab";
    return {ball, slab};
}

TEST(DicomSegAcquired, TiltedUnevenSeriesGetsFramesOnItsSourceImages) {
    TempDir dir;
    const SynthSeriesSpec spec = tiltedSpec();
    ASSERT_TRUE(writeSynthSeries(spec, dir / "ct").isOk());
    auto scan = scanDicom({dir / "ct"});
    ASSERT_TRUE(scan.isOk()) << scan.status().toString();
    ASSERT_EQ(scan->series.size(), 1u);
    const SeriesCandidate& c = scan->series[0];
    ASSERT_TRUE(c.tilted && c.uneven_spacing);
    auto volume = loadSeries(c);
    ASSERT_TRUE(volume.isOk()) << volume.status().toString();
    const Geometry grid = volume->geometry();
    const Volume labels = labelsOn(grid);

    const std::string path = dir / "seg.dcm";
    auto report = writeDicomSeg(labels, c, twoSegments(), {}, path);
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_TRUE(report->mapped_to_acquired);
    EXPECT_TRUE(report->per_frame_references);

    // The file itself: every frame's position is its source image's, and it names that image.
    std::map<std::string, Vec3> position_of_sop;
    for (const SliceRef& s : c.slices) {
        DcmFileFormat f;
        ASSERT_TRUE(f.loadFile(s.path.c_str()).good());
        OFString sop;
        f.getDataset()->findAndGetOFString(DCM_SOPInstanceUID, sop);
        position_of_sop[sop.c_str()] = s.position;
    }
    DcmFileFormat seg;
    ASSERT_TRUE(seg.loadFile(path.c_str()).good());
    DcmItem* shared = nullptr;
    ASSERT_TRUE(seg.getDataset()
                    ->findAndGetSequenceItem(DCM_SharedFunctionalGroupsSequence, shared, 0)
                    .good());
    DcmItem* orientation = nullptr;
    ASSERT_TRUE(
        shared->findAndGetSequenceItem(DCM_PlaneOrientationSequence, orientation, 0).good());
    for (int v = 0; v < 6; ++v) {
        Float64 x = 0;
        ASSERT_TRUE(orientation->findAndGetFloat64(DCM_ImageOrientationPatient, x, v).good());
        const Vec3& expected = v < 3 ? spec.row_dir : spec.col_dir;
        EXPECT_NEAR(x, expected[v % 3], 1e-6) << "IOP value " << v;
    }
    DcmSequenceOfItems* frames = nullptr;
    ASSERT_TRUE(
        seg.getDataset()->findAndGetSequence(DCM_PerFrameFunctionalGroupsSequence, frames).good());
    ASSERT_EQ(static_cast<int>(frames->card()), report->frames);
    std::set<std::string> referenced;
    for (unsigned long f = 0; f < frames->card(); ++f) {
        DcmItem* item = frames->getItem(f);
        DcmItem *plane = nullptr, *derivation = nullptr, *source = nullptr;
        ASSERT_TRUE(item->findAndGetSequenceItem(DCM_PlanePositionSequence, plane, 0).good());
        ASSERT_TRUE(item->findAndGetSequenceItem(DCM_DerivationImageSequence, derivation, 0).good())
            << "frame " << f + 1 << " names no source image";
        ASSERT_TRUE(derivation->findAndGetSequenceItem(DCM_SourceImageSequence, source, 0).good());
        OFString sop;
        ASSERT_TRUE(source->findAndGetOFString(DCM_ReferencedSOPInstanceUID, sop).good());
        ASSERT_EQ(position_of_sop.count(sop.c_str()), 1u) << sop;
        referenced.insert(sop.c_str());
        const Vec3& expected = position_of_sop[sop.c_str()];
        for (int a = 0; a < 3; ++a) {
            Float64 x = 0;
            ASSERT_TRUE(plane->findAndGetFloat64(DCM_ImagePositionPatient, x, a).good());
            EXPECT_NEAR(x, expected[a], 1e-4) << "frame " << f + 1;
        }
    }
    EXPECT_GE(referenced.size(), 8u);  // the ball and the slab span most slices

    // Labels at the acquired pixels against the shapes themselves (not our own mapping).
    auto acquired = labelsOnAcquiredImages(labels, c);
    ASSERT_TRUE(acquired.isOk());
    ASSERT_TRUE(acquired->resampled);
    int64_t agree = 0, total = 0;
    for (size_t k = 0; k < acquired->planes.planeCount(); ++k)
        for (int y = 0; y < spec.rows; ++y)
            for (int x = 0; x < spec.columns; ++x) {
                const int truth = analyticLabel(acquired->planes.pixelToPhysical(k, x, y));
                const int got = acquired->plane<uint8_t>(k)[y * spec.columns + x];
                agree += truth == got;
                total += truth != 0 || got != 0;
            }
    // Nearest-voxel lookup on the 2 mm grid: only boundary pixels may differ.
    EXPECT_GT(
        static_cast<double>(agree - (int64_t(spec.columns) * spec.rows * spec.slices - total)) /
            total,
        0.9);

    // voxseg's reader: on the source slices voxel for voxel, and onto the grid.
    SegReadOptions options;
    options.source = &c;
    options.grid = grid;
    options.label_values = {{"ball", 1}, {"slab", 2}};
    auto back = readDicomSeg(path, options);
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    ASSERT_TRUE(back->acquired.has_value());
    const int64_t n = acquired->labels.geometry().voxelCount();
    int64_t differ = 0;
    for (int64_t i = 0; i < n; ++i)
        differ += back->acquired->labels.data<uint8_t>()[i] != acquired->labels.data<uint8_t>()[i];
    EXPECT_EQ(differ, 0);
    EXPECT_TRUE(back->label_map.geometry().approxEqual(grid));
    // Twice nearest (grid -> acquired -> grid) on 2 mm slices: boundaries move by up to half a
    // step, and grid corners no slice reaches come back empty.
    int64_t both = 0, sum = 0;
    for (int64_t i = 0; i < grid.voxelCount(); ++i) {
        const int a = labels.data<uint8_t>()[i], b = back->label_map.data<uint8_t>()[i];
        both += a == b && a != 0;
        sum += (a != 0) + (b != 0);
    }
    const double dice = 2.0 * both / sum;
    std::printf("grid -> acquired images -> grid: Dice %.4f\n", dice);
    EXPECT_GT(dice, 0.9);

    // The Label Map SEG of the same labels: voxseg's reader puts it on the source images too.
    SegWriteOptions label_map_options;
    label_map_options.type = SegType::kLabelMap;
    const std::string label_map_path = dir / "labelmap.dcm";
    ASSERT_TRUE(writeDicomSeg(labels, c, twoSegments(), label_map_options, label_map_path).isOk());
    options.grid.reset();
    auto label_map_back = readDicomSeg(label_map_path, options);
    ASSERT_TRUE(label_map_back.isOk()) << label_map_back.status().toString();
    differ = 0;
    for (int64_t i = 0; i < n; ++i)
        differ += label_map_back->acquired->labels.data<uint8_t>()[i] !=
                  acquired->labels.data<uint8_t>()[i];
    EXPECT_EQ(differ, 0);

    // highdicom (pip) reads both per source image: the same labels voxel for voxel.
    if (const char* keep = std::getenv("VOXSEG_KEEP_SEG"))  // a folder to inspect them in
        std::filesystem::copy(dir.path(), keep,
                              std::filesystem::copy_options::recursive |
                                  std::filesystem::copy_options::overwrite_existing);
    for (const std::string& seg_file : {path, label_map_path})
        voxseg::testing::highdicomAgrees(seg_file, dir / "ct", *acquired, dir / "expected");

    // Bad input: the SEG read against another series is refused, naming both series.
    SynthSeriesSpec other_spec = tiltedSpec();
    other_spec.value = [](int, int, int) { return 0; };
    ASSERT_TRUE(writeSynthSeries(other_spec, dir / "other").isOk());
    auto other = scanDicom({dir / "other"});
    ASSERT_TRUE(other.isOk());
    SegReadOptions wrong;
    wrong.source = &other->series.at(0);
    auto refused = readDicomSeg(path, wrong);
    ASSERT_FALSE(refused.isOk());
    EXPECT_NE(refused.status().toString().find(c.series_uid), std::string::npos)
        << refused.status().toString();
    EXPECT_NE(refused.status().toString().find(other->series.at(0).series_uid), std::string::npos);

    if (voxseg::testing::haveCommand("dciodvfy")) {
        const std::string verdict = voxseg::testing::runCommand("dciodvfy '" + path + "'");
        EXPECT_EQ(verdict.find("Error"), std::string::npos) << verdict;
    } else {
        ADD_FAILURE() << "dciodvfy (Debian package dicom3tools) is not installed";
    }
}

}  // namespace
}  // namespace voxseg::io
