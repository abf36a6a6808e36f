// Helpers for the batch tests: a model package around the golden nnU-Net PlainConvUNet
// (tests/engine/golden/nnunet_plain.onnx) and small synthetic studies written as image files.
#pragma once

#include "core/volume.h"
#include "engine/sha256.h"
#include "io/image_io.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace voxseg::batch::testing {

// Image files carry no modality, so any `modality` accepts them.
inline std::string makePackage(const std::filesystem::path& parent,
                               const std::string& modality = "MR") {
    namespace fs = std::filesystem;
    const fs::path folder = parent / "model";
    fs::create_directories(folder);
    fs::copy_file(fs::path(VOXSEG_SOURCE_DIR) / "tests/engine/golden/nnunet_plain.onnx",
                  folder / "model.onnx", fs::copy_options::overwrite_existing);
    nlohmann::json j = {
        {"name", "test-net"},
        {"version", "0.1"},
        {"description", "golden PlainConvUNet"},
        {"license", "MIT"},
        {"channels", {{{"modality", modality}, {"normalization", {{"scheme", "zscore"}}}}}},
        {"spacing_mm", {1.0, 1.0, 1.0}},
        {"patch_size", {16, 24, 20}},
        {"axis_order", "zyx"},
        {"orientation", "native"},
        {"labels",
         {{{"value", 1}, {"name", "one"}, {"color", {255, 0, 0}}},
          {{"value", 2}, {"name", "two"}, {"color", {0, 255, 0}}}}},
        {"output", "softmax"},
        {"inference",
         {{"overlap", 0.5},
          {"gaussian_sigma_scale", 0.125},
          {"mirror_axes", nlohmann::json::array()}}},
        {"sha256", *engine::sha256File(folder / "model.onnx")}};
    std::ofstream(folder / "model.json") << j.dump(2);
    return folder.string();
}

// A noisy sphere whose centre moves with `seed`, so every case has a different answer.
inline Volume makeVolume(uint32_t seed, std::array<int64_t, 3> size = {30, 28, 22}) {
    Geometry g;
    g.size = size;
    g.spacing = {0.9, 0.8, 1.2};
    g.origin = {-12, 30, 7};
    Volume v = Volume::allocate<float>(g);
    std::mt19937 rng(seed);
    std::normal_distribution<float> noise(0.f, 5.f);
    const double ci = size[0] / 2.0 + (seed % 5) - 2.0, cj = size[1] / 2.0, ck = size[2] / 2.0;
    float* p = v.data<float>();
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i) {
                const double r = std::hypot(i - ci, j - cj, k - ck);
                *p++ = (r < 7 ? 100.f : 20.f) + noise(rng);
            }
    return v;
}

inline std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace voxseg::batch::testing
