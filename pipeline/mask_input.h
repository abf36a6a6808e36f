// A stage's "mask" (model.json stages[i].mask, engine::MaskLink; docs/model-package-stages.md): the
// network sees the image only inside an earlier stage's label, as pyliverlesionseg's lesion
// network sees the liver: the label resampled onto the stage's network grid, dilated with the
// 18-neighbourhood (scipy generate_binary_structure(3, 2)), the image cut to the mask's bounding
// box and set to a constant outside the mask; the network's scores outside the box are
// background. These are the steps, as plain functions on volumes (index axes i, j, k).
// Thread-safe; nothing is kept.
#pragma once

#include "core/status.h"
#include "core/volume.h"
#include "engine/graph/tensor.h"
#include "engine/model/model_package.h"
#include "pipeline/crop.h"

#include <array>
#include <optional>
#include <vector>

namespace voxseg::pipeline {

// `times` binary dilations of the nonzero voxels of `mask` with the 18-neighbourhood (faces and
// edges, not corners; scipy binary_dilation with generate_binary_structure(3, 2), border value
// 0). uint8 result (1 inside), same grid. times == 2 equals scipy's single dilation with
// iterate_structure(generate_binary_structure(3, 2), 2).
Result<Volume> dilate18(const Volume& mask, int times);

// Bounding box of the nonzero voxels; nullopt when there are none.
std::optional<CropBox> maskBox(const Volume& mask);

// The stage's mask on its network grid `net_grid`: voxels of `label` in `labels` (the linked
// stage's labels on the oriented grid), cropped to `region`, resampled as a segmentation (order
// 1, >= 0.5, every axis), dilated `link.dilate` times. uint8.
Result<Volume> stageMask(const Volume& labels, const CropBox& region, const Geometry& net_grid,
                         const engine::MaskLink& link);

// `image` (float32) cut to `box` with `outside` wherever `mask` (same grid as image) is 0.
Result<Volume> maskedImage(const Volume& image, const Volume& mask, const CropBox& box,
                           double outside);

// Scores [K, box...] of the network on the box, pasted into scores of the whole network grid
// (`full`, tensor order `order`) with each channel's `background` score outside the box.
Result<engine::Tensor> pasteScores(const engine::Tensor& scores, const Geometry& box_grid,
                                   const Geometry& full, const CropBox& box,
                                   engine::AxisOrder order, const std::vector<float>& background);

// Background scores per channel of a stage's output (logits): softmax: channel 0 high, the
// others low; sigmoid and regions: every channel low.
std::vector<float> backgroundScores(const engine::StageSpec& stage);

}  // namespace voxseg::pipeline
