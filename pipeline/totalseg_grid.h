// TotalSegmentator's way around an nnU-Net network (model.json "grid": "totalsegmentator",
// docs/model-package-stages.md): TotalSegmentator 2.18.0 resamples the (canonical, cropped) image
// to the task spacing itself (resampling.py change_spacing: scipy.ndimage.zoom, order 1, then
// int32), hands that image to nnU-Net, whose own preprocessing crops it to the nonzero box and
// normalises it (its spacing already is the plans' spacing, so nnU-Net does not resample), and
// brings nnU-Net's label map back to the input shape with an order-0 zoom. --roi_subset crops the
// input first to the box of the requested classes in a coarse model's output plus 20 mm
// (cropping.py crop_to_mask). These functions are those steps; pipeline/stages.cpp calls them. Pure
// functions, thread-safe.
#pragma once

#include "core/geometry.h"
#include "core/status.h"
#include "core/volume.h"
#include "engine/graph/tensor.h"
#include "engine/model/model_package.h"
#include "pipeline/crop.h"

#include <array>
#include <functional>
#include <optional>
#include <vector>

namespace voxseg::pipeline {

// The stage's zoom per index axis: the spacing as TotalSegmentator reads it (the NIfTI header's
// float32) over the target spacing (`target_mm` in index order).
std::array<double, 3> totalSegmentatorZoom(const Geometry& grid,
                                           const std::array<double, 3>& target_mm);

// TotalSegmentator's resampled image: `region` zoomed to `target_mm` (index order) with order 1
// and cast to int32; a region whose spacing already equals the target is returned as float32
// unchanged (change_spacing returns such an image as it is).
Result<Volume> totalSegmentatorZoomed(const Volume& region, const std::array<double, 3>& target_mm,
                                      int threads);

// The network input of a totalsegmentator stage.
struct ZoomedInput {
    engine::Tensor tensor;  // [1, D0, D1, D2] float32, normalised, the nonzero box, model order
    Geometry zoomed;        // TotalSegmentator's resampled image grid (the whole region)
    CropBox nonzero;        // nnU-Net's crop_to_nonzero inside `zoomed`
    Geometry network;       // croppedGeometry(zoomed, nonzero): the tensor's grid
};

// nnU-Net's preprocessing of a zoomed image (or slab): crop to the nonzero box, normalise.
Result<ZoomedInput> nnUNetInput(const Volume& zoomed, const engine::Normalization& normalization,
                                engine::AxisOrder order);

// TotalSegmentator's split of a large image (nnunet.py, "triple split", for its multi-model
// tasks): when the zoomed image has more than 512 x 512 x 900 voxels and more than 200 along
// index axis k (the superior axis of its canonical orientation), three slabs along k of
// third = n // 3 slices plus a 20-slice margin: [0, third + 20), [third + 1 - 20, 2 third + 20),
// [2 third + 1 - 20, n), of whose labels [0, third), [third, 2 third) and [2 third, n) are kept.
// One slab (the whole axis) otherwise.
struct Slab {
    int64_t begin = 0, end = 0;            // the slab, along k
    int64_t keep_begin = 0, keep_end = 0;  // the part of it whose labels are kept (global k)
};
struct SlabRule {  // TotalSegmentator's numbers (tests use smaller ones)
    int64_t max_voxels = int64_t{512} * 512 * 900;
    int64_t min_slices = 200;
    int64_t margin = 20;
};
std::vector<Slab> totalSegmentatorSlabs(const std::array<int64_t, 3>& zoomed_size, bool split,
                                        const SlabRule& rule = {});

// nnU-Net on one network input: labels (uint8/uint16) on `in.network`.
using PredictLabels = std::function<Result<Volume>(ZoomedInput& in)>;

struct TotalSegmentatorTrace {
    std::array<int64_t, 3> zoomed{0, 0, 0};
    size_t slabs = 0;
    // keep_grids: the resampled image and its labels are kept here (TotalSegmentator --fast
    // computes its statistics on them).
    bool keep_grids = false;
    Volume zoomed_image, zoomed_labels;
    // Set by the caller: run on the labels on the zoomed grid (all slabs put together) before
    // they go back, as TotalSegmentator post-processes its body task there.
    std::function<Status(Volume& zoomed_labels)> postprocess;
};

// One totalsegmentator stage on `region`: zoomed, split into slabs when `split` and the image is
// large enough (totalSegmentatorSlabs), each slab through nnUNetInput and `predict`, the kept
// labels put together on the zoomed grid and brought back onto `region`'s grid
// (totalSegmentatorLabelsBack).
Result<Volume> totalSegmentatorLabels(const Volume& region, const std::array<double, 3>& target_mm,
                                      const engine::Normalization& normalization,
                                      engine::AxisOrder order, bool split, int threads,
                                      const PredictLabels& predict,
                                      TotalSegmentatorTrace* trace = nullptr,
                                      const SlabRule& rule = {});

// nnU-Net's labels on `in.network` (uint8/uint16) back onto `region_grid`: pasted into the
// zoomed grid (background outside the nonzero box), then an order-0 zoom to the region's shape
// (change_spacing(..., target_shape, order=0)). The result lies on `region_grid`.
Result<Volume> totalSegmentatorLabelsBack(const Volume& network_labels, const ZoomedInput& in,
                                          const Geometry& region_grid);

// --roi_subset's box in `labels`' index space (labels on the oriented input grid): the voxels
// with any value in `requested`, min - addon .. max + 1 + addon per axis with addon =
// int(margin_mm / spacing as float32), clipped to the grid (cropping.py get_bbox_from_mask).
// nullopt when no voxel has a requested value.
std::optional<CropBox> roiSubsetBox(const Volume& labels, const std::vector<int>& requested,
                                    double margin_mm);

}  // namespace voxseg::pipeline
