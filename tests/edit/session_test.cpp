// EditSession (edit/session.h): strokes applied segment by segment equal the one-line stroke
// the journal keeps, undo takes a stroke back whole, the recovery folder restores a session
// voxel for voxel (torn last line dropped), and the segment metadata / code lists.
#include "edit/session.h"
#include "edit/journal.h"
#include "edit/segment_codes.h"
#include "edit/segment_meta.h"
#include "tests/edit/edit_test_grids.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace voxseg::edit {
namespace {

using testing::gridCases;
using testing::makeImage;
using testing::makeLabels;

bool sameVoxels(const Volume& a, const Volume& b) {
    const size_t bytes = static_cast<size_t>(a.geometry().voxelCount()) *
                         (a.pixelType() == PixelType::kUInt16 ? 2 : 1);
    return a.pixelType() == b.pixelType() && a.geometry().size == b.geometry().size &&
           std::memcmp(a.rawData(), b.rawData(), bytes) == 0;
}

int64_t countLabel(const Volume& v, int label) {
    int64_t n = 0;
    for (int64_t i = 0; i < v.geometry().voxelCount(); ++i) n += testing::labelAt(v, i) == label;
    return n;
}

// A zig-zag of `n` points through the grid's centre, in LPS mm.
std::vector<Vec3> zigzag(const Geometry& g, int n) {
    const Vec3 c = testing::gridCentre(g);
    std::vector<Vec3> out;
    for (int s = 0; s < n; ++s)
        out.push_back({c[0] - 8 + 16.0 * s / n, c[1] + (s % 2 ? 3.0 : -3.0), c[2] + 0.4 * s});
    return out;
}

EditOp brush(const std::vector<Vec3>& points, Shape shape, OpKind kind = OpKind::kPaint) {
    EditOp op;
    op.kind = kind;
    op.shape = shape;
    op.plane = Plane::kAxial;
    op.points = points;
    op.stroke = true;
    op.radius_mm = 2.5;
    op.label = kind == OpKind::kPaint ? 3 : 0;
    return op;
}

TEST(EditSession, AStrokeDrawnPointByPointEqualsItsJournalLineAndUndoesWhole) {
    for (const auto& gc : gridCases()) {
        for (Shape shape : {Shape::kSphere, Shape::kDisk}) {
            SCOPED_TRACE(gc.name + (shape == Shape::kDisk ? " disk" : " sphere"));
            const Volume image = makeImage(gc.geometry);
            const Volume labels = makeLabels(gc.geometry);
            ::voxseg::testing::TempDir dir;
            SessionOptions o;
            o.recovery_root = dir / "recovery";
            o.source = "/data/ct";
            o.series_uid = "1.2.3";
            auto s = EditSession::start(image, labels, {}, o);
            ASSERT_TRUE(s.isOk()) << s.status().toString();
            // 70 points: the stroke is folded every 32 steps and still undoes as one.
            const auto points = zigzag(gc.geometry, 70);
            EditOp first = brush({points[0]}, shape);
            first.stroke = false;
            ASSERT_TRUE(s->beginStroke(first).isOk());
            int64_t changed = 0;
            for (size_t p = 1; p < points.size(); ++p) {
                auto r = s->extendStroke(points[p]);
                ASSERT_TRUE(r.isOk()) << r.status().toString();
                changed += r->voxels_changed;
            }
            ASSERT_TRUE(s->endStroke().isOk());
            EXPECT_GT(changed, 0);
            EXPECT_EQ(s->editor().undoDepth(), 1);
            EXPECT_EQ(s->journalLines(), 1);
            // The same stroke applied in one op on a fresh editor.
            auto fresh = LabelEditor::create(image, labels);
            ASSERT_TRUE(fresh.isOk());
            ASSERT_TRUE(fresh->apply(brush(points, shape)).isOk());
            EXPECT_TRUE(sameVoxels(s->labelMap(), fresh->labelMap()));
            // The journal holds that one op.
            auto lines = readJournal(s->folder() + "/edits.jsonl");
            ASSERT_TRUE(lines.isOk());
            ASSERT_EQ(lines->size(), 1u);
            EXPECT_EQ(lines->front().op.points.size(), points.size());
            // One undo takes the whole stroke back.
            auto u = s->undo();
            ASSERT_TRUE(u.isOk());
            EXPECT_EQ(countLabel(s->labelMap(), 3), 0);
            EXPECT_EQ(u->labels, (std::vector<int>{0, 3}));
            ASSERT_TRUE(s->redo().isOk());
            EXPECT_TRUE(sameVoxels(s->labelMap(), fresh->labelMap()));
        }
    }
}

TEST(EditSession, ApplyReportsTheChangedBoxAndLabels) {
    const Geometry g = gridCases()[0].geometry;
    auto editor = LabelEditor::create(makeImage(g), makeLabels(g));
    ASSERT_TRUE(editor.isOk());
    EditOp op = brush({testing::gridCentre(g)}, Shape::kSphere);
    op.stroke = false;
    auto r = editor->apply(op);
    ASSERT_TRUE(r.isOk());
    ASSERT_TRUE(r->changedAnything());
    EXPECT_EQ(r->labels, (std::vector<int>{0, 3}));
    // Every label-3 voxel lies in the box.
    const Volume& m = editor->labelMap();
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i)
                if (testing::labelAt(m, i + g.size[0] * (j + g.size[1] * k)) == 3) {
                    EXPECT_TRUE(i >= r->box_lo[0] && i <= r->box_hi[0] && j >= r->box_lo[1] &&
                                j <= r->box_hi[1] && k >= r->box_lo[2] && k <= r->box_hi[2]);
                }
    // Painting it again changes nothing: an empty box.
    auto again = editor->apply(op);
    ASSERT_TRUE(again.isOk());
    EXPECT_FALSE(again->changedAnything());
    EXPECT_TRUE(again->labels.empty());
}

TEST(EditSession, RecoveryRestoresEveryJournalledEditAndDropsATornLine) {
    const Geometry g = gridCases()[1].geometry;  // oblique
    const Volume image = makeImage(g);
    Volume labels = makeLabels(g);
    labels.data<uint8_t>()[100] = 2;  // the session starts from a non-empty map
    ::voxseg::testing::TempDir dir;
    SessionOptions o;
    o.recovery_root = dir / "recovery";
    o.source = "/data/ct";
    o.series_uid = "1.2.3";
    SegmentMeta meta;
    meta.value = 3;
    meta.name = "tumour";
    meta.status = ReviewStatus::kCorrected;
    Volume expected;
    std::string folder;
    {
        auto s = EditSession::start(image, labels, {meta}, o);
        ASSERT_TRUE(s.isOk()) << s.status().toString();
        const auto points = zigzag(g, 12);
        for (int stroke = 0; stroke < 10; ++stroke) {
            EditOp op = brush({points[stroke]}, stroke % 2 ? Shape::kDisk : Shape::kSphere);
            op.stroke = false;
            op.label = 3 + stroke % 2;
            ASSERT_TRUE(s->beginStroke(op).isOk());
            ASSERT_TRUE(s->extendStroke(points[stroke + 1]).isOk());
            ASSERT_TRUE(s->endStroke().isOk());
        }
        ASSERT_TRUE(s->undo().isOk());
        expected = cloneVolume(s->labelMap());
        folder = s->folder();
        // A stroke being drawn when the process dies is not in the journal; a torn line (the
        // write interrupted) is dropped on restore.
        EditOp drawing = brush({points[11]}, Shape::kSphere);
        drawing.label = 5;
        ASSERT_TRUE(s->beginStroke(drawing).isOk());
        EXPECT_GT(countLabel(s->labelMap(), 5), 0);
        std::ofstream(folder + "/edits.jsonl", std::ios::app) << "{\"op\": \"paint\", \"sha";
        // The session object goes away without discardRecovery: as after kill -9.
    }
    EXPECT_FALSE(findRecovery(o.recovery_root, "/data/other", "1.2.3"));
    auto info = findRecovery(o.recovery_root, o.source, o.series_uid);
    ASSERT_TRUE(info);
    EXPECT_EQ(info->journal_lines, 11);  // 10 strokes + undo; the torn line not counted
    ASSERT_EQ(info->segments.size(), 1u);
    EXPECT_EQ(info->segments[0], meta);
    auto restored = EditSession::restore(image, *info, o);
    ASSERT_TRUE(restored.isOk()) << restored.status().toString();
    EXPECT_TRUE(sameVoxels(restored->labelMap(), expected));
    EXPECT_TRUE(sameVoxels(restored->base(), labels));
    EXPECT_TRUE(restored->dirty());
    // The restored history undoes and redoes; new edits append after the restored ones.
    EXPECT_TRUE(restored->editor().canRedo());
    ASSERT_TRUE(restored->redo().isOk());
    auto lines = readJournal(folder + "/edits.jsonl");
    ASSERT_TRUE(lines.isOk()) << lines.status().toString();
    EXPECT_EQ(lines->size(), 12u);
    ASSERT_TRUE(restored->discardRecovery().isOk());
    EXPECT_FALSE(std::filesystem::exists(folder));
    EXPECT_FALSE(findRecovery(o.recovery_root, o.source, o.series_uid));
}

TEST(SegmentMeta, SidecarRoundTripsAndBadFilesNameTheKey) {
    SegmentMeta a;
    a.value = 1;
    a.name = "liver";
    a.color = {10, 20, 30};
    a.category = {"91723000", "SCT", "Anatomical Structure"};
    a.type = {"10200004", "SCT", "Liver"};
    a.type_modifier = CodedConcept{"7771000", "SCT", "Left"};  // kept through the sidecar
    a.status = ReviewStatus::kAccepted;
    a.algorithm_type = "SEMIAUTOMATIC";
    SegmentMeta b;
    b.value = 300;
    b.name = "lesion";
    b.status = ReviewStatus::kRejected;
    auto parsed = segmentsFromJson(segmentsToJson({a, b}));
    ASSERT_TRUE(parsed.isOk()) << parsed.status().toString();
    ASSERT_EQ(parsed->size(), 2u);
    EXPECT_EQ((*parsed)[0], a);
    EXPECT_EQ((*parsed)[1], b);
    EXPECT_EQ((*parsed)[0].type_modifier->meaning, "Left");
    EXPECT_FALSE((*parsed)[1].type_modifier.has_value());
    EXPECT_EQ(toSegmentDescription(a).description, "liver; review: accepted");
    EXPECT_EQ(sidecarPath("/x/seg.nii.gz"), "/x/seg.json");
    EXPECT_EQ(sidecarPath("/x/seg.NRRD"), "/x/seg.json");
    EXPECT_EQ(sidecarPath("/x/seg.dcm"), "/x/seg.review.json");
    std::string bad = segmentsToJson({a});
    bad.replace(bad.find("accepted"), 8, "approved");
    auto e = segmentsFromJson(bad);
    ASSERT_FALSE(e.isOk());
    EXPECT_NE(e.status().message().find("approved"), std::string::npos);
    bad = segmentsToJson({a});
    bad.replace(bad.find("\"name\""), 6, "\"nome\"");
    e = segmentsFromJson(bad);
    ASSERT_FALSE(e.isOk());
    EXPECT_NE(e.status().message().find("nome"), std::string::npos) << e.status().toString();
}

TEST(SegmentCodes, TheDicomListsAreShippedAndSearchable) {
    const auto& categories = segmentationCodes(CodeGroup::kCategory);
    const auto& types = segmentationCodes(CodeGroup::kType);
    EXPECT_EQ(categories.size(), 8u);
    EXPECT_GT(types.size(), 800u);
    // Codes DICOM PS3.16 gives these meanings (checked against the standard's CID tables).
    const CodedConcept* tissue = findSegmentationCode(CodeGroup::kCategory, "SCT", "85756007");
    ASSERT_NE(tissue, nullptr);
    EXPECT_EQ(tissue->meaning, "Tissue");
    const CodedConcept* liver = findSegmentationCode(CodeGroup::kType, "SCT", "10200004");
    ASSERT_NE(liver, nullptr);
    EXPECT_EQ(liver->meaning, "Liver");
    auto hits = searchSegmentationCodes(CodeGroup::kType, "LIV");
    ASSERT_FALSE(hits.empty());
    EXPECT_EQ(hits.front().meaning.substr(0, 5), "Liver");  // prefix matches first
    for (const auto& h : searchSegmentationCodes(CodeGroup::kType, "artery left")) {
        std::string m = h.meaning;
        for (char& c : m) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        EXPECT_NE(m.find("artery"), std::string::npos) << h.meaning;
        EXPECT_NE(m.find("left"), std::string::npos) << h.meaning;
    }
    EXPECT_EQ(searchSegmentationCodes(CodeGroup::kType, "10200004").front().meaning, "Liver");
    EXPECT_TRUE(searchSegmentationCodes(CodeGroup::kType, "no such organ xyz").empty());
}

}  // namespace
}  // namespace voxseg::edit
