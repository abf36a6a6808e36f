// `voxseg edit <image> --labels <label map | SEG | RTSTRUCT> --ops edits.jsonl -o <out>`: replays
// an edit journal (edit/journal.h, docs/edit-journal.md) onto a segmentation headless, with the
// same code the viewer runs, and writes the result as a label map file or a DICOM SEG. With
// --interactive-model, the journal's prompt ops run an interactive session on that package
// (edit/interactive/prompt_ops.h, docs/interactive.md); --labels is then optional (an empty map).
#include "app/commands.h"
#include "app/series_table.h"
#include "core/atomic_file.h"
#include "core/log.h"
#include "edit/interactive/interactive_model.h"
#include "edit/interactive/interactive_session.h"
#include "edit/interactive/prompt_ops.h"
#include "edit/journal.h"
#include "edit/label_editor.h"
#include "edit/save.h"
#include "edit/session.h"
#include "io/image_io.h"
#include "pipeline/segment.h"
#include "pipeline/segmentation_files.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>

namespace voxseg::app {
namespace {
constexpr const char* kComponent = "edit";

using edit::asEditableLabels;
namespace ei = edit::interactive;

// The journal's first prompt op, when it has one.
const edit::JournalLine* firstPrompt(const std::vector<edit::JournalLine>& lines) {
    for (const edit::JournalLine& l : lines)
        if (edit::isPromptOp(l.op.kind)) return &l;
    return nullptr;
}

// An empty label map on the image's grid: uint16 when an op writes a label above 255.
Volume emptyLabels(const Volume& image, const std::vector<edit::JournalLine>& lines) {
    bool wide = false;
    for (const edit::JournalLine& l : lines) wide = wide || l.op.label > 255 || l.op.other > 255;
    VolumeInfo info;
    info.source = "(empty label map)";
    return wide ? Volume::allocate<uint16_t>(image.geometry(), info)
                : Volume::allocate<uint8_t>(image.geometry(), info);
}

// Reads a mask file of a prompt_initial_seg op onto the image's grid (a path relative to the
// journal's folder), nonzero = in, (z, y, x) order.
ei::MaskLoader maskLoader(const std::string& ops, const Geometry& grid,
                          const io::SeriesCandidate* series) {
    return [ops, grid, series](const std::string& file) -> Result<std::vector<uint8_t>> {
        std::filesystem::path path(file);
        if (path.is_relative()) path = std::filesystem::path(ops).parent_path() / path;
        VOXSEG_ASSIGN_OR_RETURN(auto seg,
                                pipeline::readSegmentationFile(path.string(), grid, series));
        VOXSEG_ASSIGN_OR_RETURN(Volume labels, asEditableLabels(seg.label_map, path.string()));
        const int64_t n = labels.geometry().voxelCount();
        std::vector<uint8_t> mask(static_cast<size_t>(n));
        const bool wide = labels.pixelType() == PixelType::kUInt16;
        for (int64_t i = 0; i < n; ++i)
            mask[static_cast<size_t>(i)] =
                (wide ? labels.data<uint16_t>()[i] : labels.data<uint8_t>()[i]) != 0;
        return mask;
    };
}

// Replays the journal through an interactive session on `package` (every op, prompts or not,
// through InteractiveEditor, so undo/redo cover both). Progress per op on the terminal's bar.
Result<edit::ReplayReport> replayInteractive(const EditCommandOptions& o,
                                             const std::vector<edit::JournalLine>& lines,
                                             edit::LabelEditor& editor, const Volume& image,
                                             const io::SeriesCandidate* series,
                                             const Progress& progress) {
    ei::InteractiveModelOptions mo;
    mo.num_threads = o.threads;
    VOXSEG_ASSIGN_OR_RETURN(auto model, ei::InteractiveModel::load(o.interactive_model, mo));
    ei::InteractiveSession session(model->spec(), model->forward());
    session.setAutoZoom(o.autozoom == "on");
    VOXSEG_RETURN_IF_ERROR(session.setImage(image));
    ei::InteractiveEditor interactive(editor, session, maskLoader(o.ops, image.geometry(), series));
    edit::ReplayReport report;
    for (size_t n = 0; n < lines.size(); ++n) {
        const edit::JournalLine& l = lines[n];
        progress.report(n, lines.size(), fmt::format("op {} of {}", n + 1, lines.size()));
        VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());
        auto r = interactive.apply(l.op);
        if (!r.isOk())
            return Status(r.status().code(),
                          fmt::format("line {}: {}", l.line, r.status().message()), o.ops);
        ++report.ops_applied;
        report.voxels_changed += r->edit.voxels_changed;
    }
    progress.report(1.0, "replayed");
    if (interactive.objectOpen())
        log::warning(kComponent,
                     "{}: the last object was not accepted (no prompt_accept after its "
                     "prompts): it is not in the output",
                     o.ops);
    return report;
}

}  // namespace

CLI::App* addEditCommand(CLI::App& app, EditCommandOptions& o) {
    CLI::App* cmd = app.add_subcommand(
        "edit", "Replay an edit journal (JSON lines) onto a segmentation and write the result");
    cmd->add_option("image", o.input,
                    "The image the segmentation belongs to: DICOM folder/file, "
                    "or .nii.gz/.nii/.nrrd/.mha")
        ->required();
    cmd->add_option("--labels", o.labels,
                    "Segmentation to edit: label map file, DICOM SEG or "
                    "RTSTRUCT (read onto the image's grid); required without "
                    "--interactive-model (with it, absent = an empty label map)");
    cmd->add_option("--ops", o.ops, "Edit journal: one op per line (docs/edit-journal.md)")
        ->required();
    cmd->add_option("-o,--output", o.output,
                    "Result: a label map file (.nii.gz, .nii, .nrrd, .mha) or .dcm for a DICOM "
                    "SEG (DICOM image input only)")
        ->required();
    cmd->add_option("--series", o.series, "Which series of a DICOM image: INDEX or UID");
    cmd->add_option("--report", o.report,
                    "Write what changed per label (JSON: voxels added/removed, algorithm type)");
    cmd->add_option("--seg-type", o.seg_type, "DICOM SEG kind: binary (default) or labelmap")
        ->check(CLI::IsMember({"binary", "labelmap"}));
    cmd->add_option("--threads", o.threads, "CPU threads (0 = all cores)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--interactive-model", o.interactive_model,
                    "Interactive model package (docs/interactive.md): runs the journal's prompt "
                    "ops (prompt_point, prompt_box, ...) in an interactive session");
    cmd->add_option("--autozoom", o.autozoom,
                    "The interactive session's AutoZoom: on (default) "
                    "or off")
        ->check(CLI::IsMember({"on", "off"}));
    return cmd;
}

ExitCode runEdit(const EditCommandOptions& o, const CommandContext& ctx) {
    auto kind = edit::outputKindFor(o.output);
    if (!kind.isOk()) return fail(kind.status(), Stage::kOutput);
    const bool to_seg = *kind == edit::OutputKind::kDicomSeg;
    std::error_code ec;
    const bool interactive = !o.interactive_model.empty();
    if (o.labels.empty() && !interactive)
        return fail(invalidArgument("--labels is required (the segmentation to edit); only "
                                    "with --interactive-model may it be left out"),
                    Stage::kInput);
    for (const std::string* p : {&o.input, &o.labels, &o.ops, &o.interactive_model})
        if (!p->empty() && !std::filesystem::exists(*p, ec))
            return fail(notFound("not found", *p), Stage::kInput);
    // The journal first: a bad line fails before any image is loaded.
    auto lines = edit::readJournal(o.ops);
    if (!lines.isOk()) return fail(lines.status(), Stage::kInput);
    if (const edit::JournalLine* prompt = firstPrompt(*lines); prompt && !interactive)
        return fail(invalidArgument(fmt::format("line {}: {} is a prompt of an interactive "
                                                "session: give its model package with "
                                                "--interactive-model",
                                                prompt->line, edit::opName(prompt->op.kind)),
                                    o.ops),
                    Stage::kInput);

    const Progress progress = ctx.progress();
    io::DicomLoadOptions dicom;
    dicom.threads = o.threads;
    std::vector<io::SeriesCandidate> candidates;
    auto study = pipeline::loadStudy(o.input, o.series, dicom, progress.sub(0.0, 0.5), &candidates);
    ctx.bar->clear();
    if (!study.isOk()) {
        if (study.status().code() == StatusCode::kAmbiguous) printCandidates(candidates, o.input);
        return fail(study.status(), Stage::kInput);
    }
    if (to_seg && !study->series)
        return fail(invalidArgument("a DICOM SEG output needs a DICOM image input (the SEG "
                                    "references its source images); write a label map instead",
                                    o.output),
                    Stage::kInput);
    const io::SeriesCandidate* series = study->series ? &*study->series : nullptr;
    pipeline::SegmentationFile segmentation;
    Result<Volume> labels = emptyLabels(study->volume, *lines);
    if (!o.labels.empty()) {
        auto seg = pipeline::readSegmentationFile(o.labels, study->volume.geometry(), series,
                                                  progress.sub(0.5, 0.7));
        if (!seg.isOk()) return fail(seg.status(), Stage::kInput);
        for (const auto& w : seg->warnings) log::warning(kComponent, "{}", w);
        labels = asEditableLabels(seg->label_map, o.labels);
        if (!labels.isOk()) return fail(labels.status(), Stage::kInput);
        segmentation = std::move(seg).value();
    }

    auto editor = edit::LabelEditor::create(study->volume, *labels);
    if (!editor.isOk()) return fail(editor.status(), Stage::kInput);
    auto replay = interactive ? replayInteractive(o, *lines, *editor, study->volume, series,
                                                  progress.sub(0.7, 0.95))
                              : edit::applyJournalLines(*lines, *editor, o.ops);
    ctx.bar->clear();
    if (!replay.isOk()) return fail(replay.status(), Stage::kInput);
    auto changes = edit::compareLabelMaps(*labels, editor->labelMap());
    if (!changes.isOk()) return fail(changes.status(), Stage::kInput);

    edit::SaveOptions save;
    save.algorithm_version = VOXSEG_VERSION;
    save.threads = o.threads;
    auto type = io::parseSegType(o.seg_type);
    if (!type.isOk()) return fail(type.status(), Stage::kInput);
    save.seg_type = *type;
    save.changes = *changes;
    const Status written = edit::saveEditedSegmentation(editor->labelMap(), o.output, series,
                                                        segmentation.segments, save);
    if (!written.isOk()) return fail(written, Stage::kOutput);

    nlohmann::ordered_json report;
    report["image"] = o.input;
    report["labels"] = o.labels;
    if (interactive) report["interactive_model"] = o.interactive_model;
    report["ops"] = o.ops;
    report["output"] = o.output;
    report["ops_applied"] = replay->ops_applied;
    report["voxels_changed"] = replay->voxels_changed;
    nlohmann::ordered_json per_label = nlohmann::ordered_json::array();
    std::string summary;
    for (const edit::LabelChange& c : *changes) {
        per_label.push_back({{"label", c.label},
                             {"voxels_before", c.voxels_before},
                             {"voxels_after", c.voxels_after},
                             {"added", c.added},
                             {"removed", c.removed},
                             {"algorithm_type", c.algorithmType()}});
        if (c.changed())
            summary +=
                fmt::format("{}{} ({})", summary.empty() ? "" : ", ", c.label, c.algorithmType());
    }
    report["label_changes"] = per_label;
    if (!o.report.empty()) {
        Status st = writeFileAtomically(o.report, report.dump(2) + "\n");
        if (!st.isOk()) return fail(st, Stage::kOutput);
    }
    if (!ctx.quiet)
        std::printf("%s: %d ops replayed, %lld voxel changes; labels changed: %s\n",
                    o.output.c_str(), replay->ops_applied,
                    static_cast<long long>(replay->voxels_changed),
                    summary.empty() ? "none" : summary.c_str());
    return ExitCode::kOk;
}

}  // namespace voxseg::app
