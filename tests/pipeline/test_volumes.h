// Synthetic volumes with known answers for the pipeline tests.
#pragma once

#include "core/volume.h"

#include <cmath>
#include <functional>

namespace voxseg::testing {

// A volume whose voxel value is f(physical point in LPS mm).
template <typename T>
Volume makeVolume(const Geometry& g, const std::function<double(const Vec3&)>& f) {
    Volume v = Volume::allocate<T>(g);
    T* p = v.data<T>();
    int64_t idx = 0;
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i, ++idx)
                p[idx] = static_cast<T>(f(g.indexToPhysical(
                    {static_cast<double>(i), static_cast<double>(j), static_cast<double>(k)})));
    return v;
}

inline Geometry makeGeometry(std::array<int64_t, 3> size, Vec3 spacing, Vec3 origin = {0, 0, 0},
                             Mat3 direction = {1, 0, 0, 0, 1, 0, 0, 0, 1}) {
    Geometry g;
    g.size = size;
    g.spacing = spacing;
    g.origin = origin;
    g.direction = direction;
    return g;
}

template <typename T>
T valueAt(const Volume& v, int64_t i, int64_t j, int64_t k) {
    const Geometry g = v.geometry();
    return v.data<T>()[(k * g.size[1] + j) * g.size[0] + i];
}

inline double distance(const Vec3& a, const Vec3& b) {
    return std::sqrt((a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) +
                     (a[2] - b[2]) * (a[2] - b[2]));
}

}  // namespace voxseg::testing
