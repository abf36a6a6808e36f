// Tiled inference of a 'valid' network (its output is the centred part of its input patch,
// smaller on every axis: pyliverlesionseg's lesion U-Net, model.json stage
// "inference": {"output_size": [...]}), as DeepVoxNet.predict tiles it with
// center_sampling=False (pyliverlesionseg/general.py, sampling/samplecreator.py):
// - per axis of an image of n voxels, with output size o: tiles of s = min(n, o) voxels start at
//   0, s, 2s, ... and, when s does not divide n, one more at n - s (flush with the end);
// - a tile's sampling centre is c = start + s // 2; the input segment (the patch, p voxels) covers
//   c - p // 2 ... c - p // 2 + p - 1, filled with 0 outside the image (ExtractSegment3D2's
//   default_value); the output covers c - o // 2 ... (p - o even: the centred part), clipped to
//   the image;
// - tiles write their outputs in order, row-major over the axes (last axis fastest); a later tile
//   overwrites where tiles overlap (no blending, no weights, no mirroring).
// Every voxel is covered. Units: voxels, array axis order. A ValidTiles runs one image at a time.
#pragma once

#include "core/progress.h"
#include "core/status.h"
#include "engine/backend.h"
#include "engine/graph/graph.h"
#include "engine/inference/sliding_window.h"

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

namespace voxseg::pipeline {

// Tile starts along one axis of `image` voxels for output size `output` (DeepVoxNet's rule above).
std::vector<int64_t> validTileStarts(int64_t image, int64_t output);

class ValidTiles final : public engine::VolumeInference {
  public:
    // Compiles `graph` for input [1, channels, patch...] on `backend`; its first output must be
    // [1, K, output...] with patch - output even and >= 0 on every axis (rank 3).
    static Result<std::unique_ptr<ValidTiles>> create(engine::Backend& backend,
                                                      const engine::Graph& graph, int64_t channels,
                                                      const std::vector<int64_t>& patch,
                                                      const std::vector<int64_t>& output,
                                                      const engine::CompileOptions& compile);
    // image: float32 [C, D0, D1, D2]; returns [K, D0, D1, D2] float32 (the network's outputs).
    Result<engine::Tensor> run(const engine::Tensor& image, const Progress& progress = {},
                               engine::SlidingWindowStats* stats = nullptr) override;
    int64_t numClasses() const override { return num_classes_; }
    engine::DType accumulator() const override { return engine::DType::kFloat32; }
    std::string describe() const override;
    void releaseWorkspace() override { network_->releaseWorkspace(); }

  private:
    ValidTiles() = default;
    std::unique_ptr<engine::CompiledGraph> network_;
    std::array<int64_t, 3> patch_{}, output_{};
    int64_t channels_ = 0, num_classes_ = 0;
};

}  // namespace voxseg::pipeline
