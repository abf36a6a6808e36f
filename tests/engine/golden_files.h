// The files of the golden tests (tools/gen_*golden*.py): an index.json listing entries with their
// input and output shapes, and raw little-endian float32 tensors beside it.
#pragma once

#include "engine/graph/tensor.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace voxseg::engine::testing {

struct GoldenNet {
    std::string name;
    Shape input_shape, output_shape;
    // When set, the stored output is only this box of the spatial dims (all of N and C).
    Shape crop_begin, crop_shape;
    // max |error| / max |y| of PyTorch with bf16 autocast's rounding (0 when not recorded).
    double bf16_emulated_rel_error = 0;
};

// The entries under `key` of `dir`/index.json, names prefixed with `prefix`; empty when the file
// is missing or unreadable (the tests then say so).
inline std::vector<GoldenNet> goldenEntries(const std::filesystem::path& dir,
                                            const std::string& key = "nets",
                                            const std::string& prefix = "") {
    std::vector<GoldenNet> nets;
    std::ifstream f(dir / "index.json");
    if (!f) return nets;
    const auto index = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
    if (index.is_discarded() || !index.contains(key)) return nets;
    for (const auto& n : index[key]) {
        GoldenNet net{prefix + n["name"].get<std::string>(),
                      n["input_shape"].get<Shape>(),
                      n["output_shape"].get<Shape>(),
                      {},
                      {},
                      n.value("bf16_emulated_rel_error", 0.0)};
        if (n.contains("output_crop")) {
            net.crop_begin = n["output_crop"]["begin"].get<Shape>();
            net.crop_shape = n["output_crop"]["shape"].get<Shape>();
        }
        nets.push_back(std::move(net));
    }
    return nets;
}

inline Tensor readRaw(const std::filesystem::path& path, const Shape& shape) {
    Tensor t(DType::kFloat32, shape);
    std::ifstream f(path, std::ios::binary);
    f.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.bytes()));
    EXPECT_TRUE(f.good() && f.gcount() == static_cast<std::streamsize>(t.bytes())) << path;
    return t;
}

}  // namespace voxseg::engine::testing
