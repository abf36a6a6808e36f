// The prompt ops of the edit journal (issue 38 item 4, edit/interactive/prompt_ops.h): every
// prompt op written by a JournalWriter reads back equal, voxel coordinates written as patient mm
// on an oblique grid read back as the same coordinates (a one-voxel box side stays one voxel),
// bad prompt lines name their key, a recorded object reads back on its own grid only, and a
// LabelEditor alone replays prompts as recorded (the accepted object written). With the
// fabricated nnInteractive package (tests/edit/data/nninteractive/): undo/redo of the edit library
// take prompts, an accept and a reset back and forth in the session and the label map together,
// with an op applied to the LabelEditor directly in between.
#include "edit/interactive/prompt_ops.h"
#include "edit/interactive/interactive_model.h"
#include "edit/journal.h"
#include "io/image_io.h"
#include "tests/edit/edit_test_grids.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <fstream>

namespace voxseg::edit::interactive {
namespace {

// A few voxels of `g`'s grid, the last voxel among them (a trailing in run).
std::vector<uint8_t> someObject(const Geometry& g) {
    std::vector<uint8_t> m(static_cast<size_t>(g.voxelCount()), 0);
    for (size_t i = 3; i < m.size(); i += 7) m[i] = i % 3 != 0;
    m.back() = 1;
    return m;
}

std::vector<EditOp> everyPromptOp(const Geometry& g) {
    BoxRequest box;
    box.lo = {3, 4.5, 5};
    box.hi = {4, 9, 11.25};
    return {pointPromptOp(g, {2.5, 3, 4}, true),
            pointPromptOp(g, {7, 1, 0}, false),
            boxPromptOp(g, box, true),
            boxPromptOp(g, box, false),
            scribblePromptOp(g, {{3, 1, 1}, {3, 2.5, 4}, {3, 6, 6}}, true),
            lassoPromptOp(g, {{1, 1, 3}, {1, 8, 3}, {6, 8, 3}, {1, 1, 3}}, false),
            initialSegFromLabelOp(3, true),
            initialSegFromMaskOp("masks/lesion.nii.gz"),
            resetPromptOp(),
            acceptPromptOp(2),
            acceptPromptOp(300, {Overwrite::Mode::kBackground, 0}),
            acceptPromptOp(4, {}, g, someObject(g)),
            sessionPromptOp("voxseg-interactive 0.1.0", std::string(64, 'a'), "bf16", false),
            sessionPromptOp("other", "", "fp32", true),
            sessionPromptOp("other", "", "fp32", true, true)};
}

TEST(PromptOps, EveryPromptOpRoundTripsThroughTheJournal) {
    voxseg::testing::TempDir dir;
    const Geometry g = edit::testing::gridCases()[1].geometry;  // oblique
    const std::vector<EditOp> ops = everyPromptOp(g);
    {
        auto w = JournalWriter::open(dir / "prompts.jsonl", true);
        ASSERT_TRUE(w.isOk()) << w.status().toString();
        for (const EditOp& op : ops) ASSERT_TRUE(w->append(op).isOk());
    }
    auto lines = readJournal(dir / "prompts.jsonl");
    ASSERT_TRUE(lines.isOk()) << lines.status().toString();
    ASSERT_EQ(lines->size(), ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
        EXPECT_TRUE(isPromptOp((*lines)[i].op.kind));
        EXPECT_EQ((*lines)[i].op, ops[i]) << "line " << i + 1 << ": " << toJsonLine(ops[i]);
    }
}

TEST(PromptOps, PositionsReadBackAsTheVoxelCoordinatesWritten) {
    const Geometry g = edit::testing::gridCases()[1].geometry;
    for (const Point3 p : {Point3{0, 0, 0}, Point3{2.5, 3, 4}, Point3{40.5, 0.25, 17}}) {
        const Point3 back = voxelOfMm(g, mmOfVoxel(g, p));
        EXPECT_EQ(back, p);
    }
    BoxRequest box;
    box.lo = {60, 26, 36};
    box.hi = {61, 43, 53};
    const EditOp op = boxPromptOp(g, box, true);
    const Point3 lo = voxelOfMm(g, op.points[0]), hi = voxelOfMm(g, op.points[1]);
    EXPECT_EQ(hi[0] - lo[0], 1.0);  // still a 2-D box
    EXPECT_EQ(lo, box.lo);
    EXPECT_EQ(hi, box.hi);
}

TEST(PromptOps, BadPromptLinesNameTheirKey) {
    const std::pair<const char*, const char*> cases[] = {
        {R"({"op": "prompt_point", "point_mm": [1, 2]})", "point_mm"},
        {R"({"op": "prompt_point", "point_mm": [1, 2, 3], "include": 1})", "include"},
        {R"({"op": "prompt_box", "corners_mm": [[1, 2, 3]]})", "corners_mm"},
        {R"({"op": "prompt_lasso", "lasso_mm": [[1, 2, 3], [4, 5, 6]]})", "lasso_mm"},
        {R"({"op": "prompt_initial_seg", "label": 1, "mask": "m.nii.gz"})", "label"},
        {R"({"op": "prompt_initial_seg"})", "label"},
        {R"({"op": "prompt_accept"})", "label"},
        {R"({"op": "prompt_reset", "label": 1})", "label"},
        {R"({"op": "prompt_scribble", "stroke_mm": [], "include": true})", "stroke_mm"},
        {R"({"op": "prompt_session", "model": "m", "autozoom": true})", "precision"},
        {R"({"op": "prompt_session", "model": "m", "precision": "bf16"})", "autozoom"},
        {R"({"op": "prompt_session", "precision": "bf16", "autozoom": true})", "model"},
        {R"({"op": "prompt_accept", "label": 1, "object": [1, 2]})", "object"},
        {R"({"op": "prompt_accept", "label": 1, "object": {"size": [2, 2, 2],
            "first_mm": [0, 0, 0], "last_mm": [1, 1, 1], "runs": [3, -1]}})",
         "object"},
        {R"({"op": "prompt_accept", "label": 1, "object": {"size": [2, 2, 2],
            "first_mm": [0, 0, 0], "last_mm": [1, 1, 1], "runs": [3, 6]}})",
         "object"},
        {R"({"op": "prompt_accept", "label": 1, "object": {"size": [2, 2],
            "first_mm": [0, 0, 0], "last_mm": [1, 1, 1], "runs": [3]}})",
         "object"},
        {R"({"op": "prompt_accept", "label": 1, "object": {"size": [2, 2, 2],
            "first_mm": [0, 0, 0], "last_mm": [1, 1, 1], "runs": [], "voxels": 1}})",
         "object"},
    };
    for (const auto& [line, key] : cases) {
        auto op = parseEditOp(line);
        ASSERT_FALSE(op.isOk()) << line;
        EXPECT_NE(op.status().message().find(std::string("\"") + key + "\""), std::string::npos)
            << line << " -> " << op.status().toString();
    }
}

TEST(PromptOps, ARecordedObjectReadsBackOnItsGridOnly) {
    const Geometry g = edit::testing::gridCases()[1].geometry;  // oblique
    for (std::vector<uint8_t> m : {someObject(g), std::vector<uint8_t>(g.voxelCount(), 0),
                                   std::vector<uint8_t>(g.voxelCount(), 1)}) {
        const RecordedObject r = recordObject(g, m);
        auto back = objectMask(r, g);
        ASSERT_TRUE(back.isOk()) << back.status().toString();
        for (uint8_t& v : m) v = v != 0;
        EXPECT_EQ(*back, m);
    }
    EXPECT_TRUE(recordObject(g, std::vector<uint8_t>(g.voxelCount(), 0)).runs.empty());
    Geometry moved = g;
    moved.origin[1] += 0.01;
    auto refused = objectMask(recordObject(g, someObject(g)), moved);
    ASSERT_FALSE(refused.isOk());
    EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(refused.status().message().find("--interactive-model"), std::string::npos);
}

// Without a session (crash recovery, `voxseg edit` without a model): prompt_session is no step,
// the other prompts an empty step each, prompt_accept writes its recorded object as the
// overwrite policy allows (and is refused without one, or on another grid).
TEST(PromptOps, ALabelEditorAloneReplaysPromptsAsRecorded) {
    const Geometry g = edit::testing::gridCases()[0].geometry;
    const Volume start = edit::testing::makeLabels(g);
    auto editor = LabelEditor::create(edit::testing::makeImage(g), start);
    ASSERT_TRUE(editor.isOk());
    const auto label = [&](int64_t i) { return int(editor->labelMap().data<uint8_t>()[i]); };
    ASSERT_TRUE(editor->apply(sessionPromptOp("m 1", "", "bf16", true)).isOk());
    EXPECT_EQ(editor->undoDepth(), 0);
    auto point = editor->apply(pointPromptOp(g, {1, 1, 1}, true));
    ASSERT_TRUE(point.isOk()) << point.status().toString();
    EXPECT_EQ(point->voxels_changed, 0);
    EXPECT_EQ(editor->undoDepth(), 1);

    auto bare = editor->apply(acceptPromptOp(7));
    ASSERT_FALSE(bare.isOk());
    EXPECT_NE(bare.status().message().find("--interactive-model"), std::string::npos);
    Geometry other = g;
    other.size[0] += 1;
    std::vector<uint8_t> elsewhere(static_cast<size_t>(other.voxelCount()), 1);
    EXPECT_FALSE(editor->apply(acceptPromptOp(7, {}, other, elsewhere)).isOk());
    EXPECT_EQ(editor->undoDepth(), 1);

    const std::vector<uint8_t> object = someObject(g);
    const Overwrite background{Overwrite::Mode::kBackground, 0};
    auto accept = editor->apply(acceptPromptOp(7, background, g, object));
    ASSERT_TRUE(accept.isOk()) << accept.status().toString();
    int64_t expected = 0;
    for (int64_t i = 0; i < g.voxelCount(); ++i) {
        const int before = start.data<uint8_t>()[i];
        const int want = object[i] && before == 0 ? 7 : before;
        expected += want != before;
        ASSERT_EQ(label(i), want) << "voxel " << i;
    }
    EXPECT_GT(expected, 0);
    EXPECT_EQ(accept->voxels_changed, expected);
    ASSERT_TRUE(editor->undo().isOk());
    for (int64_t i = 0; i < g.voxelCount(); ++i) ASSERT_EQ(label(i), start.data<uint8_t>()[i]);
}

int64_t countOf(const Volume& labels, int label) {
    int64_t n = 0;
    const uint8_t* d = labels.data<uint8_t>();
    for (int64_t i = 0; i < labels.geometry().voxelCount(); ++i) n += d[i] == label;
    return n;
}

std::vector<uint8_t> labelMask(const LabelEditor& editor, int label) {
    const Volume& labels = editor.labelMap();
    std::vector<uint8_t> m(static_cast<size_t>(labels.geometry().voxelCount()));
    for (size_t i = 0; i < m.size(); ++i) m[i] = labels.data<uint8_t>()[i] == label;
    return m;
}

int64_t countOf(const std::vector<uint8_t>& mask) {
    int64_t n = 0;
    for (uint8_t v : mask) n += v != 0;
    return n;
}

// The fabricated package (tests/edit/data/nninteractive/) on its phantom, an empty label map.
struct Fabricated {
    std::unique_ptr<InteractiveModel> model;
    Volume image;
    void load() {
        const std::string dir = std::string(VOXSEG_SOURCE_DIR) + "/tests/edit/data/nninteractive/";
        auto m = InteractiveModel::load(dir + "model", {});
        ASSERT_TRUE(m.isOk()) << m.status().toString();
        model = std::move(*m);
        auto v = io::readImage(dir + "image.nii.gz");
        ASSERT_TRUE(v.isOk());
        image = *v;
    }
};

TEST(PromptOps, UndoRedoTakeThePromptsAndTheAcceptBackAndForth) {
    Fabricated f;
    ASSERT_NO_FATAL_FAILURE(f.load());
    const Geometry& g = f.image.geometry();
    InteractiveSession session(f.model->spec(), f.model->forward());
    session.setAutoZoom(false);
    ASSERT_TRUE(session.setImage(f.image).isOk());
    auto editor = LabelEditor::create(f.image, Volume::allocate<uint8_t>(g));
    ASSERT_TRUE(editor.isOk());
    InteractiveEditor edits(*editor, session);
    EditOp undo, redo;
    undo.kind = OpKind::kUndo;
    redo.kind = OpKind::kRedo;

    ASSERT_TRUE(edits.apply(pointPromptOp(g, {28, 30, 30}, true)).isOk());
    const std::vector<uint8_t> one = session.target();
    auto second = edits.apply(pointPromptOp(g, {42, 50, 110}, true));
    ASSERT_TRUE(second.isOk()) << second.status().toString();
    ASSERT_TRUE(second->object_changed.has_value());
    const std::vector<uint8_t> two = session.target();
    ASSERT_GT(countOf(two), countOf(one));
    EXPECT_EQ(countOf(editor->labelMap(), 1), 0);  // prompts leave the label map alone

    ASSERT_TRUE(edits.apply(acceptPromptOp(1)).isOk());
    EXPECT_EQ(countOf(editor->labelMap(), 1), countOf(two));
    EXPECT_FALSE(edits.objectOpen());
    ASSERT_TRUE(edits.apply(undo).isOk());  // the accept: the object is back, the label gone
    EXPECT_EQ(session.target(), two);
    EXPECT_EQ(countOf(editor->labelMap(), 1), 0);
    ASSERT_TRUE(edits.apply(undo).isOk());  // the second point
    EXPECT_EQ(session.target(), one);
    ASSERT_TRUE(edits.apply(redo).isOk());
    EXPECT_EQ(session.target(), two);
    ASSERT_TRUE(edits.apply(redo).isOk());  // the accept again
    EXPECT_EQ(countOf(editor->labelMap(), 1), countOf(two));
    EXPECT_FALSE(edits.objectOpen());

    // A reset is one step too; an op applied to the editor directly between prompts (as the
    // viewer's brush strokes are) stays in line.
    ASSERT_TRUE(edits.apply(pointPromptOp(g, {20, 72, 30}, true)).isOk());
    const std::vector<uint8_t> three = session.target();
    EditOp paint;
    paint.kind = OpKind::kPaint;
    paint.points = {mmOfVoxel(g, {70, 10, 10})};
    paint.radius_mm = 2;
    paint.label = 5;
    ASSERT_TRUE(editor->apply(paint).isOk());  // straight to the editor (as a brush stroke)
    ASSERT_TRUE(edits.apply(resetPromptOp()).isOk());
    EXPECT_FALSE(edits.objectOpen());
    ASSERT_TRUE(edits.apply(undo).isOk());
    EXPECT_EQ(session.target(), three);
    ASSERT_TRUE(edits.apply(undo).isOk());  // the paint
    EXPECT_EQ(countOf(editor->labelMap(), 5), 0);
    EXPECT_EQ(session.target(), three);
    ASSERT_TRUE(edits.apply(undo).isOk());  // the third point: no object
    EXPECT_FALSE(edits.objectOpen());
    EXPECT_EQ(countOf(editor->labelMap(), 1), countOf(two));
}

// A rerun with the model: prompt_session lines reach the settings handler (no step), a restart
// clears the object for good, and an accept that records its object reports how many voxels the
// rerun object differs by.
TEST(PromptOps, ARerunAppliesSessionLinesAndChecksRecordedObjects) {
    Fabricated f;
    ASSERT_NO_FATAL_FAILURE(f.load());
    const Geometry& g = f.image.geometry();
    InteractiveSession session(f.model->spec(), f.model->forward());
    ASSERT_TRUE(session.setImage(f.image).isOk());
    auto editor = LabelEditor::create(f.image, Volume::allocate<uint8_t>(g));
    ASSERT_TRUE(editor.isOk());
    InteractiveEditor edits(*editor, session);

    // Without a handler the line sets AutoZoom; with one, the handler decides (and may refuse).
    ASSERT_TRUE(edits.apply(sessionPromptOp("m", "", "fp32", false)).isOk());
    EXPECT_FALSE(session.autoZoom());
    std::vector<std::string> seen;
    edits.setSessionSettings([&](const EditOp& op) -> Status {
        seen.push_back(op.precision);
        if (op.precision == "fp64") return invalidArgument("unknown precision 'fp64'");
        return Status::ok();
    });
    ASSERT_TRUE(edits.apply(sessionPromptOp("m", "", "fp32", false)).isOk());
    EXPECT_FALSE(edits.apply(sessionPromptOp("m", "", "fp64", false)).isOk());
    EXPECT_EQ(seen, (std::vector<std::string>{"fp32", "fp64"}));
    EXPECT_EQ(editor->undoDepth(), 0);

    // A restart clears the object, and the prompt before it can no longer be undone in the
    // session (its step still undoes in the label map: an empty one).
    ASSERT_TRUE(edits.apply(pointPromptOp(g, {42, 50, 110}, true)).isOk());
    ASSERT_TRUE(edits.objectOpen());
    ASSERT_TRUE(edits.apply(sessionPromptOp("m", "", "fp32", false, true)).isOk());
    EXPECT_FALSE(edits.objectOpen());
    EditOp undo;
    undo.kind = OpKind::kUndo;
    ASSERT_TRUE(edits.apply(undo).isOk());
    EXPECT_FALSE(edits.objectOpen());
    EXPECT_EQ(editor->undoDepth(), 0);

    ASSERT_TRUE(edits.apply(pointPromptOp(g, {28, 30, 30}, true)).isOk());
    const std::vector<uint8_t> object = session.target();
    ASSERT_GT(countOf(object), 0);
    auto same = edits.apply(acceptPromptOp(1, {}, g, object));
    ASSERT_TRUE(same.isOk()) << same.status().toString();
    ASSERT_TRUE(same->recorded_differs.has_value());
    EXPECT_EQ(*same->recorded_differs, 0);

    ASSERT_TRUE(edits.apply(pointPromptOp(g, {28, 30, 30}, true)).isOk());
    std::vector<uint8_t> altered = session.target();
    altered[0] = !altered[0];
    altered[1] = !altered[1];
    auto differs = edits.apply(acceptPromptOp(2, {}, g, altered));
    ASSERT_TRUE(differs.isOk());
    EXPECT_EQ(differs->recorded_differs, std::optional<int64_t>(2));
    // The rerun object is what is written, not the recorded one.
    EXPECT_EQ(countOf(editor->labelMap(), 2), countOf(object));
    auto bare = edits.apply(pointPromptOp(g, {28, 30, 30}, true));
    ASSERT_TRUE(bare.isOk());
    auto unrecorded = edits.apply(acceptPromptOp(3));
    ASSERT_TRUE(unrecorded.isOk());
    EXPECT_FALSE(unrecorded->recorded_differs.has_value());
    EXPECT_TRUE(unrecorded->recorded_unplaced.empty());
    // A record on another grid: written from the rerun, the comparison refused with the reason.
    ASSERT_TRUE(edits.apply(pointPromptOp(g, {28, 30, 30}, true)).isOk());
    Geometry other = g;
    other.spacing[0] *= 2;
    auto elsewhere =
        edits.apply(acceptPromptOp(4, {}, other, std::vector<uint8_t>(g.voxelCount())));
    ASSERT_TRUE(elsewhere.isOk()) << elsewhere.status().toString();
    EXPECT_FALSE(elsewhere->recorded_differs.has_value());
    EXPECT_NE(elsewhere->recorded_unplaced.find("grid"), std::string::npos);
    EXPECT_EQ(countOf(editor->labelMap(), 4), countOf(object));
}

// rebuildSession: a journal written by an InteractiveEditor (an accepted object, then an open
// one) rebuilt on a fresh session gives the open object and deltas by line that undo its
// prompts; another model's journal is refused.
TEST(PromptOps, ASessionRebuiltFromAJournalHoldsItsOpenObject) {
    Fabricated f;
    ASSERT_NO_FATAL_FAILURE(f.load());
    const Geometry& g = f.image.geometry();
    const Volume base = Volume::allocate<uint8_t>(g);
    InteractiveSession session(f.model->spec(), f.model->forward());
    ASSERT_TRUE(session.setImage(f.image).isOk());
    auto editor = LabelEditor::create(f.image, base);
    ASSERT_TRUE(editor.isOk());
    InteractiveEditor edits(*editor, session);
    std::vector<JournalLine> lines;
    const auto apply = [&](const EditOp& op) {
        auto r = edits.apply(op);
        ASSERT_TRUE(r.isOk()) << r.status().toString();
        EditOp journalled = op;
        if (op.kind == OpKind::kPromptAccept)  // as the viewer writes it: the object recorded
            journalled = acceptPromptOp(op.label, op.overwrite, g, labelMask(*editor, op.label));
        lines.push_back({static_cast<int>(lines.size()) + 1, journalled});
    };
    apply(sessionPromptOp("m 1", "", "fp32", false, true));
    apply(pointPromptOp(g, {42, 50, 110}, true));
    apply(acceptPromptOp(1));
    apply(pointPromptOp(g, {28, 30, 30}, true));
    const std::vector<uint8_t> one = session.target();
    apply(pointPromptOp(g, {28, 36, 34}, false));
    const std::vector<uint8_t> two = session.target();
    ASSERT_NE(one, two);

    InteractiveSession fresh(f.model->spec(), f.model->forward());
    ASSERT_TRUE(fresh.setImage(f.image).isOk());
    EXPECT_FALSE(rebuildSession(fresh, f.image, base, lines, "another 2").isOk());
    auto rebuilt = rebuildSession(fresh, f.image, base, lines, "m 1");
    ASSERT_TRUE(rebuilt.isOk()) << rebuilt.status().toString();
    EXPECT_EQ(fresh.target(), two);
    EXPECT_FALSE(rebuilt->autozoom);
    // Deltas for the lines of both points of the open object (and the accept's), by line index.
    std::map<size_t, std::shared_ptr<InteractiveDelta>> by_line(rebuilt->deltas.begin(),
                                                                rebuilt->deltas.end());
    ASSERT_TRUE(by_line.count(4));
    ASSERT_TRUE(by_line.count(3));
    ASSERT_TRUE(fresh.revert(*by_line.at(4)).isOk());
    EXPECT_EQ(fresh.target(), one);
}

}  // namespace
}  // namespace voxseg::edit::interactive
