#include "pipeline/segment.h"

#include "backends/registry.h"
#include "core/atomic_file.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/process_metrics.h"
#include "core/sha256.h"
#include "engine/inference/sliding_window.h"
#include "io/acquired_labels.h"
#include "io/image_io.h"
#include "io/seg_writer.h"
#include "pipeline/input_checks.h"
#include "pipeline/labels.h"
#include "pipeline/model_labels.h"
#include "pipeline/prediction_export.h"
#include "pipeline/preprocess.h"
#include "pipeline/preview.h"
#include "pipeline/segment_options_schema.h"
#include "pipeline/segmentation_files.h"
#include "pipeline/totalseg_statistics.h"

#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <thread>

namespace voxseg::pipeline {
namespace fs = std::filesystem;
namespace {

constexpr const char* kComponent = "segment";

using Clock = std::chrono::steady_clock;

StageTiming stageDone(const char* name, Clock::time_point t) {
    return {name, secondsSince(t), peakRssMib()};
}

// Runs independent jobs on up to `threads` threads (0: one per job, up to the cores; 1: in
// order on this thread). Every job runs even when another fails; the first failure in job order
// is returned, so the error does not depend on timing.
Status runSideBySide(const std::vector<std::function<Status()>>& jobs, int threads) {
    std::vector<Status> results(jobs.size(), Status::ok());
    auto run = [&](size_t i) {
        try {
            results[i] = jobs[i]();
        } catch (const std::bad_alloc&) {
            results[i] = Status(StatusCode::kOutOfMemory, "out of memory while writing outputs");
        } catch (const std::exception& e) {
            results[i] = Status(StatusCode::kInternal, e.what());
        }
    };
    const size_t cores = std::max(1u, std::thread::hardware_concurrency());
    const size_t n = std::min(jobs.size(), threads > 0 ? static_cast<size_t>(threads) : cores);
    if (n <= 1) {
        for (size_t i = 0; i < jobs.size(); ++i) run(i);
    } else {
        std::atomic<size_t> next{0};
        auto worker = [&] {
            for (size_t i = next++; i < jobs.size(); i = next++) run(i);
        };
        std::vector<std::thread> pool;
        for (size_t t = 1; t < n; ++t) pool.emplace_back(worker);
        worker();
        for (auto& t : pool) t.join();
    }
    for (const Status& st : results)
        if (!st.isOk()) return st;
    return Status::ok();
}

// sha256 over the sorted input files' own digests: identifies exactly which data was segmented.
Result<std::string> inputDigest(const StudyInput& input, const std::string& input_path) {
    std::vector<std::string> files;
    if (input.series) {
        for (const auto& s : input.series->slices) files.push_back(s.path);
    } else {
        std::error_code ec;
        if (!fs::is_regular_file(input_path, ec)) return std::string();  // in-memory input
        files.push_back(input_path);
    }
    for (size_t c = 0; c < input.extra_channels.size(); ++c) {  // multi-channel models
        const auto& series = c < input.extra_series.size() ? input.extra_series[c] : std::nullopt;
        std::error_code ec;
        if (series)
            for (const auto& sl : series->slices) files.push_back(sl.path);
        else if (fs::is_regular_file(input.extra_channels[c].info().source, ec))
            files.push_back(input.extra_channels[c].info().source);
    }
    std::sort(files.begin(), files.end());
    files.erase(std::unique(files.begin(), files.end()), files.end());
    std::string all;
    for (const auto& f : files) {
        VOXSEG_ASSIGN_OR_RETURN(std::string d, sha256File(f));
        all += d;
    }
    return sha256Hex(all);
}

// A hidden folder inside the output folder; everything is written there first.
class Staging {
  public:
    explicit Staging(fs::path out_dir) : out_dir_(std::move(out_dir)) {
        dir_ = out_dir_ / (".voxseg-staging-" + std::to_string(::getpid()));
    }
    ~Staging() {
        std::error_code ec;
        fs::remove_all(dir_, ec);
        if (created_ && !committed_) fs::remove(out_dir_, ec);  // ours and empty: a failed run
    }
    Status create() {
        std::error_code ec;
        created_ = !fs::exists(out_dir_, ec);
        fs::create_directories(out_dir_, ec);
        if (ec) return ioError("cannot create output folder: " + ec.message(), out_dir_.string());
        fs::remove_all(dir_, ec);
        fs::create_directories(dir_, ec);
        if (ec) return ioError("output folder is not writable: " + ec.message(), out_dir_.string());
        return Status::ok();
    }
    // `name` may lie in a subfolder ("masks/liver.nii.gz"), made here and at commit.
    std::string path(const std::string& name) {
        names_.push_back(name);
        const fs::path p = dir_ / name;
        if (name.find('/') != std::string::npos) {
            std::error_code ec;  // a failure shows when the file is written
            fs::create_directories(p.parent_path(), ec);
        }
        return p.string();
    }
    // `status` with the staging folder in its paths replaced by the output folder, so a failed
    // write names the file the user asked for, not a hidden temporary one.
    Status named(const Status& status) const {
        if (status.isOk()) return status;
        const std::string from = dir_.string(), to = out_dir_.string();
        auto replace = [&](std::string text) {
            for (size_t at = text.find(from); at != std::string::npos;
                 at = text.find(from, at + to.size()))
                text.replace(at, from.size(), to);
            return text;
        };
        return Status(status.code(), replace(status.message()), replace(status.subject()));
    }
    // Renames every staged file into the output folder (each rename is atomic).
    Result<std::vector<std::string>> commit() {
        std::vector<std::string> written;
        for (const auto& n : names_) {
            std::error_code ec;
            const fs::path target = out_dir_ / n;
            if (n.find('/') != std::string::npos) fs::create_directories(target.parent_path(), ec);
            if (!ec) fs::rename(dir_ / n, target, ec);
            if (ec) return ioError("could not move output into place: " + ec.message(), target);
            written.push_back(target.string());
            committed_ = true;
        }
        return written;
    }

  private:
    fs::path out_dir_;
    fs::path dir_;
    std::vector<std::string> names_;
    bool created_ = false;
    bool committed_ = false;
};

}  // namespace

Result<StudyInput> loadStudy(const std::string& path, const std::string& selector,
                             const io::DicomLoadOptions& dicom, const Progress& progress,
                             std::vector<io::SeriesCandidate>* candidates_out) {
    const auto t0 = Clock::now();
    std::error_code ec;
    if (!fs::exists(path, ec)) return notFound("input not found", path);
    StudyInput in;
    if (io::isImageFile(path)) {
        VOXSEG_ASSIGN_OR_RETURN(in.volume, io::readImage(path, progress, dicom.max_voxels));
        in.load_seconds = secondsSince(t0);
        return in;
    }
    VOXSEG_ASSIGN_OR_RETURN(auto scan, io::scanDicom({path}, {}, progress.sub(0.0, 0.2)));
    if (candidates_out) *candidates_out = scan.series;
    VOXSEG_ASSIGN_OR_RETURN(const io::SeriesCandidate* chosen, io::selectSeries(scan, selector));
    VOXSEG_ASSIGN_OR_RETURN(in.volume, io::loadSeries(*chosen, dicom, progress.sub(0.2, 1.0)));
    in.series = *chosen;
    in.load_seconds = secondsSince(t0);
    return in;
}

Result<SegmentOutputs> parseOutputs(const std::string& list) {
    SegmentOutputs o;
    o.label_map = o.dicom_seg = o.statistics = o.preview = o.probabilities = o.rtstruct = false;
    o.masks = o.totalseg_statistics = false;
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item == "nifti" || item == "labels")
            o.label_map = true;
        else if (item == "seg")
            o.dicom_seg = true;
        else if (item == "stats")
            o.statistics = true;
        else if (item == "preview")
            o.preview = true;
        else if (item == "probabilities")
            o.probabilities = true;
        else if (item == "rtstruct")
            o.rtstruct = true;
        else if (item == "masks")
            o.masks = true;
        else if (item == "ts-stats")
            o.totalseg_statistics = true;
        else if (!item.empty())
            return invalidArgument("unknown output '" + item +
                                   "': use nifti, seg, rtstruct, stats, preview, probabilities, "
                                   "masks, ts-stats");
    }
    return o;
}

std::string outputsName(const SegmentOutputs& o) {
    std::string list;
    auto add = [&](bool on, const char* name) {
        if (on) list += (list.empty() ? "" : ",") + std::string(name);
    };
    add(o.label_map, "nifti");
    add(o.dicom_seg, "seg");
    add(o.rtstruct, "rtstruct");
    add(o.statistics, "stats");
    add(o.preview, "preview");
    add(o.probabilities, "probabilities");
    add(o.masks, "masks");
    add(o.totalseg_statistics, "ts-stats");
    return list;
}

Result<engine::DType> parseAccumulator(const std::string& name) {
    if (name == "fp16") return engine::DType::kFloat16;
    if (name == "fp32") return engine::DType::kFloat32;
    return invalidArgument("'" + name + "' is not fp16 or fp32");
}

const char* accumulatorName(engine::DType accumulator) {
    return accumulator == engine::DType::kFloat16 ? "fp16" : "fp32";
}

struct Segmenter::Impl {
    engine::ModelPackage model;
    SegmentOptions options;
    std::unique_ptr<engine::Backend> backend;
    engine::PrecisionChoice precision;            // what runs, and why (run.json, log)
    engine::SlidingWindowOptions window_options;  // as used (for run.json)
    // The backend's whole-volume path (host window, or cuda's on the GPU); averages ensemble
    // members per patch.
    std::unique_ptr<engine::VolumeInference> window;
    std::unique_ptr<StageRunner> stages;  // format_version 2 packages instead
    std::vector<int> label_values;        // --labels: the values written (empty: every label)
    engine::ModelPackage output_model;    // the package describing only the labels written
    std::string model_sha256;
    double load_seconds = 0.0;

    // write()'s parts: every requested output file, written side by side into `staging` (the
    // DICOM outputs on the acquired images, kept in `acquired` for run.json), and run.json.
    Status writeOutputs(const StudyInput& input, const SegmentWork& work,
                        const engine::Tensor& scores, SegmentReport& report, Staging& staging,
                        std::optional<io::AcquiredLabels>& acquired, std::string& digest,
                        const std::string& input_path, const Progress& progress) const;
    nlohmann::json runRecord(const StudyInput& input, const SegmentReport& report,
                             const std::string& input_path, const std::string& digest,
                             const io::AcquiredLabels* acquired, double peak_before_run) const;
};

Segmenter::Segmenter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Segmenter::~Segmenter() = default;
Segmenter::Segmenter(Segmenter&&) noexcept = default;
Segmenter& Segmenter::operator=(Segmenter&&) noexcept = default;
const engine::ModelPackage& Segmenter::model() const { return impl_->model; }
std::string Segmenter::backendName() const { return impl_->backend->name(); }

Result<Segmenter> Segmenter::create(const std::string& model_folder, const SegmentOptions& options,
                                    std::string* warning) {
    const auto t0 = Clock::now();
    // The rules between options (tta/no-tta, batch, overlap, accumulator): decided by the
    // option schema, for options that did not come through it (the library API).
    VOXSEG_RETURN_IF_ERROR(checkSegmentOptions(options));
    auto impl = std::make_unique<Impl>();
    impl->options = options;
    // Signatures first: the files of an untrusted package are not parsed at all.
    VOXSEG_ASSIGN_OR_RETURN(const std::string trust,
                            engine::checkModelTrust(model_folder, options.trust));
    if (options.trust.active()) log::info(kComponent, "model package {}", trust);
    VOXSEG_ASSIGN_OR_RETURN(engine::LoadedModel loaded, engine::loadModelPackage(model_folder));
    impl->model = loaded.package;
    const auto& m = impl->model;
    if (!options.labels.empty()) {
        VOXSEG_ASSIGN_OR_RETURN(impl->label_values, labelValuesByName(m, options.labels));
    }

    VOXSEG_ASSIGN_OR_RETURN(impl->backend, engine::createBackend(options.device, warning));
    std::string precision_warning;
    VOXSEG_ASSIGN_OR_RETURN(impl->precision,
                            engine::choosePrecision(*impl->backend, options.precision,
                                                    m.precisionHints(), &precision_warning));
    if (!precision_warning.empty()) log::warning(kComponent, "{}", precision_warning);

    // Per-run overrides go into the package's inference settings, which define the window.
    if (options.overlap) impl->model.inference.overlap = *options.overlap;
    if (options.tta) impl->model.inference.mirror_axes = {0, 1, 2};
    if (options.no_tta) impl->model.inference.mirror_axes.clear();
    for (auto& stage : impl->model.stages) {  // staged packages: the same overrides per stage
        if (options.overlap) stage.inference.overlap = *options.overlap;
        if (options.tta) stage.inference.mirror_axes = {0, 1, 2};
        if (options.no_tta) stage.inference.mirror_axes.clear();
    }
    loaded.package = impl->model;
    engine::CompileOptions compile;
    compile.precision = impl->precision.precision;
    compile.num_threads = options.threads;
    compile.observer = options.observer;
    if (engine::usesCalibration(compile.precision)) {
        // The package's record, validated on held-back cases (calibrate's own validation run
        // needs only the record); the backend checks the CPU's weight bits. fp8 reads the same
        // record (docs/int8-gpu.md).
        if (!options.int8_validation_run)
            VOXSEG_RETURN_IF_ERROR(engine::int8PackageSupport(m.quantization, m.name));
        if (!m.quantization)
            return unsupported("model " + m.name + " has no int8 calibration", model_folder);
        compile.quantization = std::make_shared<const engine::QuantizationRecord>(*m.quantization);
    }
    engine::DType accumulator = options.accumulator;
    if (m.hasStages()) {
        if (options.outputs.probabilities)
            return unsupported("model " + m.name +
                                   " has stages: probability maps are not written for staged "
                                   "models; drop 'probabilities' from --outputs",
                               model_folder);
        auto runner =
            StageRunner::create(*impl->backend, loaded, options.batch, compile, impl->label_values,
                                options.networks_resident ? NetworkResidency::kResident
                                                          : NetworkResidency::kOneAtATime);
        if (!runner.isOk()) return runner.status().withContext("model " + m.name);
        impl->stages = std::move(*runner);
        impl->window_options = m.stages.front().slidingWindowOptions();
        accumulator = engine::DType::kFloat32;  // stages keep fp32 scores
    } else {
        auto window = engine::createSlidingWindow(*impl->backend, loaded, options.batch, compile,
                                                  accumulator);
        if (!window.isOk()) return window.status().withContext("model " + m.name);
        impl->window = std::move(*window);
        impl->window_options = impl->model.slidingWindowOptions();
        accumulator = impl->window->accumulator();
    }
    impl->window_options.batch = options.batch;
    impl->window_options.accumulator = accumulator;
    impl->output_model =
        impl->label_values.empty() ? impl->model : withOnlyLabels(impl->model, impl->label_values);
    if (options.outputs.masks) {  // before any work: a label name that cannot be a file name
        const Status names = checkMaskFileNames(impl->output_model.labels);
        if (!names.isOk())
            return Status(names.code(), "model " + m.name + ": " + names.message(), model_folder);
    }
    for (const auto& file : m.models)
        impl->model_sha256 += (impl->model_sha256.empty() ? "" : ",") + file.sha256;
    impl->load_seconds = secondsSince(t0);
    log::info(kComponent, "model {} {} on {} ({}), {}: {}", m.name, m.version,
              impl->backend->name(), impl->backend->deviceDescription(),
              engine::precisionName(impl->precision.precision), impl->precision.reason);
    if (impl->window) log::info(kComponent, "{}", impl->window->describe());
    return Segmenter(std::move(impl));
}

const std::string& Segmenter::modelSha256() const { return impl_->model_sha256; }

Result<SegmentReport> Segmenter::run(const StudyInput& input, const std::string& input_path,
                                     const std::string& out_dir, const Progress& progress) {
    // An unwritable output folder fails before any work, as the staging folder is made here.
    {
        Staging probe(out_dir);
        VOXSEG_RETURN_IF_ERROR(probe.create());
    }
    VOXSEG_ASSIGN_OR_RETURN(SegmentWork work, prepare(input, input_path, progress.sub(0.0, 0.1)));
    VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());
    VOXSEG_RETURN_IF_ERROR(infer(work, progress.sub(0.1, 0.85)));
    VOXSEG_RETURN_IF_ERROR(finish(work, progress.sub(0.85, 0.9)));
    return write(input, std::move(work), input_path, out_dir, progress.sub(0.9, 1.0));
}

std::vector<std::string> StudyInput::modalities() const {
    std::vector<std::string> out{volume.info().modality};
    for (const Volume& c : extra_channels) out.push_back(c.info().modality);
    return out;
}

Result<SegmentWork> Segmenter::prepare(const StudyInput& input, const std::string& input_path,
                                       const Progress& progress) const {
    const Impl& s = *impl_;
    const auto& m = s.model;
    SegmentWork work;
    SegmentReport& report = work.report;
    work.peak_rss_before_mib = peakRssMib();  // model and input loaded
    report.backend = s.backend->name() + " (" + s.backend->deviceDescription() + ")";
    report.precision = engine::precisionName(s.precision.precision);
    report.precision_reason = s.precision.reason;
    report.warnings = input.volume.info().warnings;
    const Geometry g = input.volume.geometry();

    // Checks that need no work first.
    std::vector<Volume> channels{input.volume};
    channels.insert(channels.end(), input.extra_channels.begin(), input.extra_channels.end());
    if (channels.size() != m.channels.size()) {
        std::string names;
        for (const auto& c : m.channels) names += (names.empty() ? "" : ", ") + c.name;
        return invalidArgument("model " + m.name + " takes " + std::to_string(m.channels.size()) +
                                   " input channels (" + names + ") but " +
                                   std::to_string(channels.size()) +
                                   " were loaded: give each with --channel NAME=PATH, or let "
                                   "model.json's rules pick them from a DICOM study",
                               input_path);
    }
    for (const ModalityMismatch& mm : modalityMismatches(m, input.modalities())) {
        if (!s.options.ignore_modality)
            return modalityRefusal(m, mm, "--ignore-modality", input_path);
        const std::string which = mm.channel.empty() ? "" : " (channel " + mm.channel + ")";
        report.warnings.push_back("modality " + mm.have + which + " differs from the model's " +
                                  mm.want);
    }
    for (size_t c = 1; c < channels.size(); ++c)
        if (!channels[c].geometry().approxEqual(g))
            return invalidArgument("channel " + m.channels[c].name +
                                       " is not on the first channel's grid (load the channels "
                                       "with loadStudyChannels, which resamples them)",
                                   input_path);
    for (int a = 0; a < 3; ++a)
        if (g.size[a] < 2)
            return unsupported("input has only " + std::to_string(g.size[a]) +
                                   " voxel(s) along axis " + std::to_string(a) +
                                   ": a 3D volume (at least 2 slices) is needed; pick a " +
                                   "volumetric series",
                               input_path);
    // The model card (model.json "intended_input"): a warning before the work, or the refusal
    // --strict-input asks for.
    const std::vector<std::string> findings = checkIntendedInput(
        m, {g, input.volume.info().modality}, /*check_modality=*/!s.options.ignore_modality);
    if (!findings.empty() && s.options.strict_input)
        return strictInputRefusal(m, findings, input_path);
    for (const std::string& f : findings) {
        report.warnings.push_back(inputWarning(f));
        log::warning(kComponent, "{}", report.warnings.back());
    }
    if (s.options.outputs.dicom_seg && !input.series)
        return invalidArgument(
            "DICOM SEG needs a DICOM input series; drop 'seg' from --outputs for image files",
            input_path);
    if (s.options.outputs.rtstruct && !input.series)
        return invalidArgument(
            "RTSTRUCT needs a DICOM input series; drop 'rtstruct' from --outputs for image files",
            input_path);

    if (m.hasStages()) {  // each stage pre-processes its own input inside infer()
        work.stage_input = input.volume;
        return work;
    }
    const auto t = Clock::now();
    PreprocessSpec spec;
    spec.orientation = m.orientation;
    spec.axis_order = m.axis_order;
    for (int a = 0; a < 3; ++a) spec.spacing_mm[a] = m.spacing_mm[a];
    for (const auto& c : m.channels) spec.channels.push_back(c.normalization);
    spec.threads = s.options.threads;
    VOXSEG_ASSIGN_OR_RETURN(work.pre, preprocess(channels, spec, progress));
    report.timings.push_back(stageDone("preprocess", t));
    return work;
}

Status Segmenter::infer(SegmentWork& work, const Progress& progress) {
    const Impl& s = *impl_;
    const auto& m = s.model;
    SegmentReport& report = work.report;

    if (s.stages) {  // staged package: every stage, pre-processing included, runs here
        const auto t = Clock::now();
        VOXSEG_ASSIGN_OR_RETURN(StagesResult staged,
                                s.stages->run(work.stage_input, s.options.threads, progress));
        work.stage_input = Volume();
        report.label_map = std::move(staged.label_map);
        report.stages = std::move(staged.stages);
        report.empty_result = staged.empty;
        report.patches = staged.patches;
        report.stage_grid_image = std::move(staged.statistics_image);
        report.stage_grid_labels = std::move(staged.statistics_labels);
        for (auto& w : staged.warnings) report.warnings.push_back(std::move(w));
        report.timings.push_back(stageDone("stages", t));
        progress.report(1.0, "inference done");
        return Status::ok();
    }
    // Inference (ensemble members averaged per patch, as nnU-Net v2 averages fold logits).
    auto t = Clock::now();
    engine::SlidingWindowStats stats;
    VOXSEG_ASSIGN_OR_RETURN(work.scores, s.window->run(work.pre.input, progress, &stats));
    work.pre.input = engine::Tensor();  // the network input is no longer needed
    report.patches = stats.patches;
    report.accumulator_bytes = stats.accumulator_bytes;
    report.timings.push_back(stageDone("inference", t));
    progress.report(1.0, "inference done");
    return Status::ok();
}

Status Segmenter::finish(SegmentWork& work, const Progress& progress) const {
    const Impl& s = *impl_;
    const auto& m = s.model;
    SegmentReport& report = work.report;

    // Back to the original grid (staged packages: infer already put the labels there).
    auto t = Clock::now();
    if (!s.stages) {
        ExportSpec exp;
        exp.activation = m.output == engine::OutputKind::kSigmoid ? OutputActivation::kSigmoid
                                                                  : OutputActivation::kSoftmax;
        exp.channel_labels = m.channelLabelValues();
        exp.threshold = 0.0;  // the scores are logits: sigmoid(x) >= 0.5 <=> x >= 0
        exp.round_to_half = m.inference.accumulation == engine::Accumulation::kNnUNetFp16;
        exp.threads = s.options.threads;
        VOXSEG_ASSIGN_OR_RETURN(report.label_map,
                                scoresToLabelMap(work.scores, work.pre.record, exp, progress));
        if (!s.options.outputs.probabilities) work.scores = engine::Tensor();
        report.timings.push_back(stageDone("export", t));
    }

    if (!s.label_values.empty()) {
        const int64_t cleared = keepOnlyLabels(report.label_map, s.label_values);
        log::debug(kComponent, "--labels: {} voxels of other labels cleared", cleared);
    }

    t = Clock::now();
    std::vector<LabelPostprocess> post = s.options.postprocess;
    if (s.options.postprocess_all)
        for (const auto& l : m.labels) post.push_back({l.value, *s.options.postprocess_all});
    if (!post.empty()) {
        VOXSEG_ASSIGN_OR_RETURN(auto steps, postprocess(report.label_map, post));
        for (const auto& r : steps)
            log::info(kComponent, "label {}: {} voxels removed, {} filled", r.label,
                      r.voxels_removed, r.voxels_filled);
    }
    report.timings.push_back(stageDone("postprocess", t));
    progress.report(1.0, "label map done");
    return Status::ok();
}

namespace {

// Which grid each output is on (run.json "grids"): the volume's (the loaded grid, resampled for
// a tilted, uneven or gapped series) or the acquired images' (DICOM outputs).
nlohmann::json outputGrids(const StudyInput& input, const SegmentOutputs& outs,
                           const io::AcquiredLabels* acquired) {
    nlohmann::json grids;
    const bool resampled =
        input.series &&
        (input.series->tilted || input.series->uneven_spacing || input.series->has_gaps) &&
        input.series->has_patient_geometry;
    grids["volume"] = {{"resampled", resampled}};
    if (resampled) {
        std::string why = input.series->tilted ? "gantry tilt" : "";
        if (input.series->uneven_spacing) why += std::string(why.empty() ? "" : ", ") + "uneven";
        if (input.series->has_gaps) why += std::string(why.empty() ? "" : ", ") + "gaps";
        grids["volume"]["why"] = why;
    }
    if (input.series)
        grids["acquired_images"] = {{"slices", input.series->slices.size()},
                                    {"mapped_back", acquired && acquired->resampled}};
    nlohmann::json on = nlohmann::json::object();
    if (outs.label_map) on["segmentation." + outs.label_format] = "volume";
    if (outs.dicom_seg && input.series) on["segmentation.dcm"] = "acquired_images";
    if (outs.rtstruct && input.series) on["rtstruct.dcm"] = "acquired_images";
    if (outs.statistics) on["statistics"] = "volume";
    if (outs.preview) on["preview.png"] = "volume";
    if (outs.probabilities) on["probabilities"] = "volume";
    if (outs.masks) on["masks"] = "volume";
    if (outs.totalseg_statistics) on["statistics_totalsegmentator.json"] = "volume";
    grids["outputs"] = on;
    return grids;
}

}  // namespace

Status Segmenter::Impl::writeOutputs(const StudyInput& input, const SegmentWork& work,
                                     const engine::Tensor& scores, SegmentReport& report,
                                     Staging& staging, std::optional<io::AcquiredLabels>& acquired,
                                     std::string& digest, const std::string& input_path,
                                     const Progress& progress) const {
    auto t = Clock::now();
    const SegmentOutputs& outs = options.outputs;
    const engine::ModelPackage& described = output_model;  // --labels: only those
    const std::vector<LabelInfo>& labels = described.labels;
    // Staged names registered here, in a fixed order (the order of `written`).
    // prepare() refused 'seg' and 'rtstruct' without a DICOM series.
    const bool seg = outs.dicom_seg && input.series;
    const bool rtstruct = outs.rtstruct && input.series;
    const std::string label_path =
        outs.label_map ? staging.path("segmentation." + outs.label_format) : "";
    const std::string seg_path = seg ? staging.path("segmentation.dcm") : "";
    const std::string rtstruct_path = rtstruct ? staging.path("rtstruct.dcm") : "";
    const std::string json_path = outs.statistics ? staging.path("statistics.json") : "";
    const std::string csv_path = outs.statistics ? staging.path("statistics.csv") : "";
    const std::string preview_path = outs.preview ? staging.path("preview.png") : "";
    const std::string ts_stats_path =
        outs.totalseg_statistics ? staging.path("statistics_totalsegmentator.json") : "";
    std::vector<LabelInfo> by_value = labels;  // masks and TotalSegmentator's JSON: value order
    std::sort(by_value.begin(), by_value.end(),
              [](const LabelInfo& a, const LabelInfo& b) { return a.value < b.value; });
    std::vector<std::string> mask_paths;
    if (outs.masks)
        for (const LabelInfo& l : by_value) mask_paths.push_back(staging.path(maskFilePath(l)));
    std::vector<std::string> probability_paths;  // per score channel; empty: not written
    if (outs.probabilities)
        for (int value : model.channelLabelValues()) {
            const bool wanted =
                label_values.empty() ||
                std::find(label_values.begin(), label_values.end(), value) != label_values.end();
            probability_paths.push_back(
                wanted ? staging.path("probabilities_" + std::to_string(value) + ".nii.gz")
                       : std::string());
        }

    std::vector<std::function<Status()>> jobs;
    // Labels outside model.json's plausible_volume_ml (pipeline/input_checks.h).
    std::vector<std::string> implausible;
    jobs.emplace_back([&]() -> Status {  // statistics: report.statistics is always filled
        VOXSEG_ASSIGN_OR_RETURN(report.statistics,
                                computeStatistics(report.label_map, &input.volume, labels));
        report.statistics.measurements = computeMeasurements(described, report.label_map);
        implausible = flagImplausibleVolumes(described, report.statistics);
        report.statistics.warnings = report.warnings;  // no other job touches the warnings
        report.statistics.warnings.insert(report.statistics.warnings.end(), implausible.begin(),
                                          implausible.end());
        if (!outs.statistics) return Status::ok();
        VOXSEG_RETURN_IF_ERROR(writeStatisticsJson(report.statistics, json_path));
        return writeStatisticsCsv(report.statistics, csv_path);
    });
    // DICOM outputs lie on the acquired images: a resampled series' labels mapped back once.
    if (seg || rtstruct) {
        auto mapped = io::labelsOnAcquiredImages(report.label_map, *input.series, options.threads);
        if (!mapped.isOk()) return mapped.status();
        acquired = std::move(*mapped);
    }
    DicomSegmentationOptions dicom;
    dicom.algorithm_name = model.name;
    dicom.algorithm_version = model.version;
    dicom.seg_type = outs.seg_type;
    dicom.threads = options.output_threads == 1 ? 1 : options.threads;
    if (seg)
        jobs.emplace_back([&] {
            return writeDicomSegmentation(DicomSegmentationKind::kSeg, *acquired, *input.series,
                                          modelSegmentDescriptions(described), dicom, seg_path);
        });
    if (rtstruct)
        jobs.emplace_back([&] {
            return writeDicomSegmentation(DicomSegmentationKind::kRtStruct, *acquired,
                                          *input.series, modelSegmentDescriptions(described), dicom,
                                          rtstruct_path);
        });
    if (outs.label_map)
        jobs.emplace_back([&] { return io::writeImage(report.label_map, label_path); });
    if (outs.preview)
        jobs.emplace_back([&] {
            return writePreview(input.volume, report.label_map, labels, preview_path).status();
        });
    if (outs.probabilities)
        jobs.emplace_back([&]() -> Status {
            engine::Tensor probs = engine::scoresAsFloat32(scores);
            if (model.output == engine::OutputKind::kSigmoid)
                engine::sigmoidInPlace(probs);
            else
                engine::softmaxChannelsInPlace(probs);
            for (int64_t c = 0; c < probs.dim(0); ++c) {
                VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());
                if (probability_paths[static_cast<size_t>(c)].empty()) continue;  // --labels
                VOXSEG_ASSIGN_OR_RETURN(Volume p,
                                        scoreChannelToOriginal(probs, c, work.pre.record));
                VOXSEG_RETURN_IF_ERROR(
                    io::writeImage(p, probability_paths[static_cast<size_t>(c)]));
            }
            return Status::ok();
        });
    if (outs.masks)
        jobs.emplace_back(
            [&] { return writeLabelMasks(report.label_map, by_value, mask_paths, progress); });
    if (outs.totalseg_statistics)
        jobs.emplace_back([&]() -> Status {
            // TotalSegmentator --fast measures on its resampled grid, otherwise on the input's.
            const bool stage_grid = !report.stage_grid_labels.empty();
            VOXSEG_ASSIGN_OR_RETURN(
                auto ts,
                computeTotalSegStatistics(stage_grid ? report.stage_grid_labels : report.label_map,
                                          stage_grid ? report.stage_grid_image : input.volume,
                                          by_value, !options.ts_stats_include_incomplete));
            return writeFileAtomically(ts_stats_path, totalSegStatisticsToJson(ts));
        });
    jobs.emplace_back([&]() -> Status {  // run.json's digest of the input files
        VOXSEG_ASSIGN_OR_RETURN(digest, inputDigest(input, input_path));
        return Status::ok();
    });
    VOXSEG_RETURN_IF_ERROR(runSideBySide(jobs, options.output_threads));
    VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());
    for (const std::string& w : implausible) {  // run.json "warnings" and the log
        log::warning(kComponent, "{}", w);
        report.warnings.push_back(w);
    }
    report.timings.push_back(stageDone("outputs", t));

    return Status::ok();
}

nlohmann::json Segmenter::Impl::runRecord(const StudyInput& input, const SegmentReport& report,
                                          const std::string& input_path, const std::string& digest,
                                          const io::AcquiredLabels* acquired,
                                          double peak_before_run) const {
    const Geometry g = input.volume.geometry();
    // run.json: what was run on what, how, and how long it took.
    nlohmann::json run;
    run["voxseg_version"] = VOXSEG_VERSION;
    run["input"] = {{"path", input_path}};
    if (!digest.empty()) run["input"]["sha256"] = digest;
    if (input.series) {
        // No SeriesDescription: free text is never kept in records (core/free_text.h).
        run["series"] = {{"index", input.series->index},
                         {"series_uid", input.series->series_uid},
                         {"modality", input.series->modality},
                         {"files", input.series->num_files}};
    }
    run["geometry"] = {{"size", g.size},
                       {"spacing_mm", g.spacing},
                       {"origin_lps_mm", g.origin},
                       {"direction", g.direction}};
    run["grids"] = outputGrids(input, options.outputs, acquired);
    run["model"] = {{"name", model.name},
                    {"version", model.version},
                    {"sha256", model_sha256},
                    {"folder", model.folder.string()},
                    {"ensemble_members", model.models.size()}};
    if (!options.labels.empty()) run["labels"] = options.labels;  // --labels
    if (!input.channel_notes.empty()) run["channels"] = input.channel_notes;
    run["device"] = {{"backend", backend->name()},
                     {"description", backend->deviceDescription()},
                     {"precision", report.precision},
                     {"precision_reason", report.precision_reason}};
    run["inference"] = {{"overlap", window_options.overlap},
                        {"sigma_scale", window_options.sigma_scale},
                        {"mirror_axes", window_options.mirror_axes},
                        {"batch", window_options.batch},
                        {"accumulator", accumulatorName(window_options.accumulator)},
                        {"window", window ? window->describe() : "stages"},
                        {"patches", report.patches},
                        {"accumulator_bytes", report.accumulator_bytes}};
    nlohmann::json timings = nlohmann::json::object();
    timings["model_load"] = load_seconds;
    timings["input_load"] = input.load_seconds;
    nlohmann::json peak = nlohmann::json::object();
    peak["before_run"] = peak_before_run;
    for (const auto& st : report.timings) {
        timings[st.stage] = st.seconds;
        peak[st.stage] = st.peak_rss_mib;
    }
    run["timings_s"] = timings;
    run["peak_rss_mib"] = peak;  // high-water mark at the end of each stage
    run["warnings"] = report.warnings;
    if (model.hasStages()) {
        nlohmann::json stages = nlohmann::json::array();
        for (const StageTrace& st : report.stages) {
            nlohmann::json j = {{"name", st.name},
                                {"region_begin", st.region.begin},
                                {"region_size", st.region.size},
                                {"network_size", st.network},
                                {"patches", st.patches},
                                {"label_voxels", st.label_voxels},
                                {"seconds", st.seconds}};
            if (st.percentiles) j["percentiles"] = *st.percentiles;
            stages.push_back(j);
        }
        run["stages"] = stages;
        run["empty_result"] = report.empty_result;
        nlohmann::json ms = nlohmann::json::object();
        for (const Measurement& x : report.statistics.measurements) ms[x.name] = x.value;
        run["measurements"] = ms;
        if (!model.citation.empty()) run["model"]["citation"] = model.citation;
    }
    return run;
}

Result<SegmentReport> Segmenter::write(const StudyInput& input, SegmentWork&& work,
                                       const std::string& input_path, const std::string& out_dir,
                                       const Progress& progress) const {
    const Impl& s = *impl_;
    SegmentReport report = std::move(work.report);
    const engine::Tensor scores = std::move(work.scores);
    Staging staging(out_dir);
    VOXSEG_RETURN_IF_ERROR(staging.create());

    // Outputs, staged. They are separate files, written side by side: the DICOM SEG alone takes
    // as long as the others together on a 512x512x300 CT.
    const Status written = [&]() -> Status {
        std::string digest;
        std::optional<io::AcquiredLabels> acquired;
        VOXSEG_RETURN_IF_ERROR(s.writeOutputs(input, work, scores, report, staging, acquired,
                                              digest, input_path, progress));
        const nlohmann::json run =
            s.runRecord(input, report, input_path, digest, acquired ? &*acquired : nullptr,
                        work.peak_rss_before_mib);
        return writeFileAtomically(
            staging.path("run.json"),
            run.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    }();
    if (!written.isOk()) return staging.named(written);
    VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());

    VOXSEG_ASSIGN_OR_RETURN(report.written, staging.commit());
    progress.report(1.0, "done");
    return report;
}

}  // namespace voxseg::pipeline
