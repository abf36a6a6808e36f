// Model package: a folder holding a network (model.onnx, or several ONNX files of an ensemble)
// and model.json, which says how to feed it and how to read its output. The format is specified
// in docs/model-package.md; this header is its typed form.
//
// readModelPackage() parses and validates model.json (every key, with errors naming the file, the
// key and what is expected); verifyModelFiles() checks each ONNX file against its sha256;
// loadModelPackage() does both and imports the networks.
// Units: spacing in millimetres; patch_size in voxels; both in the network's axis order
// (axis_order). Plain values: thread-compatible.
#pragma once

#include "core/coded_concept.h"
#include "core/label_info.h"
#include "core/status.h"
#include "engine/backend.h"
#include "engine/graph/graph.h"
#include "engine/inference/sliding_window.h"
#include "engine/model/model_quantization.h"

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace voxseg::engine {

// How a channel's intensities are normalised before the network.
struct Normalization {
    enum class Scheme { kCT, kZScore, kNone, kPercentile, kWindow };
    Scheme scheme = Scheme::kNone;
    // kCT: clip to [clip_low, clip_high], then (x - mean) / std.
    double clip_low = 0.0, clip_high = 0.0, mean = 0.0, std = 1.0;
    // kZScore: statistics over voxels != 0 only (and voxels outside stay 0), like nnU-Net's
    // use_mask_for_norm.
    bool nonzero_mask = false;
    // kPercentile: clip to the image's percentiles [percentile_low, percentile_high] (in %,
    // linear interpolation between order statistics as numpy/torch quantile), optionally map
    // [low, high] linearly onto `range`, optionally z-score (population std, or sample std with
    // std_ddof 1), then x * affine_scale + affine_shift. `percentiles_of` names an earlier stage
    // whose network input (before normalisation) the percentiles are taken from (deepbet takes
    // them from its 128^3 bbox input for both networks); empty: this image.
    double percentile_low = 0.0, percentile_high = 100.0;
    std::string percentiles_of;
    int percentiles_of_stage = -1;  // resolved index of percentiles_of (-1: this image)
    bool zscore = false;
    int std_ddof = 0;
    // kWindow: clip to [clip_low, clip_high] and map that window linearly onto `range`.
    bool has_range = false;
    double range_low = 0.0, range_high = 1.0;
    double affine_scale = 1.0, affine_shift = 0.0;
};
const char* normalizationSchemeName(Normalization::Scheme scheme);

// Which series of a study a channel takes (docs/model-package.md, "Channels"): every rule given
// must hold. Empty rules match any series of the channel's modality.
struct SeriesMatch {
    std::string series_description;  // ECMAScript regex, case-insensitive, searched in the text
    std::string image_type;          // a value of ImageType (0008,0008), e.g. "ORIGINAL"
    std::optional<std::array<double, 2>> echo_time_ms;  // [low, high] inclusive
    bool empty() const { return series_description.empty() && image_type.empty() && !echo_time_ms; }
};

struct ChannelSpec {
    std::string modality;  // "CT", "MR", "PT", ...
    Normalization normalization;
    // The channel's name (`--channel NAME=...`, manifest columns, messages); default: "channel<i>"
    // for several channels, the modality for one.
    std::string name;
    SeriesMatch match;
};

enum class AxisOrder { kZyx, kXyz };
enum class OutputKind { kSoftmax, kSigmoid };

struct InferenceSpec {
    double overlap = 0.5;
    bool gaussian = true;  // false: constant weights
    double gaussian_sigma_scale = 0.125;
    std::vector<int> mirror_axes;  // spatial axes in network order
    WindowConvention convention = WindowConvention::kNnUNet;
    Accumulation accumulation = Accumulation::kNormalized;  // "accumulate"
    // Stages only ("output_size"): the network returns the centred part of its patch of this
    // size ('valid' convolutions); the stage is tiled as DeepVoxNet tiles it
    // (pipeline/valid_tiles.h) instead of the sliding window. Empty: output = patch.
    std::vector<int64_t> output_size;
};

// One network file; an ensemble lists several and averages their outputs.
struct ModelFile {
    std::string file;    // relative to the package folder
    std::string sha256;  // lower-case hex
};

// ---- format_version 2: stages (docs/model-package-stages.md, "Stages") ----

// How a stage resizes its input onto the network grid (and its output back).
enum class Interpolation { kNearestExact, kLinear, kSpline3 };
const char* interpolationName(Interpolation interpolation);

// Which grid a spacing_mm stage resamples onto (model.json stages[i].grid). kFieldOfView: the
// field of view kept edge to edge (nnU-Net, scikit-image); kMonai: MONAI Spacingd's grid (voxel
// (0,0,0) kept, exact spacing) and Invertd's way back (softmax probabilities resampled, then
// argmax): pipeline/monai_spacing.h. kTotalSegmentator: TotalSegmentator's change_spacing
// (scipy.ndimage.zoom, corner-aligned, order 1, then int32 truncation; nnU-Net's crop to the
// nonzero box on that grid; labels brought back with an order-0 zoom): pipeline/scipy_zoom.h.
enum class StageGrid { kFieldOfView, kMonai, kTotalSegmentator };

// How a crop link makes its box. kLabelBox: deepbet's get_bbox_with_margin on the linked stage's
// network grid (one label). kRoiSubset: TotalSegmentator's --roi_subset: the bounding box, on the
// input grid, of the voxels the linked stage gave any of the labels the run asked for
// (--labels), grown by int(margin_mm / spacing) voxels per axis and clipped; without --labels the
// link is off (the stage runs on the whole image and the linked stage is not needed).
// kLabelSet: TotalSegmentator's crop tasks (liver_segments, lung_nodules, ...): the same box as
// kRoiSubset, of the fixed `labels` of the linked stage, always on.
enum class CropRule { kLabelBox, kRoiSubset, kLabelSet };

// "crop the input to the bounding box of stage `stage`'s label `label`, plus a margin".
struct CropLink {
    std::string stage;     // the stage's name
    int stage_index = -1;  // resolved when the package is read (always an earlier stage)
    CropRule rule = CropRule::kLabelBox;
    int label = 0;            // kLabelBox
    std::vector<int> labels;  // kLabelSet: values of the linked stage
    // The box grows by margin_fraction of its size on each side (deepbet: 0.1) and by margin_mm.
    double margin_fraction = 0.0, margin_mm = 0.0;
    // A slice of the linked stage's grid belongs to the box when more than this fraction of its
    // voxels has the label (deepbet: 0.02); 0: any voxel.
    double slice_fraction = 0.0;
};

enum class StageOutputKind {
    kSoftmax,      // logits, channel 0 background, label = argmax
    kSigmoid,      // logits, one channel per label, sigmoid >= threshold
    kProbability,  // the network already outputs probabilities: channel `channel` > threshold
    // nnU-Net region-based training: logits, one channel per (overlapping) region; channel i's
    // voxels with sigmoid > 0.5 are painted labels[i] (regions_class_order), in channel order,
    // later regions over earlier ones (LabelManager.convert_probabilities_to_segmentation).
    kRegions,
};

struct StageOutput {
    StageOutputKind kind = StageOutputKind::kSoftmax;
    // Label values of the channels (kProbability: one value; kRegions: regions_class_order).
    std::vector<int> labels;
    // kRegions: the label values each region holds (dataset.json's "labels" entries, e.g. BraTS
    // whole tumour [1, 2, 3]); informative, the painting uses `labels`.
    std::vector<std::vector<int>> regions;
    int channel = 1;         // kProbability
    int channels = 2;        // kProbability: channels the network returns
    double threshold = 0.5;  // kSigmoid, kProbability
};

enum class FillHoles { kNone, k3D, kPerSlice };
// What one label's post-processing does (pipeline/postprocess.h).
struct PostprocessRule {
    bool largest_component = false;
    double min_component_ml = 0.0;
    FillHoles fill_holes = FillHoles::kNone;
    bool any() const {
        return largest_component || min_component_ml > 0 || fill_holes != FillHoles::kNone;
    }
};
// "postprocess": the stage-wide rule applies to every label of the stage but those with a rule
// of their own ("labels": {"<value>": {...}}); components are 26-connected, or 6-connected with
// "connectivity": 6 (scipy.ndimage.label's default, TotalSegmentator's body task).
// on_stage_grid ("grid": "stage"; totalsegmentator grid stages only): on the stage's resampled
// grid before its labels go back to the input grid, as TotalSegmentator post-processes its body
// task; otherwise on the input grid.
struct StagePostprocess : PostprocessRule {
    std::map<int, PostprocessRule> labels;
    bool fully_connected = true;
    bool on_stage_grid = false;
    bool any() const {
        if (PostprocessRule::any()) return true;
        for (const auto& [label, rule] : labels)
            if (rule.any()) return true;
        return false;
    }
};

// "feed stage `stage`'s prediction as one-hot channels" (nnU-Net's 3d_lowres ->
// 3d_cascade_fullres): the stage's label map, exported to the input grid as nnU-Net exports its
// low-resolution prediction, is cropped to this stage's region and resampled onto its network
// grid as nnU-Net resamples a segmentation (per label, order 1, >= 0.5; an anisotropic axis with
// order 0), and one channel per label value (1 where the label is, else 0) is appended after the
// image channels, in `labels` order (nnU-Net: its foreground labels, ascending).
struct OneHotLink {
    std::string stage;
    int stage_index = -1;     // resolved when the package is read (always an earlier stage)
    std::vector<int> labels;  // default: the stage's label values, ascending
};

// "the network sees the image only inside stage `stage`'s label" (pyliverlesionseg's lesion
// input: the liver, dilated, a constant elsewhere): the label, on the oriented grid after the
// linked stage's post-processing, is cropped to this stage's region, resampled onto its network
// grid as a segmentation (order 1, >= 0.5) and dilated `dilate` times with the 18-neighbourhood;
// the normalised network image is cut to the mask's bounding box and set to `outside` where the
// mask is 0. The stage's scores outside the box are background.
struct MaskLink {
    std::string stage;
    int stage_index = -1;  // resolved when the package is read (always an earlier stage)
    int label = 0;
    int dilate = 0;
    double outside = 0.0;
};

struct StageSpec {
    std::string name;
    ModelFile model;
    std::optional<CropLink> crop_to;
    std::optional<OneHotLink> one_hot_from;
    std::optional<MaskLink> mask;
    // "normalize_first": normalise on the input grid, then resize (pyliverlesionseg normalises
    // before zoom3d); otherwise a linear or nearest-exact stage normalises the resized image.
    bool normalize_first = false;
    // The stage's labels are part of the result (on the input grid; later result stages paint
    // over earlier ones). The last stage always is; others when model.json says "result": true.
    bool result = false;
    // Exactly one of: a fixed network shape (the whole resized region is one patch), or a
    // spacing with a sliding-window patch. Network axis order.
    std::vector<int64_t> shape;
    std::vector<double> spacing_mm;
    std::vector<int64_t> patch_size;
    Interpolation interpolation = Interpolation::kSpline3;
    StageGrid grid = StageGrid::kFieldOfView;
    // kTotalSegmentator only: TotalSegmentator's split of a large image into three slabs along
    // the superior axis (its multi-model tasks; pipeline/totalseg_grid.h totalSegmentatorSlabs).
    bool slabs = false;
    // kTotalSegmentator result stage: statistics_totalsegmentator.json is computed on this
    // stage's resampled grid (TotalSegmentator --fast does), not on the input grid.
    bool statistics_on_stage_grid = false;
    Normalization normalization;
    StageOutput output;
    StagePostprocess postprocess;
    InferenceSpec inference;

    std::vector<int64_t> patch() const { return shape.empty() ? patch_size : shape; }
    // Image channels plus the one-hot channels of `one_hot_from`.
    int64_t inputChannels(size_t image_channels) const {
        return static_cast<int64_t>(image_channels) +
               (one_hot_from ? static_cast<int64_t>(one_hot_from->labels.size()) : 0);
    }
    int64_t outputChannels() const;
    std::vector<int> channelLabelValues() const;
    SlidingWindowOptions slidingWindowOptions() const;
};

// A number derived from the final label map, written to statistics.json and run.json.
struct MeasurementSpec {
    std::string name;  // e.g. "tiv_ml"
    std::string kind = "volume_ml";
    std::vector<int> labels;  // volume of these labels together
    std::string description;
};

// model.json "precision" (optional, both format versions; docs/model-package.md): the model
// needs fp32. "auto" then runs fp32; an explicit --precision bf16 still runs, with a warning.
struct PrecisionSpec {
    bool requires_fp32 = false;
    std::string reason;  // why (e.g. tools/check_precision.py's Dice), shown in the log
};

// model.json "intended_input" (optional, both format versions; docs/model-package.md, "Intended
// input"): what the model was made for. pipeline/input_checks.h compares an input with it
// before a run (a warning, or a refusal with --strict-input). Every field is optional.
struct IntendedInput {
    std::vector<std::string> modalities;  // e.g. {"MR"}; empty: not stated
    std::string body_region;              // free text, e.g. "head: hippocampus crops"
    // The input's extent (voxels x spacing, edge to edge) in mm: [low, high] for every axis (one
    // entry) or per image axis i, j, k (three entries); empty: not stated.
    std::vector<std::array<double, 2>> extent_mm;
    std::optional<std::array<double, 2>> spacing_mm;  // [low, high], every axis
    bool expects_crop = false;  // the model was trained on crops around the structure
};

// model.json labels[i].plausible_volume_ml (optional): a result outside [low, high] mL is
// flagged as implausible in statistics.json, run.json and the log.
struct PlausibleVolume {
    int label = 0;
    double low_ml = 0.0, high_ml = 0.0;
};

struct ModelPackage {
    std::filesystem::path folder;
    int format_version = 1;
    std::string name, version, description, license;
    std::string attribution;  // optional: credit the licence requires (e.g. CC BY-SA data)
    // Optional: what the model must not be used for ("not a clinical model: ..."), shown with
    // its card (pipeline/model_card.h: the viewer's Run model dialog).
    std::string disclaimer;
    PrecisionSpec precision;
    // model.json "quantization" (docs/int8.md): present once `voxseg model calibrate` wrote it.
    std::optional<QuantizationRecord> quantization;
    std::vector<ChannelSpec> channels;
    std::vector<double> spacing_mm;   // network axis order
    std::vector<int64_t> patch_size;  // network axis order
    AxisOrder axis_order = AxisOrder::kZyx;
    std::string orientation = "native";  // "native" or a three-letter code such as "RAS"
    std::vector<LabelInfo> labels;
    std::optional<IntendedInput> intended_input;
    std::vector<PlausibleVolume> plausible_volumes;  // in labels' order, only labels that state one
    OutputKind output = OutputKind::kSoftmax;
    InferenceSpec inference;
    std::vector<ModelFile> models;  // at least one (version 2: one per stage, in stage order)
    // format_version 2 only: `citation` (free text), the stages in order (the last one gives the
    // result; `labels` name its values) and derived measurements. Version 2 has no top-level
    // spacing_mm, patch_size, output, inference, sha256 or models: each stage has its own.
    std::string citation;
    std::vector<StageSpec> stages;
    std::vector<MeasurementSpec> measurements;
    bool hasStages() const { return !stages.empty(); }
    // A promptable (nnInteractive-style) package: model.json's "interactive" section as JSON
    // text, read by edit/interactive/interactive_model.h (docs/interactive.md); empty for a
    // segmentation package. Such a package has no stages, geometry or output of its own.
    std::string interactive_json;
    bool isInteractive() const { return !interactive_json.empty(); }

    // Channels the network produces: labels + 1 (background) for softmax, labels for sigmoid.
    int64_t outputChannels() const;
    // value written for output channel k (softmax: 0 for channel 0, then the labels' values).
    std::vector<int> channelLabelValues() const;
    // What the precision policy (engine::choosePrecision) needs to know about this model.
    ModelPrecisionHints precisionHints() const {
        const bool validated = quantization && quantization->held_back;
        return {precision.requires_fp32, precision.reason, name,
                validated ? quantization->weight_bits : 0};
    }
    // Sliding-window options for this model (batch, compile options left at their defaults).
    SlidingWindowOptions slidingWindowOptions() const;
};

// The largest model.json voxseg reads (a guard against being pointed at a big file).
constexpr size_t kMaxModelJsonBytes = 4u << 20;

// Parses <folder>/model.json and validates every key. Does not read the ONNX files.
Result<ModelPackage> readModelPackage(const std::filesystem::path& folder);
// Same, from JSON text; `source` names it in messages.
Result<ModelPackage> parseModelPackage(const std::string& json_text, const std::string& source,
                                       const std::filesystem::path& folder = {});
// Hashes every model file and compares with model.json (kCorruptData on mismatch).
Status verifyModelFiles(const ModelPackage& package);

// JSON text of a package (what tools write, formatted with 2-space indents).
std::string modelPackageToJson(const ModelPackage& package);

// A package with its networks imported (one Graph per models[] entry, imported for input
// [1, channels, patch_size...]; version 2: one per stage, for [1, channels, stage patch...];
// backends re-infer the batch).
struct LoadedModel {
    ModelPackage package;
    std::vector<Graph> graphs;
};

// readModelPackage + verifyModelFiles + ONNX import, then checks that each network takes the
// package's channel count and returns outputChannels() channels at the patch's spatial shape.
Result<LoadedModel> loadModelPackage(const std::filesystem::path& folder);

// The package's sliding window on `backend` (Backend::makeSlidingWindow: the host window, or
// the backend's own, e.g. cuda's on the GPU), compiled for `batch` patches per forward pass,
// summing scores in `accumulator` (kFloat32 or kFloat16, SlidingWindowOptions::accumulator; a
// device window may keep its own). A package with "accumulate": "nnunet-fp16" always gets the
// host window (nnU-Net's float16 arithmetic; the backend still runs the networks) and float16
// scores. Version 2 packages: kUnsupported (use createStageWindow).
Result<std::unique_ptr<VolumeInference>> createSlidingWindow(Backend& backend,
                                                             const LoadedModel& model, int batch,
                                                             const CompileOptions& compile = {},
                                                             DType accumulator = DType::kFloat32);

// Stage `stage`'s sliding window (version 2; Backend::makeSlidingWindow as above), in fp32 (a
// thresholded probability must not be rounded to fp16 before it is compared with 0.5), or in
// nnU-Net's float16 arithmetic when the stage's inference says "accumulate": "nnunet-fp16".
Result<std::unique_ptr<VolumeInference>> createStageWindow(Backend& backend,
                                                           const LoadedModel& model, size_t stage,
                                                           int batch,
                                                           const CompileOptions& compile = {});
// The same on a stage network the caller holds (loadStageGraph).
Result<std::unique_ptr<VolumeInference>> createStageWindow(Backend& backend,
                                                           const ModelPackage& package,
                                                           const Graph& graph, size_t stage,
                                                           int batch,
                                                           const CompileOptions& compile = {});

// Stage `stage`'s network of a version 2 package, imported again from the package's folder with
// loadModelPackage's checks, its file first checked against model.json's sha256 again (the
// package may have changed on disk since it was read). For a runner that compiles one stage's
// network at a time (pipeline/stages.h, NetworkResidency::kOneAtATime).
Result<Graph> loadStageGraph(const ModelPackage& package, size_t stage);

}  // namespace voxseg::engine
