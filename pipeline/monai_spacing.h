// MONAI's Spacingd and its inverse (Invertd), reproduced: the grid MONAI 1.4's Spacing resamples
// onto and the bilinear resampling both ways (monai/transforms/spatial/array.py Spacing,
// monai/data/utils.py compute_shape_offset, transforms/spatial/functional.py spatial_resample).
//
// Spacing (scale_extent=False, on an image already reoriented so that its axes are the target's):
// the new grid keeps voxel (0,0,0) where it was (the smallest corner's centre, not the field of
// view's edge), has exactly the target spacing, and round((n - 1) * spacing / target + 1) voxels
// per axis. Output voxel d reads the input at continuous index d * target / spacing, bilinear
// (torch grid_sample, align_corners=False, padding_mode "border": positions clamped to
// [0, n - 1]) in float64, Spacing's default dtype. Invertd resamples back the same way: input
// voxel i reads the network grid at i * spacing / target. With a softmax output MONAI's
// postprocessing (Activationsd softmax, Invertd nearest_interp=false, AsDiscreted argmax)
// interpolates probabilities, not logits, and takes the first maximum.
// Plain functions; reentrant; single-threaded.
#pragma once

#include "core/geometry.h"
#include "core/status.h"
#include "core/volume.h"
#include "engine/graph/tensor.h"
#include "pipeline/tensor_layout.h"

#include <array>
#include <vector>

namespace voxseg::pipeline {

// round((n - 1) * spacing / target + 1) per index axis (round half to even, as numpy), >= 1.
std::array<int64_t, 3> monaiSpacingSize(const Geometry& geometry, const Vec3& target_spacing);

// Spacing's output grid: same origin (voxel (0,0,0)) and direction, spacing `target_spacing`,
// monaiSpacingSize voxels.
Geometry monaiSpacingGeometry(const Geometry& geometry, const Vec3& target_spacing);

// `volume` (any pixel type, read as float32 as LoadImaged does) resampled bilinearly onto
// `target`, a grid with the same origin and direction (monaiSpacingGeometry, or the reverse):
// output voxel d reads index d * target.spacing / volume.spacing, clamped. float32 result.
Result<Volume> monaiResampleLinear(const Volume& volume, const Geometry& target);

// Activationsd(softmax) + Invertd + AsDiscreted(argmax): `scores` (float32 or float16 logits
// [K, D0, D1, D2] on `network`, in `order`) -> softmax per voxel -> each channel resampled onto
// `target` as monaiResampleLinear does -> channel_labels[first argmax]. uint8 when max_label
// fits, else uint16; the result lies on `target`.
Result<Volume> monaiSoftmaxToLabels(const engine::Tensor& scores, const Geometry& network,
                                    AxisOrder order, const Geometry& target,
                                    const std::vector<int>& channel_labels, int max_label);

}  // namespace voxseg::pipeline
