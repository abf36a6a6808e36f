// Helpers for the batch tests: a model package around the golden nnU-Net PlainConvUNet
// (tests/engine/golden/nnunet_plain.onnx) and small synthetic studies written as image files.
#pragma once

#include "core/volume.h"
#include "io/image_io.h"
#include "tests/pipeline/test_model_package.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace voxseg::batch::testing {

// Image files carry no modality, so any `modality` accepts them.
inline std::string makePackage(const std::filesystem::path& parent,
                               const std::string& modality = "MR") {
    return voxseg::testing::writeTinyModelPackage(parent / "model", modality);
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
