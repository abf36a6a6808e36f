// One patient position shared by several images on different grids (the viewer's linked
// crosshairs across series: a prior study with other spacing, another sequence, another
// orientation). The position is a point in LPS mm; each image finds its own voxel for it
// through its own origin, spacing and direction (core/geometry.h), nearest voxel centre, and
// says whether the point lies inside its volume. Plain functions, no state, thread-safe.
#pragma once

#include "core/geometry.h"

#include <array>
#include <cstdint>

namespace voxseg {

using VoxelIndex = std::array<int64_t, 3>;

// Where a patient point falls in one grid.
struct GridLocation {
    VoxelIndex voxel{0, 0, 0};  // the nearest voxel, clamped into the grid
    Vec3 index{0, 0, 0};        // continuous index of the point (not clamped)
    // Within the volume: every continuous index in [-0.5, size - 0.5] (the voxels' extent).
    bool inside = false;
};

// The voxel of `grid` nearest to `point_mm` (LPS), clamped, and whether the point is inside.
// An empty grid gives voxel (0, 0, 0), outside.
GridLocation locatePatientPoint(const Geometry& grid, const Vec3& point_mm);

// The centre of `voxel` in LPS mm.
Vec3 voxelCentre(const Geometry& grid, const VoxelIndex& voxel);

// The shared point after one image's crosshair moved from voxel `before` to `after` (a click,
// a slice scrolled): along each index axis of `grid` whose index changed, the point takes the
// new voxel's centre; along the unchanged axes it keeps its own (sub-voxel) coordinate, so
// scrolling a coarse series does not drag the others' in-plane position to its voxel centres,
// and a point clamped at the edge of `grid` stays where it was along the axes not moved.
Vec3 movePatientPoint(const Geometry& grid, const Vec3& point_mm, const VoxelIndex& before,
                      const VoxelIndex& after);

}  // namespace voxseg
