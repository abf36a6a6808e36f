// `voxseg edit` as a child process: it reproduces the library's replay voxel for voxel (label map
// output on an oblique NIfTI image, DICOM SEG output on a DICOM series), reports what changed
// per label, and names the file and line of a bad op (exit code 2, no output written).
#include "edit/journal.h"
#include "edit/label_editor.h"
#include "io/image_io.h"
#include "pipeline/segment.h"
#include "pipeline/segmentation_files.h"
#include "tests/app/run_voxseg.h"
#include "tests/edit/edit_test_grids.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace voxseg::edit {
namespace {

using app::clitest::runVoxseg;
using app::clitest::slurp;
using testing::sameVoxels;

// A journal exercising several op kinds around `c` (LPS mm), with an undo in it.
void writeJournal(const std::string& path, const Vec3& c) {
    auto j = JournalWriter::open(path, true);
    ASSERT_TRUE(j.isOk());
    auto paint = [&](Vec3 p, double r, int label, Shape shape) {
        EditOp op;
        op.kind = OpKind::kPaint;
        op.shape = shape;
        op.plane = Plane::kAxial;
        op.points = {p};
        op.radius_mm = r;
        op.label = label;
        return op;
    };
    std::vector<EditOp> ops{paint(c, 5.5, 1, Shape::kSphere),
                            paint({c[0] + 6, c[1], c[2]}, 4.0, 3, Shape::kDisk),
                            paint({c[0] - 6, c[1] + 3, c[2]}, 3.0, 2, Shape::kSphere)};
    EditOp undo;
    undo.kind = OpKind::kUndo;
    ops.push_back(undo);
    EditOp margin;
    margin.kind = OpKind::kMargin;
    margin.label = 1;
    margin.margin_mm = 1.2;
    margin.overwrite = {Overwrite::Mode::kBackground, 0};
    ops.push_back(margin);
    EditOp erase = paint({c[0], c[1] - 3, c[2]}, 2.0, 0, Shape::kSphere);
    erase.kind = OpKind::kErase;
    ops.push_back(erase);
    for (const EditOp& op : ops) ASSERT_TRUE(j->append(op).isOk());
}

Volume libraryReplay(const Volume& image, const Volume& labels, const std::string& journal) {
    auto editor = LabelEditor::create(image, labels);
    EXPECT_TRUE(editor.isOk()) << editor.status().toString();
    auto r = replayJournal(journal, *editor);
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    return cloneVolume(editor->labelMap());
}

TEST(EditCli, LabelMapOutputMatchesTheLibraryOnAnObliqueImage) {
    voxseg::testing::TempDir dir;
    const Geometry g = testing::gridCases()[1].geometry;
    Volume labels = testing::makeLabels(g);
    for (int64_t i = 0; i < g.voxelCount(); i += 7) labels.data<uint8_t>()[i] = 1;  // sparse 1s
    ASSERT_TRUE(io::writeImage(testing::makeImage(g), dir / "image.nii.gz").isOk());
    ASSERT_TRUE(io::writeImage(labels, dir / "labels.nii.gz").isOk());
    writeJournal(dir / "edits.jsonl", testing::gridCentre(g));

    auto r =
        runVoxseg({"edit", dir / "image.nii.gz", "--labels", dir / "labels.nii.gz", "--ops",
                   dir / "edits.jsonl", "-o", dir / "out.nii.gz", "--report", dir / "report.json"},
                  dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // What the CLI read, read here the same way, replayed by the library.
    auto image = io::readImage(dir / "image.nii.gz");
    auto in = io::readImage(dir / "labels.nii.gz");
    auto out = io::readImage(dir / "out.nii.gz");
    ASSERT_TRUE(image.isOk() && in.isOk() && out.isOk());
    const Volume expected = libraryReplay(*image, *in, dir / "edits.jsonl");
    EXPECT_TRUE(out->geometry().approxEqual(image->geometry()));
    EXPECT_TRUE(sameVoxels(*out, expected));
    EXPECT_FALSE(sameVoxels(*out, *in));

    const auto report = nlohmann::json::parse(slurp(dir / "report.json"));
    EXPECT_EQ(report["ops_applied"], 6);
    std::map<int, std::string> types;
    for (const auto& c : report["label_changes"]) types[c["label"]] = c["algorithm_type"];
    EXPECT_EQ(types[1], "SEMIAUTOMATIC");
    EXPECT_EQ(types[3], "MANUAL");
    EXPECT_EQ(types.count(2), 0u);  // painted, then undone
}

TEST(EditCli, DicomSegOutputMatchesTheLibraryOnADicomSeries) {
    voxseg::testing::TempDir dir;
    const std::string dicom = dir / "series";
    ASSERT_EQ(runVoxseg({"synth", dicom, "--size", "40x36x10", "--spacing", "0.8x0.8x2.0"}, dir)
                  .exit_code,
              0);
    auto study = pipeline::loadStudy(dicom, "", {});
    ASSERT_TRUE(study.isOk()) << study.status().toString();
    ASSERT_TRUE(study->series.has_value());
    const Geometry g = study->volume.geometry();
    Volume labels = Volume::allocate<uint8_t>(g);
    for (int64_t i = 0; i < 200; ++i) labels.data<uint8_t>()[g.voxelCount() / 2 + i] = 1;
    ASSERT_TRUE(io::writeImage(labels, dir / "labels.nii.gz").isOk());
    writeJournal(dir / "edits.jsonl", g.indexToPhysical({20.2, 17.8, 4.6}));

    auto r = runVoxseg({"edit", dicom, "--labels", dir / "labels.nii.gz", "--ops",
                        dir / "edits.jsonl", "-o", dir / "edited.dcm"},
                       dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto in = io::readImage(dir / "labels.nii.gz");
    ASSERT_TRUE(in.isOk());
    const Volume expected = libraryReplay(study->volume, *in, dir / "edits.jsonl");
    auto seg = pipeline::readSegmentationFile(dir / "edited.dcm", g, &*study->series);
    ASSERT_TRUE(seg.isOk()) << seg.status().toString();
    EXPECT_EQ(seg->kind, "DICOM SEG");
    // SEG segments are numbered in their own order; compare voxel sets per label.
    const Volume& got = seg->label_map;
    int64_t mismatched = 0, labelled = 0;
    std::map<int, int> mapping;  // expected label -> SEG label
    for (int64_t i = 0; i < g.voxelCount(); ++i) {
        const int e = testing::labelAt(expected, i), s = testing::labelAt(got, i);
        labelled += e != 0;
        if ((e == 0) != (s == 0)) {
            ++mismatched;
            continue;
        }
        if (e == 0) continue;
        auto [it, fresh] = mapping.emplace(e, s);
        if (it->second != s) ++mismatched;
    }
    EXPECT_EQ(mismatched, 0);
    EXPECT_GT(labelled, 300);
    EXPECT_EQ(mapping.size(), 2u);  // labels 1 and 3
    // Issue 18 item 3: label 1 came with the input and was edited, label 3 was drawn by hand.
    ASSERT_EQ(seg->segments.size(), 2u);
    std::map<std::string, std::string> type_of;
    for (const auto& d : seg->segments) type_of[d.name] = d.algorithm_type;
    EXPECT_EQ(type_of["label 1"], "SEMIAUTOMATIC");
    EXPECT_EQ(type_of["label 3"], "MANUAL");
}

TEST(EditCli, ABadOpNamesTheFileAndLineAndWritesNothing) {
    voxseg::testing::TempDir dir;
    const Geometry g = testing::gridCases()[0].geometry;
    ASSERT_TRUE(io::writeImage(testing::makeImage(g), dir / "image.nrrd").isOk());
    ASSERT_TRUE(io::writeImage(testing::makeLabels(g), dir / "labels.nrrd").isOk());
    {
        std::ofstream out(dir / "edits.jsonl");
        out << R"({"op": "undo"})"
            << "\n"
            << R"({"op": "paint", "shape": "disk", "plane": "oblique", "center_mm": [0, 0, 0], "radius_mm": 2, "label": 1})"
            << "\n";
    }
    auto r = runVoxseg({"edit", dir / "image.nrrd", "--labels", dir / "labels.nrrd", "--ops",
                        dir / "edits.jsonl", "-o", dir / "out.nrrd"},
                       dir);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("edits.jsonl"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("line 2"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("\"plane\""), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "out.nrrd"));

    // A line that parses but cannot apply: undo with nothing to undo, on line 1.
    {
        std::ofstream out(dir / "edits.jsonl");
        out << R"({"op": "undo"})"
            << "\n";
    }
    r = runVoxseg({"edit", dir / "image.nrrd", "--labels", dir / "labels.nrrd", "--ops",
                   dir / "edits.jsonl", "-o", dir / "out.nrrd"},
                  dir);
    EXPECT_EQ(r.exit_code, 5) << r.err;
    EXPECT_NE(r.err.find("line 1"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "out.nrrd"));

    // A SEG needs a DICOM image.
    r = runVoxseg({"edit", dir / "image.nrrd", "--labels", dir / "labels.nrrd", "--ops",
                   dir / "edits.jsonl", "-o", dir / "out.dcm"},
                  dir);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("DICOM"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace voxseg::edit
