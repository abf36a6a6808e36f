// Resampling an irregular slice stack (gantry tilt, uneven spacing, missing slices) onto a
// regular orthogonal grid, as dcm2niix and Slicer do. The output axes are the row direction
// (made orthogonal to the stacking direction), the stacking direction crossed with it, and the
// stacking direction (first to last slice); in-plane spacing is kept, the slice spacing is the
// median step along the stack; the grid covers every slice's footprint in-plane and spans the
// slice centres along the stack. Values are interpolated
// linearly within and between slices, also across a gap of up to two missing slices, and never
// extrapolated: voxels beyond the end slices, beyond a slice's outer pixel centres or inside a
// wider gap get the fill value (the smallest input value).
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
    std::vector<Vec3> positions;  // IPP per slice, sorted along `normal`
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
Geometry regularGridFor(const IrregularStack& stack, bool tilted);

Result<ResampledStack> resampleStack(const IrregularStack& stack, bool tilted, int threads);

}  // namespace voxseg::io
