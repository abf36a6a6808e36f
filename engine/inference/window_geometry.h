// The sliding window's options and the geometry they imply, written once for every window that
// runs them: the host SlidingWindow (engine/inference/sliding_window.h) and the CUDA window
// (cuda/cuda_sliding_window.h) both check options here, pad, place their patches and mirror them
// as this file says, so that their results differ only by arithmetic.
//
// - validateSlidingWindowOptions: the option checks and their messages.
// - windowStarts: where windows start along one axis (nnU-Net's or MONAI's rule).
// - windowGrid / gridOrigin: the image padded with zeros (centred) to at least one patch per axis,
//   the starts on each axis, and the origin of window i (row-major, last axis fastest, so the
//   first axis never decreases along the list).
// - flipSets: the mirrored copies each window runs as for test-time augmentation, in order.
//
// Rank-1 and rank-2 windows run the 3D code: grids are 3 axes with leading 1s (padTo3D).
// Pure functions; thread-safe. Units: voxels, array axis order.
#pragma once

#include "core/status.h"
#include "engine/backend.h"
#include "engine/graph/tensor.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace voxseg::engine {

enum class WindowConvention { kNnUNet, kMonai };
enum class Accumulation { kNormalized, kNnUNetFp16 };
const char* windowConventionName(WindowConvention convention);
// "nnunet" | "monai".
Result<WindowConvention> parseWindowConvention(const std::string& name);
const char* accumulationName(Accumulation accumulation);
// "normalized" | "nnunet-fp16"; anything else is an error naming both.
Result<Accumulation> parseAccumulation(const std::string& name);

struct SlidingWindowOptions {
    // Patch size per spatial axis, in the axis order of the image array (rank 2 or 3).
    std::vector<int64_t> patch_size;
    // Fraction of a patch shared by neighbours, in [0, 1). nnU-Net's tile_step_size = 1 - overlap.
    double overlap = 0.5;
    bool gaussian = true;  // false: every voxel of a patch weighs 1
    double sigma_scale = 0.125;
    int batch = 1;  // patches per forward pass
    // Test-time augmentation: every combination of flips of these spatial axes (0-based, array
    // order) is run and averaged, 2^n forward passes per patch.
    std::vector<int> mirror_axes;
    WindowConvention convention = WindowConvention::kNnUNet;
    // Storage of the K x volume score sums and of the result: kFloat32, or kFloat16 (half the
    // memory; each weighted patch output is added in fp32 and rounded to fp16 once per store,
    // about 3 significant digits, saturating at +-65504), as nnU-Net v2's predicted_logits.
    DType accumulator = DType::kFloat32;
    // How the weighted outputs are summed (engine/inference/sliding_window.h); kNnUNetFp16 keeps
    // float16 whatever `accumulator` says.
    Accumulation accumulation = Accumulation::kNormalized;
    // Used when the window compiles the graph itself (precision; device_index on a GPU).
    CompileOptions compile;
};

// Checks options against an image shape [C, spatial...] (empty: the options alone); the message
// names the bad option.
Status validateSlidingWindowOptions(const SlidingWindowOptions& options, const Shape& image_shape);

// Window start positions along one axis of length `image` (>= patch) for the given convention.
std::vector<int64_t> windowStarts(int64_t image, int64_t patch, double overlap,
                                  WindowConvention convention);

// Spatial extents (rank 1 to 3) as 3 axes with leading 1s.
std::array<int64_t, 3> padTo3D(const std::vector<int64_t>& extents);

// Where one image's windows go, over 3 axes (padTo3D).
struct WindowGrid {
    std::array<int64_t, 3> patch{};
    std::array<int64_t, 3> dims{};        // the image
    std::array<int64_t, 3> padded{};      // max(image, patch) per axis
    std::array<int64_t, 3> pad_before{};  // zeros before the image: half the padding, rounded down
    bool needs_pad = false;
    int64_t voxels = 0;                          // of the padded image
    std::array<std::vector<int64_t>, 3> starts;  // windowStarts per axis of the padded image
    int64_t num_windows = 0;
};

// The grid of valid `options` over an image with spatial extents `spatial` (as many axes as
// options.patch_size, each > 0).
WindowGrid windowGrid(const SlidingWindowOptions& options, const std::vector<int64_t>& spatial);

// Origin of window `window` (in [0, num_windows)) in the padded image: row-major over the grid,
// last axis fastest.
std::array<int64_t, 3> gridOrigin(const WindowGrid& grid, int64_t window);

// The mirrored copies each window runs as, as bit sets over the 3 grid axes (bit 0 = the first of
// padTo3D's axes): every subset of `mirror_axes` (spatial axes of a rank-`rank` patch), identity
// first. Default order: ascending bit sets. nnunet_order: nnU-Net's, whose float32 sum of mirrored
// outputs depends on it (itertools.combinations of the mirror axes: one axis, then two, then
// three).
std::vector<unsigned> flipSets(const std::vector<int>& mirror_axes, size_t rank, bool nnunet_order);

}  // namespace voxseg::engine
