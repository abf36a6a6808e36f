// `voxseg batch <manifest|folder> -m <model> -o <outdir>`: many studies with one model load,
// sharded over array jobs, resumable, stopped cleanly by SIGTERM (batch/runner.h does the work).
#include "app/commands.h"
#include "app/signals.h"
#include "batch/child_process.h"
#include "batch/manifest.h"
#include "batch/runner.h"
#include "batch/shard.h"
#include "batch/supervisor.h"
#include "core/log.h"
#include "pipeline/channels.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace voxseg::app {
namespace {
constexpr const char* kComponent = "batch";

ExitCode runBatchWorker(const std::vector<batch::BatchCase>& cases, const batch::BatchOptions& bo,
                        const CommandContext& ctx, bool print_summary);
}  // namespace

CLI::App* addBatchCommand(CLI::App& app, BatchCommandOptions& o) {
    CLI::App* cmd = app.add_subcommand(
        "batch",
        "Segment many studies with one model load: manifest (CSV/JSON lines) or a folder of case "
        "folders; sharded, resumable, stopped cleanly by SIGTERM");
    cmd->add_option("cases", o.manifest,
                    "Manifest (.csv with header case_id,input[,series], or .jsonl) or a folder "
                    "with one case per sub-folder")
        ->required();
    cmd->add_option("-m,--model", o.seg.model, "Model package folder (model.json + model.onnx)")
        ->required();
    cmd->add_option("-o,--output", o.seg.output,
                    "Output root: one folder per case id, plus .voxseg-batch/ (journal, summary, "
                    "metrics)")
        ->required();
    addSegmentModelOptions(cmd, o.seg);
    cmd->add_option("--shard", o.shard,
                    "This process's share i/N (default: from SLURM_ARRAY_TASK_ID, "
                    "JOB_COMPLETION_INDEX or AWS_BATCH_JOB_ARRAY_INDEX)");
    cmd->add_option("--shards", o.shards,
                    "Shard count N for Kubernetes Indexed Jobs and AWS Batch array jobs")
        ->check(CLI::Range(1, 1000000));
    cmd->add_option("--devices", o.devices,
                    "Devices to spread cases over, one model copy each: GPU numbers (0,1), or "
                    "cpu, cuda:N, reference");
    cmd->add_option("--loaders", o.loaders, "CPU threads reading and pre-processing cases")
        ->check(CLI::Range(1, 64));
    cmd->add_option("--prefetch", o.prefetch,
                    "Pre-processed cases waiting for a device (bounds memory)")
        ->check(CLI::Range(1, 64));
    cmd->add_option("--writers", o.writers,
                    "CPU threads turning scores into label maps and writing outputs (default: "
                    "one per device, up to 4 while half the cores allow)")
        ->check(CLI::Range(1, 64));
    cmd->add_option("--grace", o.grace_seconds,
                    "Seconds the cases in flight get to finish after SIGTERM/SIGINT")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--retries", o.read_retries, "Extra attempts after a transient read error")
        ->check(CLI::Range(0, 20));
    cmd->add_option("--min-free-mb", o.min_free_mb,
                    "Stop (exit 6) when the output file system has less free space (MiB)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--metrics-file", o.metrics_file,
                    "Prometheus text file (default .voxseg-batch/metrics-<shard>.prom; point it "
                    "at a node exporter's textfile directory)");
    cmd->add_flag("--force", o.force, "Redo every case of the shard, ignoring the journal");
    cmd->add_flag("--retry-failed", o.retry_failed,
                  "Also run again the cases that killed their worker process in an earlier run "
                  "(skipped otherwise; other failed cases always run again)");
    return cmd;
}

ExitCode runBatch(const BatchCommandOptions& o, const CommandContext& ctx) {
    keepRunningOnRepeatedSigterm();
    // Crash isolation (batch/supervisor.h): this process supervises a worker process that
    // runs the cases, unless it is that worker.
    auto link = batch::WorkerLink::fromEnvironment();
    if (!link.isOk()) return fail(link.status(), Stage::kInput);
    batch::BatchOptions bo;
    auto so = toSegmentOptions(o.seg);
    if (!so.isOk()) return fail(so.status(), Stage::kInput);
    bo.segment = *so;
    bo.dicom = toDicomOptions(o.seg);
    bo.model = o.seg.model;
    bo.output_root = o.seg.output;
    bo.series = o.seg.series;
    bo.loaders = o.loaders;
    bo.prefetch = o.prefetch;
    bo.writers = o.writers;
    bo.grace_seconds = o.grace_seconds;
    bo.read_retries = o.read_retries;
    bo.min_free_bytes = static_cast<uint64_t>(o.min_free_mb * 1024.0 * 1024.0);
    bo.metrics_path = o.metrics_file;
    bo.redo_all = o.force;
    bo.retry_failed = o.retry_failed;
    batch::WorkerLink* worker = link->get();
    if (worker) {
        bo.run_started = worker->plan().run_started;
        bo.only = worker->plan().only;
        bo.one_at_a_time = !bo.only.empty();
        bo.on_flight = [worker](const std::string& id, bool started) {
            started ? worker->caseStarted(id) : worker->caseEnded(id);
        };
        bo.on_ready = [worker](const std::string& sha, const std::string& options) {
            worker->ready(sha, options);
        };
    }

    auto shard = batch::resolveShard(o.shard, o.shards, batch::processEnvironment());
    if (!shard.isOk()) return fail(shard.status(), Stage::kInput);
    bo.shard = *shard;
    auto devices = batch::parseDevices(o.devices, so->device);
    if (!devices.isOk()) return fail(devices.status(), Stage::kInput);
    bo.devices = *devices;

    std::error_code ec;
    if (std::filesystem::exists(o.seg.output, ec) &&
        !std::filesystem::is_directory(o.seg.output, ec))
        return fail(invalidArgument("output exists and is not a folder", o.seg.output),
                    Stage::kOutput);
    auto cases = std::filesystem::is_directory(o.manifest, ec)
                     ? batch::listCaseFolders(o.manifest, o.seg.output)
                     : batch::readManifest(o.manifest);
    if (!cases.isOk()) return fail(cases.status(), Stage::kInput);
    // --channel NAME=VALUE applies to every case whose manifest does not name that channel.
    auto channel_defaults = pipeline::parseChannelAssignments(o.seg.channels);
    if (!channel_defaults.isOk()) return fail(channel_defaults.status(), Stage::kInput);
    for (auto& c : *cases)
        for (const auto& d : *channel_defaults)
            if (std::none_of(c.channels.begin(), c.channels.end(),
                             [&](const auto& named) { return named.first == d.name; }))
                c.channels.emplace_back(d.name, d.value);
    if (!worker) {
        std::vector<batch::SupervisedCase> supervised;
        for (const auto& c : *cases)
            if (batch::inShard(c.id, bo.shard))
                supervised.push_back({c.id, c.input, c.series.empty() ? bo.series : c.series});
        return static_cast<ExitCode>(
            batch::superviseBatch(batch::ownArguments(), supervised,
                                  batch::journalPath(bo.output_root, bo.shard), ctx.cancel));
    }
    const ExitCode rc = runBatchWorker(*cases, bo, ctx, worker->plan().final);
    worker->finished(toInt(rc));
    return rc;
}

namespace {

// The batch itself, in the worker process (or in the only process, before crash isolation).
ExitCode runBatchWorker(const std::vector<batch::BatchCase>& cases, const batch::BatchOptions& bo,
                        const CommandContext& ctx, bool print_summary) {
    ProgressCallback bar = ctx.bar->callback();
    auto on_case = [&](const batch::CaseRecord&, const batch::BatchStats& s) {
        if (!bar) return;  // no terminal, or --quiet
        const int finished = s.done + s.failed + s.skipped + s.interrupted;
        bar(s.cases_in_shard ? static_cast<double>(finished) / s.cases_in_shard : 1.0,
            fmt::format("{}/{} cases{}", finished, s.cases_in_shard,
                        s.failed ? fmt::format(" ({} failed)", s.failed) : std::string()));
    };
    auto result = batch::runBatch(cases, bo, ctx.cancel, on_case);
    ctx.bar->clear();
    if (!result.isOk()) {
        const Status& st = result.status();
        return fail(st, st.code() == StatusCode::kIoError ? Stage::kOutput : Stage::kInput);
    }
    const batch::BatchStats& s = result->stats;
    if (!ctx.quiet && print_summary)
        std::printf(
            "shard %s: %d cases, %d done, %d failed, %d skipped (done earlier), %d interrupted, "
            "%d not started; %.1f s, %.2f cases/min\nsummary: %s\n",
            s.shard.c_str(), s.cases_in_shard, s.done, s.failed, s.skipped, s.interrupted,
            s.pending(), s.wall_seconds, s.casesPerMinute(), result->summary_path.c_str());
    switch (result->stop) {
        case batch::StopReason::kSignal:
            log::warning(kComponent, "stopped by a signal: rerun the same command to finish");
            return ExitCode::kBatchStopped;
        case batch::StopReason::kDiskFull:
            return ExitCode::kOutputNotWritable;
        case batch::StopReason::kNone:
            break;
    }
    return s.failed > 0 ? ExitCode::kSomeCasesFailed : ExitCode::kOk;
}

}  // namespace
}  // namespace voxseg::app
