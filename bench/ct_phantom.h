// A CT-like int16 phantom for benchmarks: air around an elliptic body of soft tissue with two
// lungs and a spine, Gaussian noise everywhere (real CT is noisy, which is what makes it hard to
// compress). Fixed seed, so every run compresses the same bytes. Header-only; single-threaded.
#pragma once

#include "core/volume.h"

#include <cmath>
#include <cstdint>
#include <random>

namespace voxseg::bench {

inline Volume makeCtPhantom(int64_t nx, int64_t ny, int64_t nz, uint32_t seed = 12345) {
    Geometry g;
    g.size = {nx, ny, nz};
    g.spacing = {0.7, 0.7, 1.0};
    g.origin = {-0.35 * static_cast<double>(nx), -0.35 * static_cast<double>(ny), -500.0};
    Volume v = Volume::allocate<int16_t>(g);
    int16_t* p = v.data<int16_t>();
    std::mt19937 rng(seed);
    std::normal_distribution<float> noise(0.0f, 12.0f);
    for (int64_t k = 0; k < nz; ++k) {
        for (int64_t j = 0; j < ny; ++j) {
            const double y = (static_cast<double>(j) - ny / 2.0) / (ny * 0.35);
            for (int64_t i = 0; i < nx; ++i) {
                const double x = (static_cast<double>(i) - nx / 2.0) / (nx * 0.45);
                float hu = -1000.0f;
                if (x * x + y * y < 1.0) {
                    hu = 40.0f;
                    const double lx = std::abs(x) - 0.45, ly = y + 0.1;
                    if (lx * lx / 0.09 + ly * ly / 0.25 < 1.0) hu = -850.0f;
                    const double sx = x, sy = y - 0.6;
                    if (sx * sx + sy * sy < 0.015) hu = 700.0f;
                }
                p[(k * ny + j) * nx + i] = static_cast<int16_t>(std::lround(hu + noise(rng)));
            }
        }
    }
    return v;
}

}  // namespace voxseg::bench
