// `voxseg synth <folder>` (hidden, for the demo, tests and benchmarks): writes a CT-like DICOM
// series with DCMTK (io/dicom_synth.h): an elliptic body of soft tissue (40 HU) with two lungs
// (-850 HU) and a spine (700 HU) in air (-1000 HU), plus deterministic noise, stored as signed
// int16 with RescaleIntercept -1024. Not a real patient: the identifiers are synthetic.
#include "app/commands.h"
#include "core/log.h"

#include "io/dicom_synth.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

namespace voxseg::app {
namespace {

constexpr double kIntercept = -1024.0;

// Phantom value in HU at voxel (i, j) of a columns x rows slice; noise is a hash of (i, j, k), so
// the value function is pure (the writer may call it from several threads).
int phantomHu(int i, int j, int k, int columns, int rows, int noise_hu, uint32_t seed) {
    const double x = (i - columns / 2.0) / (columns * 0.45);
    const double y = (j - rows / 2.0) / (rows * 0.35);
    double hu = -1000.0;
    if (x * x + y * y < 1.0) {
        hu = 40.0;
        const double lx = std::abs(x) - 0.45, ly = y + 0.1;
        if (lx * lx / 0.09 + ly * ly / 0.25 < 1.0) hu = -850.0;
        if (x * x + (y - 0.6) * (y - 0.6) < 0.015) hu = 700.0;
    }
    if (noise_hu > 0) {
        uint32_t h = seed ^ (static_cast<uint32_t>(i) * 73856093u) ^
                     (static_cast<uint32_t>(j) * 19349663u) ^
                     (static_cast<uint32_t>(k) * 83492791u);
        h ^= h >> 13;
        h *= 0x5bd1e995u;
        h ^= h >> 15;
        hu += static_cast<int>(h % static_cast<uint32_t>(2 * noise_hu + 1)) - noise_hu;
    }
    return static_cast<int>(std::lround(hu));
}

}  // namespace

CLI::App* addSynthCommand(CLI::App& app, SynthOptions& o) {
    CLI::App* cmd = app.add_subcommand(
        "synth", "Write a synthetic CT-like DICOM series (demo, tests, benchmarks)");
    cmd->group("");  // hidden from `voxseg --help`: a developer tool
    cmd->add_option("folder", o.folder, "Output folder (created)")->required();
    cmd->add_option("--size", o.size, "COLUMNSxROWSxSLICES (default 256x256x64)");
    cmd->add_option("--spacing", o.spacing, "Row spacing x column spacing x slice spacing, mm");
    cmd->add_option("--series-count", o.series_count,
                    "Number of series, in subfolders series1..N (2+ makes the input ambiguous)")
        ->check(CLI::Range(1, 20));
    cmd->add_option("--noise", o.noise_hu, "Uniform noise amplitude in HU (0 = exact phantom)")
        ->check(CLI::Range(0, 500));
    cmd->add_option("--seed", o.seed, "Noise seed");
    return cmd;
}

ExitCode runSynth(const SynthOptions& o, const CommandContext& ctx) {
    int columns = 0, rows = 0, slices = 0;
    if (std::sscanf(o.size.c_str(), "%dx%dx%d", &columns, &rows, &slices) != 3 || columns < 1 ||
        rows < 1 || slices < 1)
        return fail(invalidArgument("--size must look like 512x512x500", o.size), Stage::kOutput);
    double row_spacing = 0, column_spacing = 0, slice_spacing = 0;
    if (std::sscanf(o.spacing.c_str(), "%lfx%lfx%lf", &row_spacing, &column_spacing,
                    &slice_spacing) != 3 ||
        row_spacing <= 0 || column_spacing <= 0 || slice_spacing <= 0)
        return fail(invalidArgument("--spacing must look like 0.7x0.7x1.0", o.spacing),
                    Stage::kOutput);
    const std::string study_uid = io::makeDicomUid();
    const std::string frame_uid = io::makeDicomUid();
    for (int s = 1; s <= o.series_count; ++s) {
        if (Status st = ctx.progress().checkCancelled(); !st.isOk())
            return fail(st, Stage::kOutput);
        io::SynthSeriesSpec spec;
        spec.study_uid = study_uid;
        spec.frame_of_reference_uid = frame_uid;
        spec.modality = "CT";
        spec.description = o.series_count == 1 ? "voxseg synthetic CT"
                                               : "voxseg synthetic CT " + std::to_string(s);
        spec.series_number = s;
        spec.columns = columns;
        spec.rows = rows;
        spec.slices = slices;
        spec.row_spacing = row_spacing;
        spec.column_spacing = column_spacing;
        spec.slice_spacing = slice_spacing;
        spec.origin = {-column_spacing * (columns - 1) / 2.0, -row_spacing * (rows - 1) / 2.0,
                       -slice_spacing * (slices - 1) / 2.0};
        spec.is_signed = true;
        spec.intercept = kIntercept;
        const int noise = o.noise_hu;
        const uint32_t seed = o.seed + static_cast<uint32_t>(s);
        spec.value = [=](int i, int j, int k) {
            return static_cast<int32_t>(phantomHu(i, j, k, columns, rows, noise, seed) -
                                        kIntercept);
        };
        spec.name_prefix = "CT";
        spec.seed = seed;
        const std::string folder =
            o.series_count == 1
                ? o.folder
                : (std::filesystem::path(o.folder) / ("series" + std::to_string(s))).string();
        auto files = io::writeSynthSeries(spec, folder);
        if (!files.isOk()) return fail(files.status(), Stage::kOutput);
        ctx.progress().report(static_cast<size_t>(s), static_cast<size_t>(o.series_count),
                              "writing DICOM");
    }
    ctx.bar->clear();
    if (!ctx.quiet)
        std::printf("wrote %d synthetic CT series of %dx%dx%d to %s\n", o.series_count, columns,
                    rows, slices, o.folder.c_str());
    return ExitCode::kOk;
}

}  // namespace voxseg::app
