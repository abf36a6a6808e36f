// Resampling an irregular slice stack (gantry tilt, uneven spacing, missing slices) onto a
// regular orthogonal grid that encloses every acquired pixel. The grid keeps the acquired
// orientation: its axes are the row direction, the column direction and the slice normal, so
// every grid plane is parallel to the acquired images (a tilted stack is de-sheared: each
// slice's in-plane drift becomes a shift within the plane, as dcm2niix's tilt correction does,
// and the plane grows to hold every shifted slice). In-plane spacing is kept; the slice step is
// the median step along the normal, adjusted so that the first and the last slice lie on grid
// planes. With even spacing every acquired slice is a grid plane and only its in-plane drift is
// interpolated.
//
// Values are linear interpolations within and between slices (along the normal), also across
// a gap of up to two missing slices. Where the two slices around a grid voxel do not both cover
// it (the drifted edges of a tilted stack, a wider gap), the voxel takes the nearest slice that
// covers it and lies less than one grid step away; a slice covers points up to (less than) one
// pixel beyond its outer pixel centres (nearest edge pixel). So the grid voxels around every
// acquired pixel hold acquired values. Anything else gets the fill value (the smallest input
// value): nothing is invented further than one grid step from an acquired pixel.
// Internal to io/. Reentrant.
#pragma once

#include "core/geometry.h"
#include "core/status.h"

#include <string>
#include <vector>

namespace voxseg::io {

// Widest step (in median steps) still interpolated: two missing slices.
inline constexpr double kMaxInterpolatedStep = 3.0;

struct IrregularStack {
    const float* data = nullptr;  // slices * rows * columns values, slice-major
    int columns = 0;
    int rows = 0;
    std::vector<Vec3> positions;  // IPP per slice, sorted along the normal
    Vec3 row_dir{1, 0, 0};
    Vec3 col_dir{0, 1, 0};
    double column_spacing = 1;
    double row_spacing = 1;
};

struct ResampledStack {
    Geometry geometry;
    std::vector<float> data;
    float fill = 0;      // value given to voxels no slice covers
    int64_t filled = 0;  // how many voxels got it
};

// Grid the stack is resampled onto (also used by messages before decoding).
Geometry regularGridFor(const IrregularStack& stack);

Result<ResampledStack> resampleStack(const IrregularStack& stack, int threads);

}  // namespace voxseg::io
