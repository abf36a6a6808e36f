// `voxseg edit --interactive-model` (issue 38 item 4): a prompts journal written from one of
// nninteractive 2.6.0's recorded sessions (tests/edit/data/nninteractive/sessions.json, session
// "autozoom_off": points, an exclude point, a 2-D box, an undo; then a reset and a new object),
// positions converted here from the session's voxel indices (z, y, x) to patient mm with the
// image's geometry, replays to 2.6.0's own masks voxel for voxel, each accepted into a label.
// An initial segmentation read from a mask file, then a point with AutoZoom, likewise (session
// "initial_seg_and_borders"). And the refusals: a package of another kind, a prompt outside the
// image and an unclosed lasso (both naming the line), an accept that records no object without
// --interactive-model; an existing output survives. A journal as the viewer writes it (a
// prompt_session line, the accepted object recorded) replays without the model to the recorded
// object, and with it in the line's precision, the rerun checked against the record.
#include "core/geometry.h"
#include "edit/interactive/prompt_ops.h"
#include "io/image_io.h"
#include "tests/app/run_voxseg.h"
#include "tests/test_data.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

namespace voxseg::edit {
namespace {

using app::clitest::runVoxseg;
using app::clitest::slurp;
using nlohmann::json;

const std::string kDir = std::string(VOXSEG_SOURCE_DIR) + "/tests/edit/data/nninteractive/";

json sessions() { return json::parse(slurp(kDir + "sessions.json")); }

const json& sessionNamed(const json& doc, const std::string& name) {
    for (const json& s : doc["sessions"])
        if (s["name"] == name) return s;
    throw std::runtime_error("no session " + name);
}

// Voxel coordinates (z, y, x) of the session -> patient LPS mm, as a JSON array.
std::string mm(const Geometry& g, double z, double y, double x) {
    const Vec3 p = g.indexToPhysical({x, y, z});
    return json::array({p[0], p[1], p[2]}).dump();
}

std::string pointLine(const Geometry& g, const json& step) {
    const json& p = step["point"];
    return fmt::format(R"({{"op": "prompt_point", "point_mm": {}, "include": {}}})",
                       mm(g, p[0], p[1], p[2]), step["include"].get<bool>());
}

std::string boxLine(const Geometry& g, const json& step) {
    const json& b = step["bbox"];  // [[z0, z1], [y0, y1], [x0, x1]]
    return fmt::format(R"({{"op": "prompt_box", "corners_mm": [{}, {}], "include": {}}})",
                       mm(g, b[0][0], b[1][0], b[2][0]), mm(g, b[0][1], b[1][1], b[2][1]),
                       step["include"].get<bool>());
}

void writeLines(const std::string& path, const std::vector<std::string>& lines) {
    std::ofstream out(path);
    for (const std::string& l : lines) out << l << "\n";
}

std::vector<uint8_t> readMask(const std::string& path) {
    auto v = io::readImage(path);
    EXPECT_TRUE(v.isOk()) << path << ": " << v.status().toString();
    if (!v.isOk()) return {};
    const auto n = static_cast<size_t>(v->geometry().voxelCount());
    std::vector<uint8_t> out(n);
    visitPixels(*v, [&](const auto* p) {
        for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(p[i]);
    });
    return out;
}

Geometry imageGeometry() {
    auto image = io::readImage(kDir + "image.nii.gz");
    EXPECT_TRUE(image.isOk());
    return image.isOk() ? image->geometry() : Geometry{};
}

TEST(InteractiveEditCli, ReplaysARecordedSessionToNnInteractivesMasks) {
    voxseg::testing::TempDir dir;
    const json doc = sessions();
    const json& steps = sessionNamed(doc, "autozoom_off")["steps"];
    ASSERT_EQ(steps[3]["op"], "bbox2d");
    ASSERT_EQ(steps[4]["op"], "undo");
    ASSERT_EQ(steps[7]["op"], "reset");
    const Geometry g = imageGeometry();
    // Steps 0-4 (point, point, exclude point, box, undo): object 1. Then a prompt, a reset and
    // step 8's point: 2.6.0's step 8 starts from a reset session too.
    writeLines(dir / "prompts.jsonl",
               {pointLine(g, steps[0]), pointLine(g, steps[1]), pointLine(g, steps[2]),
                boxLine(g, steps[3]), R"({"op": "undo"})", R"({"op": "prompt_accept", "label": 1})",
                pointLine(g, steps[0]), R"({"op": "prompt_reset"})", pointLine(g, steps[8]),
                R"({"op": "prompt_accept", "label": 2})"});
    auto r = runVoxseg({"edit", kDir + "image.nii.gz", "--interactive-model", kDir + "model",
                        "--device", "cpu", "--autozoom", "off", "--ops", dir / "prompts.jsonl",
                        "-o", dir / "out.nii.gz", "--report", dir / "report.json"},
                       dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::vector<uint8_t> out = readMask(dir / "out.nii.gz");
    const std::vector<uint8_t> first = readMask(kDir + steps[4]["result"].get<std::string>());
    const std::vector<uint8_t> second = readMask(kDir + steps[8]["result"].get<std::string>());
    ASSERT_EQ(out.size(), first.size());
    ASSERT_EQ(out.size(), second.size());
    int64_t differ = 0, ones = 0, twos = 0;
    for (size_t i = 0; i < out.size(); ++i) {
        const int expected = second[i] ? 2 : first[i] ? 1 : 0;  // object 2 accepted over 1
        differ += out[i] != expected;
        ones += out[i] == 1;
        twos += out[i] == 2;
    }
    EXPECT_EQ(differ, 0);
    EXPECT_GT(ones, 1000);
    EXPECT_EQ(twos, steps[8]["mask_voxels"].get<int64_t>());
    const json report = json::parse(slurp(dir / "report.json"));
    EXPECT_EQ(report["ops_applied"], 10);
    EXPECT_EQ(report["warnings"], json::array());
}

// Session "initial_seg_and_borders": an initial segmentation from a mask file (a path relative to
// the journal), then a point at the image's corner with AutoZoom on: 2.6.0's mask after step 1.
TEST(InteractiveEditCli, AnInitialSegmentationFromAMaskFileThenAPoint) {
    voxseg::testing::TempDir dir;
    const json doc = sessions();
    const json& steps = sessionNamed(doc, "initial_seg_and_borders")["steps"];
    ASSERT_EQ(steps[0]["op"], "initial_seg");
    ASSERT_FALSE(steps[0]["run_prediction"].get<bool>());
    ASSERT_EQ(steps[1]["op"], "point");
    ASSERT_TRUE(steps[1]["random_fallback"].empty());  // no NumPy draws to seed
    std::filesystem::create_directories(dir / "masks");
    std::filesystem::copy_file(kDir + steps[0]["mask"].get<std::string>(),
                               dir / "masks/initial.nii.gz");
    const Geometry g = imageGeometry();
    writeLines(dir / "prompts.jsonl",
               {R"({"op": "prompt_initial_seg", "mask": "masks/initial.nii.gz"})",
                pointLine(g, steps[1]), R"({"op": "prompt_accept", "label": 4})"});
    auto r =
        runVoxseg({"edit", kDir + "image.nii.gz", "--interactive-model", kDir + "model", "--device",
                   "cpu", "--ops", dir / "prompts.jsonl", "-o", dir / "out.nii.gz"},
                  dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::vector<uint8_t> out = readMask(dir / "out.nii.gz");
    const std::vector<uint8_t> expected = readMask(kDir + steps[1]["result"].get<std::string>());
    ASSERT_EQ(out.size(), expected.size());
    int64_t differ = 0, fours = 0;
    for (size_t i = 0; i < out.size(); ++i) {
        differ += out[i] != (expected[i] ? 4 : 0);
        fours += out[i] == 4;
    }
    EXPECT_EQ(differ, 0);
    EXPECT_EQ(fours, steps[1]["mask_voxels"].get<int64_t>());
}

TEST(InteractiveEditCli, AViewerJournalReplaysWithAndWithoutTheModel) {
    voxseg::testing::TempDir dir;
    const json doc = sessions();
    const json& steps = sessionNamed(doc, "autozoom_off")["steps"];
    const Geometry g = imageGeometry();
    // 2.6.0's object after steps 0-4, recorded in the accept as the viewer records it.
    const std::vector<uint8_t> first = readMask(kDir + steps[4]["result"].get<std::string>());
    const auto accept = toJsonLine(interactive::acceptPromptOp(3, {}, g, first));
    const auto lines = [&](const std::string& precision) {
        return std::vector<std::string>{
            toJsonLine(interactive::sessionPromptOp("another-model 2.0", "", precision, false)),
            pointLine(g, steps[0]),
            pointLine(g, steps[1]),
            pointLine(g, steps[2]),
            boxLine(g, steps[3]),
            R"({"op": "undo"})",
            accept};
    };
    const auto run = [&](const std::vector<std::string>& extra) {
        std::vector<std::string> args = {
            "edit", kDir + "image.nii.gz", "--ops",    dir / "prompts.jsonl",
            "-o",   dir / "out.nii.gz",    "--report", dir / "report.json"};
        args.insert(args.end(), extra.begin(), extra.end());
        return runVoxseg(args, dir);
    };
    const auto threes = [&] {
        const std::vector<uint8_t> out = readMask(dir / "out.nii.gz");
        int64_t differ = 0;
        for (size_t i = 0; i < out.size(); ++i) differ += out[i] != (first[i] ? 3 : 0);
        return out.size() == first.size() ? differ : -1;
    };
    // The CPU: the comparisons are exact there (2.6.0's objects were made in fp32 on a CPU).
    const std::vector<std::string> model = {"--interactive-model", kDir + "model", "--device",
                                            "cpu"};

    // Without the model: the recorded object, exactly.
    writeLines(dir / "prompts.jsonl", lines("fp32"));
    auto r = run({});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(threes(), 0);
    EXPECT_NE(r.err.find("written as recorded"), std::string::npos) << r.err;

    // With it, in the line's precision (fp32): the rerun equals the record; the other model's
    // name is reported.
    r = run(model);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(threes(), 0);
    EXPECT_EQ(json::parse(slurp(dir / "report.json"))["recorded_objects_differ"], json::array({0}));
    EXPECT_NE(r.err.find("another-model 2.0"), std::string::npos) << r.err;

    // A line saying bf16 compiles the network in bf16 (--precision journal, the default); a
    // line saying fp64 is an error naming it; --precision overrides the lines.
    writeLines(dir / "prompts.jsonl", lines("bf16"));
    r = run(model);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("cpu bf16"), std::string::npos) << r.err;
    const json differs = json::parse(slurp(dir / "report.json"))["recorded_objects_differ"];
    ASSERT_EQ(differs.size(), 1u);
    std::cout << "bf16 rerun against the fp32 record: " << differs[0] << " voxels differ\n";
    EXPECT_LT(differs[0].get<int64_t>(), 50);  // bf16 against 2.6.0's fp32 object
    r = run({"--interactive-model", kDir + "model", "--device", "cpu", "--precision", "fp32"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err.find("cpu bf16"), std::string::npos) << r.err;
    EXPECT_EQ(threes(), 0);
    writeLines(dir / "prompts.jsonl", lines("fp64"));
    r = run(model);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("line 1"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("fp64"), std::string::npos) << r.err;
}

// A package whose model.json says it is made for coarser images than this one: the replay
// warns (stderr and the report), naming the spacing, and still runs the prompts; with
// --strict-input it refuses instead.
TEST(InteractiveEditCli, AnImageOutsideTheIntendedInputIsWarnedAboutAndStillRuns) {
    voxseg::testing::TempDir dir;
    const json doc = sessions();
    const json& steps = sessionNamed(doc, "autozoom_off")["steps"];
    const Geometry g = imageGeometry();
    std::filesystem::copy(kDir + "model", dir / "model");
    json model = json::parse(slurp(dir / "model/model.json"));
    const double finest = std::min({g.spacing[0], g.spacing[1], g.spacing[2]});
    model["intended_input"] = {{"body_region", "test: coarse images only"},
                               {"spacing_mm", {finest * 2, finest * 10}}};
    std::ofstream(dir / "model/model.json") << model.dump(2);
    writeLines(dir / "prompts.jsonl",
               {pointLine(g, steps[0]), R"({"op": "prompt_accept", "label": 1})"});
    auto r = runVoxseg({"edit", kDir + "image.nii.gz", "--interactive-model", dir / "model",
                        "--device", "cpu", "--autozoom", "off", "--ops", dir / "prompts.jsonl",
                        "-o", dir / "out.nii.gz", "--report", dir / "report.json"},
                       dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("input spacing"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("the objects may be poor"), std::string::npos) << r.err;
    const json warnings = json::parse(slurp(dir / "report.json"))["warnings"];
    ASSERT_EQ(warnings.size(), 1u) << warnings;
    EXPECT_NE(warnings[0].get<std::string>().find("spacing"), std::string::npos) << warnings;
    const std::vector<uint8_t> out = readMask(dir / "out.nii.gz");
    EXPECT_EQ(std::count(out.begin(), out.end(), 1), steps[0]["mask_voxels"].get<int64_t>());

    // --strict-input refuses it instead, naming the spacing; the output already there stays.
    const std::string before = slurp(dir / "out.nii.gz");
    r = runVoxseg(
        {"edit", kDir + "image.nii.gz", "--interactive-model", dir / "model", "--device", "cpu",
         "--ops", dir / "prompts.jsonl", "-o", dir / "out.nii.gz", "--strict-input"},
        dir);
    EXPECT_EQ(r.exit_code, 5) << r.err;
    EXPECT_NE(r.err.find("--strict-input"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("input spacing"), std::string::npos) << r.err;
    EXPECT_EQ(slurp(dir / "out.nii.gz"), before);
}

TEST(InteractiveEditCli, RefusalsNameTheProblemAndKeepTheExistingOutput) {
    voxseg::testing::TempDir dir;
    const Geometry g = imageGeometry();
    const std::string inside = fmt::format(
        R"({{"op": "prompt_point", "point_mm": {}, "include": true}})", mm(g, 20, 40, 60));
    const std::string outside = fmt::format(
        R"({{"op": "prompt_point", "point_mm": {}, "include": true}})", mm(g, 20, 40, 400));
    const std::string open_lasso =
        fmt::format(R"({{"op": "prompt_lasso", "lasso_mm": [{}, {}, {}, {}], "include": true}})",
                    mm(g, 30, 10, 10), mm(g, 30, 10, 30), mm(g, 30, 30, 30), mm(g, 30, 30, 10));
    const std::string out = dir / "out.nii.gz";
    writeLines(out, {"already written"});
    auto check = [&](const std::vector<std::string>& args, const std::vector<std::string>& lines,
                     const std::vector<std::string>& expected) {
        writeLines(dir / "prompts.jsonl", lines);
        std::vector<std::string> all = {
            "edit", kDir + "image.nii.gz", "--ops", dir / "prompts.jsonl", "-o", out};
        all.insert(all.end(), args.begin(), args.end());
        auto r = runVoxseg(all, dir);
        EXPECT_NE(r.exit_code, 0) << r.err;
        for (const std::string& e : expected)
            EXPECT_NE(r.err.find(e), std::string::npos) << "want \"" << e << "\" in: " << r.err;
        EXPECT_EQ(slurp(out), "already written\n");
    };
    const std::vector<std::string> model = {"--interactive-model", kDir + "model"};
    const std::string reset = R"({"op": "prompt_reset"})";  // a cheap line 1
    check(model, {reset, outside}, {"line 2", "outside"});
    check(model, {reset, open_lasso}, {"line 2", "does not close"});
    check({"--interactive-model", std::string(VOXSEG_SOURCE_DIR) + "/sample_data/models/liver"},
          {inside}, {"interactive"});
    check({"--labels", kDir + "s0_step0.nii.gz"},
          {inside, R"({"op": "prompt_accept", "label": 1})"},
          {"line 2", "prompt_accept", "records no object", "--interactive-model"});
}

}  // namespace
}  // namespace voxseg::edit
