// The decoder's up-sampling folded into the convolution after its concat: a rewrite the cpu
// backend applies after optimize() (docs/perf-cpu.md, "Folded up-sampling").
//
// A U-Net decoder stage computes Conv3(Concat(ConvT(x), s)): a ConvTranspose whose kernel equals
// its stride (2, or 1 along an axis nnU-Net does not pool), then a 3x3x3 convolution with padding
// 1 over the concat. Both are linear with nothing between them, so the part of the convolution
// that reads the up-sampled channels equals one convolution on the coarse x whose kernel is the
// product of the two: per output parity (2 per axis of stride 2) a 2-wide kernel on x (3-wide
// along a stride-1 axis). That convolution, with padding 1, writes all G parities as G * O
// channels at (L + 1) positions per axis of stride 2 (P); the skip half stays a convolution of
// s (Y, with the biases folded in), and SubpixelAdd (op_kind.h) adds P's parities into Y's
// voxels, with a correction on the border voxels where the ConvTranspose's bias met the
// convolution's zero padding. In multiply-adds per fine voxel, 8 * Cx * O * ((L + 1) / L)^3
// against Cx * Cu + 27 * Cu * O (nnU-Net's Cx = 2 Cu = 2 O: 16.8 against 29 at L = 64), and the
// up-sampled tensor and the concat are never written.
//
// The values equal the unfolded graph's up to float rounding (the kernels' products are one
// float matrix product, oneDNN's sgemm). Shapes must be inferred; the rewrite is applied where the
// folded stage needs at most `max_ratio` of the multiply-adds (by default 3/4: nnU-Net's stages
// from a coarse side of 16 on; a stride-1 axis gains less, 12 * Cx * O against the same, and
// stays). Pure function; thread-safe on distinct graphs.
#pragma once

#include "engine/graph/graph.h"

#include <string>

namespace voxseg::engine::passes {

// The suffix of the parity convolution's node name (the skip convolution keeps the folded
// Conv's name): int8 plans recognise it (int8_policy.h).
inline constexpr const char* kFoldedUpsamplingSuffix = "#up";

// Folds every eligible stage of `g` in place; returns how many.
int foldUpsampling(Graph& g, double max_ratio = 0.75);

// The name of the graph layer a node of a folded graph stands for: its name without
// kFoldedUpsamplingSuffix.
std::string foldedLayerName(const std::string& node_name);

}  // namespace voxseg::engine::passes
