// Label Map SEG reader (io/seg_labelmap) on highdicom's own Label Map SEGs (label `data`):
// shared/data/highdicom-test-files/seg_image_sm_control_labelmap{,_palette_color}.dcm, a slide
// microscopy label map (20 frames of 10x10, 8 bit, segments 0..20 with 0 = Background). The folder
// holds no BINARY SEG of the same segmentation (its BINARY SEGs segment a CT), so the expected
// figures below were read with pydicom 3.0.2 (`pixel_array`, `np.unique(..., return_counts)`,
// `pydicom.pixels.apply_color_lut`) and checked against the file's dcmdump.
#include "io/acquired_labels.h"
#include "io/dicom_series.h"
#include "io/seg_labelmap.h"

#include "tests/test_data.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <cstdio>
#include <fstream>
#include <iostream>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <string>

namespace voxseg::io {
namespace {

constexpr const char* kFolder = "highdicom-test-files";

std::string file(const char* name) {
    return (voxseg::testing::sharedData(kFolder) / name).string();
}

// Voxels per label value over all 20 frames (pydicom); label 2 is described but absent.
const std::map<int, int64_t> kVoxels = {
    {0, 1477}, {1, 14},  {3, 23},  {4, 22},  {5, 30},  {6, 31},  {7, 28},
    {8, 23},   {9, 32},  {10, 29}, {11, 25}, {12, 28}, {13, 27}, {14, 28},
    {15, 20},  {16, 31}, {17, 31}, {18, 27}, {19, 44}, {20, 30},
};
// The largest label of each frame (pydicom), and the source frame each frame names.
const int kLabelOfFrame[20] = {9,  10, 17, 16, 3, 7, 11, 18, 13, 12,
                               19, 6,  14, 20, 5, 8, 15, 19, 4,  1};
const int kSourceFrame[20] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  12,
                              15, 16, 17, 18, 19, 21, 22, 23, 24, 25};

void expectHighdicomLabelMap(const SegFrames& f) {
    EXPECT_TRUE(f.slide_coordinates);
    ASSERT_EQ(f.positions.size(), 20u);
    ASSERT_EQ(f.planes.pixelType(), PixelType::kUInt8);
    const Geometry g = f.planes.geometry();
    ASSERT_EQ(g.size[0], 10);
    ASSERT_EQ(g.size[1], 10);
    ASSERT_EQ(g.size[2], 20);
    EXPECT_NEAR(f.positions[0][0], 23.449873, 1e-9);
    EXPECT_NEAR(f.positions[0][1], 25.691574, 1e-9);
    EXPECT_NEAR(f.positions[1][1], 25.686584, 1e-9);
    EXPECT_NEAR(f.spacing[0], 0.000499, 1e-12);
    std::map<int, int64_t> voxels;
    const uint8_t* v = f.planes.data<uint8_t>();
    for (int frame = 0; frame < 20; ++frame) {
        int top = 0;
        for (int i = 0; i < 100; ++i) {
            ++voxels[v[frame * 100 + i]];
            top = std::max<int>(top, v[frame * 100 + i]);
        }
        EXPECT_EQ(top, kLabelOfFrame[frame]) << "frame " << frame;
        EXPECT_EQ(f.referenced_frames[static_cast<size_t>(frame)], kSourceFrame[frame]);
        EXPECT_EQ(f.referenced_sop_instances[static_cast<size_t>(frame)],
                  "1.2.826.0.1.3680043.9.7433.3.12857516184849951143044513877282227");
    }
    EXPECT_EQ(voxels, kVoxels);
    ASSERT_EQ(f.segments.size(), 20u);  // 1..20; the Background segment (0) is not one
    for (size_t i = 0; i < f.segments.size(); ++i)
        EXPECT_EQ(f.segments[i].value, static_cast<int>(i) + 1);
    EXPECT_EQ(f.segments[0].name, "RGB(37, 231, 253)");
    EXPECT_EQ(f.segments[0].category.code, "85756007");
    EXPECT_EQ(f.referenced_series_uid,
              "1.2.826.0.1.3680043.9.7433.3.57084118109582350083572639456817453");
    EXPECT_EQ(f.frame_of_reference_uid, "1.2.826.0.1.3680043.9.7433.2.1");
}

TEST(LabelMapSegData, ReadsHighdicomsMonochromeLabelMap) {
    VOXSEG_REQUIRE_DATA(kFolder);
    auto f = readLabelMapSegFrames(file("seg_image_sm_control_labelmap.dcm"));
    ASSERT_TRUE(f.isOk()) << f.status().toString();
    EXPECT_FALSE(f->palette_color);
    expectHighdicomLabelMap(*f);
}

TEST(LabelMapSegData, ReadsHighdicomsPaletteColorLabelMapWithItsColours) {
    VOXSEG_REQUIRE_DATA(kFolder);
    auto f = readLabelMapSegFrames(file("seg_image_sm_control_labelmap_palette_color.dcm"));
    ASSERT_TRUE(f.isOk()) << f.status().toString();
    EXPECT_TRUE(f->palette_color);
    expectHighdicomLabelMap(*f);
    // Palette entries 1..3 (8-bit entries packed two per OW word), as pydicom applies them.
    using Rgb = std::array<uint8_t, 3>;
    EXPECT_EQ(f->segments[0].color, (Rgb{255, 0, 191}));
    EXPECT_EQ(f->segments[1].color, (Rgb{253, 0, 255}));
    EXPECT_EQ(f->segments[2].color, (Rgb{182, 0, 255}));

    // Same pixels as the MONOCHROME2 file.
    auto mono = readLabelMapSegFrames(file("seg_image_sm_control_labelmap.dcm"));
    ASSERT_TRUE(mono.isOk());
    EXPECT_EQ(std::memcmp(mono->planes.data<uint8_t>(), f->planes.data<uint8_t>(), 2000), 0);
}

TEST(LabelMapSegData, ReadLabelMapSegFillsTheSegReadResult) {
    VOXSEG_REQUIRE_DATA(kFolder);
    const std::string path = file("seg_image_sm_control_labelmap.dcm");
    DcmFileFormat dicom;
    ASSERT_TRUE(dicom.loadFile(path.c_str()).good());
    auto r = readLabelMapSeg(path, *dicom.getDataset());
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r->frames, 20);
    EXPECT_EQ(r->segments.size(), 20u);
    EXPECT_EQ(r->label_map.geometry().size[2], 20);
    EXPECT_FALSE(r->fractional);
}

TEST(LabelMapSegData, ABinarySegIsNotTakenForALabelMap) {
    VOXSEG_REQUIRE_DATA(kFolder);
    auto f = readLabelMapSegFrames(file("seg_image_ct_binary.dcm"));
    ASSERT_FALSE(f.isOk());
    EXPECT_NE(f.status().toString().find("not a Label Map SEG"), std::string::npos);
}

// Written on a real CT series (pydicom-test-files CT2, the series highdicom's CT SEGs reference):
// HU thresholds as labels, through labelsOnAcquiredImages() as the pipeline does; highdicom
// reads the Label Map SEG back per source image voxel for voxel.
TEST(LabelMapSegData, HighdicomReadsWhatWeWriteOnARealCt) {
#ifndef VOXSEG_PYTHON3
    GTEST_SKIP() << "python3 not found at configure time";
#else
    const std::string rel = "pydicom-test-files/dicomdirtests/77654033/CT2";
    VOXSEG_REQUIRE_DATA(rel);
    auto scan = scanDicom({voxseg::testing::sharedData(rel).string()});
    ASSERT_TRUE(scan.isOk()) << scan.status().toString();
    ASSERT_EQ(scan->series.size(), 1u);
    const SeriesCandidate& source = scan->series.front();
    auto ct = loadSeries(source);
    ASSERT_TRUE(ct.isOk()) << ct.status().toString();
    const Geometry g = ct->geometry();
    Volume labels = Volume::allocate<uint8_t>(g);
    const Volume hu = ct->castTo(PixelType::kFloat32);
    for (int64_t i = 0; i < g.voxelCount(); ++i) {
        const float v = hu.data<float>()[i];
        labels.data<uint8_t>()[i] = v > 300 ? 2 : (v > -200 && v < 100 ? 1 : 0);
    }
    auto acquired = labelsOnAcquiredImages(labels, source, 1);
    ASSERT_TRUE(acquired.isOk()) << acquired.status().toString();
    std::vector<SegmentDescription> segments(2);
    segments[0].value = 1, segments[0].name = "soft tissue";
    segments[1].value = 2, segments[1].name = "bone";
    segments[1].type = {"272673000", "SCT", "Bone"};
    voxseg::testing::TempDir dir;
    const std::string path = dir / "ct2_labelmap.dcm";
    auto report = writeLabelMapSeg(*acquired, source, segments, {}, path);
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_EQ(report->segments, 2);

    // Expected planes for tests/io/highdicom_check.py: raw uint8 + .json sidecar.
    const std::string raw = dir / "expected.raw";
    {
        std::ofstream out(raw, std::ios::binary);
        out.write(
            reinterpret_cast<const char*>(acquired->labels.data<uint8_t>()),
            static_cast<std::streamsize>(acquired->planeSize() * acquired->planes.planeCount()));
        std::ofstream meta(raw + ".json");
        meta << "{\"dtype\": \"uint8\", \"rows\": " << acquired->planes.rows
             << ", \"columns\": " << acquired->planes.columns << ", \"planes\": [";
        for (size_t k = 0; k < acquired->planes.planeCount(); ++k) {
            DcmFileFormat f;
            ASSERT_TRUE(f.loadFile(acquired->planes.slices[k].path.c_str()).good());
            OFString uid;
            f.getDataset()->findAndGetOFString(DCM_SOPInstanceUID, uid);
            meta << (k ? ", " : "") << "{\"sop_instance_uid\": \"" << uid << "\", \"frame\": 0}";
        }
        meta << "]}\n";
    }
    const std::string command = std::string(VOXSEG_PYTHON3) + " " + VOXSEG_SOURCE_DIR +
                                "/tests/io/highdicom_check.py '" + path + "' '" +
                                voxseg::testing::sharedData(rel).string() + "' '" + raw + "' 2>&1";
    FILE* pipe = ::popen(command.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string out;
    char buffer[4096];
    while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
    const int rc = ::pclose(pipe);
    std::cout << "highdicom on CT2: " << out;
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 3)
        GTEST_SKIP() << "highdicom is not installed: pip install highdicom";
    EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << out;
    EXPECT_NE(out.find("\"voxels_differing\": 0"), std::string::npos) << out;
    EXPECT_EQ(out.find("\"voxels_labelled\": 0,"), std::string::npos) << out;
#endif
}

}  // namespace
}  // namespace voxseg::io
