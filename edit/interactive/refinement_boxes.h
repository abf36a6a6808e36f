// Where an interactive session refines a zoomed-out prediction: patch-sized boxes that cover a
// 3-D change mask, chosen as nnInteractive 2.6.0's utils/bboxes.py generate_bounding_boxes does
// (candidate centers on a stride grid inside the mask's bounding box, halving the stride when
// none lies in the mask, a greedy cover counting each box's inner part (box less a margin), and
// NumPy-random sampling for whatever the grid leaves uncovered). Same boxes, same order.
#pragma once

#include "edit/interactive/session_state.h"

#include <random>
#include <vector>

namespace voxseg::edit::interactive {

// Boxes (half-open, in the mask's coordinates, may extend past it) covering the nonzero voxels of
// `mask` (shape (z, y, x), C order): generate_bounding_boxes(mask, box_size, stride="auto",
// margin, max_depth). `rng` stands for np.random's global state (random_sampling_fallback).
// Empty when the mask is.
std::vector<Box> coverWithBoxes(const std::vector<uint8_t>& mask, const Index3& shape,
                                const Index3& box_size, const Index3& margin, int max_depth,
                                std::mt19937& rng);

}  // namespace voxseg::edit::interactive
