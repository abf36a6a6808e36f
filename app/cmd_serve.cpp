// `voxseg serve --config node.json`: a DICOM node that receives series by C-STORE, segments
// the ones a route matches and sends the results back (node/server.h does the work).
#include "app/commands.h"
#include "app/signals.h"
#include "batch/child_process.h"
#include "core/log.h"
#include "node/config.h"
#include "node/job_worker.h"
#include "node/server.h"

#include <cstdio>

namespace voxseg::app {

CLI::App* addServeCommand(CLI::App& app, ServeCommandOptions& o) {
    CLI::App* cmd = app.add_subcommand(
        "serve",
        "Run as a DICOM node: receive series by C-STORE, segment those a route matches, send the "
        "SEG/RTSTRUCT back by C-STORE or STOW-RS (docs/node.md)");
    cmd->add_option("-c,--config", o.config, "Node configuration (node.json, docs/node.md)")
        ->required();
    cmd->add_flag("--check", o.check, "Validate the configuration and exit");
    cmd->add_flag("--resend", o.resend,
                  "Send every result the outbox holds (also those held after failed retries), "
                  "then exit");
    cmd->add_option("--grace", o.grace_seconds,
                    "Seconds the series in segmentation gets to finish after SIGTERM/SIGINT")
        ->check(CLI::NonNegativeNumber);
    // The node starts itself again with this flag as its segmentation worker process
    // (node/job_worker.h); not for users (hidden from --help).
    cmd->add_flag("--internal-worker", o.internal_worker)->group("");
    return cmd;
}

ExitCode runServe(const ServeCommandOptions& o, const CommandContext& ctx) {
    auto config = node::loadNodeConfig(o.config);
    if (!config.isOk()) return fail(config.status(), Stage::kInput);
    if (o.internal_worker) return static_cast<ExitCode>(node::runJobWorker(*config));
    if (o.check) {
        if (!ctx.quiet)
            std::printf("%s: valid (%zu routes, %zu destinations)\n", o.config.c_str(),
                        config->routes.size(), config->destinations.size());
        return ExitCode::kOk;
    }
    if (o.resend) {
        auto r = node::resendOutbox(*config, ctx.cancel);
        if (!r.isOk()) return fail(r.status(), Stage::kOutput);
        if (!ctx.quiet)
            std::printf("outbox: %d results delivered, %d still held\n", r->delivered, r->held);
        return r->held > 0 ? ExitCode::kSomeCasesFailed : ExitCode::kOk;
    }
    keepRunningOnRepeatedSigterm();
    // Each series is segmented in a worker process: a crash in a library costs that series,
    // not the node (node/job_worker.h).
    std::vector<std::string> worker_args = batch::ownArguments();
    worker_args.push_back("--internal-worker");
    auto r = node::runNode(*config, ctx.cancel, o.grace_seconds, worker_args);
    if (!r.isOk()) return fail(r.status(), Stage::kOutput);
    return ExitCode::kOk;
}

}  // namespace voxseg::app
