// Intensity normalisation per input channel, as a model's model.json states it (nnU-Net schemes):
//   ct:     clip to [lo, hi], then (x - mean) / max(std, 1e-8) with the dataset's foreground
//           statistics stored in the model;
//   zscore: (x - mean) / max(std, 1e-8) with this image's mean and population std (numpy's
//           default); with `nonzero_mask`, statistics and normalisation only inside the mask
//           (voxels outside keep their value, as nnU-Net's ZScoreNormalization does);
//   none:   values unchanged;
//   percentile: clip to the image's percentiles (or to given values: a staged package takes them
//           from an earlier stage's input), optionally map onto a range, z-score (population or
//           sample std), then an affine x * scale + shift (deepbet's normalize());
//   window: clip to a fixed [lo, hi] and map it linearly onto a range, then the affine.
// Output is always float32 on the input's grid. Statistics are accumulated in double.
// Plain functions; thread-safe.
#pragma once

#include "core/status.h"
#include "core/volume.h"
#include "engine/model/model_package.h"

#include <array>
#include <string>

namespace voxseg::pipeline {

// The model package's normalisation record (engine/model/model_package.h) is used as is.
using Normalization = engine::Normalization;

// nnU-Net's guard against division by a zero standard deviation.
inline constexpr double kMinStd = 1e-8;

// `mask` (uint8, same grid, optional) is the nonzero mask used with `nonzero_mask`; when absent,
// voxels != 0 of `volume` form it.
// `percentile_values` (kPercentile only, optional): the clip values [low, high] to use instead of
// this image's percentiles.
Result<Volume> normalize(const Volume& volume, const Normalization& normalization,
                         const Volume* mask = nullptr,
                         const std::array<double, 2>* percentile_values = nullptr);

// The image's percentiles `low` and `high` (in %, 0..100) with linear interpolation between order
// statistics (numpy's default, torch.quantile); NaN voxels count as 0. Any pixel type.
Result<std::array<double, 2>> percentileValues(const Volume& volume, double low, double high);

}  // namespace voxseg::pipeline
