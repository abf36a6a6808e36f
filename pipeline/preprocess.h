// The pre-processing chain in nnU-Net's order, from loaded channels to the network's input tensor:
//   reorient (orientation.h) -> crop to the nonzero box (crop.h) -> normalise per channel
//   (normalization.h) -> resample to the model's spacing (resample.h) -> tensor in the model's
//   axis order (tensor_layout.h).
// The PreprocessRecord keeps every grid on the way so prediction_export.h can map the network's
// output back onto the exact input grid. Plain function; thread-safe.
#pragma once

#include "core/geometry.h"
#include "core/progress.h"
#include "core/status.h"
#include "core/volume.h"
#include "engine/graph/tensor.h"
#include "pipeline/crop.h"
#include "pipeline/normalization.h"
#include "pipeline/orientation.h"
#include "pipeline/tensor_layout.h"

#include <array>
#include <string>
#include <vector>

namespace voxseg::pipeline {

struct PreprocessSpec {
    std::string orientation = "native";  // or a code such as "RAS"
    AxisOrder axis_order = AxisOrder::kZyx;
    // Target spacing in the model's axis order; all zero keeps the input spacing.
    std::array<double, 3> spacing_mm{0, 0, 0};
    std::vector<Normalization> channels;  // one per input channel
    bool crop_nonzero = true;
    int threads = 0;  // resampling; 0 = every core
};

struct PreprocessRecord {
    Geometry original;        // the input grid; label maps come back on it
    AxisMapping orientation;  // original -> oriented
    Geometry oriented;
    CropBox crop;  // inside `oriented`
    Geometry cropped;
    Geometry network;  // the grid of the tensor (resampled `cropped`)
    AxisOrder axis_order = AxisOrder::kZyx;
};

struct Preprocessed {
    engine::Tensor input;  // float32 [C, D0, D1, D2] in the model's axis order
    PreprocessRecord record;
};

Result<Preprocessed> preprocess(const std::vector<Volume>& channels, const PreprocessSpec& spec,
                                const Progress& progress = {});

}  // namespace voxseg::pipeline
