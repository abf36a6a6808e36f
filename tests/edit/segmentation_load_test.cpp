// Issue 39 item 1: a segmentation saved with names, colours, codes, review status and edit
// provenance reopens with every one of them (edit/segmentation_load.h): DICOM SEG and RTSTRUCT
// with the sidecar the viewer writes beside them and without it (the file alone, as another
// tool's would be read), a label map with its sidecar; labels renumbered by a binary SEG come
// back to their values, voxel for voxel.
#include "edit/segmentation_load.h"
#include "edit/label_editor.h"
#include "edit/save.h"
#include "edit/segment_meta.h"
#include "io/dicom_synth.h"
#include "io/image_io.h"
#include "pipeline/segment.h"
#include "pipeline/segmentation_files.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace voxseg::edit {
namespace {

namespace fs = std::filesystem;

const std::string kLongName =
    "Left anterior segment of the superior lobe of the right lung, marked by the resident";

// Label values 2, 5 and 7 (a binary SEG numbers them 1..3); 9 has no voxels.
std::vector<SegmentMeta> reviewedSegments() {
    auto meta = [](int value, std::string name, std::array<uint8_t, 3> color, CodedConcept type,
                   ReviewStatus status, std::string algorithm) {
        SegmentMeta m;
        m.value = value;
        m.name = std::move(name);
        m.color = color;
        m.category = {"123037004", "SCT", "Anatomical Structure"};
        m.type = std::move(type);
        m.status = status;
        m.algorithm_type = std::move(algorithm);
        return m;
    };
    std::vector<SegmentMeta> out{meta(2, "Liver", {221, 130, 101}, {"10200004", "SCT", "Liver"},
                                      ReviewStatus::kCorrected, "SEMIAUTOMATIC"),
                                 meta(5, "Spleen", {157, 108, 162}, {"78961009", "SCT", "Spleen"},
                                      ReviewStatus::kAccepted, "AUTOMATIC"),
                                 meta(7, kLongName, {12, 200, 47}, {"39607008", "SCT", "Lung"},
                                      ReviewStatus::kRejected, "MANUAL"),
                                 meta(9, "Lesion", {250, 250, 10}, {"52988006", "SCT", "Lesion"},
                                      ReviewStatus::kNotReviewed, "MANUAL")};
    out[2].category = {"49755003", "SCT", "Morphologically Altered Structure"};
    return out;
}

// Boxes of labels 2, 5 and 7 on the series' grid.
Volume boxes(const Geometry& g) {
    Volume v = Volume::allocate<uint8_t>(g);
    uint8_t* p = v.data<uint8_t>();
    auto box = [&](int value, std::array<int64_t, 3> lo, std::array<int64_t, 3> hi) {
        for (int64_t k = lo[2]; k < hi[2]; ++k)
            for (int64_t j = lo[1]; j < hi[1]; ++j)
                for (int64_t i = lo[0]; i < hi[0]; ++i)
                    p[(k * g.size[1] + j) * g.size[0] + i] = static_cast<uint8_t>(value);
    };
    box(2, {3, 3, 1}, {12, 10, 6});
    box(5, {16, 4, 2}, {22, 12, 7});
    box(7, {6, 14, 3}, {20, 20, 5});
    return v;
}

int64_t differingVoxels(const Volume& a, const Volume& b) {
    const int64_t n = a.geometry().voxelCount();
    int64_t differ = 0;
    for (int64_t i = 0; i < n; ++i) {
        const int va = visitPixels(a, [&](const auto* p) { return static_cast<int>(p[i]); });
        const int vb = visitPixels(b, [&](const auto* p) { return static_cast<int>(p[i]); });
        differ += va != vb;
    }
    return differ;
}

// Every field, one by one, so a failure names it.
void expectSameSegments(const std::vector<SegmentMeta>& got, const std::vector<SegmentMeta>& want,
                        const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < want.size(); ++i) {
        SCOPED_TRACE(what + ", label " + std::to_string(want[i].value));
        EXPECT_EQ(got[i].value, want[i].value);
        EXPECT_EQ(got[i].name, want[i].name);
        EXPECT_EQ(got[i].color, want[i].color);
        EXPECT_EQ(got[i].category, want[i].category);
        EXPECT_EQ(got[i].type, want[i].type);
        EXPECT_EQ(reviewStatusName(got[i].status), std::string(reviewStatusName(want[i].status)));
        EXPECT_EQ(got[i].algorithm_type, want[i].algorithm_type);
        EXPECT_EQ(got[i], want[i]);
    }
}

class SegmentationLoad : public ::testing::Test {
  protected:
    void SetUp() override {
        io::SynthSeriesSpec spec;
        spec.columns = 26;
        spec.rows = 22;
        spec.slices = 8;
        spec.value = [](int i, int j, int k) { return 1000 + 10 * i + 3 * j - 7 * k; };
        ASSERT_TRUE(io::writeSynthSeries(spec, dir_ / "series").isOk());
        auto study = pipeline::loadStudy(dir_ / "series", "", {});
        ASSERT_TRUE(study.isOk()) << study.status().toString();
        ASSERT_TRUE(study->series.has_value());
        study_ = std::move(study.value());
        grid_ = study_.volume.geometry();
        labels_ = boxes(grid_);
    }
    std::vector<io::SegmentDescription> descriptions() const {
        std::vector<io::SegmentDescription> out;
        for (const SegmentMeta& m : reviewedSegments()) out.push_back(toSegmentDescription(m));
        return out;
    }
    // Written as the viewer saves: the file, then the sidecar beside it.
    void save(const std::string& path, bool rtstruct) {
        if (rtstruct) {
            ASSERT_TRUE(pipeline::writeDicomSegmentation(pipeline::DicomSegmentationKind::kRtStruct,
                                                         labels_, *study_.series, descriptions(),
                                                         {}, path)
                            .isOk());
        } else {
            ASSERT_TRUE(
                saveEditedSegmentation(labels_, path, &*study_.series, descriptions()).isOk());
        }
        ASSERT_TRUE(writeSegmentsFile(reviewedSegments(), sidecarPath(path)).isOk());
    }
    Result<LoadedSegmentation> load(const std::string& path) {
        return loadSegmentation(path, grid_, &*study_.series);
    }

    voxseg::testing::TempDir dir_;
    pipeline::StudyInput study_;
    Geometry grid_;
    Volume labels_;
};

TEST_F(SegmentationLoad, DicomSegWithItsSidecarKeepsEveryField) {
    const std::string path = dir_ / "reviewed.dcm";
    save(path, false);
    auto back = load(path);
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    EXPECT_EQ(back->kind, "DICOM SEG");
    EXPECT_EQ(back->sidecar, dir_ / "reviewed.review.json");
    EXPECT_TRUE(back->warnings.empty()) << back->warnings.front();
    expectSameSegments(back->segments, reviewedSegments(), "SEG + sidecar");
    EXPECT_EQ(differingVoxels(back->label_map, labels_), 0) << "values 2, 5, 7 restored";
    // What the writers would be given again: the same descriptions.
    ASSERT_EQ(back->descriptions.size(), 4u);
    EXPECT_EQ(back->descriptions[0].description, "Liver; review: corrected");
    EXPECT_EQ(back->descriptions[2].algorithm_type, "MANUAL");
}

TEST_F(SegmentationLoad, DicomSegAloneKeepsNamesCodesStatusAndProvenance) {
    const std::string path = dir_ / "alone.dcm";
    save(path, false);
    fs::remove(sidecarPath(path));
    auto back = load(path);
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    EXPECT_TRUE(back->sidecar.empty());
    // The SEG alone: segments numbered 1..3 in label order, the empty label not written, the
    // colour through CIELab, the long name cut to SegmentLabel's 64 characters; everything else
    // as saved, the status of the long-named segment too.
    std::vector<SegmentMeta> want = reviewedSegments();
    want.pop_back();
    want[2].name = kLongName.substr(0, 64);
    for (size_t i = 0; i < want.size(); ++i) want[i].value = static_cast<int>(i) + 1;
    ASSERT_EQ(back->segments.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
        for (size_t c = 0; c < 3; ++c)
            EXPECT_NEAR(back->segments[i].color[c], want[i].color[c], 1) << want[i].name;
        back->segments[i].color = want[i].color;
    }
    expectSameSegments(back->segments, want, "SEG alone");
    Volume renumbered = boxes(grid_);
    for (int64_t i = 0; i < grid_.voxelCount(); ++i) {
        uint8_t& v = renumbered.data<uint8_t>()[i];
        v = v == 2 ? 1 : v == 5 ? 2 : v == 7 ? 3 : 0;
    }
    EXPECT_EQ(differingVoxels(back->label_map, renumbered), 0);
}

TEST_F(SegmentationLoad, RtStructWithItsSidecarKeepsEveryField) {
    const std::string path = dir_ / "structures.dcm";
    save(path, true);
    auto back = load(path);
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    EXPECT_EQ(back->kind, "RTSTRUCT");
    EXPECT_EQ(back->sidecar, dir_ / "structures.review.json");
    expectSameSegments(back->segments, reviewedSegments(), "RTSTRUCT + sidecar");
    EXPECT_EQ(differingVoxels(back->label_map, labels_), 0);
}

TEST_F(SegmentationLoad, RtStructAloneKeepsNamesColoursTypeAndStatus) {
    const std::string path = dir_ / "structures.dcm";
    save(path, true);
    fs::remove(sidecarPath(path));
    auto back = load(path);
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    // ROI numbers are the label values; an RTSTRUCT has no category and voxseg's writer says
    // AUTOMATIC for every ROI: those two come from the sidecar only.
    std::vector<SegmentMeta> want = reviewedSegments();
    want.pop_back();
    for (SegmentMeta& m : want) {
        m.category = defaultLabelCategory();
        m.algorithm_type = "AUTOMATIC";
    }
    want[2].name = kLongName.substr(0, 64);  // ROIName holds 64 characters
    expectSameSegments(back->segments, want, "RTSTRUCT alone");
}

TEST_F(SegmentationLoad, LabelMapWithItsSidecarKeepsEveryField) {
    const std::string path = dir_ / "labels.nii.gz";
    ASSERT_TRUE(io::writeImage(labels_, path).isOk());
    ASSERT_TRUE(writeSegmentsFile(reviewedSegments(), sidecarPath(path)).isOk());
    auto back = load(path);
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    EXPECT_EQ(back->kind, "label map");
    EXPECT_EQ(back->sidecar, dir_ / "labels.json");
    expectSameSegments(back->segments, reviewedSegments(), "label map + sidecar");
    EXPECT_EQ(differingVoxels(back->label_map, labels_), 0);
}

TEST_F(SegmentationLoad, AnotherToolsJsonIsIgnoredAndABrokenSidecarIsNamed) {
    const std::string path = dir_ / "labels.nii.gz";
    ASSERT_TRUE(io::writeImage(labels_, path).isOk());
    std::ofstream(dir_ / "labels.json") << R"({"Sources": ["bids::sub-01_T1w.nii.gz"]})";
    auto bids = load(path);
    ASSERT_TRUE(bids.isOk()) << bids.status().toString();
    EXPECT_TRUE(bids->segments.empty());
    EXPECT_TRUE(bids->warnings.empty());

    std::ofstream(dir_ / "labels.json", std::ios::trunc)
        << R"({"format": "voxseg-labels", "version": 1, "segments": [{"value": 2}]})";
    auto broken = load(path);
    ASSERT_TRUE(broken.isOk()) << broken.status().toString();
    EXPECT_TRUE(broken->segments.empty());
    ASSERT_EQ(broken->warnings.size(), 1u);
    EXPECT_NE(broken->warnings[0].find("labels.json"), std::string::npos) << broken->warnings[0];
}

TEST_F(SegmentationLoad, ASidecarOfOtherSegmentsIsNotUsed) {
    const std::string path = dir_ / "reviewed.dcm";
    save(path, false);
    std::vector<SegmentMeta> other = reviewedSegments();
    other[1].name = "Kidney";
    ASSERT_TRUE(writeSegmentsFile(other, sidecarPath(path)).isOk());
    auto back = load(path);
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    EXPECT_TRUE(back->sidecar.empty());
    ASSERT_EQ(back->warnings.size(), 1u);
    EXPECT_NE(back->warnings[0].find("Spleen"), std::string::npos) << back->warnings[0];
    ASSERT_EQ(back->segments.size(), 3u);
    EXPECT_EQ(back->segments[1].name, "Spleen");
    EXPECT_EQ(back->segments[1].status, ReviewStatus::kAccepted);  // from the SEG itself
}

TEST(SegmentDescriptionText, StatusComesBackFromTheDescriptionEvenAfterALongName) {
    for (ReviewStatus s : {ReviewStatus::kNotReviewed, ReviewStatus::kAccepted,
                           ReviewStatus::kCorrected, ReviewStatus::kRejected}) {
        SegmentMeta m;
        m.value = 4;
        m.name = kLongName;
        m.status = s;
        m.algorithm_type = "SEMIAUTOMATIC";
        const io::SegmentDescription d = toSegmentDescription(m);
        EXPECT_EQ(d.name.size(), 64u);
        EXPECT_LE(d.description.size(), 64u) << d.description;
        EXPECT_EQ(reviewStatusInDescription(d.description), s);
        SegmentMeta cut = m;
        cut.name = d.name;
        EXPECT_EQ(fromSegmentDescription(d), cut);
    }
    // Other writers' descriptions state no status; unknown algorithm types are dropped.
    EXPECT_FALSE(reviewStatusInDescription("Liver segment 2"));
    EXPECT_FALSE(reviewStatusInDescription("x; review: maybe"));
    io::SegmentDescription other;
    other.name = "liver";
    other.description = "from 3D Slicer";
    other.algorithm_type = "UNKNOWN";
    const SegmentMeta m = fromSegmentDescription(other);
    EXPECT_EQ(m.name, "liver");
    EXPECT_EQ(m.status, ReviewStatus::kNotReviewed);
    EXPECT_EQ(m.algorithm_type, "");
}

TEST(EditProvenance, ALoadedAlgorithmTypeSurvivesASave) {
    LabelChange unchanged{.label = 1, .voxels_before = 10, .voxels_after = 10};
    LabelChange edited{.label = 1, .voxels_before = 10, .voxels_after = 12, .added = 2};
    LabelChange drawn{.label = 1, .voxels_before = 0, .voxels_after = 12, .added = 12};
    EXPECT_EQ(unchanged.algorithmTypeAfter("SEMIAUTOMATIC"), "SEMIAUTOMATIC");
    EXPECT_EQ(unchanged.algorithmTypeAfter("MANUAL"), "MANUAL");
    EXPECT_EQ(unchanged.algorithmTypeAfter(""), "AUTOMATIC");
    EXPECT_EQ(edited.algorithmTypeAfter("AUTOMATIC"), "SEMIAUTOMATIC");
    EXPECT_EQ(edited.algorithmTypeAfter("MANUAL"), "MANUAL");
    EXPECT_EQ(drawn.algorithmTypeAfter(""), "MANUAL");
}

}  // namespace
}  // namespace voxseg::edit
