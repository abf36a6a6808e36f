// `voxseg convert <path> -o <file>`: one volume out of a DICOM series or an image file.
#include "app/commands.h"
#include "app/series_table.h"
#include "core/atomic_file.h"
#include "core/log.h"
#include "io/dicom_series.h"
#include "io/image_io.h"
#include "pipeline/segment.h"

#include <chrono>
#include <filesystem>

namespace voxseg::app {
namespace {

constexpr const char* kComponent = "convert";

Result<Volume> loadDicom(const ConvertOptions& o, const CommandContext& ctx, bool* ambiguous) {
    io::DicomLoadOptions load;
    load.tilt = o.refuse_tilt ? io::IrregularPolicy::kRefuse : io::IrregularPolicy::kResample;
    load.uneven_spacing =
        o.refuse_uneven ? io::IrregularPolicy::kRefuse : io::IrregularPolicy::kResample;
    load.allow_gaps = !o.no_gaps;
    load.threads = o.threads;
    std::vector<io::SeriesCandidate> candidates;
    auto study =
        pipeline::loadStudy(o.input, o.series, load, ctx.progress().sub(0.0, 0.6), &candidates);
    if (!study.isOk()) {
        if (study.status().code() == StatusCode::kAmbiguous) {
            *ambiguous = true;
            ctx.bar->clear();
            printCandidates(candidates, o.input);
        }
        return study.status();
    }
    log::info(kComponent, "series {} (index {}): {} files", study->series->series_uid,
              study->series->index, study->series->num_files);
    return std::move(study->volume);
}

}  // namespace

CLI::App* addConvertCommand(CLI::App& app, ConvertOptions& o) {
    CLI::App* cmd = app.add_subcommand(
        "convert", "Convert one DICOM series (or an image file) to .nii.gz, .nii, .nrrd or .mha");
    cmd->add_option("path", o.input, "DICOM folder/file/DICOMDIR, or an image file")->required();
    cmd->add_option(
           "-o,--output", o.output,
           "Output file: .nii.gz, .nii, .nrrd, .nhdr, .mha or .mhd (replaced if it exists)")
        ->required();
    cmd->add_option("--series", o.series,
                    "Which series when there are several: INDEX (from `voxseg info`) or "
                    "SeriesInstanceUID");
    cmd->add_flag("--refuse-tilt", o.refuse_tilt,
                  "Fail on gantry-tilted stacks instead of resampling them to an orthogonal grid");
    cmd->add_flag("--refuse-uneven", o.refuse_uneven,
                  "Fail on unevenly spaced slices instead of resampling to even spacing");
    cmd->add_flag("--no-gaps", o.no_gaps, "Fail when slices are missing instead of warning");
    cmd->add_option("--threads", o.threads, "Threads for decoding and compression (0 = all cores)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--gzip-level", o.gzip_level, "Deflate level for .nii.gz, 1..12 (default 6)")
        ->check(CLI::Range(1, 12));
    return cmd;
}

ExitCode runConvert(const ConvertOptions& o, const CommandContext& ctx) {
    const auto start = std::chrono::steady_clock::now();
    // Cheap checks first, so a bad output path fails before minutes of decoding.
    if (io::imageFormatFromPath(o.output) == io::ImageFormat::kUnknown)
        return fail(invalidArgument("unknown output format: use a name ending in .nii.gz, .nii, "
                                    ".nrrd, .nhdr, .mha or .mhd",
                                    o.output),
                    Stage::kOutput);
    std::error_code ec;
    if (std::filesystem::is_directory(o.output, ec))
        return fail(invalidArgument("output is a folder: give a file name", o.output),
                    Stage::kOutput);
    if (Status st = AtomicFile(o.output).checkWritable(); !st.isOk())
        return fail(st, Stage::kOutput);
    if (!std::filesystem::exists(o.input, ec))
        return fail(notFound("input not found", o.input), Stage::kInput);

    const Progress progress = ctx.progress();
    Result<Volume> volume = internalError("no input read", o.input);
    if (io::isImageFile(o.input)) {
        if (!o.series.empty())
            log::warning(kComponent, "--series ignored: {} is an image file", o.input);
        volume = io::readImage(o.input, progress.sub(0.0, 0.4));
    } else {
        bool ambiguous = false;
        volume = loadDicom(o, ctx, &ambiguous);
        if (!volume.isOk() && ambiguous) {
            log::error("", "{}", volume.status().toString());
            return ExitCode::kAmbiguousSeries;
        }
    }
    ctx.bar->clear();
    if (!volume.isOk()) return fail(volume.status(), Stage::kInput);
    for (const auto& w : volume->info().warnings) log::warning(kComponent, "{}", w);

    io::ImageWriteOptions write;
    write.compression_level = o.gzip_level;
    write.threads = o.threads;
    const Status st = io::writeImage(*volume, o.output, write, progress.sub(0.6, 1.0));
    ctx.bar->clear();
    if (!st.isOk()) return fail(st, Stage::kOutput);

    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const Geometry g = volume->geometry();
    if (!ctx.quiet)
        std::printf("wrote %s: %lldx%lldx%lld %s, spacing %.4gx%.4gx%.4g mm, %s (%.2f s)\n",
                    o.output.c_str(), static_cast<long long>(g.size[0]),
                    static_cast<long long>(g.size[1]), static_cast<long long>(g.size[2]),
                    pixelTypeName(volume->pixelType()), g.spacing[0], g.spacing[1], g.spacing[2],
                    g.orientationCode().c_str(), seconds);
    return ExitCode::kOk;
}

}  // namespace voxseg::app
