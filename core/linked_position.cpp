#include "core/linked_position.h"

#include <algorithm>
#include <cmath>

namespace voxseg {

GridLocation locatePatientPoint(const Geometry& grid, const Vec3& point_mm) {
    GridLocation out;
    if (grid.voxelCount() <= 0) return out;
    out.index = grid.physicalToIndex(point_mm);
    out.inside = true;
    for (int a = 0; a < 3; ++a) {
        const double c = out.index[a];
        const double last = static_cast<double>(grid.size[a] - 1);
        if (!std::isfinite(c) || c < -0.5 || c > last + 0.5) out.inside = false;
        const double nearest = std::isfinite(c) ? std::clamp(std::round(c), 0.0, last) : 0.0;
        out.voxel[a] = static_cast<int64_t>(nearest);
    }
    return out;
}

Vec3 voxelCentre(const Geometry& grid, const VoxelIndex& voxel) {
    return grid.indexToPhysical({static_cast<double>(voxel[0]), static_cast<double>(voxel[1]),
                                 static_cast<double>(voxel[2])});
}

Vec3 movePatientPoint(const Geometry& grid, const Vec3& point_mm, const VoxelIndex& before,
                      const VoxelIndex& after) {
    Vec3 index = grid.physicalToIndex(point_mm);
    for (int a = 0; a < 3; ++a)
        if (after[a] != before[a] || !std::isfinite(index[a]))
            index[a] = static_cast<double>(after[a]);
    return grid.indexToPhysical(index);
}

}  // namespace voxseg
