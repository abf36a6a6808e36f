// The segment pipeline: one study in, a label map (and SEG, RTSTRUCT, statistics, preview, masks,
// run record) out. Shared by `voxseg segment`, `voxseg batch` and the viewer; each step is one of
// the plain stage functions of pipeline/ and engine/, chained here and nowhere else.
//
//   load (DICOM series or image file) -> reorient/crop/normalise/resample (preprocess)
//   -> sliding-window inference (every model of the package, averaged) -> scores back to the
//   original grid + argmax (scoresToLabelMap) -> post-processing -> outputs
//
// A Segmenter holds the imported model and the backend; create it once and run it on many
// studies (batch mode). Outputs are staged in a hidden folder inside the output folder and
// renamed into place only when every requested output was written, so a failure or a cancel
// never leaves a half-written file under a final name. Not thread-safe: one run at a time.
#pragma once

#include "backends/registry.h"
#include "core/progress.h"
#include "core/status.h"
#include "core/volume.h"
#include "engine/backend.h"
#include "engine/model/model_package.h"
#include "engine/model/model_signature.h"
#include "io/dicom_series.h"
#include "io/seg_writer.h"
#include "pipeline/postprocess.h"
#include "pipeline/preprocess.h"
#include "pipeline/stages.h"
#include "pipeline/statistics.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace voxseg::pipeline {

// One input volume and, for DICOM, the series it came from (needed for DICOM SEG).
struct StudyInput {
    Volume volume;
    std::optional<io::SeriesCandidate> series;
    double load_seconds = 0.0;
    // Multi-channel models (pipeline/channels.h): channels 2..N in model.json's order, already on
    // `volume`'s grid, the series each came from, and per channel (first included) where it came
    // from and what was done to it (run.json "channels").
    std::vector<Volume> extra_channels;
    std::vector<std::optional<io::SeriesCandidate>> extra_series;
    std::vector<std::string> channel_notes;
    // Each channel's modality, the first one first ("" where unknown): what
    // pipeline/input_checks.h's modalityMismatches compares with the model's channels.
    std::vector<std::string> modalities() const;
};

// Loads an image file, or scans a DICOM path and loads the series `selector` picks (index or
// UID; empty = the only one). Several and no selector: kAmbiguous, with every candidate in
// `candidates_out` so the caller can list them.
Result<StudyInput> loadStudy(const std::string& path, const std::string& selector,
                             const io::DicomLoadOptions& dicom, const Progress& progress = {},
                             std::vector<io::SeriesCandidate>* candidates_out = nullptr);

struct SegmentOutputs {
    bool label_map = true;       // segmentation.<format>
    bool dicom_seg = false;      // segmentation.dcm (DICOM inputs only)
    bool statistics = true;      // statistics.json + statistics.csv
    bool preview = true;         // preview.png
    bool probabilities = false;  // probabilities_<label>.nii.gz, one per network output channel
    bool rtstruct = false;       // rtstruct.dcm (DICOM inputs only)
    bool masks = false;          // masks/<label name>.nii.gz, one uint8 0/1 mask per label
    // statistics_totalsegmentator.json: TotalSegmentator's --statistics (totalseg_statistics.h)
    bool totalseg_statistics = false;
    std::string label_format = "nii.gz";          // nii.gz | nii | nrrd | mha
    io::SegType seg_type = io::SegType::kBinary;  // segmentation.dcm: BINARY or LABELMAP
};
// "nifti,seg,rtstruct,stats,preview,probabilities,masks,ts-stats" -> flags (unknown names are an
// error).
Result<SegmentOutputs> parseOutputs(const std::string& list);
// The inverse: the names of the files `outputs` asks for, in parseOutputs' order.
std::string outputsName(const SegmentOutputs& outputs);
// "fp16" | "fp32" -> the accumulator DType; accumulatorName is the inverse.
Result<engine::DType> parseAccumulator(const std::string& name);
const char* accumulatorName(engine::DType accumulator);

// The options a user picks are described, parsed and checked by pipeline/segment_options_schema.h
// (every front end goes through it; Segmenter::create checks its rules again for API callers).
struct SegmentOptions {
    engine::DeviceSpec device;  // auto | cpu | reference | cuda:N (engine::parseDevice)
    // kAuto: the backend's choice unless the model requires fp32 (engine::choosePrecision).
    engine::Precision precision = engine::Precision::kAuto;
    std::optional<double> overlap;  // default: model.json
    bool tta = false;               // mirror on all spatial axes (else model.json's axes)
    bool no_tta = false;            // no mirroring, whatever model.json says
    int batch = 1;                  // patches per forward pass
    // Host sliding-window score sums: kFloat16 (nnU-Net v2's choice; half the memory of the
    // largest buffer, 3 significant digits) or kFloat32 (parseAccumulator). The cuda window
    // always sums in float32 on the device.
    engine::DType accumulator = engine::DType::kFloat16;
    int threads = 0;  // CPU threads (0: all cores)
    // Output files written side by side by this many threads (0: one per output, up to the
    // cores; 1: one after another, as `voxseg batch`'s writers do, which already overlap cases).
    int output_threads = 0;
    bool ignore_modality = false;  // run although the input's modality differs
    // statistics_totalsegmentator.json measures labels touching the border too
    // (TotalSegmentator's --stats_include_incomplete).
    bool ts_stats_include_incomplete = false;
    // Refuse an input outside the model's intended input (model.json "intended_input",
    // pipeline/input_checks.h) instead of running it with a warning.
    bool strict_input = false;
    // Label names to write (`--labels`): the label map, SEG, RTSTRUCT, statistics and preview hold
    // only these, and a staged package runs only the stages they need. Empty: every label.
    std::vector<std::string> labels;
    std::vector<LabelPostprocess> postprocess;          // per label
    std::optional<PostprocessOptions> postprocess_all;  // applied to every model label
    SegmentOutputs outputs;
    // --require-signed / --trusted-keys: checked before any file of the package is parsed.
    engine::ModelTrustPolicy trust;
    // Tensors of the network handed to a callback as each patch runs (fp32/bf16 cpu only;
    // engine/activation_observer.h): `voxseg model calibrate` collects int8 ranges with it.
    engine::ActivationObserver observer;
    // Precision int8 needs a package whose calibration was validated on held-back cases
    // (engine::int8PackageSupport). Set only by `voxseg model calibrate`, whose held-back run
    // is that validation: the record it runs has no held_back yet.
    bool int8_validation_run = false;
    // Staged packages: every stage network compiled once and kept for the next study (batch, the
    // node, the viewer), or each compiled just before its stage and freed after it (`voxseg
    // segment`: one study, so TotalSegmentator's five part networks are never resident together;
    // pipeline/stages.h NetworkResidency). Single-network packages are always kept.
    bool networks_resident = true;
};

// Per-stage wall time in seconds, in pipeline order.
struct StageTiming {
    std::string stage;
    double seconds = 0.0;
    // The process's peak resident memory (VmHWM, MiB) when the stage ended: a high-water mark,
    // so a stage's own peak shows as the increase over the previous stage. 0 where unknown.
    double peak_rss_mib = 0.0;
};

struct SegmentReport {
    Volume label_map;  // on the input's exact grid
    StatisticsReport statistics;
    std::vector<StageTiming> timings;
    std::vector<std::string> warnings;
    std::vector<std::string> written;  // final paths
    std::string backend;               // name + device description
    std::string precision;             // what ran: fp32 | fp16 | bf16
    std::string precision_reason;      // why (engine::choosePrecision), as logged
    int64_t patches = 0;
    size_t accumulator_bytes = 0;
    // Staged packages (format_version 2): what each stage did, and whether a link found nothing
    // (then label_map is all background and `warnings` says why; the run still succeeds).
    std::vector<StageTrace> stages;
    bool empty_result = false;
    // A stage with "statistics_on_stage_grid" (TotalSegmentator --fast): its resampled image
    // and labels, which statistics_totalsegmentator.json is computed on.
    Volume stage_grid_image, stage_grid_labels;
};

// One study between the stages of Segmenter (prepare -> infer -> write). Move-only in practice
// (the tensors share buffers when copied); each stage drops what later stages do not need, so a
// queue of these stays as small as possible.
struct SegmentWork {
    Preprocessed pre;       // prepare: the network input (released by infer) and the record
    Volume stage_input;     // staged packages: prepare keeps the input, infer runs the stages
    engine::Tensor scores;  // infer: logits on the model grid (kept only for probabilities)
    SegmentReport report;   // filled as the stages run
    double peak_rss_before_mib = 0.0;  // process peak when prepare started (run.json)
};

class Segmenter {
  public:
    ~Segmenter();
    Segmenter(Segmenter&&) noexcept;
    Segmenter& operator=(Segmenter&&) noexcept;

    // Reads and verifies the model package (sha256), imports every model, picks the backend.
    // `warning` receives one line when device "auto" fell back (e.g. no CUDA device).
    static Result<Segmenter> create(const std::string& model_folder, const SegmentOptions& options,
                                    std::string* warning = nullptr);

    const engine::ModelPackage& model() const;
    // The backend in use ("cpu", "cuda", "reference"), after "auto" was resolved.
    std::string backendName() const;

    // Segments one loaded study and writes the requested outputs into `out_dir` (created when
    // missing). `input_path` is recorded in run.json (with a digest of the input files).
    Result<SegmentReport> run(const StudyInput& input, const std::string& input_path,
                              const std::string& out_dir, const Progress& progress = {});

    // run() in four steps, for callers that overlap studies (voxseg batch): prepare, finish and
    // write only read the model and options, so they may run on other threads (and several at
    // once) while infer runs; infer uses the backend and must not run concurrently with itself on
    // one Segmenter. Only infer needs the device: a GPU is free again as soon as it returns.
    // prepare: input checks (channels, modality, size) and pre-processing.
    Result<SegmentWork> prepare(const StudyInput& input, const std::string& input_path,
                                const Progress& progress = {}) const;
    // infer: the sliding window (scores on the model grid, in work.scores).
    Status infer(SegmentWork& work, const Progress& progress = {});
    // finish: scores back to the input grid (label map), post-processing. CPU only.
    Status finish(SegmentWork& work, const Progress& progress = {}) const;
    // write: statistics and every requested output, staged in out_dir and renamed into place.
    Result<SegmentReport> write(const StudyInput& input, SegmentWork&& work,
                                const std::string& input_path, const std::string& out_dir,
                                const Progress& progress = {}) const;

    // sha256 of the model file(s), comma-separated (as recorded in run.json).
    const std::string& modelSha256() const;

  private:
    struct Impl;
    explicit Segmenter(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace voxseg::pipeline
