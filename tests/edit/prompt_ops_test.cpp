// The prompt ops of the edit journal (issue 38 item 4, edit/interactive/prompt_ops.h): every
// prompt op written by a JournalWriter reads back equal, voxel coordinates written as patient mm
// on an oblique grid read back as the same coordinates (a one-voxel box side stays one voxel),
// bad prompt lines name their key, and a LabelEditor alone refuses a prompt op.
#include "edit/interactive/prompt_ops.h"
#include "edit/journal.h"
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

}  // namespace
}  // namespace voxseg::edit::interactive
