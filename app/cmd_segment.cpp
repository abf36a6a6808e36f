// `voxseg segment <input> -m <model> -o <outdir>`: one study in, segmentation outputs out.
#include "app/commands.h"
#include "app/series_table.h"
#include "core/log.h"
#include "pipeline/channels.h"
#include "pipeline/segment.h"
#include "pipeline/segment_options_schema.h"

#include <cstdio>
#include <filesystem>
#include <functional>
#include <sstream>

namespace voxseg::app {
namespace {
constexpr const char* kComponent = "segment";

// An option whose text is turned into a typed value by `parse` (the engine's own parsers, so
// names are parsed in one place); the validator shows the parser's message.
template <typename T>
void addParsedOption(CLI::App* cmd, const std::string& flag, T& target,
                     std::function<Result<T>(const std::string&)> parse, const std::string& help,
                     const std::string& type_name, const std::string& default_name) {
    cmd->add_option_function<std::string>(
           flag, [&target, parse](const std::string& text) { target = *parse(text); }, help)
        ->check(CLI::Validator(
            [parse](std::string& text) {
                auto value = parse(text);
                return value.isOk() ? std::string() : value.status().message();
            },
            type_name))
        ->default_str(default_name);
}

}  // namespace

void addSegmentModelOptions(CLI::App* cmd, SegmentCommandOptions& o) {
    cmd->add_option("--series", o.series, "Which series: INDEX (see `voxseg info`) or UID");
    // Help, ranges and defaults of the per-run options come from the schema the viewer's Run
    // model dialog is built from (pipeline/segment_options_schema.h).
    using pipeline::segmentOptionSpec;
    addParsedOption<engine::DeviceSpec>(
        cmd, "--device", o.device, [](const std::string& n) { return engine::parseDevice(n, ""); },
        segmentOptionSpec("--device").help, "DEVICE", segmentOptionSpec("--device").default_text);
    addParsedOption<engine::Precision>(cmd, "--precision", o.precision, engine::parsePrecision,
                                       segmentOptionSpec("--precision").help, "PRECISION",
                                       segmentOptionSpec("--precision").default_text);
    cmd->add_option("--overlap", o.overlap, segmentOptionSpec("--overlap").help)
        ->check(CLI::Range(segmentOptionSpec("--overlap").min, segmentOptionSpec("--overlap").max));
    auto* tta = cmd->add_flag("--tta", o.tta, segmentOptionSpec("--tta").help);
    cmd->add_flag("--no-tta", o.no_tta, segmentOptionSpec("--no-tta").help)->excludes(tta);
    cmd->add_option("--batch", o.batch, segmentOptionSpec("--batch").help)
        ->check(CLI::Range(segmentOptionSpec("--batch").min, segmentOptionSpec("--batch").max));
    addParsedOption<engine::DType>(cmd, "--accumulator", o.accumulator, pipeline::parseAccumulator,
                                   segmentOptionSpec("--accumulator").help, "fp16|fp32",
                                   segmentOptionSpec("--accumulator").default_text);
    cmd->add_option("--outputs", o.outputs,
                    "Comma-separated: nifti, seg, rtstruct, stats, preview, probabilities");
    cmd->add_option("--seg-type", o.seg_type,
                    "DICOM SEG kind: binary (Segmentation IOD, default) or labelmap (Label Map "
                    "Segmentation IOD, DICOM 2024)")
        ->check(CLI::IsMember({"binary", "labelmap"}));
    cmd->add_option("--format", o.label_format, "Label map format: nii.gz, nii, nrrd, mha")
        ->check(CLI::IsMember({"nii.gz", "nii", "nrrd", "mha"}));
    cmd->add_flag("--largest-component", o.largest_component,
                  segmentOptionSpec("--largest-component").help);
    cmd->add_option("--min-component-ml", o.min_component_ml,
                    segmentOptionSpec("--min-component-ml").help)
        ->check(CLI::NonNegativeNumber);
    cmd->add_flag("--fill-holes", o.fill_holes, segmentOptionSpec("--fill-holes").help);
    cmd->add_flag("--ignore-modality", o.ignore_modality,
                  "Run even when the input modality differs from the model's");
    cmd->add_flag("--refuse-tilt", o.refuse_tilt, "Fail on gantry-tilted stacks");
    cmd->add_flag("--refuse-uneven", o.refuse_uneven, "Fail on unevenly spaced slices");
    cmd->add_option("--max-voxels", o.max_voxels,
                    "Refuse DICOM series that claim more voxels (default 2e9)")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--threads", o.threads, "CPU threads (0 = all cores)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--trusted-keys", o.trusted_keys,
                    "Public keys you trust (lines of `voxseg model keygen` .pub files): a signed "
                    "model package must verify against one of them");
    cmd->add_flag("--require-signed", o.require_signed,
                  "Refuse model packages that are not signed by a --trusted-keys key");
    cmd->add_option("--labels", o.labels,
                    "Comma-separated label names (model.json): write only these structures and "
                    "run only the stages they need");
    cmd->add_option("--channel", o.channels,
                    "NAME=PATH or NAME=SERIES (repeatable): the series or file of model channel "
                    "NAME (default: model.json's rules pick them from the DICOM study)");
}

Result<pipeline::SegmentOptions> toSegmentOptions(const SegmentCommandOptions& o) {
    pipeline::SegmentOptions so;
    so.device = o.device;
    so.precision = o.precision;
    if (o.overlap >= 0) so.overlap = o.overlap;
    so.tta = o.tta;
    so.no_tta = o.no_tta;
    so.batch = o.batch;
    so.accumulator = o.accumulator;
    so.threads = o.threads;
    so.ignore_modality = o.ignore_modality;
    so.trust.require_signed = o.require_signed;
    so.trust.trusted_keys = o.trusted_keys;
    std::stringstream names(o.labels);
    for (std::string name; std::getline(names, name, ',');)
        if (!name.empty()) so.labels.push_back(name);
    if (!o.labels.empty() && so.labels.empty())
        return invalidArgument("--labels lists no label name");
    if (o.largest_component || o.min_component_ml > 0 || o.fill_holes) {
        pipeline::PostprocessOptions p;
        p.largest_component = o.largest_component;
        p.min_component_ml = o.min_component_ml;
        p.fill_holes = o.fill_holes ? pipeline::HoleFilling::k3D : pipeline::HoleFilling::kNone;
        so.postprocess_all = p;
    }
    VOXSEG_ASSIGN_OR_RETURN(so.outputs, pipeline::parseOutputs(o.outputs));
    so.outputs.label_format = o.label_format;
    VOXSEG_ASSIGN_OR_RETURN(so.outputs.seg_type, io::parseSegType(o.seg_type));
    return so;
}

io::DicomLoadOptions toDicomOptions(const SegmentCommandOptions& o) {
    io::DicomLoadOptions dicom;
    dicom.tilt = o.refuse_tilt ? io::IrregularPolicy::kRefuse : io::IrregularPolicy::kResample;
    dicom.uneven_spacing =
        o.refuse_uneven ? io::IrregularPolicy::kRefuse : io::IrregularPolicy::kResample;
    dicom.max_voxels = static_cast<int64_t>(o.max_voxels);
    dicom.threads = o.threads;
    return dicom;
}

CLI::App* addSegmentCommand(CLI::App& app, SegmentCommandOptions& o) {
    CLI::App* cmd = app.add_subcommand(
        "segment", "Segment one study (DICOM folder/file or image file) with a model package");
    cmd->add_option("input", o.input, "DICOM folder/file/DICOMDIR, or .nii.gz/.nii/.nrrd/.mha")
        ->required();
    cmd->add_option("-m,--model", o.model, "Model package folder (model.json + model.onnx)")
        ->required();
    cmd->add_option("-o,--output", o.output, "Output folder (created; outputs inside replaced)")
        ->required();
    addSegmentModelOptions(cmd, o);
    return cmd;
}

ExitCode runSegment(const SegmentCommandOptions& o, const CommandContext& ctx) {
    auto so = toSegmentOptions(o);
    if (!so.isOk()) return fail(so.status(), Stage::kInput);

    // Cheap checks before loading anything.
    std::error_code ec;
    if (!std::filesystem::exists(o.input, ec))
        return fail(notFound("input not found", o.input), Stage::kInput);
    if (std::filesystem::exists(o.output, ec) && !std::filesystem::is_directory(o.output, ec))
        return fail(invalidArgument("output exists and is not a folder", o.output), Stage::kOutput);

    std::string warning;
    auto segmenter = pipeline::Segmenter::create(o.model, *so, &warning);
    if (!warning.empty()) log::warning(kComponent, "{}", warning);
    // A missing or damaged model is an input problem; a missing device has its own exit code.
    if (!segmenter.isOk()) return fail(segmenter.status(), Stage::kInput);
    const Progress progress = ctx.progress();
    const io::DicomLoadOptions dicom = toDicomOptions(o);
    auto assignments = pipeline::parseChannelAssignments(o.channels);
    if (!assignments.isOk()) return fail(assignments.status(), Stage::kInput);
    std::vector<io::SeriesCandidate> candidates;
    auto input = pipeline::loadStudyChannels(o.input, o.series, *assignments, segmenter->model(),
                                             dicom, progress.sub(0.0, 0.15), &candidates);
    ctx.bar->clear();
    if (!input.isOk()) {
        if (input.status().code() == StatusCode::kAmbiguous) printCandidates(candidates, o.input);
        return fail(input.status(), Stage::kInput);
    }
    for (const auto& w : input->volume.info().warnings) log::warning(kComponent, "{}", w);

    auto report = segmenter->run(*input, o.input, o.output, progress.sub(0.15, 1.0));
    ctx.bar->clear();
    if (!report.isOk()) {
        const Status& st = report.status();
        const bool output_problem = st.code() == StatusCode::kIoError;
        return fail(st, output_problem ? Stage::kOutput : Stage::kInput);
    }
    if (!ctx.quiet) {
        std::printf("%-28s %10s %10s\n", "label", "voxels", "mL");
        for (const auto& l : report->statistics.labels)
            std::printf("%-28s %10lld %10.2f\n", l.name.c_str(), static_cast<long long>(l.voxels),
                        l.volume_ml);
        double total = 0;
        for (const auto& t : report->timings) total += t.seconds;
        std::printf("%s, %s, %lld patches, %.2f s; outputs in %s\n", report->backend.c_str(),
                    report->precision.c_str(), static_cast<long long>(report->patches), total,
                    o.output.c_str());
    }
    return ExitCode::kOk;
}

}  // namespace voxseg::app
