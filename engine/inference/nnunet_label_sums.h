// nnU-Net's float16 sliding-window sums (Accumulation::kNnUNetFp16, one network) turned into
// labels region by region, so that the K x volume float16 sums are never all held at once.
//
// The windows arrive in the grid's row-major order (gridOrigin: axis 0 slowest). Along the
// slowest axis that has more than one window start (axis 0, else axis 1 when axis 0 has one), a
// window's start never decreases, so once a window starting at s arrives no later window touches
// the planes before s: they are final. The sums are kept per plane of that axis, each allocated
// when a window first reaches it; a final plane is divided by its weight sums and reduced to
// labels (the first largest channel, as argmaxLabels picks it) and freed. Every voxel is summed
// in the same order with the same float16 roundings as nnunetAccumulate's whole-volume sums, so
// the labels are those of argmaxLabels(SlidingWindow::run()) exactly. Peak memory: the planes of
// one window's extent plus those still open from the previous start (TotalSegmentator's 266-row
// axis with 128-row patches: 128 of 266 planes) instead of all.
// Without a second start on axis 0 or 1 (or when only axis 2 has several), all planes stay open
// until the end: the memory of the whole-volume sums, the same labels.
#pragma once

#include "core/status.h"
#include "engine/inference/window_geometry.h"

#include <cstdint>
#include <span>
#include <vector>

namespace voxseg::engine {

class NnUNetLabelSums {
  public:
    // grid: SlidingWindow::run's grid (padded volume); classes: K; map: the float16 importance
    // map (patch voxels); values: the label written for channel k (empty: k); labels: one entry
    // per voxel of the unpadded image (grid.dims, row-major), written as planes become final.
    NnUNetLabelSums(const WindowGrid& grid, int64_t classes, const std::vector<uint16_t>& map,
                    std::span<const int> values, std::span<int16_t> labels);

    // Adds window `window`'s prediction (K x patch float32, mirrored copies already averaged)
    // to the sums: nnU-Net's predicted_logits[sl] += prediction * gaussian. Planes before the
    // window's start on the streaming axis become labels first.
    Status add(int64_t window, const float* prediction);
    // Every remaining plane to labels (after the last window).
    Status finish();
    // Most bytes of float16 sums held at once (planes), plus the weight sums.
    size_t peakBytes() const { return peak_bytes_ + weight_sum_.size() * sizeof(uint16_t); }

  private:
    uint16_t* plane(int64_t index);  // allocated (zeros) on first use; nullptr: no memory
    Status finalize(int64_t index);  // divide, reduce to labels, free
    Status finalizeBefore(int64_t end);

    const WindowGrid& grid_;
    int64_t classes_;
    const std::vector<uint16_t>& map_;
    std::span<const int> values_;
    std::span<int16_t> labels_;
    int axis_ = 0;            // the streaming axis (0 or 1)
    int64_t rows_ = 0;        // per plane and class: the other of axes 0/1 (its padded extent)
    int64_t next_final_ = 0;  // planes before this are labels already
    std::vector<uint16_t> weight_sum_;           // n_predictions, the whole padded grid
    std::vector<std::vector<uint16_t>> planes_;  // [K, rows_, padded x] per plane; empty: none
    size_t held_bytes_ = 0, peak_bytes_ = 0;
    std::vector<float> best_, widened_;
    std::vector<int32_t> index_;
};

}  // namespace voxseg::engine
