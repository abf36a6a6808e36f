// `voxseg info <path...>`: what volumes the inputs hold, without decoding pixels.
#include "app/commands.h"
#include "app/series_table.h"
#include "core/log.h"
#include "io/dicom_series.h"
#include "io/image_io.h"

#include <filesystem>

namespace voxseg::app {

ExitCode fail(const Status& status, Stage stage) {
    if (status.code() == StatusCode::kCancelled) {
        log::error("", "interrupted: stopped before finishing; no output was written");
        return ExitCode::kCancelled;
    }
    log::error("", "{}", status.toString());
    return exitCodeFor(status, stage);
}

CLI::App* addInfoCommand(CLI::App& app, InfoOptions& o) {
    CLI::App* cmd = app.add_subcommand(
        "info", "List the volumes found in DICOM folders/files or image files (no pixel decoding)");
    cmd->add_option("path", o.paths,
                    "DICOM folders, DICOM files, DICOMDIR, or .nii/.nii.gz/.nrrd/.mha files")
        ->required();
    cmd->add_flag("--json", o.json, "Print JSON instead of a table");
    cmd->add_flag("--show-phi", o.show_phi,
                  "Also print patient name, ID and birth date, and descriptions with the "
                  "patient's name left in (never logged)");
    cmd->add_option("--threads", o.threads, "Header-reading threads (0 = all cores)")
        ->check(CLI::NonNegativeNumber);
    return cmd;
}

ExitCode runInfo(const InfoOptions& o, const CommandContext& ctx) {
    InfoReport report;
    std::vector<std::string> dicom_inputs;
    for (const auto& path : o.paths) {
        std::error_code ec;
        if (!std::filesystem::exists(path, ec))
            return fail(notFound("input not found", path), Stage::kInput);
        if (io::isImageFile(path)) {
            auto header = io::readImageHeader(path);
            if (!header.isOk()) return fail(header.status(), Stage::kInput);
            report.rows.push_back(rowFromImage(path, *header));
        } else {
            dicom_inputs.push_back(path);
        }
    }
    if (!dicom_inputs.empty()) {
        io::DicomScanOptions scan_options;
        scan_options.threads = o.threads;
        auto scan = io::scanDicom(dicom_inputs, scan_options, ctx.progress());
        ctx.bar->clear();
        if (!scan.isOk()) return fail(scan.status(), Stage::kInput);
        for (const auto& c : scan->series) report.rows.push_back(rowFromCandidate(c, o.show_phi));
        report.skipped = scan->skipped;
    }
    if (o.json) {
        std::printf(
            "%s\n",
            toJson(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
        printTable(report, stdout);
    }
    return ExitCode::kOk;
}

}  // namespace voxseg::app
