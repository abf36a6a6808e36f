// Resampling to a model's voxel spacing with nnU-Net's rules.
//
// - New size per axis = round(size * spacing / target_spacing) (nnU-Net compute_new_shape); when
//   it equals the old size the volume is passed through (cast to float32 for images).
// - The resampled grid keeps the field of view edge to edge (skimage.resize / nnU-Net mapping:
//   input index = (output index + 0.5) * size_in / size_out - 0.5), so its spacing is
//   spacing * size / new_size, which may differ slightly from the target.
// - Images: order-3 B-spline axis by axis (spline_resample.h) with the edge sample repeated
//   beyond the ends, as scikit-image's resize(mode="edge") that nnU-Net calls, and the result
//   clipped to the input's value range (resize's clip=True). When one axis is more than 3x
//   coarser than the others (checked on the source spacing, then on the target), that axis is
//   resampled with order 0 (nearest) and the others with order 3; nnU-Net then resizes slice by
//   slice along it, so each output slice is clipped to the range of the input slice it copies.
// - Labels: nearest neighbour (ITK), pixel type kept.
// Axes here are the volume's index axes (i, j, k); convert a model's zyx/xyz values with
// pipeline/tensor_layout.h. Thread safety: reentrant; `threads` = 0 uses every core.
#pragma once

#include "core/geometry.h"
#include "core/progress.h"
#include "core/status.h"
#include "core/volume.h"

#include <array>

namespace voxseg::pipeline {

enum class ResampleKind { kImage, kLabel };

// nnU-Net's anisotropy threshold: an axis more than this many times coarser is done separately.
inline constexpr double kSeparateAxisThreshold = 3.0;

// round(size * spacing / target) per axis, at least 1.
std::array<int64_t, 3> resampledSize(const Geometry& geometry, const Vec3& target_spacing);

// The grid of `geometry` resampled to `new_size` keeping the field of view (see above).
Geometry resampledGeometry(const Geometry& geometry, const std::array<int64_t, 3>& new_size);

// The axis to resample separately with order 0, or -1 (nnU-Net get_do_separate_z +
// get_lowres_axis: the unique coarsest axis when max/min spacing > threshold, checked on `from`
// first, then on `to`).
int separateAxis(const Vec3& from_spacing, const Vec3& to_spacing,
                 double threshold = kSeparateAxisThreshold);

// Resamples to the grid `target` (same direction as `volume`, produced by resampledGeometry).
// Images come back as float32, labels in their own pixel type.
Result<Volume> resampleToGrid(const Volume& volume, const Geometry& target, ResampleKind kind,
                              const Progress& progress = {}, int threads = 0);

// Trilinear resampling of `volume` (as float32) onto any grid in patient space (other
// direction, spacing or origin allowed; 0 outside the volume). For a second series on the first
// one's grid.
Result<Volume> resampleLinearOnto(const Volume& volume, const Geometry& grid);

// resampledSize + resampledGeometry + resampleToGrid.
Result<Volume> resampleToSpacing(const Volume& volume, const Vec3& target_spacing,
                                 ResampleKind kind, const Progress& progress = {}, int threads = 0);

}  // namespace voxseg::pipeline
