// `voxseg serve --config node.json`: a DICOM node that receives series by C-STORE, segments
// the ones a route matches and sends the results back (node/server.h does the work).
#include "app/commands.h"
#include "app/signals.h"
#include "core/log.h"
#include "node/config.h"

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
    return cmd;
}

ExitCode runServe(const ServeCommandOptions& o, const CommandContext& ctx) {
    auto config = node::loadNodeConfig(o.config);
    if (!config.isOk()) return fail(config.status(), Stage::kInput);
    if (o.check) {
        if (!ctx.quiet)
            std::printf("%s: valid (%zu routes, %zu destinations)\n", o.config.c_str(),
                        config->routes.size(), config->destinations.size());
        return ExitCode::kOk;
    }
    return fail(unsupported("not implemented yet"), Stage::kInput);
}

}  // namespace voxseg::app
