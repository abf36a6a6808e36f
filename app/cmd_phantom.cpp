// `voxseg phantom <folder>`: a synthetic CT study (io/ct_phantom.h) with its ground truth:
// <folder>/dicom/ (CT series, DCMTK), labels.nii.gz, phantom.json, optionally image.nii.gz.
// Used by the demo (scripts/demo.sh), the demo model's training (tools/train_ct_phantom.py),
// tests and benchmarks. Same seed and options, same voxels.
#include "app/commands.h"
#include "core/log.h"
#include "io/ct_phantom.h"

#include <chrono>
#include <cstdio>
#include <sstream>

namespace voxseg::app {

CLI::App* addPhantomCommand(CLI::App& app, PhantomOptions& o) {
    CLI::App* cmd = app.add_subcommand(
        "phantom", "Write a synthetic CT study (DICOM) and its label map (no real patient)");
    cmd->add_option("folder", o.folder, "Output folder (created)")->required();
    cmd->add_option("--seed", o.seed, "Seed: shapes, pose, contrast phase and noise");
    cmd->add_option("--size", o.size, "COLUMNSxROWSxSLICES (default 256x256x150)");
    cmd->add_option("--spacing", o.spacing, "Spacing along columns x rows x slices, mm");
    cmd->add_option("--noise", o.noise_hu, "Noise standard deviation in HU (default: random 10-20)")
        ->check(CLI::Range(0.0, 500.0));
    cmd->add_flag("--no-table", o.no_table, "Leave out the patient table");
    cmd->add_option("--outputs", o.outputs, "Comma-separated: dicom, labels, image (NIfTI HU)");
    cmd->add_option("--threads", o.threads, "Threads (0 = all cores)")
        ->check(CLI::NonNegativeNumber);
    return cmd;
}

ExitCode runPhantom(const PhantomOptions& o, const CommandContext& ctx) {
    io::CtPhantomSpec spec;
    spec.seed = o.seed;
    long long c = 0, r = 0, s = 0;
    if (std::sscanf(o.size.c_str(), "%lldx%lldx%lld", &c, &r, &s) != 3 || c < 1 || r < 1 || s < 1)
        return fail(invalidArgument("--size must look like 256x256x150", o.size), Stage::kInput);
    spec.size = {c, r, s};
    if (std::sscanf(o.spacing.c_str(), "%lfx%lfx%lf", &spec.spacing[0], &spec.spacing[1],
                    &spec.spacing[2]) != 3)
        return fail(invalidArgument("--spacing must look like 1.5x1.5x2.0", o.spacing),
                    Stage::kInput);
    spec.noise_hu = o.noise_hu;
    spec.table = !o.no_table;
    spec.threads = o.threads;
    io::PhantomWriteOptions w;
    w.dicom = w.labels_nifti = w.image_nifti = false;
    std::stringstream ss(o.outputs);
    for (std::string item; std::getline(ss, item, ',');) {
        if (item == "dicom")
            w.dicom = true;
        else if (item == "labels")
            w.labels_nifti = true;
        else if (item == "image")
            w.image_nifti = true;
        else if (!item.empty())
            return fail(invalidArgument("unknown output '" + item + "': use dicom, labels, image"),
                        Stage::kInput);
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto phantom = io::makeCtPhantom(spec);
    if (!phantom.isOk()) return fail(phantom.status(), Stage::kInput);
    const double gen_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (Status st = ctx.progress().checkCancelled(); !st.isOk()) return fail(st, Stage::kOutput);
    auto written = io::writeCtPhantomStudy(*phantom, spec, o.folder, w);
    if (!written.isOk()) return fail(written.status(), Stage::kOutput);
    const double total_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    log::debug("phantom", "generated in {:.2f} s, written in {:.2f} s", gen_s, total_s - gen_s);
    if (!ctx.quiet)
        std::printf("phantom seed %u: %lldx%lldx%lld, %s phase, noise %.1f HU -> %s\n", o.seed, c,
                    r, s,
                    phantom->phase == io::ContrastPhase::kArterial ? "arterial" : "non-contrast",
                    phantom->noise_hu, o.folder.c_str());
    return ExitCode::kOk;
}

}  // namespace voxseg::app
