// `voxseg model calibrate PACKAGE --cases FOLDER|MANIFEST -o OUT` (issue 40): INT8 activation
// scales measured on representative cases and validated on held-back ones (pipeline/calibrate.h,
// docs/int8.md "Calibration and accuracy"). The cases are a batch manifest or a folder of case
// folders (batch/manifest.h), so the same list serves `voxseg batch`. An interactive package is
// calibrated on click sessions (edit/interactive/interactive_calibration.h): its manifest gives
// each case's label map as a channel:labels column.
#include "app/commands.h"
#include "batch/manifest.h"
#include "core/log.h"
#include "edit/interactive/interactive_calibration.h"
#include "engine/model/model_package.h"
#include "engine/quant/int8_policy.h"
#include "pipeline/calibrate.h"

#include <fmt/format.h>

#include <cstdio>

namespace voxseg::app {

namespace ei = edit::interactive;

void addModelCalibrateCommand(CLI::App* model, ModelCommandOptions& o) {
    CalibrateCommandOptions& c = o.calibrate;
    CLI::App* cmd = model->add_subcommand(
        "calibrate",
        "INT8 scales for a package from representative cases, validated against fp32 on "
        "held-back cases; writes a new package");
    cmd->add_option("package", c.package, "Model package folder (read only)")->required();
    cmd->add_option("--cases", c.cases,
                    "Folder of case folders, or a batch manifest (CSV or JSON lines)")
        ->required();
    cmd->add_option("-o,--output", c.output, "The calibrated package (a new folder)")->required();
    cmd->add_option("--method", c.method,
                    "How activation ranges are chosen: mse (default), percentile, minmax")
        ->check(CLI::IsMember({"percentile", "mse", "minmax"}));
    cmd->add_option("--percentile", c.percentile, "Percentile for --method percentile")
        ->default_val(99.99);
    cmd->add_option("--min-cases", c.min_cases,
                    "Fewest calibration cases accepted (held-back cases come on top)")
        ->default_val(8)
        ->check(CLI::Range(1, 100000));
    cmd->add_option("--weight-bits", c.weight_bits,
                    "Weight bits to calibrate and validate: 8 (runs where VNNI or AMX is), 7 "
                    "(runs exactly on every CPU); default: what this CPU multiplies exactly")
        ->check(CLI::IsMember({7, 8}));
    cmd->add_option("--norm-inputs", c.norm_inputs,
                    "What normalisations read after an int8 convolution: float (default) or "
                    "int8 (8-bit per channel: faster, one rounding more; the gate decides)")
        ->check(CLI::IsMember({"float", "int8"}));
    cmd->add_option("--keep-float", c.keep_float,
                    "Which of the first and last convolution stay float: first,last (default), "
                    "first, last or none (every convolution int8, as NNCF; the gate decides)")
        ->check(CLI::IsMember({"first,last", "last,first", "first", "last", "none"}));
    cmd->add_option("--zero-points", c.zero_points,
                    "Which activations get a zero point: always (default) or where-needed "
                    "(not LeakyReLU outputs, whose small negatives then clamp to 0: faster "
                    "convolutions on AMX; the gate decides)")
        ->check(CLI::IsMember({"always", "where-needed"}));
    cmd->add_option("--upsampling", c.upsampling,
                    "The decoder's up-sampling (ConvTranspose with kernel = stride): float "
                    "(default) or int8 (an int8 1x1 convolution into the concat: faster, "
                    "its input and weights quantised; the gate decides)")
        ->check(CLI::IsMember({"float", "int8"}));
    cmd->add_option("--held-back", c.held_back,
                    "Cases kept out of calibration to validate int8 on: a count (2) or a share "
                    "(25%); default 25 %, at least 2");
    cmd->add_option("--min-dice", c.min_dice,
                    "Gate: lowest Dice of int8 vs fp32 per held-back case and label")
        ->default_val(0.995);
    cmd->add_option("--min-agreement", c.min_agreement,
                    "Gate: share of held-back voxels int8 must label as fp32 does")
        ->default_val(0.999);
    cmd->add_option("--key", c.key_file, "Sign the new package with this secret key (NAME.key)");
    cmd->add_option("--threads", c.threads, "CPU threads (0: all cores)")->default_val(0);
    cmd->add_option("--batch", c.batch, "Patches per forward pass")
        ->default_val(1)
        ->check(CLI::Range(1, 64));
    cmd->add_option("--corrections", c.corrections,
                    "Interactive packages: corrective clicks after the first, per structure")
        ->default_val(2)
        ->check(CLI::Range(0, 20));
    cmd->add_option("--structures", c.structures,
                    "Interactive packages: the largest labels of each case's label map clicked "
                    "on (0: all)")
        ->default_val(3)
        ->check(CLI::Range(0, 1000));
    cmd->callback([&o] { o.action = "calibrate"; });
}

namespace {

Result<std::vector<pipeline::CalibrationCase>> readCases(const std::string& path) {
    VOXSEG_ASSIGN_OR_RETURN(const std::vector<batch::BatchCase> rows, batch::readManifest(path));
    std::vector<pipeline::CalibrationCase> cases;
    for (const batch::BatchCase& r : rows) {
        pipeline::CalibrationCase c{r.id, r.input, r.series, {}};
        for (const auto& [name, value] : r.channels) c.channels.push_back({name, value});
        cases.push_back(std::move(c));
    }
    return cases;
}

// An interactive package's cases: each row's image and its "labels" channel (the structures).
Result<std::vector<ei::InteractiveCalibrationCase>> readInteractiveCases(const std::string& path) {
    VOXSEG_ASSIGN_OR_RETURN(const std::vector<batch::BatchCase> rows, batch::readManifest(path));
    std::vector<ei::InteractiveCalibrationCase> cases;
    for (const batch::BatchCase& r : rows) {
        ei::InteractiveCalibrationCase c{r.id, r.input, r.series, {}};
        for (const auto& [name, value] : r.channels) {
            if (name != "labels")
                return invalidArgument(fmt::format("case {}: channel \"{}\": an interactive "
                                                   "package's cases have one extra column, "
                                                   "channel:labels (the structures to click on)",
                                                   r.id, name),
                                       path);
            c.labels = value;
        }
        if (c.labels.empty())
            return invalidArgument("case " + r.id +
                                       ": no labels: an interactive package calibrates on click "
                                       "sessions over each case's structures; give a "
                                       "channel:labels column (a label map, SEG or RTSTRUCT)",
                                   path);
        cases.push_back(std::move(c));
    }
    return cases;
}

Result<pipeline::CalibrateOptions> toCalibrateOptions(const CalibrateCommandOptions& c) {
    pipeline::CalibrateOptions o;
    o.method = c.method == "mse"      ? engine::RangeMethod::kMse
               : c.method == "minmax" ? engine::RangeMethod::kMinMax
                                      : engine::RangeMethod::kPercentile;
    o.percentile = c.percentile;
    o.min_cases = c.min_cases;
    o.weight_bits = c.weight_bits ? c.weight_bits : pipeline::calibrationWeightBits();
    o.norm_inputs_s8 = c.norm_inputs == "int8";
    o.keep_float = *engine::quant::parseInt8FloatEnds(c.keep_float);  // CLI11 checked it
    o.zero_points = *engine::quant::parseZeroPoints(c.zero_points);   // CLI11 checked it
    o.int8_upsampling = c.upsampling == "int8";
    if (!c.held_back.empty()) {
        VOXSEG_ASSIGN_OR_RETURN(o.held_back, pipeline::parseHeldBack(c.held_back));
    }
    o.gate = {c.min_dice, c.min_agreement};
    o.segment.device = engine::DeviceSpec::cpu();  // the observer and int8 are the cpu backend's
    o.segment.threads = c.threads;
    o.segment.batch = c.batch;
    if (!c.key_file.empty()) o.sign_key = c.key_file;
    return o;
}

}  // namespace

ExitCode runModelCalibrate(const CalibrateCommandOptions& c, const CommandContext& context) {
    auto options = toCalibrateOptions(c);
    if (!options.isOk()) return fail(options.status(), Stage::kInput);
    auto package = engine::readModelPackage(c.package);
    if (!package.isOk()) return fail(package.status(), Stage::kInput);
    const auto calibrate = [&]() -> Result<pipeline::CalibrateReport> {
        if (package->isInteractive()) {
            VOXSEG_ASSIGN_OR_RETURN(auto cases, readInteractiveCases(c.cases));
            ei::InteractiveCalibrateOptions io;
            io.calibrate = *options;
            io.corrections = c.corrections;
            io.max_structures = c.structures;
            return ei::calibrateInteractivePackage(c.package, cases, c.output, io,
                                                   context.progress());
        }
        VOXSEG_ASSIGN_OR_RETURN(auto cases, readCases(c.cases));
        return pipeline::calibratePackage(c.package, cases, c.output, *options, context.progress());
    };
    auto report = calibrate();
    context.bar->clear();
    if (!report.isOk()) {
        const Status& s = report.status();
        const bool output_problem = s.subject() == c.output;
        return fail(s.withContext("calibrate, nothing written"),
                    output_problem ? Stage::kOutput : Stage::kInput);
    }
    std::fputs(pipeline::heldBackTable(report->held_back, report->label_names, report->summary,
                                       options->gate)
                   .c_str(),
               stdout);
    std::fflush(stdout);  // the table before the refusal, also when both go to one pipe
    if (!report->gate.isOk())
        return fail(
            report->gate.withContext("calibrate " + c.package + ": int8 refused, nothing written"),
            Stage::kInput);
    const auto& q = report->record;
    const std::string method =
        std::string(engine::rangeMethodName(q.method)) +
        (q.method == engine::RangeMethod::kPercentile ? fmt::format(" {}", q.percentile) : "");
    std::printf(
        "%s: int8 calibration of %zu tensors and %zu 8-bit normalisation inputs (%s, %d-bit "
        "weights) on %zu cases, %lld patches; validated on %zu held-back cases; %s\n",
        c.output.c_str(), q.activations.size(), q.norm_inputs.size(), method.c_str(), q.weight_bits,
        q.calibration_cases.size(), static_cast<long long>(report->patches),
        report->held_back.size(), report->signature.c_str());
    return ExitCode::kOk;
}

}  // namespace voxseg::app
