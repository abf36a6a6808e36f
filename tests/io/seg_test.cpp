// DICOM SEG writer/reader: round trip voxel-exact, dciodvfy-clean, clear errors; reading the
// dcmqi and highdicom reference SEGs (label `data`, in seg_data_test.cpp).
#include "io/dicom_series.h"
#include "io/dicom_synth.h"
#include "io/seg_reader.h"
#include "io/seg_writer.h"

#include "tests/test_data.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

namespace voxseg::io {
namespace {

using voxseg::testing::TempDir;

// A small synthetic CT series (16 columns x 12 rows x 6 slices), oblique-free, written with DCMTK.
struct SyntheticSeries {
    SeriesCandidate candidate;
    Geometry geometry;
};

SyntheticSeries writeSeries(const TempDir& dir) {
    SyntheticSeries s;
    Geometry& g = s.geometry;
    g.size = {16, 12, 6};
    g.spacing = {0.75, 0.8, 2.5};
    g.origin = {-6.0, -4.5, 100.0};
    char study[100], series[100], frame_of_reference[100], uid[100];
    dcmGenerateUniqueIdentifier(study);
    dcmGenerateUniqueIdentifier(series);
    dcmGenerateUniqueIdentifier(frame_of_reference);
    s.candidate.series_uid = series;
    s.candidate.study_uid = study;
    s.candidate.frame_of_reference_uid = frame_of_reference;
    s.candidate.modality = "CT";
    s.candidate.geometry = g;
    for (int k = 0; k < 6; ++k) {
        DcmFileFormat file;
        DcmDataset* ds = file.getDataset();
        ds->putAndInsertString(DCM_SOPClassUID, UID_CTImageStorage);
        ds->putAndInsertString(DCM_SOPInstanceUID, dcmGenerateUniqueIdentifier(uid));
        ds->putAndInsertString(DCM_StudyInstanceUID, study);
        ds->putAndInsertString(DCM_SeriesInstanceUID, series);
        ds->putAndInsertString(DCM_FrameOfReferenceUID, frame_of_reference);
        ds->putAndInsertString(DCM_PatientName, "Phantom^Synthetic");
        ds->putAndInsertString(DCM_PatientID, "SYN0001");
        ds->putAndInsertString(DCM_PatientBirthDate, "19700101");
        ds->putAndInsertString(DCM_PatientSex, "O");
        ds->putAndInsertString(DCM_StudyDate, "20240101");
        ds->putAndInsertString(DCM_StudyTime, "120000");
        ds->putAndInsertString(DCM_StudyID, "1");
        ds->putAndInsertString(DCM_AccessionNumber, "A1");
        ds->putAndInsertString(DCM_ReferringPhysicianName, "");
        ds->putAndInsertString(DCM_Modality, "CT");
        ds->putAndInsertString(DCM_SeriesNumber, "2");
        ds->putAndInsertString(DCM_InstanceNumber, std::to_string(k + 1).c_str());
        ds->putAndInsertString(DCM_ImageType, "ORIGINAL\\PRIMARY\\AXIAL");
        ds->putAndInsertString(DCM_ImageOrientationPatient, "1\\0\\0\\0\\1\\0");
        const std::string ipp = "-6\\-4.5\\" + std::to_string(100.0 + 2.5 * k);
        ds->putAndInsertString(DCM_ImagePositionPatient, ipp.c_str());
        ds->putAndInsertString(DCM_PixelSpacing, "0.8\\0.75");
        ds->putAndInsertString(DCM_SliceThickness, "2.5");
        ds->putAndInsertString(DCM_RescaleIntercept, "-1024");
        ds->putAndInsertString(DCM_RescaleSlope, "1");
        ds->putAndInsertString(DCM_KVP, "120");
        ds->putAndInsertString(DCM_PhotometricInterpretation, "MONOCHROME2");
        ds->putAndInsertUint16(DCM_SamplesPerPixel, 1);
        ds->putAndInsertUint16(DCM_Rows, 12);
        ds->putAndInsertUint16(DCM_Columns, 16);
        ds->putAndInsertUint16(DCM_BitsAllocated, 16);
        ds->putAndInsertUint16(DCM_BitsStored, 16);
        ds->putAndInsertUint16(DCM_HighBit, 15);
        ds->putAndInsertUint16(DCM_PixelRepresentation, 0);
        std::vector<Uint16> pixels(16 * 12, static_cast<Uint16>(1000 + k));
        ds->putAndInsertUint16Array(DCM_PixelData, pixels.data(), pixels.size());
        // Names without extension, in reverse order: the writer must not rely on either.
        const std::string path = dir / ("img" + std::to_string(97 - k));
        EXPECT_TRUE(file.saveFile(path.c_str(), EXS_LittleEndianExplicit).good());
        SliceRef ref;
        ref.path = path;
        ref.position = {-6.0, -4.5, 100.0 + 2.5 * k};
        ref.instance_number = k + 1;
        s.candidate.slices.push_back(ref);
    }
    s.candidate.num_files = 6;
    return s;
}

// Labels: 1 = block on slices 1-3, 2 = a cross on slices 2-4, 5 = one voxel on slice 4
// (slices 0 and 5 empty; label 5 is not consecutive).
Volume makeLabels(const Geometry& g) {
    Volume v = Volume::allocate<uint8_t>(g);
    uint8_t* p = v.data<uint8_t>();
    auto at = [&](int i, int j, int k) -> uint8_t& { return p[(k * 12 + j) * 16 + i]; };
    for (int k = 1; k <= 3; ++k)
        for (int j = 2; j <= 6; ++j)
            for (int i = 1; i <= 7; ++i) at(i, j, k) = 1;
    for (int k = 2; k <= 4; ++k) {
        for (int i = 9; i <= 14; ++i) at(i, 8, k) = 2;
        for (int j = 5; j <= 11; ++j) at(12, j, k) = 2;
    }
    at(15, 0, 4) = 5;
    return v;
}

std::vector<SegmentDescription> descriptions() {
    return {
        {{1,
          "liver",
          {221, 130, 101},
          {"123037004", "SCT", "Anatomical Structure"},
          {"10200004", "SCT", "Liver"}},
         "",
         ""},
        {{2,
          "spleen",
          {157, 108, 162},
          {"123037004", "SCT", "Anatomical Structure"},
          {"78961009", "SCT", "Spleen"}},
         "",
         ""},
        {{5,
          "aorta",
          {224, 97, 76},
          {"123037004", "SCT", "Anatomical Structure"},
          {"15825003", "SCT", "Aorta"}},
         "",
         ""},
    };
}

// Runs dciodvfy (dicom3tools) and returns its output.
std::string dciodvfy(const std::string& path) {
    std::string out;
    FILE* pipe = ::popen(("dciodvfy '" + path + "' 2>&1").c_str(), "r");
    if (!pipe) return "cannot run dciodvfy";
    char buffer[4096];
    while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
    ::pclose(pipe);
    return out;
}

TEST(DicomSeg, RoundTripIsVoxelExactAndDciodvfyClean) {
    TempDir dir;
    const SyntheticSeries series = writeSeries(dir);
    const Volume labels = makeLabels(series.geometry);
    SegWriteOptions options;
    options.algorithm_name = "voxseg test model";
    options.algorithm_version = "1.2.3";
    const std::string path = dir / "seg.dcm";
    // A type modifier (laterality, as TotalSegmentator codes kidney_left) on the first segment.
    std::vector<SegmentDescription> descs = descriptions();
    descs[0].type_modifier = CodedConcept{"7771000", "SCT", "Left"};
    auto report = writeDicomSeg(labels, series.candidate, descs, options, path);
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_EQ(report->segments, 3);
    EXPECT_EQ(report->frames, 3 + 3 + 1);  // empty frames omitted
    EXPECT_TRUE(report->per_frame_references);
    if (const char* keep = std::getenv("VOXSEG_KEEP_SEG"))
        std::filesystem::copy_file(path, keep, std::filesystem::copy_options::overwrite_existing);

    if (std::system("which dciodvfy > /dev/null 2>&1") == 0) {
        const std::string verdict = dciodvfy(path);
        EXPECT_EQ(verdict.find("Error"), std::string::npos) << verdict;
    } else {
        ADD_FAILURE() << "dciodvfy (Debian package dicom3tools) is not installed";
    }

    // Back onto the source grid, label values by segment name.
    SegReadOptions read_options;
    read_options.grid = series.geometry;
    for (const auto& d : descriptions()) read_options.label_values[d.name] = d.value;
    auto back = readDicomSeg(path, read_options);
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    EXPECT_EQ(back->frames, 7);
    EXPECT_EQ(back->referenced_series_uid, series.candidate.series_uid);
    EXPECT_EQ(back->frame_of_reference_uid, series.candidate.frame_of_reference_uid);
    EXPECT_EQ(back->overlapping_voxels, 0);
    ASSERT_EQ(back->label_map.pixelType(), PixelType::kUInt8);
    EXPECT_TRUE(back->label_map.geometry().approxEqual(series.geometry));
    int64_t differences = 0;
    for (int64_t n = 0; n < series.geometry.voxelCount(); ++n)
        differences += back->label_map.data<uint8_t>()[n] != labels.data<uint8_t>()[n];
    EXPECT_EQ(differences, 0);
    ASSERT_EQ(back->segments.size(), 3u);
    EXPECT_EQ(back->segments[0].type.meaning, "Liver");
    EXPECT_EQ(back->segments[2].type.code, "15825003");
    ASSERT_TRUE(back->segments[0].type_modifier.has_value());
    EXPECT_EQ(*back->segments[0].type_modifier, (CodedConcept{"7771000", "SCT", "Left"}));
    EXPECT_FALSE(back->segments[1].type_modifier.has_value());
    EXPECT_EQ(back->segments[0].algorithm_name, "voxseg test model");
    for (int c = 0; c < 3; ++c)  // CIELab round trip within one sRGB step
        EXPECT_NEAR(back->segments[1].color[c], descriptions()[1].color[c], 1);

    // Without a grid: frames define it (slices 1..4); every voxel lands where it was.
    auto derived = readDicomSeg(path);
    ASSERT_TRUE(derived.isOk()) << derived.status().toString();
    const Geometry dg = derived->label_map.geometry();
    EXPECT_EQ(dg.size, (std::array<int64_t, 3>{16, 12, 4}));
    for (int64_t k = 0; k < dg.size[2]; ++k)
        for (int64_t j = 0; j < dg.size[1]; ++j)
            for (int64_t i = 0; i < dg.size[0]; ++i) {
                const Vec3 p = dg.indexToPhysical(
                    {static_cast<double>(i), static_cast<double>(j), static_cast<double>(k)});
                const Vec3 q = series.geometry.physicalToIndex(p);
                const int64_t src =
                    (std::llround(q[2]) * 12 + std::llround(q[1])) * 16 + std::llround(q[0]);
                const uint8_t expected_segment = [&] {
                    switch (labels.data<uint8_t>()[src]) {
                        case 1:
                            return 1;
                        case 2:
                            return 2;
                        case 5:
                            return 3;  // segment number, no mapping given
                        default:
                            return 0;
                    }
                }();
                ASSERT_EQ(derived->label_map.data<uint8_t>()[(k * 12 + j) * 16 + i],
                          expected_segment);
            }
}

// uint16 label maps with a value far above 255: the per-slice presence count is as wide as the
// largest value, and every frame still carries exactly its segment's voxels.
TEST(DicomSeg, Uint16LabelsWithLargeValuesRoundTrip) {
    TempDir dir;
    const SyntheticSeries series = writeSeries(dir);
    Volume labels = makeLabels(series.geometry).castTo(PixelType::kUInt16);
    uint16_t* p = labels.data<uint16_t>();
    for (int64_t n = 0; n < series.geometry.voxelCount(); ++n)
        if (p[n] == 5) p[n] = 1000;
    std::vector<SegmentDescription> segments = descriptions();
    segments[2].value = 1000;
    const std::string path = dir / "seg16.dcm";
    auto report = writeDicomSeg(labels, series.candidate, segments, SegWriteOptions(), path);
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_EQ(report->segments, 3);
    EXPECT_EQ(report->frames, 3 + 3 + 1);

    SegReadOptions read_options;
    read_options.grid = series.geometry;
    for (const auto& d : segments) read_options.label_values[d.name] = d.value;
    auto back = readDicomSeg(path, read_options);
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    ASSERT_EQ(back->label_map.pixelType(), PixelType::kUInt16);
    int64_t differences = 0, large = 0;
    for (int64_t n = 0; n < series.geometry.voxelCount(); ++n) {
        differences += back->label_map.data<uint16_t>()[n] != p[n];
        large += p[n] == 1000;
    }
    EXPECT_EQ(large, 1);
    EXPECT_EQ(differences, 0);
}

TEST(DicomSeg, ClearErrorsAndNothingLeftBehind) {
    TempDir dir;
    const SyntheticSeries series = writeSeries(dir);
    const std::string path = dir / "seg.dcm";
    // No source DICOM series (a NIfTI input).
    auto no_source =
        writeDicomSeg(makeLabels(series.geometry), SeriesCandidate{}, descriptions(), {}, path);
    ASSERT_FALSE(no_source.isOk());
    EXPECT_EQ(no_source.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(no_source.status().message().find("source DICOM series"), std::string::npos);
    // Empty label map.
    auto empty = writeDicomSeg(Volume::allocate<uint8_t>(series.geometry), series.candidate,
                               descriptions(), {}, path);
    ASSERT_FALSE(empty.isOk());
    EXPECT_NE(empty.status().message().find("empty"), std::string::npos);
    // Float "label map".
    auto wrong_type = writeDicomSeg(Volume::allocate<float>(series.geometry), series.candidate,
                                    descriptions(), {}, path);
    EXPECT_FALSE(wrong_type.isOk());
    // Unwritable folder.
    auto unwritable = writeDicomSeg(makeLabels(series.geometry), series.candidate, descriptions(),
                                    {}, "/nonexistent-folder/seg.dcm");
    EXPECT_FALSE(unwritable.isOk());
    EXPECT_FALSE(std::filesystem::exists(path));
    // Reading something that is not a SEG.
    auto not_seg = readDicomSeg(series.candidate.slices[0].path);
    ASSERT_FALSE(not_seg.isOk());
    EXPECT_NE(not_seg.status().message().find("not a DICOM Segmentation"), std::string::npos);
    auto missing = readDicomSeg(dir / "missing.dcm");
    EXPECT_FALSE(missing.isOk());
    // Only the six source slices are in the folder: no temporaries.
    int files = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++files;
    EXPECT_EQ(files, 6);
}

// The io/ path: an oblique series written and scanned by io/dicom_series, a label map on the
// candidate's grid, SEG out and back: voxel-exact, dciodvfy-clean.
TEST(DicomSeg, ObliqueScannedSeriesRoundTrip) {
    TempDir dir;
    SynthSeriesSpec spec;
    const double c = std::cos(0.3), s = std::sin(0.3);
    spec.row_dir = {c, s, 0};
    spec.col_dir = {-s * std::cos(0.2), c * std::cos(0.2),
                    -std::sin(0.2)};  // orthogonal to row_dir
    spec.columns = 20;
    spec.rows = 14;
    spec.slices = 7;
    spec.origin = {12.5, -30.25, 48.0};
    spec.shuffle_names = true;
    auto written = writeSynthSeries(spec, dir.path().string());
    ASSERT_TRUE(written.isOk()) << written.status().toString();
    auto scan = scanDicom({dir.path().string()});
    ASSERT_TRUE(scan.isOk()) << scan.status().toString();
    auto candidate = selectSeries(*scan, "");
    ASSERT_TRUE(candidate.isOk()) << candidate.status().toString();
    // The grid loadSeries() returns for this candidate (regular stack: no resampling).
    const Geometry g = (*candidate)->geometry;
    ASSERT_EQ(g.size, (std::array<int64_t, 3>{20, 14, 7}));
    // Labels: 1 for i < 8 on slices 2..4, 2 on a diagonal line of the last slice.
    Volume labels = Volume::allocate<uint8_t>(g);
    for (int64_t k = 2; k <= 4; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < 8; ++i)
                labels.data<uint8_t>()[(k * g.size[1] + j) * g.size[0] + i] = 1;
    for (int64_t j = 0; j < g.size[1]; ++j)
        labels.data<uint8_t>()[((g.size[2] - 1) * g.size[1] + j) * g.size[0] + j] = 2;
    const std::string path = dir / "out.seg.dcm";
    auto report = writeDicomSeg(labels, **candidate, descriptions(), {}, path);
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_EQ(report->frames, 3 + 1);
    EXPECT_TRUE(report->per_frame_references);
    if (std::system("which dciodvfy > /dev/null 2>&1") == 0) {
        const std::string verdict = dciodvfy(path);
        EXPECT_EQ(verdict.find("Error"), std::string::npos) << verdict;
    }
    SegReadOptions options;
    options.grid = g;
    auto back = readDicomSeg(path, options);
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    EXPECT_EQ(std::memcmp(back->label_map.rawData(), labels.rawData(),
                          static_cast<size_t>(g.voxelCount())),
              0);
    auto derived = readDicomSeg(path);
    ASSERT_TRUE(derived.isOk()) << derived.status().toString();
    // Derived grid: the frames' slices 2..6 in the loaded volume's orientation.
    const Vec3 first = derived->label_map.geometry().origin;
    const Vec3 expected = g.indexToPhysical({0, 0, 2});
    for (int a = 0; a < 3; ++a) EXPECT_NEAR(first[a], expected[a], 1e-3);
}

}  // namespace
}  // namespace voxseg::io
