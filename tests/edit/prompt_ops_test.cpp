// The prompt ops of the edit journal (issue 38 item 4, edit/interactive/prompt_ops.h): every
// prompt op written by a JournalWriter reads back equal, voxel coordinates written as patient mm
// on an oblique grid read back as the same coordinates (a one-voxel box side stays one voxel),
// bad prompt lines name their key, and a LabelEditor alone refuses a prompt op. With the
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
            acceptPromptOp(300, {Overwrite::Mode::kBackground, 0})};
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
    };
    for (const auto& [line, key] : cases) {
        auto op = parseEditOp(line);
        ASSERT_FALSE(op.isOk()) << line;
        EXPECT_NE(op.status().message().find(std::string("\"") + key + "\""), std::string::npos)
            << line << " -> " << op.status().toString();
    }
}

TEST(PromptOps, ALabelEditorAloneRefusesAPromptOp) {
    const Geometry g = edit::testing::gridCases()[0].geometry;
    auto editor = LabelEditor::create(edit::testing::makeImage(g), edit::testing::makeLabels(g));
    ASSERT_TRUE(editor.isOk());
    auto r = editor->apply(pointPromptOp(g, {1, 1, 1}, true));
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("interactive"), std::string::npos);
    EXPECT_EQ(editor->undoDepth(), 0);
}

int64_t countOf(const Volume& labels, int label) {
    int64_t n = 0;
    const uint8_t* d = labels.data<uint8_t>();
    for (int64_t i = 0; i < labels.geometry().voxelCount(); ++i) n += d[i] == label;
    return n;
}

int64_t countOf(const std::vector<uint8_t>& mask) {
    int64_t n = 0;
    for (uint8_t v : mask) n += v != 0;
    return n;
}

TEST(PromptOps, UndoRedoTakeThePromptsAndTheAcceptBackAndForth) {
    const std::string dir = std::string(VOXSEG_SOURCE_DIR) + "/tests/edit/data/nninteractive/";
    auto model = InteractiveModel::load(dir + "model", {});
    ASSERT_TRUE(model.isOk()) << model.status().toString();
    auto image = io::readImage(dir + "image.nii.gz");
    ASSERT_TRUE(image.isOk());
    const Geometry& g = image->geometry();
    InteractiveSession session((*model)->spec(), (*model)->forward());
    session.setAutoZoom(false);
    ASSERT_TRUE(session.setImage(*image).isOk());
    auto editor = LabelEditor::create(*image, Volume::allocate<uint8_t>(g));
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

}  // namespace
}  // namespace voxseg::edit::interactive
