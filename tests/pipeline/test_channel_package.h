// A two-channel model package (format version 1, channels T1 and T2) and a DICOM study to run it
// on, for the multi-channel tests (tests/pipeline/channels_test.cpp, tests/batch): the network
// is a 1x1x1 convolution giving label 1 where T1 is bright and T2 is not, label 2 the other way
// round; the study has cuboid A bright in T1 only and cuboid B bright in T2 only, T2 on a coarser
// grid of the same field of view.
#pragma once

#include "core/volume.h"
#include "io/dicom_synth.h"
#include "tests/pipeline/test_stage_package.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

namespace voxseg::testing {

// Cuboid A is bright in T1 only, cuboid B in T2 only (LPS mm).
inline bool inA(const Vec3& p) {
    return p[0] >= 6 && p[0] < 18 && p[1] >= 6 && p[1] < 18 && p[2] >= 6 && p[2] < 24;
}
inline bool inB(const Vec3& p) {
    return p[0] >= 22 && p[0] < 34 && p[1] >= 16 && p[1] < 30 && p[2] >= 9 && p[2] < 27;
}

inline io::SynthSeriesSpec t1Spec(const std::string& study, const std::string& frame) {
    io::SynthSeriesSpec s;
    s.study_uid = study;
    s.frame_of_reference_uid = frame;
    s.modality = "MR";
    s.description = "t1_mprage";
    s.series_number = 2;
    s.columns = 40, s.rows = 36, s.slices = 24;
    s.column_spacing = s.row_spacing = 1.0;
    s.slice_spacing = 1.5;
    s.echo_time = 3;
    s.value = [](int i, int j, int k) { return inA({1.0 * i, 1.0 * j, 1.5 * k}) ? 200 : 10; };
    return s;
}

// The same field of view on a 2 x 2 x 3 mm grid (voxel edges on T1's).
inline io::SynthSeriesSpec t2Spec(const std::string& study, const std::string& frame) {
    io::SynthSeriesSpec s;
    s.study_uid = study;
    s.frame_of_reference_uid = frame;
    s.modality = "MR";
    s.description = "t2_tse";
    s.series_number = 3;
    s.columns = 20, s.rows = 18, s.slices = 12;
    s.column_spacing = s.row_spacing = 2.0;
    s.slice_spacing = 3.0;
    s.origin = {0.5, 0.5, 0.75};
    s.echo_time = 90;
    s.value = [](int i, int j, int k) {
        return inB({0.5 + 2.0 * i, 0.5 + 2.0 * j, 0.75 + 3.0 * k}) ? 200 : 10;
    };
    return s;
}

inline io::SynthSeriesSpec decoySpec(const std::string& study, const std::string& frame) {
    io::SynthSeriesSpec s = t1Spec(study, frame);
    s.description = "t1_map";
    s.image_type = "DERIVED\\PRIMARY\\T1MAP";
    s.series_number = 4;
    s.value = [](int, int, int) { return 500; };
    return s;
}

inline nlohmann::json channelJson(const std::string& name, const nlohmann::json& match) {
    return {{"name", name},
            {"modality", "MR"},
            {"match", match},
            {"normalization", {{"scheme", "window"}, {"window", {0, 200}}, {"range", {0, 1}}}}};
}

// Version 1, two channels; logits [0, T1 - T2 - 0.5, T2 - T1 - 0.5] on the normalised values.
inline std::string writeTwoChannelPackage(const std::filesystem::path& folder,
                                          const nlohmann::json& t1_match) {
    std::filesystem::create_directories(folder);
    const std::string sha = writeOnnx(
        folder, "model.onnx", conv1x1NetworkOnnx(2, 3, {0, 0, 1, -1, -1, 1}, {0, -0.5f, -0.5f}));
    const nlohmann::json j = {
        {"name", "two-channel-test"},
        {"version", "0.1"},
        {"description", "T1 and T2"},
        {"license", "MIT"},
        {"channels",
         {channelJson("T1", t1_match), channelJson("T2", {{"echo_time_ms", {50, 200}}})}},
        {"spacing_mm", {1.5, 1.0, 1.0}},
        {"patch_size", {16, 16, 16}},
        {"axis_order", "zyx"},
        {"orientation", "native"},
        {"labels",
         {{{"value", 1}, {"name", "t1_bright"}, {"color", {255, 0, 0}}},
          {{"value", 2}, {"name", "t2_bright"}, {"color", {0, 255, 0}}}}},
        {"output", "softmax"},
        {"sha256", sha}};
    std::ofstream(folder / "model.json") << j.dump(2);
    return folder.string();
}

inline const nlohmann::json kT1Rule = {{"series_description", "t1"}, {"image_type", "ORIGINAL"}};

// Dice of label 1 against cuboid A, or of label 2 against cuboid B, on a uint8 label map.
inline double diceWithCuboid(const Volume& labels, int label) {
    const Geometry g = labels.geometry();
    const uint8_t* p = labels.data<uint8_t>();
    int64_t a = 0, b = 0, both = 0;
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i) {
                const Vec3 at = g.indexToPhysical({1.0 * i, 1.0 * j, 1.0 * k});
                const bool t = label == 1 ? inA(at) : inB(at);
                const bool got = p[(k * g.size[1] + j) * g.size[0] + i] == label;
                a += t, b += got, both += t && got;
            }
    return 2.0 * static_cast<double>(both) / static_cast<double>(a + b);
}

}  // namespace voxseg::testing
