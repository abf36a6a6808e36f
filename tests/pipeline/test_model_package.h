// A tiny real model package for tests (pipeline, app, ui): tests/engine/golden/nnunet_plain.onnx
// (an nnU-Net PlainConvUNet exported from PyTorch) with a model.json for `modality`, labels
// 1 "one" (red) and 2 "two" (green), patch 16x24x20 at `spacing_mm` (default 1 mm). Written
// into `folder` (writeTinyModelPackage) or `dir`/model (makeTinyModelPackage).
#pragma once

#include "core/sha256.h"
#include "tests/test_data.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

namespace voxseg::testing {

inline std::string writeTinyModelPackage(const std::filesystem::path& folder,
                                         const std::string& modality, double spacing_mm = 1.0) {
    namespace fs = std::filesystem;
    fs::create_directories(folder);
    fs::copy_file(fs::path(VOXSEG_SOURCE_DIR) / "tests/engine/golden/nnunet_plain.onnx",
                  folder / "model.onnx", fs::copy_options::overwrite_existing);
    nlohmann::json j = {
        {"name", "test-net"},
        {"version", "0.1"},
        {"description", "golden PlainConvUNet"},
        {"license", "MIT"},
        {"channels", {{{"modality", modality}, {"normalization", {{"scheme", "zscore"}}}}}},
        {"spacing_mm", {spacing_mm, spacing_mm, spacing_mm}},
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
        {"sha256", *sha256File(folder / "model.onnx")}};
    std::ofstream(folder / "model.json") << j.dump(2);
    return folder.string();
}

inline std::string makeTinyModelPackage(const TempDir& dir, const std::string& modality) {
    return writeTinyModelPackage(dir.path() / "model", modality);
}

}  // namespace voxseg::testing
