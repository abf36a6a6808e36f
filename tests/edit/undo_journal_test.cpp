// Undo/redo restore the label map bit for bit over more than 50 steps; the journal round-trips
// (ops written, parsed and replayed give the same map as applying them); bad lines are reported
// with their line number and key.
#include "edit/journal.h"
#include "edit/label_editor.h"
#include "tests/edit/edit_test_grids.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include <fmt/format.h>

namespace voxseg::edit {
namespace {

using testing::labelAt;
using testing::sameVoxels;

// A varied, reproducible sequence of ops on `g` (fixed seed).
std::vector<EditOp> randomOps(const Geometry& g, int n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(0.1, 0.9);
    auto point = [&] {
        return g.indexToPhysical({u(rng) * double(g.size[0] - 1), u(rng) * double(g.size[1] - 1),
                                  u(rng) * double(g.size[2] - 1)});
    };
    std::vector<EditOp> ops;
    for (int s = 0; s < n; ++s) {
        EditOp op;
        op.label = 1 + int(rng() % 4);
        const double radius = 1.5 + 4 * u(rng);
        if (s % 9 <= 3) op.radius_mm = radius;
        switch (s % 9) {
            case 0:
            case 1:
                op.kind = OpKind::kPaint;
                op.points = {point()};
                break;
            case 2:
                op.kind = OpKind::kPaint;
                op.shape = Shape::kDisk;
                op.plane = Plane(rng() % 3);
                op.points = {point(), point()};
                op.stroke = true;
                op.overwrite = {Overwrite::Mode::kBackground, 0};
                break;
            case 3:
                op.kind = OpKind::kErase;
                op.points = {point()};
                op.label = 0;
                break;
            case 4:
                op.kind = OpKind::kThreshold;
                op.min = 300;
                op.max = 330;
                op.in_slice = true;
                op.plane = Plane::kAxial;
                op.points = {point()};
                break;
            case 5:
                op.kind = OpKind::kMargin;
                op.margin_mm = (rng() % 2 ? 1.0 : -1.0) * 1.2;
                break;
            case 6:
                op.kind = OpKind::kFillBetweenSlices;
                op.plane = Plane::kCoronal;
                break;
            case 7:
                op.kind = OpKind::kIslands;
                op.island_mode = IslandMode::kKeepLargest;
                op.connectivity = 26;
                break;
            default:
                op.kind = OpKind::kFloodFill;
                op.points = {point()};
                op.min = 200;
                op.max = 260;
                op.connectivity = 6;
                break;
        }
        ops.push_back(op);
    }
    return ops;
}

TEST(Undo, SixtyStepsUndoneAndRedoneBitExact) {
    const auto grids = testing::gridCases();
    for (const auto& g : {grids[0], grids[1]}) {
        SCOPED_TRACE(g.name);
        auto editor =
            LabelEditor::create(testing::makeImage(g.geometry), testing::makeLabels(g.geometry));
        ASSERT_TRUE(editor.isOk());
        std::vector<Volume> states{cloneVolume(editor->labelMap())};
        int changing = 0;
        for (const EditOp& op : randomOps(g.geometry, 60, 7)) {
            auto r = editor->apply(op);
            ASSERT_TRUE(r.isOk()) << toJsonLine(op) << ": " << r.status().toString();
            changing += r->voxels_changed > 0;
            states.push_back(cloneVolume(editor->labelMap()));
        }
        EXPECT_GT(changing, 40);
        EXPECT_EQ(editor->undoDepth(), 60);
        for (int s = 59; s >= 0; --s) {
            ASSERT_TRUE(editor->undo().isOk());
            ASSERT_TRUE(sameVoxels(editor->labelMap(), states[size_t(s)])) << "after undo to " << s;
        }
        EXPECT_FALSE(editor->undo().isOk());
        for (int s = 1; s <= 60; ++s) {
            ASSERT_TRUE(editor->redo().isOk());
            ASSERT_TRUE(sameVoxels(editor->labelMap(), states[size_t(s)])) << "after redo to " << s;
        }
        EXPECT_FALSE(editor->redo().isOk());
        // A new op after undo drops the redo history.
        ASSERT_TRUE(editor->undo().isOk());
        ASSERT_TRUE(editor->apply(randomOps(g.geometry, 1, 99)[0]).isOk());
        EXPECT_FALSE(editor->canRedo());
    }
}

TEST(Undo, HistoryDepthIsBounded) {
    const auto g = testing::gridCases()[0].geometry;
    EditorOptions options;
    options.max_undo_steps = 5;
    auto editor = LabelEditor::create(testing::makeImage(g), testing::makeLabels(g), options);
    ASSERT_TRUE(editor.isOk());
    for (const EditOp& op : randomOps(g, 12, 3)) ASSERT_TRUE(editor->apply(op).isOk());
    EXPECT_EQ(editor->undoDepth(), 5);
}

TEST(EditOp, EveryOpRoundTripsThroughItsJsonLine) {
    const auto g = testing::gridCases()[1].geometry;
    std::vector<EditOp> ops = randomOps(g, 27, 11);
    EditOp op;
    op.kind = OpKind::kIslands;
    op.label = 2;
    op.island_mode = IslandMode::kRemoveSmall;
    op.min_ml = 0.25;
    op.connectivity = 6;
    ops.push_back(op);
    op = {};
    op.kind = OpKind::kLogical;
    op.logical = LogicalOp::kCopy;
    op.label = 2;
    op.other = 5;
    ops.push_back(op);
    op = {};
    op.kind = OpKind::kMedian;
    op.label = 3;
    op.radius_mm = 1.25;
    op.overwrite = {Overwrite::Mode::kLabel, 4};
    ops.push_back(op);
    op = {};
    op.kind = OpKind::kLevelTrace;
    op.label = 4;
    op.points = {{1.5, -2.25, 3}};
    op.in_slice = true;
    op.plane = Plane::kCoronal;
    ops.push_back(op);
    op = {};
    op.kind = OpKind::kUndo;
    ops.push_back(op);
    op.kind = OpKind::kRedo;
    ops.push_back(op);
    for (const EditOp& o : ops) {
        const std::string line = toJsonLine(o);
        EXPECT_EQ(line.find('\n'), std::string::npos);
        auto back = parseEditOp(line);
        ASSERT_TRUE(back.isOk()) << line << ": " << back.status().toString();
        EXPECT_TRUE(*back == o) << line << " -> " << toJsonLine(*back);
    }
}

TEST(EditOp, TheIssuesLinesParse) {
    for (
        const char* line :
        {R"({"op": "paint", "shape": "sphere", "center_mm": [1, 2.5, -3], "radius_mm": 4, "label": 2})",
         R"({"op": "paint", "shape": "disk", "plane": "axial", "center_mm": [0, 0, 0], "radius_mm": 2, "label": 1})",
         R"({"op": "erase", "shape": "disk", "plane": "sagittal", "center_mm": [0, 0, 0], "radius_mm": 2})",
         R"({"op": "fill_between_slices", "label": 3, "plane": "axial"})", R"({"op": "undo"})",
         // docs/edit-journal.md's examples
         R"({"op":"paint","shape":"sphere","center_mm":[12.5,-40,88],"radius_mm":5,"label":2,"overwrite":"all"})",
         R"({"op":"paint","shape":"disk","plane":"axial","stroke_mm":[[0,0,10],[4,1,10],[9,3,10]],"radius_mm":3,"label":1,"min":-100,"max":300,"overwrite":"background"})",
         R"({"op":"erase","shape":"disk","plane":"sagittal","center_mm":[0,5,10],"radius_mm":4,"label":1})",
         R"({"op":"flood_fill","label":3,"seed_mm":[10,20,30],"min":100,"max":400,"connectivity":6,"overwrite":"background"})",
         R"({"op":"fill_between_slices","label":1,"plane":"axial","overwrite":"all"})",
         R"({"op":"islands","label":1,"mode":"remove_small","min_ml":0.5,"connectivity":26})",
         R"({"op":"margin","label":1,"margin_mm":-2,"overwrite":"all"})"}) {
        auto op = parseEditOp(line);
        EXPECT_TRUE(op.isOk()) << line << ": " << op.status().toString();
    }
}

TEST(EditOp, BadLinesNameTheKey) {
    const std::vector<std::pair<std::string, std::string>> cases{
        {R"({"op": "paint", "shape": "sphere", "center_mm": [0,0,0], "radius_mm": 2, "label": 1, "colour": 3})",
         "\"colour\""},
        {R"({"op": "paint", "shape": "sphere", "center_mm": [0,0,0], "radius_mm": -2, "label": 1})",
         "\"radius_mm\""},
        {R"({"op": "paint", "shape": "cube", "center_mm": [0,0,0], "radius_mm": 2, "label": 1})",
         "\"shape\""},
        {R"({"op": "paint", "shape": "disk", "center_mm": [0,0,0], "radius_mm": 2, "label": 1})",
         "\"plane\""},
        {R"({"op": "paint", "shape": "sphere", "center_mm": [0,0], "radius_mm": 2, "label": 1})",
         "\"center_mm\""},
        {R"({"op": "paint", "shape": "sphere", "center_mm": [0,0,0], "radius_mm": 2})",
         "\"label\""},
        {R"({"op": "paint", "shape": "sphere", "center_mm": [0,0,0], "radius_mm": 2, "label": 1, "overwrite": "some"})",
         "\"overwrite\""},
        {R"({"op": "flood_fill", "label": 1, "seed_mm": [0,0,0], "min": 0, "max": 1, "connectivity": 8})",
         "\"connectivity\""},
        {R"({"op": "threshold", "label": 1, "min": 5, "max": 1})", "\"max\""},
        {R"({"op": "smudge"})", "\"op\""},
        // Beyond 1 km: damage, refused before any op turns it into a voxel index (a fuzzer's
        // 4.4e25 mm overflowed the brush's int64 box).
        {R"({"op": "paint", "shape": "sphere", "center_mm": [4.4e25,2,1], "radius_mm": 1.5, "label": 2})",
         "\"center_mm\""},
        {R"({"op": "paint", "shape": "disk", "plane": "axial", "stroke_mm": [[0,0,1],[0,-2e6,1]], "radius_mm": 1, "label": 2})",
         "\"stroke_mm\""},
        {R"({"op": "paint", "shape": "sphere", "center_mm": [0,0,0], "radius_mm": 1e300, "label": 1})",
         "\"radius_mm\""},
        {R"({"op": "margin", "label": 1, "margin_mm": -1e7})", "\"margin_mm\""},
        {R"({"op": "prompt_point", "point_mm": [0, 1e9, 0]})", "\"point_mm\""},
        {R"({"op": "paint", )", "not JSON"},
    };
    for (const auto& [line, key] : cases) {
        auto op = parseEditOp(line);
        ASSERT_FALSE(op.isOk()) << line;
        EXPECT_NE(op.status().message().find(key), std::string::npos)
            << line << " -> " << op.status().message();
    }
}

TEST(Journal, WrittenOpsReplayToTheSameLabelMap) {
    voxseg::testing::TempDir dir;
    const auto g = testing::gridCases()[2].geometry;
    const Volume image = testing::makeImage(g), labels = testing::makeLabels(g);
    auto direct = LabelEditor::create(image, labels);
    ASSERT_TRUE(direct.isOk());
    auto journal = JournalWriter::open(dir / "edits.jsonl");
    ASSERT_TRUE(journal.isOk());
    std::vector<EditOp> ops = randomOps(g, 30, 5);
    EditOp undo;
    undo.kind = OpKind::kUndo;
    ops.insert(ops.begin() + 10, undo);
    ops.insert(ops.begin() + 11, undo);
    EditOp redo;
    redo.kind = OpKind::kRedo;
    ops.insert(ops.begin() + 12, redo);
    for (const EditOp& op : ops) {
        ASSERT_TRUE(direct->apply(op).isOk());
        ASSERT_TRUE(journal->append(op).isOk());
    }
    auto replayed = LabelEditor::create(image, labels);
    ASSERT_TRUE(replayed.isOk());
    auto r = replayJournal(dir / "edits.jsonl", *replayed);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r->ops_applied, int(ops.size()));
    EXPECT_TRUE(sameVoxels(direct->labelMap(), replayed->labelMap()));
    EXPECT_FALSE(sameVoxels(labels, replayed->labelMap()));
    EXPECT_EQ(replayed->undoDepth(), direct->undoDepth());
}

TEST(Journal, ABadLineIsReportedWithItsNumberAndNothingAfterItRuns) {
    voxseg::testing::TempDir dir;
    const auto g = testing::gridCases()[0].geometry;
    const Vec3 c = testing::gridCentre(g);
    {
        std::ofstream out(dir / "bad.jsonl");
        out << fmt::format(R"({{"op": "paint", "shape": "sphere", "center_mm": [{}, {}, {}], )"
                           R"("radius_mm": 3, "label": 1}})",
                           c[0], c[1], c[2])
            << "\n\n"
            << R"({"op": "paint", "shape": "sphere", "center_mm": [0, 0, 0], "radius": 3, "label": 1})"
            << "\n";
    }
    auto editor = LabelEditor::create(testing::makeImage(g), testing::makeLabels(g));
    ASSERT_TRUE(editor.isOk());
    auto r = replayJournal(dir / "bad.jsonl", *editor);
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().toString().find("bad.jsonl"), std::string::npos) << r.status().toString();
    EXPECT_NE(r.status().message().find("line 3"), std::string::npos) << r.status().toString();
    EXPECT_NE(r.status().message().find("\"radius\""), std::string::npos) << r.status().toString();

    // An op that parses but cannot apply (undo with nothing to undo) names its line too.
    {
        std::ofstream out(dir / "undo.jsonl");
        out << R"({"op": "undo"})"
            << "\n";
    }
    auto u = replayJournal(dir / "undo.jsonl", *editor);
    ASSERT_FALSE(u.isOk());
    EXPECT_NE(u.status().message().find("line 1"), std::string::npos) << u.status().toString();
}

TEST(Journal, ATornLastLineIsDroppedAndTheNextAppendStartsAFreshLine) {
    voxseg::testing::TempDir dir;
    const auto g = testing::gridCases()[0].geometry;
    const std::vector<EditOp> ops = randomOps(g, 3, 21);
    {
        auto j = JournalWriter::open(dir / "crash.jsonl");
        ASSERT_TRUE(j.isOk());
        for (const EditOp& op : ops) ASSERT_TRUE(j->append(op).isOk());
    }
    {
        std::ofstream out(dir / "crash.jsonl", std::ios::app);
        out << toJsonLine(ops[0]).substr(0, 25);  // the op being written at the kill
    }
    bool torn = false;
    auto recovered = readJournal(dir / "crash.jsonl", &torn);
    ASSERT_TRUE(recovered.isOk()) << recovered.status().toString();
    EXPECT_TRUE(torn);
    ASSERT_EQ(recovered->size(), 3u);
    for (size_t n = 0; n < 3; ++n) EXPECT_TRUE((*recovered)[n].op == ops[n]);
    // Appending cuts the torn line off: the new op is line 4 and the file reads clean.
    {
        auto j = JournalWriter::open(dir / "crash.jsonl");
        ASSERT_TRUE(j.isOk());
        ASSERT_TRUE(j->append(ops[1]).isOk());
    }
    auto appended = readJournal(dir / "crash.jsonl", &torn);
    ASSERT_TRUE(appended.isOk()) << appended.status().toString();
    EXPECT_FALSE(torn);
    ASSERT_EQ(appended->size(), 4u);
    EXPECT_EQ((*appended)[3].line, 4);
    EXPECT_TRUE((*appended)[3].op == ops[1]);
    // A torn line in the middle is an error naming it.
    {
        std::ofstream out(dir / "crash.jsonl", std::ios::app);
        out << toJsonLine(ops[0]).substr(0, 25) << "\n" << toJsonLine(ops[2]) << "\n";
    }
    auto middle = readJournal(dir / "crash.jsonl", &torn);
    ASSERT_FALSE(middle.isOk());
    EXPECT_NE(middle.status().message().find("line 5"), std::string::npos)
        << middle.status().toString();
}

TEST(Compare, ChangesPerLabelMarkEditedAndNewSegments) {
    const auto g = testing::gridCases()[0].geometry;
    Volume labels = testing::makeLabels(g);
    for (int64_t i = 0; i < 1000; ++i) labels.data<uint8_t>()[i] = 1;
    for (int64_t i = 2000; i < 2100; ++i) labels.data<uint8_t>()[i] = 2;
    auto editor = LabelEditor::create(testing::makeImage(g), labels);
    ASSERT_TRUE(editor.isOk());
    EditOp op;
    op.kind = OpKind::kPaint;
    op.points = {testing::gridCentre(g)};
    op.radius_mm = 3;
    op.label = 3;
    ASSERT_TRUE(editor->apply(op).isOk());
    op.label = 1;
    op.points = {g.indexToPhysical({5, 1, 0})};
    ASSERT_TRUE(editor->apply(op).isOk());
    auto changes = compareLabelMaps(labels, editor->labelMap());
    ASSERT_TRUE(changes.isOk());
    ASSERT_EQ(changes->size(), 3u);
    EXPECT_STREQ((*changes)[0].algorithmType(), "SEMIAUTOMATIC");
    EXPECT_GT((*changes)[0].added, 0);
    EXPECT_STREQ((*changes)[1].algorithmType(), "AUTOMATIC");
    EXPECT_STREQ((*changes)[2].algorithmType(), "MANUAL");
    EXPECT_EQ((*changes)[2].voxels_before, 0);
}

}  // namespace
}  // namespace voxseg::edit
