// `voxseg convert <path> -o <file>`: one volume out of a DICOM series or an image file; or, with
// `--referenced <series>`, an RTSTRUCT's ROIs as a label map on that series' grid.
#include "app/commands.h"
#include "app/series_table.h"
#include "core/atomic_file.h"
#include "core/log.h"
#include "io/dicom_series.h"
#include "io/image_io.h"
#include "io/rtstruct_reader.h"
#include "pipeline/segment.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <map>

namespace voxseg::app {
namespace {

constexpr const char* kComponent = "convert";

io::DicomLoadOptions loadOptions(const ConvertOptions& o) {
    io::DicomLoadOptions load;
    load.tilt = o.refuse_tilt ? io::IrregularPolicy::kRefuse : io::IrregularPolicy::kResample;
    load.uneven_spacing =
        o.refuse_uneven ? io::IrregularPolicy::kRefuse : io::IrregularPolicy::kResample;
    load.allow_gaps = !o.no_gaps;
    load.max_voxels = static_cast<int64_t>(o.max_voxels);
    load.threads = o.threads;
    return load;
}

// "labels.nii.gz" -> "labels.rois.json": which label value is which ROI.
std::string sidecarPath(const std::string& output) {
    const std::string ext = io::imageExtension(output);
    return output.substr(0, output.size() - (ext.size() < output.size() ? ext.size() : 0)) +
           ".rois.json";
}

Result<Volume> loadDicom(const ConvertOptions& o, const CommandContext& ctx, bool* ambiguous) {
    std::vector<io::SeriesCandidate> candidates;
    auto study = pipeline::loadStudy(o.input, o.series, loadOptions(o),
                                     ctx.progress().sub(0.0, 0.6), &candidates);
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

// The RTSTRUCT `o.input` onto the grid `referenced` loads to; the label map and its sidecar.
ExitCode convertRtStruct(const ConvertOptions& o, const CommandContext& ctx,
                         std::chrono::steady_clock::time_point start) {
    const std::string& referenced = o.referenced;
    std::error_code ec;
    if (!std::filesystem::exists(referenced, ec))
        return fail(notFound("referenced series not found", referenced), Stage::kInput);
    if (!io::isRtStruct(o.input))
        return fail(invalidArgument("--referenced is for RTSTRUCT inputs, and this is not a DICOM "
                                    "RT Structure Set",
                                    o.input),
                    Stage::kInput);
    const std::string sidecar = sidecarPath(o.output);
    if (Status st = AtomicFile(sidecar).checkWritable(); !st.isOk())
        return fail(st, Stage::kOutput);
    std::vector<io::SeriesCandidate> candidates;
    auto study = pipeline::loadStudy(referenced, o.series, loadOptions(o),
                                     ctx.progress().sub(0.0, 0.5), &candidates);
    ctx.bar->clear();
    if (!study.isOk()) {
        if (study.status().code() == StatusCode::kAmbiguous) {
            printCandidates(candidates, referenced);
            log::error("", "{}", study.status().toString());
            return ExitCode::kAmbiguousSeries;
        }
        return fail(study.status(), Stage::kInput);
    }
    if (!study->series)
        return fail(invalidArgument("--referenced must be the DICOM series the RTSTRUCT outlines, "
                                    "not an image file",
                                    referenced),
                    Stage::kInput);
    io::RtStructReadOptions read;
    read.grid = study->volume.geometry();
    read.threads = o.threads;
    auto rt = io::readRtStruct(o.input, *study->series, read);
    if (!rt.isOk()) return fail(rt.status(), Stage::kInput);
    const Volume& labels = *rt->grid_labels;

    // Voxels per label value on the written grid (the reader counts acquired pixels).
    std::map<int, int64_t> voxels;
    const int64_t n = labels.geometry().voxelCount();
    if (const uint8_t* d = labels.data<uint8_t>())
        for (int64_t i = 0; i < n; ++i) voxels[d[i]] += d[i] != 0;
    else if (const uint16_t* d16 = labels.data<uint16_t>())
        for (int64_t i = 0; i < n; ++i) voxels[d16[i]] += d16[i] != 0;

    io::ImageWriteOptions write;
    write.compression_level = o.gzip_level;
    write.threads = o.threads;
    if (Status st = io::writeImage(labels, o.output, write, ctx.progress().sub(0.5, 1.0));
        !st.isOk()) {
        ctx.bar->clear();
        return fail(st, Stage::kOutput);
    }
    ctx.bar->clear();
    nlohmann::json j;
    j["rtstruct"] = o.input;
    j["label_map"] = o.output;
    j["referenced_series_uid"] = study->series->series_uid;
    j["frame_of_reference_uid"] = rt->frame_of_reference_uid;
    j["structure_set_label"] = rt->structure_set_label;
    j["overlapping_voxels"] = rt->overlapping_voxels;
    j["rois"] = nlohmann::json::array();
    for (const io::RtRoi& roi : rt->rois) {
        const int value = roi.description.value;
        j["rois"].push_back({{"label_value", value},
                             {"roi_number", roi.roi_number},
                             {"name", roi.description.name},
                             {"color", roi.description.color},
                             {"interpreted_type", roi.interpreted_type},
                             {"contours", roi.contours},
                             {"contours_placed", roi.contours_placed},
                             {"voxels", value > 0 && voxels.count(value) ? voxels[value] : 0},
                             {"warnings", roi.warnings}});
        log::info(kComponent, "label {} = ROI {} '{}' ({} voxels)", value, roi.roi_number,
                  roi.description.name, value > 0 && voxels.count(value) ? voxels[value] : 0);
    }
    j["warnings"] = rt->warnings;
    if (Status st = writeFileAtomically(
            sidecar, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
        !st.isOk())
        return fail(st, Stage::kOutput);

    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const Geometry g = labels.geometry();
    if (!ctx.quiet)
        std::printf(
            "wrote %s: %zu ROI(s) as labels on %lldx%lldx%lld %s, label names in %s "
            "(%.2f s)\n",
            o.output.c_str(), rt->rois.size(), static_cast<long long>(g.size[0]),
            static_cast<long long>(g.size[1]), static_cast<long long>(g.size[2]),
            pixelTypeName(labels.pixelType()), sidecar.c_str(), seconds);
    return ExitCode::kOk;
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
    addMaxVoxelsOption(cmd, o.max_voxels);
    cmd->add_option("--threads", o.threads, "Threads for decoding and compression (0 = all cores)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--gzip-level", o.gzip_level, "Deflate level for .nii.gz, 1..12 (default 6)")
        ->check(CLI::Range(1, 12));
    cmd->add_option("--referenced", o.referenced,
                    "PATH is an RTSTRUCT: write its ROIs as a label map on the grid of this DICOM "
                    "series (folder/files; --series picks one), label values in "
                    "<output>.rois.json");
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

    if (!o.referenced.empty()) return convertRtStruct(o, ctx, start);
    if (io::isRtStruct(o.input))
        return fail(invalidArgument("this is an RTSTRUCT: give the image series it outlines with "
                                    "--referenced <series folder>",
                                    o.input),
                    Stage::kInput);

    const Progress progress = ctx.progress();
    Result<Volume> volume = internalError("no input read", o.input);
    if (io::isImageFile(o.input)) {
        if (!o.series.empty())
            log::warning(kComponent, "--series ignored: {} is an image file", o.input);
        volume = io::readImage(o.input, progress.sub(0.0, 0.4), static_cast<int64_t>(o.max_voxels));
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
