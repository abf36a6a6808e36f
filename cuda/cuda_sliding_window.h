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
// It takes the host window's options (engine::SlidingWindowOptions, 3D patches; precision and GPU
// from options.compile) and its geometry (engine/inference/window_geometry.h: the option checks,
// the zero padding of volumes smaller than a patch, the patch grid and the mirrored copies) and
// importance map (engine::importanceMap), so that CPU and GPU results differ only by arithmetic.
// The device sums in float32 whatever options.accumulator and options.accumulation say, the
// mirrored copies in the normalized order (engine::flipSets).
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
#include "engine/inference/window_geometry.h"

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

namespace voxseg::cuda {

struct CudaSlidingWindowResult {
    std::vector<uint16_t> labels;  // D*H*W, argmax over classes
    engine::Tensor probabilities;  // K,D,H,W weight-averaged logits, when asked for
    engine::WindowGrid grid;       // the windows it ran (padding, starts, num_windows)
    int64_t forward_passes = 0;    // network runs (batches x members x flips)
    int batch = 0;                 // batch actually used
};

// The CUDA window's option checks: the host window's (engine::validateSlidingWindowOptions, same
// messages) and 3D patches (kUnsupported otherwise).
Status validateCudaWindowOptions(const engine::SlidingWindowOptions& options);

// What the CUDA window runs over one image, planned on the host from the shared geometry; pure,
// so it is tested without a GPU.
struct CudaWindowPlan {
    engine::WindowGrid grid;  // engine::windowGrid: padding and starts per axis
    // engine::gridOrigin of every window in the padded volume, in order: z-major, so z never
    // decreases along the list (the early download of finished slices relies on it).
    std::vector<std::array<int64_t, 3>> origins;
    // engine::flipSets (ascending, identity first): bit a mirrors spatial axis a (0 = D).
    std::vector<int> flips;
};
Result<CudaWindowPlan> planCudaWindow(const engine::SlidingWindowOptions& options,
                                      const engine::Shape& image_shape);

class CudaSlidingWindow {
  public:
    // Compiles `graph` (one input N,C,pd,ph,pw; the first output gives the classes) for
    // options.batch patches in options.compile.precision on GPU options.compile.device_index,
    // halving the batch on out-of-memory down to 1.
    static Result<std::unique_ptr<CudaSlidingWindow>> create(
        const engine::Graph& graph, int64_t channels, const engine::SlidingWindowOptions& options);
    // An ensemble: every graph runs on each batch; their outputs must agree in classes.
    static Result<std::unique_ptr<CudaSlidingWindow>> create(
        const std::vector<const engine::Graph*>& graphs, int64_t channels,
        const engine::SlidingWindowOptions& options);
    ~CudaSlidingWindow();

    // image: float32 [C, D, H, W]. return_probabilities: also download the averaged logits.
    Result<CudaSlidingWindowResult> run(const engine::Tensor& image, const Progress& progress = {},
                                        bool return_probabilities = false);

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

// The VolumeInference (engine/inference/sliding_window.h) of `voxseg segment --device cuda`: a
// CudaSlidingWindow with the host window's options; run() returns the K,D,H,W weighted-mean
// logits (float32) and fills the stats.
Result<std::unique_ptr<engine::VolumeInference>> makeCudaVolumeInference(
    const std::vector<const engine::Graph*>& graphs, int64_t channels,
    const engine::SlidingWindowOptions& options);

// One call: create + run.
Result<CudaSlidingWindowResult> slidingWindowCuda(const engine::Graph& graph,
                                                  const engine::Tensor& image,
                                                  const engine::SlidingWindowOptions& options,
                                                  const Progress& progress = {},
                                                  bool return_probabilities = false);

}  // namespace voxseg::cuda
