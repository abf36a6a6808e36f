// DICOM outputs of a real gantry-tilted, unevenly spaced head CT (label "data": dcm_qa_ct's GE
// HiSpeed Dual, 18.5 degrees, 1.08-7 mm steps). A label map made on the loaded (de-sheared)
// grid by thresholds (bone, brain) goes back onto the 28 acquired images and out as BINARY SEG,
// Label Map SEG and RTSTRUCT. Each lands on the source images voxel for voxel when read by
// voxseg's readers and by highdicom (pip; skipped with a message when absent), and dciodvfy
// finds no error in the BINARY SEG and the RTSTRUCT.
#include "io/acquired_labels.h"
#include "io/dicom_series.h"
#include "io/rtstruct_reader.h"
#include "io/rtstruct_writer.h"
#include "io/seg_reader.h"
#include "io/seg_writer.h"
#include "tests/io/dicom_tools.h"
#include "tests/test_data.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace voxseg::io {
namespace {

using voxseg::testing::sharedData;
using voxseg::testing::TempDir;

int64_t differences(const Volume& a, const Volume& b) {
    const int64_t n = a.geometry().voxelCount();
    EXPECT_EQ(n, b.geometry().voxelCount());
    int64_t d = 0;
    for (int64_t i = 0; i < n; ++i) d += a.data<uint8_t>()[i] != b.data<uint8_t>()[i];
    return d;
}

TEST(DicomOutputsData, TiltedGeHeadCtSegAndRtstructLandOnTheSourceImages) {
    const std::string rel = "dcm_qa_ct/GE_HiSpeedDual_tilt_varspacing";
    VOXSEG_REQUIRE_DATA(rel);
    const std::string folder = sharedData(rel).string();
    auto scan = scanDicom({folder});
    ASSERT_TRUE(scan.isOk());
    const SeriesCandidate& c = scan->series.at(0);
    ASSERT_TRUE(c.tilted);
    auto volume = loadSeries(c);
    ASSERT_TRUE(volume.isOk()) << volume.status().toString();
    const Geometry g = volume->geometry();
    Volume labels = Volume::allocate<uint8_t>(g);
    const int16_t* hu = volume->data<int16_t>();
    for (int64_t i = 0; i < g.voxelCount(); ++i)
        labels.data<uint8_t>()[i] = hu[i] > 400 ? 1 : (hu[i] >= 20 && hu[i] <= 60 ? 2 : 0);
    SegmentDescription bone, brain;
    bone.value = 1;
    bone.name = "bone";
    brain.value = 2;
    brain.name = "brain";
    const std::vector<SegmentDescription> segments{bone, brain};

    auto acquired = labelsOnAcquiredImages(labels, c);
    ASSERT_TRUE(acquired.isOk());
    ASSERT_TRUE(acquired->resampled);
    // The thresholds on the acquired images themselves agree with the mapped labels except
    // where linear interpolation between images moved a value across a threshold.
    SeriesCandidate plain = c;
    plain.tilted = plain.uneven_spacing = plain.has_gaps = false;
    auto raw = loadSeries(plain);
    ASSERT_TRUE(raw.isOk());
    int64_t agree = 0, either = 0;
    for (int64_t i = 0; i < raw->geometry().voxelCount(); ++i) {
        const int16_t v = raw->data<int16_t>()[i];
        const int truth = v > 400 ? 1 : (v >= 20 && v <= 60 ? 2 : 0);
        const int got = acquired->labels.data<uint8_t>()[i];
        agree += truth == got && truth != 0;
        either += truth != 0 || got != 0;
    }
    std::printf("labels at the acquired pixels vs thresholds of the acquired values: %.4f\n",
                static_cast<double>(agree) / either);
    EXPECT_GT(static_cast<double>(agree) / either, 0.85);

    TempDir dir;
    const std::string seg = dir / "seg.dcm", labelmap = dir / "labelmap.dcm",
                      rt = dir / "rtstruct.dcm";
    auto seg_report = writeDicomSeg(*acquired, c, segments, {}, seg);
    ASSERT_TRUE(seg_report.isOk()) << seg_report.status().toString();
    EXPECT_TRUE(seg_report->per_frame_references);
    SegWriteOptions lm;
    lm.type = SegType::kLabelMap;
    ASSERT_TRUE(writeDicomSeg(*acquired, c, segments, lm, labelmap).isOk());
    auto rt_report = writeRtStruct(*acquired, c, segments, {}, rt);
    ASSERT_TRUE(rt_report.isOk()) << rt_report.status().toString();
    std::printf("SEG %d frames, RTSTRUCT %d ROIs, %lld contours, %lld points\n", seg_report->frames,
                rt_report->rois, static_cast<long long>(rt_report->contours),
                static_cast<long long>(rt_report->points));

    // voxseg's readers: on the source images voxel for voxel.
    SegReadOptions options;
    options.source = &c;
    options.label_values = {{"bone", 1}, {"brain", 2}};
    for (const std::string& path : {seg, labelmap}) {
        auto back = readDicomSeg(path, options);
        ASSERT_TRUE(back.isOk()) << back.status().toString();
        EXPECT_EQ(differences(back->acquired->labels, acquired->labels), 0) << path;
    }
    RtStructReadOptions rt_options;
    rt_options.label_values = options.label_values;
    auto rt_back = readRtStruct(rt, c, rt_options);
    ASSERT_TRUE(rt_back.isOk()) << rt_back.status().toString();
    EXPECT_TRUE(rt_back->warnings.empty());
    EXPECT_EQ(differences(rt_back->acquired.labels, acquired->labels), 0);

    // dciodvfy: no error in the BINARY SEG and the RTSTRUCT.
    if (!voxseg::testing::haveCommand("dciodvfy")) {
        ADD_FAILURE() << "dciodvfy (Debian package dicom3tools) is not installed";
    } else {
        for (const std::string& path : {seg, rt}) {
            const std::string verdict = voxseg::testing::runCommand("dciodvfy '" + path + "'");
            EXPECT_EQ(verdict.find("Error"), std::string::npos) << path << "\n" << verdict;
        }
    }

    // highdicom: both SEGs per source image.
    for (const std::string& path : {seg, labelmap})
        voxseg::testing::highdicomAgrees(path, folder, *acquired, dir / "expected");
}

}  // namespace
}  // namespace voxseg::io
