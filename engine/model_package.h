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
#include "core/status.h"
#include "engine/backend.h"
#include "engine/graph.h"
#include "engine/sliding_window.h"

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace voxseg::engine {

// How a channel's intensities are normalised before the network.
struct Normalization {
    enum class Scheme { kCT, kZScore, kNone };
    Scheme scheme = Scheme::kNone;
    // kCT: clip to [clip_low, clip_high], then (x - mean) / std.
    double clip_low = 0.0, clip_high = 0.0, mean = 0.0, std = 1.0;
    // kZScore: statistics over voxels != 0 only (and voxels outside stay 0), like nnU-Net's
    // use_mask_for_norm.
    bool nonzero_mask = false;
};
const char* normalizationSchemeName(Normalization::Scheme scheme);

struct ChannelSpec {
    std::string modality;  // "CT", "MR", "PT", ...
    Normalization normalization;
};

struct LabelSpec {
    int value = 0;  // 1..32767; 0 is background
    std::string name;
    std::array<uint8_t, 3> color{};  // RGB
    std::optional<CodedConcept> category;
    std::optional<CodedConcept> type;
};

enum class AxisOrder { kZyx, kXyz };
enum class OutputKind { kSoftmax, kSigmoid };

struct InferenceSpec {
    double overlap = 0.5;
    bool gaussian = true;  // false: constant weights
    double gaussian_sigma_scale = 0.125;
    std::vector<int> mirror_axes;  // spatial axes in network order
    WindowConvention convention = WindowConvention::kNnUNet;
};

// One network file; an ensemble lists several and averages their outputs.
struct ModelFile {
    std::string file;    // relative to the package folder
    std::string sha256;  // lower-case hex
};

struct ModelPackage {
    std::filesystem::path folder;
    int format_version = 1;
    std::string name, version, description, license;
    std::string attribution;  // optional: credit the licence requires (e.g. CC BY-SA data)
    std::vector<ChannelSpec> channels;
    std::vector<double> spacing_mm;   // network axis order
    std::vector<int64_t> patch_size;  // network axis order
    AxisOrder axis_order = AxisOrder::kZyx;
    std::string orientation = "native";  // "native" or a three-letter code such as "RAS"
    std::vector<LabelSpec> labels;
    OutputKind output = OutputKind::kSoftmax;
    InferenceSpec inference;
    std::vector<ModelFile> models;  // at least one

    // Channels the network produces: labels + 1 (background) for softmax, labels for sigmoid.
    int64_t outputChannels() const;
    // value written for output channel k (softmax: 0 for channel 0, then the labels' values).
    std::vector<int> channelLabelValues() const;
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
// [1, channels, patch_size...]; backends re-infer the batch).
struct LoadedModel {
    ModelPackage package;
    std::vector<Graph> graphs;
};

// readModelPackage + verifyModelFiles + ONNX import, then checks that each network takes the
// package's channel count and returns outputChannels() channels at the patch's spatial shape.
Result<LoadedModel> loadModelPackage(const std::filesystem::path& folder);

// The package's sliding window on `backend`, compiled for `batch` patches per forward pass,
// summing scores in `accumulator` (kFloat32 or kFloat16, SlidingWindowOptions::accumulator).
Result<std::unique_ptr<SlidingWindow>> createSlidingWindow(Backend& backend,
                                                           const LoadedModel& model, int batch,
                                                           const CompileOptions& compile = {},
                                                           DType accumulator = DType::kFloat32);

}  // namespace voxseg::engine
