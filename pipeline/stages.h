// Staged model packages (model.json format_version 2): a chain of networks, each with its own
// resize (fixed shape or spacing), normalisation, output rule and post-processing, linked by
// "crop to the bounding box of stage N's label L plus a margin". The last stage's label map is
// the result, on the input's exact grid. docs/model-package-stages.md ("Stages") is the
// specification; deepbet's bet.py (brain extraction: 128^3 box finder, then 256^3 on the box) is
// the pipeline it reproduces step for step (docs/brain-extraction.md).
//
// Grids: every stage starts from the input reoriented to the package's orientation (the
// "oriented" grid, LPS mm kept); a stage's region is the whole oriented grid or its link's box;
// the region is resized onto the stage's network grid (same field of view, resampledGeometry).
// A stage that a crop link reads keeps its label map on its network grid (the link reads it there,
// as deepbet reads its 128^3 mask); a stage that a one-hot link reads (nnU-Net's cascade) or that
// gives part of the result has its labels brought back to the region and into the oriented grid;
// result stages' labels are then un-oriented and painted into the result in stage order.
// Post-processing runs on the grid the labels are used on (network grid for crop links, input
// grid for results; one-hot links read the labels before post-processing).
//
// A StageRunner owns one compiled sliding window per stage; run() is not reentrant (one study at a
// time, like Segmenter::infer). The free functions are pure and thread-safe.
#pragma once

#include "core/progress.h"
#include "core/status.h"
#include "core/volume.h"
#include "engine/backend.h"
#include "engine/inference/sliding_window.h"
#include "engine/model/model_package.h"
#include "pipeline/crop.h"
#include "pipeline/statistics.h"

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace voxseg::pipeline {

// PyTorch's F.interpolate(mode="nearest-exact") on the index grid: output voxel d takes input
// voxel min(floor((d + 0.5) * in / out), in - 1) per axis (scale in float, as PyTorch computes
// it). Any pixel type; the result lies on resampledGeometry(volume, size).
Result<Volume> resizeNearestExact(const Volume& volume, const std::array<int64_t, 3>& size);
// PyTorch's trilinear with align_corners=False (source index (d + 0.5) * in / out - 0.5, clamped
// to the volume). float32 result.
Result<Volume> resizeLinear(const Volume& volume, const std::array<int64_t, 3>& size);
// nnU-Net's resize_segmentation (order 1) onto `size`: for every label value in ascending order,
// its mask is interpolated linearly (scikit-image order 1, mode "edge") and the voxels >= 0.5
// take the value; axis `separate_axis` (or none: -1) with order 0 instead, as nnU-Net resamples
// an anisotropic axis of a segmentation. uint8/uint16 in and out; the result lies on
// resampledGeometry(labels, size).
Result<Volume> resampleSegmentation(const Volume& labels, const std::array<int64_t, 3>& size,
                                    int separate_axis = -1);
// One float32 volume per value: 1 where `labels` has it, else 0 (nnU-Net's
// convert_labelmap_to_one_hot).
std::vector<Volume> oneHotChannels(const Volume& labels, const std::vector<int>& values);
// One of the three, onto `size` (order-3 spline: pipeline/spline_resample.h on every axis).
Result<Volume> resizeImage(const Volume& volume, const std::array<int64_t, 3>& size,
                           engine::Interpolation interpolation, int threads = 0);

// The box a crop link asks for, in `oriented` index space: the bounding box of `link.label` in
// `labels` (a stage's label map on its network grid, computed on `region` of the oriented grid),
// scaled to the region's voxels, grown by the margin, rounded and clipped as deepbet's
// get_bbox_with_margin does. nullopt when the label has no voxels (or no slice above
// slice_fraction).
std::optional<CropBox> linkBox(const Volume& labels, const CropBox& region,
                               const Geometry& oriented, const engine::CropLink& link);

// Per stage, for run.json.
struct StageTrace {
    std::string name;
    CropBox region;                                    // in the oriented grid
    std::array<int64_t, 3> network{0, 0, 0};           // network grid size (index axes)
    std::optional<std::array<double, 2>> percentiles;  // clip values used (percentile scheme)
    int64_t patches = 0;
    int64_t label_voxels = 0;  // on the grid the stage's labels are on
    double seconds = 0.0;
};

struct StagesResult {
    Volume label_map;  // uint8/uint16, on the input's exact grid: the result stages' labels
    // A link found nothing (e.g. no brain in the box finder's output): `warnings` says which stage
    // and label, and the stages that depend on it did not run. `empty`: no result stage ran (the
    // label map is all background).
    bool empty = false;
    std::vector<std::string> warnings;
    std::vector<StageTrace> stages;
    int64_t patches = 0;
    // The resampled image and labels of the stage with "statistics_on_stage_grid", if any ran.
    Volume statistics_image, statistics_labels;
};

// Whether a crop link crops for a run asked for `labels` (empty: all): a roi_subset link only
// crops when labels were asked for (TotalSegmentator's --roi_subset).
bool cropLinkActive(const engine::CropLink& link, const std::vector<int>& labels);

// Which stages run to produce `labels` (empty: every label): the result stages giving one of
// them, and every stage those (active) links point to (crop_to, one_hot_from, mask,
// percentiles_of), transitively.
std::vector<bool> stagesNeeded(const engine::ModelPackage& package, const std::vector<int>& labels);

// Where a runner's stage networks live. kResident: every needed network is compiled by create()
// and kept (batch, the node and the viewer run many studies on one load). kOneAtATime: each
// stage's network is imported (engine::loadStageGraph: its sha256 checked again) and compiled
// just before the stage runs, and freed after it (`voxseg segment`, one study: TotalSegmentator's
// five part networks are then never resident together; docs/perf-totalseg.md).
enum class NetworkResidency { kResident, kOneAtATime };

class StageRunner {
  public:
    // Compiles the networks of the stages `labels` need (stagesNeeded; empty: all) on `backend`
    // (which must outlive the runner), now or stage by stage in run() (`residency`); run() skips
    // the others.
    static Result<std::unique_ptr<StageRunner>> create(
        engine::Backend& backend, const engine::LoadedModel& model, int batch,
        const engine::CompileOptions& compile, const std::vector<int>& labels = {},
        NetworkResidency residency = NetworkResidency::kResident);
    // `input`: one channel, any pixel type. `threads`: resampling (0: every core).
    Result<StagesResult> run(const Volume& input, int threads = 0, const Progress& progress = {});

  private:
    StageRunner() = default;
    // Stage s's compiled network from `graph` (a sliding window, or valid tiles).
    Result<std::unique_ptr<engine::VolumeInference>> compileStage(size_t s,
                                                                  const engine::Graph& graph);
    // windows_[s], compiled now when the runner compiles one stage at a time.
    Status ensureWindow(size_t s);
    // Stage s on `region` of the oriented input. networkStage: the stage's network grid
    // (stageInput), its labels on that grid into `net_labels` when `keep_net_labels` (a crop
    // link reads them there) and on the oriented grid when `want_oriented`.
    // totalSegmentatorStage: a "totalsegmentator" grid stage (pipeline/totalseg_grid.h), labels
    // on the oriented grid.
    Result<std::optional<Volume>> networkStage(
        size_t s, const Volume& oriented, const CropBox& region,
        const std::vector<Volume>& oriented_labels, const std::vector<Volume>& mask_labels,
        std::vector<std::optional<std::array<double, 2>>>& percentiles, int threads,
        const Progress& progress, bool keep_net_labels, bool want_oriented, StageTrace& trace,
        Volume& net_labels, int64_t& patches);
    Result<Volume> totalSegmentatorStage(size_t s, const Volume& oriented, const CropBox& region,
                                         int threads, const Progress& progress, StageTrace& trace,
                                         StagesResult& result);
    engine::ModelPackage package_;
    std::vector<bool> needed_;
    std::vector<int> labels_;  // the labels asked for (empty: all)
    std::vector<std::unique_ptr<engine::VolumeInference>> windows_;  // null: not needed or
                                                                     // not compiled yet
    engine::Backend* backend_ = nullptr;
    int batch_ = 1;
    engine::CompileOptions compile_;
    NetworkResidency residency_ = NetworkResidency::kResident;
};

// The package's measurements on a label map (volume_ml: voxels of the labels x voxel volume).
std::vector<Measurement> computeMeasurements(const engine::ModelPackage& package,
                                             const Volume& label_map);

}  // namespace voxseg::pipeline
