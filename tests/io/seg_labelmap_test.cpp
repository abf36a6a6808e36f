// Label Map SEG (io/seg_labelmap): written on a synthetic dciodvfy-clean CT series and read back
// voxel-exact, with per-frame positions and source references; 8 vs 16 bit by the values
// present; empty planes omitted; described-but-absent labels get no segment; dciodvfy and
// highdicom (tests/io/highdicom_check.py) on what is written.
#include "io/seg_labelmap.h"
#include "io/acquired_labels.h"
#include "io/dicom_series.h"
#include "io/dicom_synth.h"

#include "tests/test_data.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcmetinf.h>
#include <dcmtk/dcmdata/dcsequen.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace voxseg::io {
namespace {

using voxseg::testing::TempDir;

constexpr int kColumns = 16, kRows = 12, kSlices = 6;

SeriesCandidate writeSource(const TempDir& dir) {
    SynthSeriesSpec spec;
    spec.columns = kColumns;
    spec.rows = kRows;
    spec.slices = kSlices;
    spec.origin = {-6.0, -4.5, 100.0};
    spec.ct_image_iod = true;
    auto files = writeSynthSeries(spec, dir / "src");
    EXPECT_TRUE(files.isOk()) << files.status().toString();
    auto scan = scanDicom({dir / "src"});
    EXPECT_TRUE(scan.isOk()) << scan.status().toString();
    EXPECT_EQ(scan->series.size(), 1u);
    return scan->series.front();
}

// Labels on the acquired planes: plane 0 and 5 empty; 1 and 2 on planes 1-3, `big` on plane 4.
AcquiredLabels makeLabels(const SeriesCandidate& source, uint16_t big) {
    AcquiredLabels a;
    a.planes = AcquiredPlanes::of(source);
    Geometry g = source.geometry;
    g.size = {kColumns, kRows, kSlices};
    a.labels = Volume::allocate<uint16_t>(g);
    uint16_t* v = a.labels.data<uint16_t>();
    for (int k = 1; k <= 4; ++k)
        for (int y = 0; y < kRows; ++y)
            for (int x = 0; x < kColumns; ++x) {
                uint16_t value = 0;
                if (k <= 3 && x >= 2 && x < 7 && y >= 3 + k && y < 9) value = 1;
                if (k <= 3 && x >= 9 && x < 14 && y >= 1 && y < 4 + k) value = 2;
                if (k == 4 && (x + y) % 3 == 0) value = big;
                v[(int64_t{k} * kRows + y) * kColumns + x] = value;
            }
    return a;
}

std::vector<SegmentDescription> descriptions(uint16_t big) {
    std::vector<SegmentDescription> d(4);
    d[0].value = 1, d[0].name = "liver", d[0].color = {200, 100, 50};
    d[0].type = {"10200004", "SCT", "Liver"};
    d[1].value = 2, d[1].name = "spleen", d[1].color = {20, 200, 60};
    d[1].type = {"78961009", "SCT", "Spleen"};
    d[2].value = big, d[2].name = "lesion", d[2].color = {250, 250, 10};
    d[3].value = 7, d[3].name = "absent organ";  // described, not in the map
    return d;
}

std::string run(const std::string& command, int* exit_code) {
    std::string out;
    FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
    if (!pipe) return "cannot run " + command;
    char buffer[4096];
    while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
    const int rc = ::pclose(pipe);
    *exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    return out;
}

std::string sopInstanceOf(const std::string& path) {
    DcmFileFormat f;
    if (f.loadFile(path.c_str()).bad()) return {};
    OFString uid;
    f.getDataset()->findAndGetOFString(DCM_SOPInstanceUID, uid);
    return uid.c_str();
}

TEST(LabelMapSeg, SixteenBitRoundTripWithPositionsAndReferences) {
    TempDir dir;
    const SeriesCandidate source = writeSource(dir);
    const AcquiredLabels labels = makeLabels(source, 300);
    SegWriteOptions options;
    options.algorithm_name = "voxseg test model";
    options.algorithm_version = "1.2.3";
    const std::string path = dir / "labelmap.dcm";
    auto report = writeLabelMapSeg(labels, source, descriptions(300), options, path);
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_EQ(report->segments, 3);  // 1, 2, 300; 7 is absent
    EXPECT_EQ(report->frames, 4);    // planes 0 and 5 hold no label
    EXPECT_TRUE(report->per_frame_references);
    if (const char* keep = std::getenv("VOXSEG_KEEP_SEG"))
        std::filesystem::copy_file(path, keep, std::filesystem::copy_options::overwrite_existing);

    // Header attributes the IOD asks for.
    DcmFileFormat file;
    ASSERT_TRUE(file.loadFile(path.c_str()).good());
    DcmDataset* ds = file.getDataset();
    OFString s;
    ds->findAndGetOFString(DCM_SOPClassUID, s);
    EXPECT_EQ(s, kLabelMapSegSopClassUid);
    file.getMetaInfo()->findAndGetOFString(DCM_MediaStorageSOPClassUID, s);
    EXPECT_EQ(s, kLabelMapSegSopClassUid);
    ds->findAndGetOFString(DCM_SegmentationType, s);
    EXPECT_EQ(s, "LABELMAP");
    ds->findAndGetOFString(DCM_PhotometricInterpretation, s);
    EXPECT_EQ(s, "MONOCHROME2");
    Uint16 bits = 0, padding = 99;
    ds->findAndGetUint16(DCM_BitsAllocated, bits);
    EXPECT_EQ(bits, 16);
    ds->findAndGetUint16(DCM_PixelPaddingValue, padding);
    EXPECT_EQ(padding, 0);
    DcmSequenceOfItems* dims = nullptr;
    ASSERT_TRUE(ds->findAndGetSequence(DCM_DimensionIndexSequence, dims).good());
    ASSERT_EQ(dims->card(), 1u);  // plane position only
    DcmTagKey pointer;
    DcmElement* pointer_element = nullptr;
    ASSERT_TRUE(
        dims->getItem(0)->findAndGetElement(DCM_DimensionIndexPointer, pointer_element).good());
    pointer_element->getTagVal(pointer, 0);
    EXPECT_EQ(pointer, DCM_ImagePositionPatient);
    ds->findAndGetOFString(DCM_PatientID, s);
    EXPECT_EQ(s, "SYNTH-0001");
    ds->findAndGetOFString(DCM_StudyInstanceUID, s);
    EXPECT_EQ(s, source.study_uid.c_str());
    DcmItem* series_item = nullptr;
    ASSERT_TRUE(ds->findAndGetSequenceItem(DCM_ReferencedSeriesSequence, series_item, 0).good());
    DcmSequenceOfItems* instances = nullptr;
    ASSERT_TRUE(series_item->findAndGetSequence(DCM_ReferencedInstanceSequence, instances).good());
    EXPECT_EQ(instances->card(), static_cast<unsigned long>(kSlices));

    // Back: frames as stored.
    auto frames = readLabelMapSegFrames(path);
    ASSERT_TRUE(frames.isOk()) << frames.status().toString();
    ASSERT_EQ(frames->positions.size(), 4u);
    ASSERT_EQ(frames->planes.pixelType(), PixelType::kUInt16);
    EXPECT_FALSE(frames->slide_coordinates);
    const Geometry fg = frames->planes.geometry();
    EXPECT_EQ(fg.size[0], kColumns);
    EXPECT_EQ(fg.size[1], kRows);
    EXPECT_EQ(fg.size[2], 4);
    EXPECT_NEAR(frames->spacing[0], labels.planes.row_spacing, 1e-6);
    EXPECT_NEAR(frames->spacing[1], labels.planes.column_spacing, 1e-6);
    for (int c = 0; c < 3; ++c) {
        EXPECT_NEAR(frames->row_dir[c], labels.planes.row_dir[c], 1e-6);
        EXPECT_NEAR(frames->col_dir[c], labels.planes.col_dir[c], 1e-6);
    }
    for (size_t f = 0; f < 4; ++f) {
        const SliceRef& slice = labels.planes.slices[f + 1];
        for (int c = 0; c < 3; ++c)
            EXPECT_NEAR(frames->positions[f][c], slice.position[c], 1e-4) << "frame " << f;
        EXPECT_EQ(frames->referenced_sop_instances[f], sopInstanceOf(slice.path)) << f;
        EXPECT_EQ(frames->referenced_frames[f], 0);
        EXPECT_EQ(std::memcmp(frames->planes.data<uint16_t>() + f * kColumns * kRows,
                              labels.plane<uint16_t>(f + 1), kColumns * kRows * 2),
                  0)
            << "frame " << f;
    }
    ASSERT_EQ(frames->segments.size(), 3u);
    EXPECT_EQ(frames->segments[0].value, 1);
    EXPECT_EQ(frames->segments[0].name, "liver");
    EXPECT_EQ(frames->segments[0].type.code, "10200004");
    EXPECT_EQ(frames->segments[1].name, "spleen");
    EXPECT_EQ(frames->segments[2].value, 300);
    EXPECT_EQ(frames->segments[2].algorithm_name, "voxseg test model");
    for (int c = 0; c < 3; ++c)  // sRGB -> CIELab (16 bit) -> sRGB
        EXPECT_NEAR(frames->segments[0].color[c], descriptions(300)[0].color[c], 2);
    EXPECT_EQ(frames->referenced_series_uid, source.series_uid);
    EXPECT_EQ(frames->frame_of_reference_uid, source.frame_of_reference_uid);
}

TEST(LabelMapSeg, EightBitWhenEveryValueFitsEvenInAUint16Map) {
    TempDir dir;
    const SeriesCandidate source = writeSource(dir);
    const AcquiredLabels labels = makeLabels(source, 255);
    const std::string path = dir / "labelmap8.dcm";
    auto report = writeLabelMapSeg(labels, source, descriptions(255), {}, path);
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    auto frames = readLabelMapSegFrames(path);
    ASSERT_TRUE(frames.isOk()) << frames.status().toString();
    ASSERT_EQ(frames->planes.pixelType(), PixelType::kUInt8);
    const uint8_t* got = frames->planes.data<uint8_t>();
    int64_t differing = 0, labelled = 0;
    for (size_t f = 0; f < 4; ++f)
        for (int64_t i = 0; i < kColumns * kRows; ++i) {
            const uint16_t want = labels.plane<uint16_t>(f + 1)[i];
            differing += got[f * kColumns * kRows + i] != want;
            labelled += want != 0;
        }
    EXPECT_EQ(differing, 0);
    EXPECT_GT(labelled, 0);
}

TEST(LabelMapSeg, ErrorsSayWhatIsWrong) {
    TempDir dir;
    const SeriesCandidate source = writeSource(dir);
    AcquiredLabels empty = makeLabels(source, 3);
    std::fill_n(empty.labels.data<uint16_t>(), kColumns * kRows * kSlices, 0);
    auto r = writeLabelMapSeg(empty, source, {}, {}, dir / "empty.dcm");
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(r.status().toString().find("empty"), std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(dir / "empty.dcm"));

    AcquiredLabels wrong = makeLabels(source, 3);
    wrong.planes.slices.pop_back();
    r = writeLabelMapSeg(wrong, source, {}, {}, dir / "wrong.dcm");
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);

    SeriesCandidate not_dicom;
    r = writeLabelMapSeg(makeLabels(source, 3), not_dicom, {}, {}, dir / "nd.dcm");
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);

    auto bad = readLabelMapSegFrames(source.slices.front().path);  // a CT image
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(bad.status().toString().find("not a Label Map SEG"), std::string::npos);
}

// dicom3tools 2022 predates Supplement 243: it does not know the Label Map SOP class ("Error -
// Information Object Not found") and, checking the SegmentSequence by the pre-2024 rule, wants
// SegmentNumbers 1, 2, 3, ... which a label map need not have (SegmentNumber = pixel value).
// Exactly these two complaints are tolerated (the second only for non-consecutive labels);
// every other "Error" line fails.
int dciodvfyErrors(const std::string& path, bool consecutive_labels) {
    int rc = 0;
    const std::string verdict = run("dciodvfy '" + path + "'", &rc);
    std::cout << "dciodvfy on " << std::filesystem::path(path).filename() << ":\n"
              << verdict << "\n";
    std::istringstream lines(verdict);
    std::string line;
    int errors = 0;
    while (std::getline(lines, line)) {
        if (line.rfind("Error", 0) != 0) continue;
        if (line == "Error - Information Object Not found") continue;
        if (!consecutive_labels &&
            line.rfind("Error - SegmentNumber not monotonically increasing from one by one", 0) ==
                0)
            continue;
        ADD_FAILURE() << line;
        ++errors;
    }
    return errors;
}

TEST(LabelMapSeg, DciodvfyFindsNoErrorBeyondTheUnknownSopClass) {
    if (std::system("which dciodvfy > /dev/null 2>&1") != 0)
        GTEST_SKIP() << "dciodvfy (Debian package dicom3tools) is not installed";
    TempDir dir;
    const SeriesCandidate source = writeSource(dir);
    const std::string sixteen = dir / "labelmap16.dcm", eight = dir / "labelmap8.dcm";
    ASSERT_TRUE(
        writeLabelMapSeg(makeLabels(source, 300), source, descriptions(300), {}, sixteen).isOk());
    ASSERT_TRUE(writeLabelMapSeg(makeLabels(source, 3), source, descriptions(3), {}, eight).isOk());
    EXPECT_EQ(dciodvfyErrors(sixteen, false), 0);
    EXPECT_EQ(dciodvfyErrors(eight, true), 0);  // labels 1, 2, 3
}

// dicom3tools 2022 does check a Label Map SEG module by module when told it is a (BINARY era)
// Segmentation: a copy relabelled as SOP class 1.2.840.10008.5.1.4.1.1.66.4 may differ from
// that IOD only where Supplement 243 changed it for LABELMAP (SegmentationType, 16-bit pixels,
// no per-frame SegmentIdentificationSequence, SegmentNumbers = pixel values). Anything else
// (a missing patient/study/equipment/functional-group attribute, a bad VR) fails.
bool labelMapDifference(const std::string& line) {
    static const char* const kAllowed[] = {
        "Error - SegmentNumber not monotonically increasing from one by one",
        "Error - Unrecognized enumerated value <LABELMAP> for value 1 of attribute "
        "<Segmentation Type>",
        "Error - Unrecognized enumerated value <0x10> for value 1 of attribute <Bits Allocated>",
        "Error - Unrecognized enumerated value <0x10> for value 1 of attribute <Bits Stored>",
        "Error - Unrecognized enumerated value <0xf> for value 1 of attribute <High Bit>",
        "Error - Missing attribute Type 1 Required Element=<SegmentIdentificationSequence> "
        "Module=<SegmentationMacro>",
    };
    for (const char* allowed : kAllowed)
        if (line.rfind(allowed, 0) == 0) return true;
    return false;
}

TEST(LabelMapSeg, DciodvfyModuleChecksUnderTheSegmentationIodFindOnlyLabelMapDifferences) {
    if (std::system("which dciodvfy > /dev/null 2>&1") != 0)
        GTEST_SKIP() << "dciodvfy (Debian package dicom3tools) is not installed";
    TempDir dir;
    const SeriesCandidate source = writeSource(dir);
    const std::string path = dir / "labelmap16.dcm", relabelled = dir / "as_segmentation.dcm";
    ASSERT_TRUE(
        writeLabelMapSeg(makeLabels(source, 300), source, descriptions(300), {}, path).isOk());
    DcmFileFormat file;
    ASSERT_TRUE(file.loadFile(path.c_str()).good());
    file.getDataset()->putAndInsertString(DCM_SOPClassUID, UID_SegmentationStorage);
    file.getMetaInfo()->putAndInsertString(DCM_MediaStorageSOPClassUID, UID_SegmentationStorage);
    ASSERT_TRUE(file.saveFile(relabelled.c_str(), EXS_LittleEndianExplicit).good());
    int rc = 0;
    const std::string verdict = run("dciodvfy '" + relabelled + "'", &rc);
    std::cout << "dciodvfy, relabelled as Segmentation Storage:\n" << verdict << "\n";
    std::istringstream lines(verdict);
    std::string line;
    int differences = 0;
    while (std::getline(lines, line)) {
        if (line.rfind("Error", 0) != 0) continue;
        if (labelMapDifference(line)) {
            ++differences;
            continue;
        }
        ADD_FAILURE() << line;
    }
    EXPECT_GT(differences, 0) << "dciodvfy did not check the Segmentation IOD:\n" << verdict;
}

// Writes the expected planes for tests/io/highdicom_check.py (raw + .json sidecar).
void writeExpected(const AcquiredLabels& labels, const std::string& raw) {
    std::ofstream out(raw, std::ios::binary);
    out.write(reinterpret_cast<const char*>(labels.labels.data<uint16_t>()),
              static_cast<std::streamsize>(labels.planeSize() * labels.planes.planeCount() * 2));
    std::ofstream meta(raw + ".json");
    meta << "{\"dtype\": \"uint16\", \"rows\": " << labels.planes.rows
         << ", \"columns\": " << labels.planes.columns << ", \"planes\": [";
    for (size_t k = 0; k < labels.planes.planeCount(); ++k)
        meta << (k ? ", " : "") << "{\"sop_instance_uid\": \""
             << sopInstanceOf(labels.planes.slices[k].path) << "\", \"frame\": 0}";
    meta << "]}\n";
}

TEST(LabelMapSeg, HighdicomReadsItVoxelForVoxelPerSourceImage) {
#ifndef VOXSEG_PYTHON3
    GTEST_SKIP() << "python3 not found at configure time";
#else
    TempDir dir;
    const SeriesCandidate source = writeSource(dir);
    for (uint16_t big : {uint16_t{300}, uint16_t{200}}) {  // 16 bit, 8 bit
        const AcquiredLabels labels = makeLabels(source, big);
        const std::string path = dir / ("labelmap" + std::to_string(big) + ".dcm");
        ASSERT_TRUE(writeLabelMapSeg(labels, source, descriptions(big), {}, path).isOk());
        const std::string raw = dir / ("expected" + std::to_string(big) + ".raw");
        writeExpected(labels, raw);
        int rc = 0;
        const std::string out = run(std::string(VOXSEG_PYTHON3) + " " + VOXSEG_SOURCE_DIR +
                                        "/tests/io/highdicom_check.py '" + path + "' '" +
                                        (dir / "src") + "' '" + raw + "'",
                                    &rc);
        std::cout << "highdicom (" << big << "): " << out;
        if (rc == 3) GTEST_SKIP() << "highdicom is not installed: pip install highdicom";
        EXPECT_EQ(rc, 0) << out;
        EXPECT_NE(out.find("\"voxels_differing\": 0"), std::string::npos) << out;
        EXPECT_NE(out.find("\"frames\": 4"), std::string::npos) << out;  // 2 empty planes
    }
#endif
}

}  // namespace
}  // namespace voxseg::io
