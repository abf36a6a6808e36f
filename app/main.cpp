// voxseg: the command line. Thin shell over io/ (and later pipeline/): parses options, sets up
// logging, the progress bar and signal handling, runs one subcommand, returns its exit code.
#include "app/commands.h"
#include "app/exit_codes.h"
#include "app/limit_options.h"
#include "app/progress_bar.h"
#include "app/signals.h"
#include "core/log.h"
#include "core/malloc_tuning.h"
#include "core/openmp_wait.h"
#include "io/dcmtk_log.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <new>
#include <string_view>

namespace {

int run(int argc, char** argv) {
    using namespace voxseg;
    using app::ExitCode;

    // First, so that an early Ctrl-C still goes through cancellation.
    CancelToken cancel;
    app::installCancelOnSignals(cancel);
    app::ignoreFileSizeSignal();

    CLI::App cli("voxseg: medical image series to volumes and 3D segmentations", "voxseg");
    cli.set_version_flag("--version", std::string("voxseg ") + VOXSEG_VERSION);
    cli.require_subcommand(1);
    cli.fallthrough();  // global options also after the subcommand: `voxseg info x --quiet`
    std::string log_format = "text";
    bool quiet = false;
    bool verbose = false;
    cli.add_option("--log-format", log_format, "Diagnostics on stderr as text or JSON lines")
        ->check(CLI::IsMember({"text", "json"}));
    cli.add_flag("-q,--quiet", quiet, "Only errors on stderr; no progress bar, no summary line");
    cli.add_flag("-v,--verbose", verbose, "Debug messages on stderr");
    app::LimitOptions limit_options;
    app::addLimitOptions(cli, limit_options);

    app::InfoOptions info_options;
    app::ConvertOptions convert_options;
    app::SynthOptions synth_options;
    app::SegmentCommandOptions segment_options;
    app::PhantomOptions phantom_options;
    app::BatchCommandOptions batch_options;
    app::EditCommandOptions edit_options;
    app::ServeCommandOptions serve_options;
    app::ModelCommandOptions model_options;
    CLI::App* info = app::addInfoCommand(cli, info_options);
    CLI::App* convert = app::addConvertCommand(cli, convert_options);
    CLI::App* synth = app::addSynthCommand(cli, synth_options);
    CLI::App* segment = app::addSegmentCommand(cli, segment_options);
    CLI::App* phantom = app::addPhantomCommand(cli, phantom_options);
    CLI::App* batch = app::addBatchCommand(cli, batch_options);
    CLI::App* edit = app::addEditCommand(cli, edit_options);
    CLI::App* serve = app::addServeCommand(cli, serve_options);
    CLI::App* model = app::addModelCommand(cli, model_options);

    try {
        cli.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = cli.exit(e);  // prints help/version (rc 0) or the error
        return rc == 0 ? 0 : app::toInt(ExitCode::kUsage);
    }

    setReadLimits(limit_options.toReadLimits());  // before anything is read
    auto sink = log_format == "json" ? log::makeJsonLinesSink() : log::makeStderrSink();
    log::setMinLevel(quiet ? log::Level::kError : verbose ? log::Level::kDebug : log::Level::kInfo);
    io::configureDcmtkLogging(verbose);
    app::ProgressBar bar(!quiet && app::ProgressBar::stderrIsTerminal() && log_format == "text");
    log::setSink(bar.wrapSink(sink));

    app::CommandContext context;
    context.bar = &bar;
    context.quiet = quiet;
    context.cancel = cancel;

    ExitCode rc = ExitCode::kInternal;
    if (cli.got_subcommand(info)) {
        rc = app::runInfo(info_options, context);
    } else if (cli.got_subcommand(convert)) {
        rc = app::runConvert(convert_options, context);
    } else if (cli.got_subcommand(segment)) {
        rc = app::runSegment(segment_options, context);
    } else if (cli.got_subcommand(batch)) {
        rc = app::runBatch(batch_options, context);
    } else if (cli.got_subcommand(synth)) {
        rc = app::runSynth(synth_options, context);
    } else if (cli.got_subcommand(phantom)) {
        rc = app::runPhantom(phantom_options, context);
    } else if (cli.got_subcommand(edit)) {
        rc = app::runEdit(edit_options, context);
    } else if (cli.got_subcommand(serve)) {
        rc = app::runServe(serve_options, context);
    } else if (cli.got_subcommand(model)) {
        rc = app::runModel(model_options, context);
    }
    bar.clear();
    log::setSink(sink);  // the bar dies before the logger: unhook it
    return app::toInt(rc);
}

// The subcommand named on the command line ("" when none): the first argument that is neither an
// option nor the value of --log-format, the one global option that takes a separate value.
std::string_view subcommandOf(char** argv) {
    for (int i = 1; argv[i] != nullptr; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--log-format") {
            if (argv[i + 1] == nullptr) break;
            ++i;
        } else if (arg.empty() || arg[0] != '-') {
            return arg;
        }
    }
    return {};
}

}  // namespace

int main(int argc, char** argv) {
    // convert, info and synth run no OpenMP code, so libgomp's wait policy cannot matter to them
    // and a second program start is not worth paying: 20-60 ms of a 0.3 s `voxseg convert` of a
    // 512x512x300 CT (loading and relocating ~55 shared libraries again; docs/perf-io.md).
    const std::string_view sub = subcommandOf(argv);
    if (sub != "convert" && sub != "info" && sub != "synth")
        voxseg::usePassiveOpenMpWaiting(argv);  // may re-execute the program (core/openmp_wait.h)
    voxseg::keepLargeAllocationsMapped();  // flat, repeatable peak memory (core/malloc_tuning.h)
    // Library code reports errors as Status; anything thrown here is a bug or memory exhaustion.
    try {
        return run(argc, argv);
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "error: out of memory\n");
        return voxseg::app::toInt(voxseg::app::ExitCode::kOutOfMemory);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: internal error: %s\n", e.what());
        return voxseg::app::toInt(voxseg::app::ExitCode::kInternal);
    }
}
