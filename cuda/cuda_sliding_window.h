// Sliding-window inference entirely on the GPU: the image is uploaded once (pinned memory, in
// z-slabs on a copy stream so that the first patches start before the upload ends), patches are
// gathered on the device into batches, the network runs on them, Gaussian-weighted logits are
// accumulated into float32 volumes on the device, and normalisation + argmax run on the device
// slab by slab as rows of patches complete, so that the label download overlaps the remaining
// compute. Only the label map (and optionally the probabilities) comes back. Ensembles (every
// member runs on each batch) and test-time mirroring (each flip gathered mirrored and added back
// mirrored) add into the same accumulators, so the result is the mean over members and flips,
// as the host window computes it.
//
// This is the path `voxseg segment --device cuda` takes: the cuda backend's
// Backend::makeSlidingWindow returns makeCudaVolumeInference's adapter.
//
// The patch grid, the importance map and the zero padding of volumes smaller than a patch are the
// host sliding window's (engine/inference/sliding_window.h: windowStarts, importanceMap, nnU-Net or
// MONAI convention), so that CPU and GPU results differ only by arithmetic.
//
// Ownership: CudaSlidingWindow owns its compiled graph and device buffers. One thread at a time.
// Units: voxels (network axis order D, H, W); the image is float32 C,D,H,W, already normalised.
#pragma once

#include "core/progress.h"
#include "core/status.h"
#include "engine/backend.h"
#include "engine/graph/graph.h"
#include "engine/graph/tensor.h"
#include "engine/inference/sliding_window.h"

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

namespace voxseg::cuda {

struct CudaSlidingWindowOptions {
    std::array<int64_t, 3> patch{128, 128, 128};
    double overlap = 0.5;
    bool gaussian = true;  // false: every voxel of a patch weighs 1
    float sigma_scale = 0.125f;
    std::vector<int> mirror_axes;  // spatial axes (0 = D, 1 = H, 2 = W) mirrored for TTA
    engine::WindowConvention convention = engine::WindowConvention::kNnUNet;
    int batch = 2;  // patches per network run; halved on out-of-memory (with a warning)
    engine::Precision precision = engine::Precision::kBFloat16;
    int device = 0;
    bool return_probabilities = false;  // also download the averaged logits (K,D,H,W float32)
};

struct CudaSlidingWindowResult {
    std::vector<uint16_t> labels;  // D*H*W, argmax over classes
    engine::Tensor probabilities;  // K,D,H,W weight-averaged logits, when asked for
    int64_t patches = 0;
    int64_t forward_passes = 0;  // network runs (batches x members x flips)
    int batch = 0;               // batch actually used
};

// Patch start positions (z, y, x) over a (padded) volume, z-major (engine::windowStarts per axis).
std::vector<std::array<int64_t, 3>> patchOrigins(
    const std::array<int64_t, 3>& padded, const std::array<int64_t, 3>& patch, double overlap,
    engine::WindowConvention convention = engine::WindowConvention::kNnUNet);

class CudaSlidingWindow {
  public:
    // Compiles `graph` (one input N,C,pd,ph,pw; the first output gives the classes) for
    // options.batch patches, halving the batch on out-of-memory down to 1.
    static Result<std::unique_ptr<CudaSlidingWindow>> create(
        const engine::Graph& graph, int64_t channels, const CudaSlidingWindowOptions& options);
    // An ensemble: every graph runs on each batch; their outputs must agree in classes.
    static Result<std::unique_ptr<CudaSlidingWindow>> create(
        const std::vector<const engine::Graph*>& graphs, int64_t channels,
        const CudaSlidingWindowOptions& options);
    ~CudaSlidingWindow();

    Result<CudaSlidingWindowResult> run(const engine::Tensor& image, const Progress& progress = {});

    int batch() const;
    int64_t numClasses() const;
    std::string describe() const;
    double flopsPerPatch() const;   // first member, one pass
    size_t workspaceBytes() const;  // compiled graphs' arenas and workspaces
    // Peak device memory held by this object after the last run (bytes).
    size_t deviceBytes() const;

    struct Impl;

  private:
    explicit CudaSlidingWindow(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// The VolumeInference (engine/inference/sliding_window.h) of `voxseg segment --device cuda`: the
// host window's options (patch rank 3; the host accumulator type does not apply: the device sums in
// float32) on GPU `device`; run() returns the K,D,H,W weighted-mean logits and fills the stats.
Result<std::unique_ptr<engine::VolumeInference>> makeCudaVolumeInference(
    const std::vector<const engine::Graph*>& graphs, int64_t channels,
    const engine::SlidingWindowOptions& options, int device);

// One call: create + run.
Result<CudaSlidingWindowResult> slidingWindowCuda(const engine::Graph& graph,
                                                  const engine::Tensor& image,
                                                  const CudaSlidingWindowOptions& options,
                                                  const Progress& progress = {});

}  // namespace voxseg::cuda
