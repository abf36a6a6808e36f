// Grids and helpers the edit tests share: an axis-aligned anisotropic grid, an oblique one
// (rotated 25 degrees about a tilted axis) and a sagittal one (slices along L-R), each with a
// CT-like int16 image whose intensity varies across the grid, and a zero label map.
#pragma once

#include "core/geometry.h"
#include "core/volume.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace voxseg::edit::testing {

struct GridCase {
    std::string name;
    Geometry geometry;
};

inline Mat3 rotation(Vec3 axis, double degrees) {
    const double n = std::sqrt(dot(axis, axis));
    for (double& a : axis) a /= n;
    const double t = degrees * M_PI / 180.0, c = std::cos(t), s = std::sin(t), C = 1 - c;
    const double x = axis[0], y = axis[1], z = axis[2];
    return {c + x * x * C,     x * y * C - z * s, x * z * C + y * s,
            y * x * C + z * s, c + y * y * C,     y * z * C - x * s,
            z * x * C - y * s, z * y * C + x * s, c + z * z * C};
}

inline std::vector<GridCase> gridCases() {
    std::vector<GridCase> out;
    Geometry axial;
    axial.size = {48, 44, 30};
    axial.spacing = {0.8, 0.9, 1.5};
    axial.origin = {-20.0, -18.0, -22.0};
    out.push_back({"axis_aligned", axial});

    Geometry oblique = axial;
    oblique.size = {44, 44, 40};
    oblique.spacing = {0.9, 0.9, 1.1};
    oblique.direction = rotation({1.0, 0.4, 0.2}, 25.0);
    oblique.origin = {-18.0, -22.0, -19.0};
    out.push_back({"oblique", oblique});

    // Sagittal stack: i runs posterior, j inferior, k to the patient's left.
    Geometry sagittal;
    sagittal.size = {46, 40, 36};
    sagittal.spacing = {0.85, 0.95, 1.3};
    sagittal.direction = {0, 0, 1, 1, 0, 0, 0, -1, 0};
    sagittal.origin = {-23.0, -19.0, 18.0};
    out.push_back({"sagittal", sagittal});
    return out;
}

// Intensity = 10 * i + 3 * j - 7 * k (int16): ranges then select voxel sets that differ from the
// shapes'.
inline Volume makeImage(const Geometry& g) {
    Volume v = Volume::allocate<int16_t>(g);
    int16_t* d = v.data<int16_t>();
    int64_t idx = 0;
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i) d[idx++] = int16_t(10 * i + 3 * j - 7 * k);
    return v;
}

inline Volume makeLabels(const Geometry& g, bool wide = false) {
    return wide ? Volume::allocate<uint16_t>(g) : Volume::allocate<uint8_t>(g);
}

inline int labelAt(const Volume& v, int64_t idx) {
    return v.pixelType() == PixelType::kUInt8 ? v.data<uint8_t>()[idx] : v.data<uint16_t>()[idx];
}

// The centre of the grid in LPS mm, nudged off the voxel lattice.
inline Vec3 gridCentre(const Geometry& g) {
    Vec3 c = g.indexToPhysical(
        {(g.size[0] - 1) / 2.0 + 0.31, (g.size[1] - 1) / 2.0 - 0.27, (g.size[2] - 1) / 2.0 + 0.13});
    return c;
}

inline double distance(const Vec3& a, const Vec3& b) {
    return std::sqrt((a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) +
                     (a[2] - b[2]) * (a[2] - b[2]));
}

// Calls fn(i, j, k, linear index, LPS centre) for every voxel.
inline void forEachVoxel(const Geometry& g,
                         const std::function<void(int64_t, int64_t, int64_t, int64_t, Vec3)>& fn) {
    int64_t idx = 0;
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i, ++idx)
                fn(i, j, k, idx, g.indexToPhysical({double(i), double(j), double(k)}));
}

inline bool sameVoxels(const Volume& a, const Volume& b) {
    const int64_t n = a.geometry().voxelCount();
    if (n != b.geometry().voxelCount()) return false;
    for (int64_t i = 0; i < n; ++i)
        if (labelAt(a, i) != labelAt(b, i)) return false;
    return true;
}

}  // namespace voxseg::edit::testing
