// From the network's output on its grid back to the input grid (nnU-Net's export): the K score
// channels (probabilities or logits) are interpolated onto the cropped input grid with linear
// (order 1) interpolation, the anisotropic axis with order 0 (same rule as resample.h), then
// reduced per voxel (softmax: argmax; sigmoid: the most probable channel above a threshold),
// pasted into the uncropped grid and un-oriented. The result is a uint8/uint16 label map whose
// geometry is exactly PreprocessRecord::original.
//
// Interpolation and argmax are fused in one pass, so no K full-size float volumes are ever held
// (peak extra memory: the label map). Written by hand for that reason; the ITK linear resampler
// is the oracle in tests/pipeline. Multithreaded over slices; the function is reentrant.
#pragma once

#include "core/progress.h"
#include "core/status.h"
#include "core/volume.h"
#include "engine/graph/tensor.h"
#include "pipeline/preprocess.h"

#include <vector>

namespace voxseg::pipeline {

enum class OutputActivation {
    kSoftmax,  // channel 0 = background; label = channel_labels[argmax]
    kSigmoid,  // one channel per label; label of the highest channel >= threshold, else 0
};

struct ExportSpec {
    OutputActivation activation = OutputActivation::kSoftmax;
    // Label value of each output channel (softmax: entry 0 is the background, 0). Empty: the
    // channel index (softmax) or index + 1 (sigmoid).
    std::vector<int> channel_labels;
    double threshold = 0.5;  // sigmoid; use 0.0 when the scores are logits
    int threads = 0;         // 0 = hardware concurrency
    // Softmax: voxels whose 8 network neighbours share one winning channel take its label without
    // interpolating (the same label in exact arithmetic). true interpolates every voxel (tests).
    bool interpolate_everywhere = false;
    // Softmax: nnU-Net 2.x's export of its float16 logits (model.json "accumulate":
    // "nnunet-fp16"): every voxel interpolated in float64 and each channel rounded to float16
    // before the argmax (first maximum wins, so float16 ties go to the lower channel).
    bool round_to_half = false;
};

// `scores`: float32 or float16 (engine::half) [K, D0, D1, D2] on record.network in
// record.axis_order.
Result<Volume> scoresToLabelMap(const engine::Tensor& scores, const PreprocessRecord& record,
                                const ExportSpec& spec, const Progress& progress = {});

// Channel `channel` of `scores` interpolated onto the original grid (float32; 0 outside the crop
// box), for the optional probability-map outputs.
Result<Volume> scoreChannelToOriginal(const engine::Tensor& scores, int64_t channel,
                                      const PreprocessRecord& record, double outside_value = 0.0);

}  // namespace voxseg::pipeline
