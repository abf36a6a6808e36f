// Conversion between Volumes and the engine's float32 [C, D0, D1, D2] tensors in a model's axis
// order, and between a model's per-axis values (spacing, patch size) and voxseg's index axes.
//
// ITK buffers are i-fastest, i.e. already C-order arrays indexed [k][j][i]:
//   "zyx" (nnU-Net, SimpleITK arrays): tensor dims (k, j, i), a plain copy;
//   "xyz" (MONAI, nibabel arrays):     tensor dims (i, j, k), a transpose.
// Plain functions; thread-safe.
#pragma once

#include "core/geometry.h"
#include "core/status.h"
#include "core/volume.h"
#include "engine/graph/tensor.h"
#include "engine/model/model_package.h"

#include <array>
#include <string>
#include <vector>

namespace voxseg::pipeline {

// The model package's axis order (engine/model/model_package.h): tensor axes [z, y, x] or [x, y,
// z].
using AxisOrder = engine::AxisOrder;

// Model-order values (e.g. spacing_mm as [z, y, x]) to index-axis order (i, j, k), and back.
Vec3 toIndexOrder(const std::array<double, 3>& model_values, AxisOrder order);
std::array<double, 3> toModelOrder(const Vec3& index_values, AxisOrder order);
// Tensor spatial dims of a grid, in model order.
std::array<int64_t, 3> tensorDims(const Geometry& geometry, AxisOrder order);

// Stacks channels (all on one grid; converted to float32) into [C, D0, D1, D2].
Result<engine::Tensor> volumesToTensor(const std::vector<Volume>& channels, AxisOrder order);

// Channel `channel` of a float32 [C, D0, D1, D2] tensor as a float32 Volume on `geometry`.
Result<Volume> tensorChannelToVolume(const engine::Tensor& tensor, int64_t channel,
                                     const Geometry& geometry, AxisOrder order);

}  // namespace voxseg::pipeline
