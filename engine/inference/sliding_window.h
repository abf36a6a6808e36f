// Sliding-window inference: runs a patch-based network over a whole volume on the host.
//
// The volume is covered by a grid of overlapping patches; patches (and their mirrored copies for
// test-time augmentation) are gathered into batches, run through one CompiledGraph, weighted by
// an importance map (Gaussian or constant) divided by each voxel's summed weights (known from the
// grid up front) and accumulated. The result is the weighted mean of the network outputs (logits
// for nnU-Net/MONAI exports), K x spatial, in the same axis order as the input array.
//
// Two conventions for the patch grid and the Gaussian, both written down in docs/model-package.md:
// - kNnUNet (default): nnU-Net v2's compute_steps_for_sliding_window (step = patch * (1 -
//   overlap), evenly spaced steps from 0 to the border) and compute_gaussian (delta filtered by
//   scipy's truncated Gaussian, centre at patch // 2, max 1, zeros replaced by the smallest
//   non-zero value). nnU-Net keeps the map in fp16; kNormalized keeps it in fp32.
// - kMonai: MONAI's sliding_window_inference (scan interval int(patch * (1 - overlap)), last
//   window clamped to the border; Gaussian centred at (patch - 1) / 2, clamped below at
//   max(min, 1e-3)).
// Two ways of summing (SlidingWindowOptions::accumulation, model.json inference.accumulate):
// - kNormalized (default): every weighted output is divided by its voxel's total weight (known
//   from the grid) as it is added, in options.accumulator's type, with the float32 map above.
// - kNnUNetFp16: nnU-Net 2.x's predict_sliding_window_return_logits rounding for rounding: its
//   float16 map (compute_gaussian, value_scaling_factor 10), float16 sums of prediction * map and
//   of the map, one division at the end, mirrored outputs averaged in float32 first (in nnU-Net's
//   order), ensemble members run one after the other and their float16 results averaged
//   (predict_logits_from_preprocessed_data). The result is float16; options.accumulator is
//   ignored (engine/inference/sliding_window_nnunet.h holds the arithmetic).
// Volumes smaller than a patch along an axis are padded with zeros (split half before, half
// after, like both frameworks) and the result is cropped back.
// The options, their checks, the grid, the padding and the mirrored copies are
// engine/inference/window_geometry.h's, which the CUDA window (cuda/cuda_sliding_window.h) shares.
//
// Memory: accumulators are K x volume scores (float32, or float16 as nnU-Net v2 keeps them:
// SlidingWindowOptions::accumulator) plus one float32 volume of weights (stored inverted), plus
// one batch of patch inputs and outputs; nothing grows with the number of patches. The last,
// partial batch is padded with zero patches (one executable per batch size; the wasted forward
// passes are at most batch - 1 per volume and are counted in the stats).
// Thread safety: a SlidingWindow runs one volume at a time; the helpers are pure functions.
#pragma once

#include "core/progress.h"
#include "core/status.h"
#include "engine/backend.h"
#include "engine/graph/graph.h"
#include "engine/graph/tensor.h"
#include "engine/inference/window_geometry.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace voxseg::engine {

struct SlidingWindowStats {
    int64_t patches = 0;            // windows on the grid
    int64_t forward_passes = 0;     // network calls (batches x ensemble members)
    int64_t padded_items = 0;       // zero patches added to fill the last batch
    double seconds = 0.0;           // whole call
    double network_seconds = 0.0;   // inside CompiledGraph::run
    size_t accumulator_bytes = 0;   // K x volume scores + float32 weight volume
    size_t patch_buffer_bytes = 0;  // peak host bytes of batch inputs + outputs
    size_t workspace_bytes = 0;     // CompiledGraph::workspaceBytes()
    std::vector<int64_t> grid;      // windows per spatial axis
};

// Importance map of a patch (row-major over the patch axes), max 1, all values > 0.
std::vector<float> importanceMap(const std::vector<int64_t>& patch, double sigma_scale,
                                 WindowConvention convention);

// Whole-volume inference of a patch network, whatever runs it: the host SlidingWindow below, or
// a backend's own (Backend::makeSlidingWindow; cuda keeps patches and accumulators on the GPU).
// run() has SlidingWindow::run's contract.
class VolumeInference {
  public:
    virtual ~VolumeInference() = default;
    // image: float32 [C, spatial...]; returns [K, spatial...] weighted-mean logits (float32, or
    // float16 bit patterns when the host accumulator is kFloat16).
    virtual Result<Tensor> run(const Tensor& image, const Progress& progress = {},
                               SlidingWindowStats* stats = nullptr) = 0;
    virtual int64_t numClasses() const = 0;
    // Type the score sums are kept in (the host window's options.accumulator; cuda: kFloat32).
    virtual DType accumulator() const = 0;
    // A short line for logs and run.json: where the window runs and how it sums.
    virtual std::string describe() const = 0;
    // CompiledGraph::releaseWorkspace of every network (between the stages of a package).
    virtual void releaseWorkspace() {}
    // The labels of run()'s scores as argmaxLabels picks them (int16 per voxel of the image, in
    // its order; values[k] written for channel k, empty: k), for callers that keep only labels.
    // The default runs run() and takes the argmax; SlidingWindow with nnU-Net's float16 sums and
    // one network reduces the sums to labels plane by plane as no later window reaches them
    // (engine/inference/nnunet_label_sums.h): the same labels without all K float16 channels
    // of the volume held at once.
    virtual Result<std::vector<int16_t>> runLabels(const Tensor& image, std::span<const int> values,
                                                   const Progress& progress = {},
                                                   SlidingWindowStats* stats = nullptr);
};

class SlidingWindow final : public VolumeInference {
  public:
    // Compiles `graph` for [batch, channels, patch...] on `backend`. The graph's first output is
    // used; it must have the patch's spatial shape.
    static Result<std::unique_ptr<SlidingWindow>> create(Backend& backend, const Graph& graph,
                                                         int64_t channels,
                                                         const SlidingWindowOptions& options);
    // An ensemble (e.g. nnU-Net folds): every patch goes through each network and their outputs
    // are averaged before weighting, so memory stays one accumulator.
    static Result<std::unique_ptr<SlidingWindow>> create(Backend& backend,
                                                         const std::vector<const Graph*>& graphs,
                                                         int64_t channels,
                                                         const SlidingWindowOptions& options);
    // Uses executables compiled elsewhere (first input [batch, C, patch...], first output
    // [batch, K, patch...]).
    static Result<std::unique_ptr<SlidingWindow>> create(std::unique_ptr<CompiledGraph> compiled,
                                                         const SlidingWindowOptions& options);
    static Result<std::unique_ptr<SlidingWindow>> create(
        std::vector<std::unique_ptr<CompiledGraph>> networks, const SlidingWindowOptions& options);

    // image: float32 [C, spatial...]; returns [K, spatial...] in accumulator()'s type
    // (float16 values as uint16 bit patterns, see half_kernels.h). Progress is reported per
    // batch; cancellation is checked between batches (kCancelled).
    Result<Tensor> run(const Tensor& image, const Progress& progress = {},
                       SlidingWindowStats* stats = nullptr) override;
    Result<std::vector<int16_t>> runLabels(const Tensor& image, std::span<const int> values,
                                           const Progress& progress = {},
                                           SlidingWindowStats* stats = nullptr) override;

    int64_t numClasses() const override { return num_classes_; }
    DType accumulator() const override {
        return options_.accumulation == Accumulation::kNnUNetFp16 ? DType::kFloat16
                                                                  : options_.accumulator;
    }
    std::string describe() const override;
    void releaseWorkspace() override {
        for (auto& network : networks_) network->releaseWorkspace();
    }
    int64_t numNetworks() const { return static_cast<int64_t>(networks_.size()); }
    const CompiledGraph& compiled(size_t i = 0) const { return *networks_[i]; }

  private:
    struct LabelsRequest {  // runLabels' arguments and result
        std::span<const int> values;
        std::vector<int16_t> labels;
    };
    SlidingWindow() = default;
    Status init();
    // run(), or with `labels` runLabels' streamed path (nnunet-fp16, one network; returns an
    // empty tensor, the labels in *labels).
    Result<Tensor> runImpl(const Tensor& image, const Progress& progress, SlidingWindowStats* stats,
                           LabelsRequest* labels);

    std::vector<std::unique_ptr<CompiledGraph>> networks_;
    SlidingWindowOptions options_;
    int64_t channels_ = 0;
    int64_t num_classes_ = 0;
    std::vector<float> importance_;          // patch voxels (kNormalized)
    std::vector<uint16_t> importance_half_;  // float16 map (kNnUNetFp16)
};

// One-shot convenience: create + run.
Result<Tensor> slidingWindowInference(Backend& backend, const Graph& graph, const Tensor& image,
                                      const SlidingWindowOptions& options,
                                      const Progress& progress = {},
                                      SlidingWindowStats* stats = nullptr);

// A float32 copy of float32 or float16 scores (SlidingWindow::run's result).
Tensor scoresAsFloat32(const Tensor& scores);

// ---- Post-processing of [K, spatial...] float32 scores (in place where named so) ----
void softmaxChannelsInPlace(Tensor& scores);
void sigmoidInPlace(Tensor& scores);
// Index of the largest channel per voxel (first wins ties), mapped through `values` when given
// (values[k] is the label written for channel k). `out` has one entry per voxel. These two also
// read float16 scores (an nnunet-fp16 window's result) as they are, without a float32 copy.
Status argmaxLabels(const Tensor& scores, std::span<uint8_t> out, std::span<const int> values = {});
Status argmaxLabels(const Tensor& scores, std::span<int16_t> out, std::span<const int> values = {});
// For sigmoid outputs (one channel per label): the channel with the largest score if that score
// exceeds `threshold` (0.5 for probabilities, 0 for logits), else 0; mapped through `values`.
Status thresholdLabels(const Tensor& scores, float threshold, std::span<uint8_t> out,
                       std::span<const int> values = {});
Status thresholdLabels(const Tensor& scores, float threshold, std::span<int16_t> out,
                       std::span<const int> values = {});

}  // namespace voxseg::engine
