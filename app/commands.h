// The `voxseg` subcommands. Each registers its options on the CLI11 app and runs after parsing,
// returning an exit code (app/exit_codes.h). Commands print results to stdout and diagnostics
// through core/log.h (stderr); they never print patient identifiers unless asked (--show-phi).
#pragma once

#include "app/exit_codes.h"
#include "app/progress_bar.h"
#include "core/progress.h"
#include "io/dicom_series.h"
#include "pipeline/segment.h"

#include <CLI/CLI.hpp>

#include <cstdint>

#include <string>
#include <utility>
#include <vector>

namespace voxseg::app {

// What every command gets from main(): the progress bar, the cancel token wired to signals, and
// the global flags.
struct CommandContext {
    ProgressBar* bar = nullptr;
    CancelToken cancel;
    bool quiet = false;
    Progress progress() const { return Progress(bar->callback(), cancel); }
};

// Reports a failed Status (through the log, so --log-format json applies) and maps it to an
// exit code.
ExitCode fail(const Status& status, Stage stage);

struct InfoOptions {
    std::vector<std::string> paths;
    bool json = false;
    bool show_phi = false;
    int threads = 0;
};
CLI::App* addInfoCommand(CLI::App& app, InfoOptions& options);
ExitCode runInfo(const InfoOptions& options, const CommandContext& context);

struct ConvertOptions {
    std::string input;
    std::string output;
    std::string series;  // index or SeriesInstanceUID; empty = the only candidate
    bool refuse_tilt = false;
    bool refuse_uneven = false;
    bool no_gaps = false;
    int threads = 0;
    int gzip_level = 6;
    std::string referenced;   // RTSTRUCT input: the series it outlines
    double max_voxels = 2e9;  // io::DicomLoadOptions::max_voxels
};
CLI::App* addConvertCommand(CLI::App& app, ConvertOptions& options);
ExitCode runConvert(const ConvertOptions& options, const CommandContext& context);

// Hidden developer command: a synthetic CT-like DICOM series (demo, tests, benchmarks).
struct SynthOptions {
    std::string folder;
    std::string size = "256x256x64";
    std::string spacing = "0.7x0.7x1.0";
    int series_count = 1;
    int noise_hu = 10;
    uint32_t seed = 1;
};
CLI::App* addSynthCommand(CLI::App& app, SynthOptions& options);
ExitCode runSynth(const SynthOptions& options, const CommandContext& context);

// `voxseg phantom`: a synthetic CT study with its ground-truth label map (io/ct_phantom.h).
struct PhantomOptions {
    std::string folder;
    uint32_t seed = 1;
    std::string size = "256x256x150";
    std::string spacing = "1.5x1.5x2.0";
    double noise_hu = -1.0;  // < 0: random per seed
    bool no_table = false;
    std::string outputs = "dicom,labels";
    int threads = 0;
};
CLI::App* addPhantomCommand(CLI::App& app, PhantomOptions& options);
ExitCode runPhantom(const PhantomOptions& options, const CommandContext& context);

// Whether this build can read DICOM (the io/ DICOM loader is compiled in).
struct SegmentCommandOptions {
    std::string input;
    std::string model;
    std::string output;
    std::string series;
    // Device, precision, overlap, batch, accumulator, TTA, post-processing, outputs, SEG type,
    // format, labels and modality flags as given (flag, text), in command-line order: applied by
    // pipeline/segment_options_schema.h.
    std::vector<std::pair<std::string, std::string>> schema_values;
    bool refuse_tilt = false;
    bool refuse_uneven = false;
    double max_voxels = 2e9;  // io::DicomLoadOptions::max_voxels
    int threads = 0;
    std::vector<std::string> channels;  // --channel NAME=PATH|SERIES (multi-channel models)
    std::string trusted_keys;           // --trusted-keys FILE (engine::ModelTrustPolicy)
    bool require_signed = false;        // --require-signed
};
CLI::App* addSegmentCommand(CLI::App& app, SegmentCommandOptions& options);
ExitCode runSegment(const SegmentCommandOptions& options, const CommandContext& context);
// The model, device and output options `segment` and `batch` share (all but input/-m/-o).
void addSegmentModelOptions(CLI::App* command, SegmentCommandOptions& options);
// --max-voxels of segment and convert: the limit for DICOM series and image files alike.
void addMaxVoxelsOption(CLI::App* command, double& max_voxels);
Result<pipeline::SegmentOptions> toSegmentOptions(const SegmentCommandOptions& options);
io::DicomLoadOptions toDicomOptions(const SegmentCommandOptions& options);

// `voxseg batch`: many studies, one model load, sharded, resumable (batch/runner.h).
struct BatchCommandOptions {
    std::string manifest;       // CSV, JSON lines, or a folder of case folders
    SegmentCommandOptions seg;  // model, output root, series, device and output options
    std::string shard;          // "i/N"; empty: from the scheduler's environment
    int shards = 0;             // N for Kubernetes / AWS Batch array indices
    std::string devices;        // "0,1", "cpu,cpu", ...
    int loaders = 1;
    int prefetch = 2;
    int writers = 0;
    double grace_seconds = 60.0;
    int read_retries = 2;
    double min_free_mb = 1024.0;
    std::string metrics_file;
    bool force = false;
    bool retry_failed = false;  // also cases that killed their worker in an earlier run
};
CLI::App* addBatchCommand(CLI::App& app, BatchCommandOptions& options);
ExitCode runBatch(const BatchCommandOptions& options, const CommandContext& context);

// `voxseg edit`: an edit journal replayed onto a segmentation (edit/journal.h).
struct EditCommandOptions {
    std::string input;   // the image: DICOM folder/file or image file
    std::string labels;  // label map file, DICOM SEG or RTSTRUCT
    std::string ops;     // the journal (JSON lines)
    std::string output;  // label map file or .dcm (DICOM SEG)
    std::string series;
    std::string report;  // optional JSON: what changed per label
    std::string seg_type = "binary";
    int threads = 0;
    std::string interactive_model;  // package folder: the journal's prompt ops run on it
    // The interactive session's AutoZoom (on | off) and network precision (engine's names);
    // "journal": as the journal's prompt_session lines say (before any: on, fp32).
    std::string autozoom = "journal";
    std::string precision = "journal";
    std::string device = "auto";  // the interactive network's device (as segment's --device)
    // Refuse an image outside the interactive package's intended_input instead of warning.
    bool strict_input = false;
};
CLI::App* addEditCommand(CLI::App& app, EditCommandOptions& options);
ExitCode runEdit(const EditCommandOptions& options, const CommandContext& context);

// `voxseg model calibrate`: INT8 scales for a package (pipeline/calibrate.h, docs/int8.md).
struct CalibrateCommandOptions {
    std::string package, cases, output;
    std::string method = "mse";
    double percentile = 99.99;
    int min_cases = 8;
    int weight_bits = 0;                    // 0: this CPU's (8 with VNNI or AMX, else 7)
    std::string norm_inputs = "float";      // --norm-inputs float|int8
    std::string keep_float = "first,last";  // --keep-float first,last|first|last|none
    std::string zero_points = "always";     // --zero-points always|where-needed
    std::string upsampling = "float";       // --upsampling float|int8
    std::string held_back;                  // empty: the default (25 %, at least 2)
    double min_dice = 0.995, min_agreement = 0.999;
    std::string key_file;
    int threads = 0;
    int batch = 1;
    // Interactive packages: click sessions per structure of each case's label map.
    int corrections = 2;  // corrective clicks after the first
    int structures = 3;   // the largest labels per case (0: all)
};

// `voxseg model keygen|sign|verify|calibrate`: package signatures
// (engine/model/model_signature.h) and INT8 calibration.
struct ModelCommandOptions {
    std::string action;  // "keygen" | "sign" | "verify" | "calibrate" (the subcommand parsed)
    std::string key_name;
    std::string comment;
    std::string package;
    std::string key_file;
    std::string trusted_keys;
    CalibrateCommandOptions calibrate;
};
CLI::App* addModelCommand(CLI::App& app, ModelCommandOptions& options);
ExitCode runModel(const ModelCommandOptions& options, const CommandContext& context);
void addModelCalibrateCommand(CLI::App* model, ModelCommandOptions& options);
ExitCode runModelCalibrate(const CalibrateCommandOptions& options, const CommandContext& context);

// `voxseg serve`: a DICOM node (receive, route, segment, send back; node/server.h).
struct ServeCommandOptions {
    std::string config;   // node.json
    bool check = false;   // validate the configuration and exit
    bool resend = false;  // send what the outbox holds (held results included), then exit
    double grace_seconds = 60.0;
    bool internal_worker = false;  // hidden: be the node's segmentation worker process
};
CLI::App* addServeCommand(CLI::App& app, ServeCommandOptions& options);
ExitCode runServe(const ServeCommandOptions& options, const CommandContext& context);

}  // namespace voxseg::app
