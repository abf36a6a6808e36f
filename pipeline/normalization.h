// Intensity normalisation per input channel, as a model's model.json states it (nnU-Net schemes):
//   ct:     clip to [lo, hi], then (x - mean) / max(std, 1e-8) with the dataset's foreground
//           statistics stored in the model;
//   zscore: (x - mean) / max(std, 1e-8) with this image's mean and population std (numpy's
//           default); with `nonzero_mask`, statistics and normalisation only inside the mask
//           (voxels outside keep their value, as nnU-Net's ZScoreNormalization does);
//   none:   values unchanged.
// Output is always float32 on the input's grid. Statistics are accumulated in double.
// Plain functions; thread-safe.
#pragma once

#include "core/status.h"
#include "core/volume.h"
#include "engine/model_package.h"

#include <string>

namespace voxseg::pipeline {

// The model package's normalisation record (engine/model_package.h) is used as is.
using Normalization = engine::Normalization;

// nnU-Net's guard against division by a zero standard deviation.
inline constexpr double kMinStd = 1e-8;

// `mask` (uint8, same grid, optional) is the nonzero mask used with `nonzero_mask`; when absent,
// voxels != 0 of `volume` form it.
Result<Volume> normalize(const Volume& volume, const Normalization& normalization,
                         const Volume* mask = nullptr);

}  // namespace voxseg::pipeline
