// `voxseg segment <input> -m <model> -o <outdir>`: one study in, segmentation outputs out.
#include "app/commands.h"
#include "app/series_table.h"
#include "core/log.h"
#include "pipeline/channels.h"
#include "pipeline/segment.h"
#include "pipeline/segment_options_schema.h"

#include <cstdio>
#include <filesystem>

namespace voxseg::app {
namespace {
constexpr const char* kComponent = "segment";

// The per-run options (device, precision, overlap, batch, accumulator, TTA, post-processing,
// outputs, SEG type, format, labels, modality check) registered from the option schema the
// viewer's Run model dialog and node.json's routes take theirs from
// (pipeline/segment_options_schema.h): flag, help, default, and a validator that is the schema's
// own apply. Values are kept as text in command-line order and applied by toSegmentOptions with
// the same functions, so nothing about them is written twice.
void addSchemaOptions(CLI::App* cmd, SegmentCommandOptions& o) {
    using Kind = pipeline::SegmentOptionSpec::Kind;
    // The schema's expert options (device, precision, batch, accumulator) are listed apart, as
    // the viewer's dialog folds them into "Advanced".
    const char* advanced = "Advanced (the defaults suit most runs)";
    for (const auto& spec : pipeline::segmentOptionSchema()) {
        const std::string flag = spec.flag;
        if (spec.kind == Kind::kFlag) {
            CLI::Option* f = cmd->add_flag_callback(
                flag, [&o, flag] { o.schema_values.emplace_back(flag, "true"); }, spec.help);
            if (spec.advanced) f->group(advanced);
            continue;
        }
        std::string type_name = spec.kind == Kind::kList   ? "LIST"
                                : spec.kind == Kind::kText ? "TEXT"
                                                           : "NUMBER";
        if (spec.kind == Kind::kChoice) {
            type_name.clear();
            for (const auto& c : spec.choices) type_name += (type_name.empty() ? "" : "|") + c;
        }
        cmd->add_option_function<std::string>(
               flag, [&o, flag](const std::string& t) { o.schema_values.emplace_back(flag, t); },
               spec.help)
            ->check(CLI::Validator(
                [&spec](std::string& text) {
                    pipeline::SegmentOptions scratch;
                    const Status status = spec.apply(text, scratch);
                    // CLI11 names the option itself.
                    return status.isOk() ? std::string()
                                         : pipeline::segmentOptionMessage(spec, status);
                },
                type_name))
            ->default_str(spec.default_text.empty() && spec.kind == Kind::kNumber
                              ? "model's"
                              : spec.default_text)
            ->group(spec.advanced ? advanced : "Options");  // "Options": CLI11's default
    }
}

}  // namespace

void addMaxVoxelsOption(CLI::App* command, double& max_voxels) {
    command
        ->add_option("--max-voxels", max_voxels,
                     "Refuse inputs (DICOM series, NIfTI, NRRD, MetaImage) that claim more voxels, "
                     "before reading them (default 2e9)")
        ->check(CLI::PositiveNumber);
}

void addSegmentModelOptions(CLI::App* cmd, SegmentCommandOptions& o) {
    cmd->add_option("--series", o.series, "Which series: INDEX (see `voxseg info`) or UID");
    addSchemaOptions(cmd, o);
    cmd->add_flag("--refuse-tilt", o.refuse_tilt, "Fail on gantry-tilted stacks");
    cmd->add_flag("--refuse-uneven", o.refuse_uneven, "Fail on unevenly spaced slices");
    addMaxVoxelsOption(cmd, o.max_voxels);
    cmd->add_option("--threads", o.threads, "CPU threads (0 = all cores)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--trusted-keys", o.trusted_keys,
                    "Public keys you trust (lines of `voxseg model keygen` .pub files): a signed "
                    "model package must verify against one of them");
    cmd->add_flag("--require-signed", o.require_signed,
                  "Refuse model packages that are not signed by a --trusted-keys key");
    cmd->add_option("--channel", o.channels,
                    "NAME=PATH or NAME=SERIES (repeatable): the series or file of model channel "
                    "NAME (default: model.json's rules pick them from the DICOM study)");
}

Result<pipeline::SegmentOptions> toSegmentOptions(const SegmentCommandOptions& o) {
    pipeline::SegmentOptions so;
    for (const auto& [flag, text] : o.schema_values)
        VOXSEG_RETURN_IF_ERROR(pipeline::applySegmentOption(flag, text, so));
    so.threads = o.threads;
    so.trust.require_signed = o.require_signed;
    so.trust.trusted_keys = o.trusted_keys;
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
    so->networks_resident = false;  // one study: a staged package's networks one at a time

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
