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
#include "pipeline/input_checks.h"
#include "pipeline/segment.h"
#include "pipeline/segmentation_files.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>

namespace voxseg::app {
namespace {
constexpr const char* kComponent = "edit";

using edit::asEditableLabels;
namespace ei = edit::interactive;

// The journal's first prompt op that only a rerun with the model can apply: a prompt_accept
// that records no object (the other prompts replay as recorded steps, edit/label_editor.h).
const edit::JournalLine* firstModelOnlyPrompt(const std::vector<edit::JournalLine>& lines) {
    for (const edit::JournalLine& l : lines)
        if (l.op.kind == edit::OpKind::kPromptAccept && !l.op.object) return &l;
    return nullptr;
}

int countPrompts(const std::vector<edit::JournalLine>& lines) {
    return static_cast<int>(std::count_if(
        lines.begin(), lines.end(), [](const auto& l) { return edit::isPromptOp(l.op.kind); }));
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

// The interactive package compiled once per precision the journal asks for.
class InteractiveModels {
  public:
    explicit InteractiveModels(const EditCommandOptions& o) : o_(o) {}

    Result<ei::InteractiveModel*> get(engine::Precision precision) {
        std::unique_ptr<ei::InteractiveModel>& m = models_[precision];
        if (!m) {
            ei::InteractiveModelOptions mo;
            mo.num_threads = o_.threads;
            mo.precision = precision;
            VOXSEG_ASSIGN_OR_RETURN(mo.device, engine::parseDevice(o_.device));
            VOXSEG_ASSIGN_OR_RETURN(m, ei::InteractiveModel::load(o_.interactive_model, mo));
            log::info(kComponent, "interactive model {}: {}", m->identity(), m->describe());
            if (identity_.empty()) identity_ = m->identity();
        }
        return m.get();
    }
    // The package's "name version", as prompt_session lines name it.
    const std::string& identity() const { return identity_; }

  private:
    const EditCommandOptions& o_;
    std::map<engine::Precision, std::unique_ptr<ei::InteractiveModel>> models_;
    std::string identity_;
};

// Replays the journal through an interactive session on `package` (every op, prompts or not,
// through InteractiveEditor, so undo/redo cover both). Progress per op on the terminal's bar.
Result<edit::ReplayReport> replayInteractive(const EditCommandOptions& o,
                                             const std::vector<edit::JournalLine>& lines,
                                             edit::LabelEditor& editor, const Volume& image,
                                             const io::SeriesCandidate* series,
                                             const Progress& progress) {
    const bool journal_precision = o.precision == "journal";
    const bool journal_autozoom = o.autozoom == "journal";
    // The first network: the one the journal's first prompt_session asks for, when it leads.
    std::string first_name = journal_precision ? "fp32" : o.precision;
    if (journal_precision)
        for (const edit::JournalLine& l : lines)
            if (l.op.kind == edit::OpKind::kPromptSession) {
                first_name = l.op.precision;
                break;
            }
    auto first = engine::parsePrecision(first_name);
    if (!first.isOk() && !journal_precision) return first.status();
    InteractiveModels models(o);
    auto model = models.get(first.isOk() ? *first : engine::Precision::kFloat32);
    // A line's precision this backend lacks is reported by that line, with its number.
    if (!model.isOk() && journal_precision) model = models.get(engine::Precision::kFloat32);
    if (!model.isOk()) return model.status();
    edit::ReplayReport report;
    report.input_warnings = (*model)->inputFindings(image);
    if (o.strict_input && !report.input_warnings.empty())
        return pipeline::strictInputRefusal((*model)->package(), report.input_warnings, o.input);
    for (const std::string& f : report.input_warnings)
        log::warning(kComponent, "{}: {}: the objects may be poor", o.input, f);
    ei::InteractiveSession session((*model)->spec(), (*model)->forward());
    session.setAutoZoom(o.autozoom != "off");
    VOXSEG_RETURN_IF_ERROR(session.setImage(image));
    ei::InteractiveEditor interactive(editor, session, maskLoader(o.ops, image.geometry(), series));
    size_t n = 0;  // the line being applied
    bool warned_model = false;
    interactive.setSessionSettings([&](const edit::EditOp& op) -> Status {
        if (journal_autozoom) session.setAutoZoom(op.autozoom);
        const std::string ours = models.identity();
        if (op.model != ours && !warned_model) {
            warned_model = true;
            log::warning(kComponent,
                         "{}: line {}: the session ran model \"{}\", replaying with \"{}\" "
                         "({}): the objects may differ",
                         o.ops, lines[n].line, op.model, ours, o.interactive_model);
        }
        if (!journal_precision) return Status::ok();
        VOXSEG_ASSIGN_OR_RETURN(const engine::Precision p, engine::parsePrecision(op.precision));
        VOXSEG_ASSIGN_OR_RETURN(ei::InteractiveModel * m, models.get(p));
        session.setForward(m->forward());
        return Status::ok();
    });
    for (; n < lines.size(); ++n) {
        const edit::JournalLine& l = lines[n];
        progress.report(n, lines.size(), fmt::format("op {} of {}", n + 1, lines.size()));
        VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());
        auto r = interactive.apply(l.op);
        if (!r.isOk())
            return Status(r.status().code(),
                          fmt::format("line {}: {}", l.line, r.status().message()), o.ops);
        ++report.ops_applied;
        report.voxels_changed += r->edit.voxels_changed;
        if (!r->recorded_unplaced.empty())
            log::warning(kComponent, "{}: line {}: not compared with the recorded object: {}",
                         o.ops, l.line, r->recorded_unplaced);
        if (r->recorded_differs) {
            report.recorded_differs.push_back(*r->recorded_differs);
            if (*r->recorded_differs > 0)
                log::warning(kComponent,
                             "{}: line {}: the rerun object differs from the recorded one in "
                             "{} voxels (the rerun's is written)",
                             o.ops, l.line, *r->recorded_differs);
        }
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
                    "The interactive session's AutoZoom: on, off, or journal (default: as the "
                    "journal's prompt_session lines say, on before any)")
        ->check(CLI::IsMember({"on", "off", "journal"}));
    cmd->add_option("--precision", o.precision,
                    "The interactive network's precision: auto, fp32, bf16, int8, ..., or "
                    "journal (default: as the journal's prompt_session lines say, fp32 before "
                    "any)");
    cmd->add_option("--device", o.device,
                    "The interactive network's device: " + engine::deviceNamesHelp() +
                        " (default auto: the GPU when there is one)");
    cmd->add_flag("--strict-input", o.strict_input,
                  "With --interactive-model: refuse an image outside the package's intended "
                  "input (model.json intended_input) instead of warning (exit 5, nothing "
                  "written)");
    return cmd;
}

ExitCode runEdit(const EditCommandOptions& o, const CommandContext& ctx) {
    auto kind = edit::outputKindFor(o.output);
    if (!kind.isOk()) return fail(kind.status(), Stage::kOutput);
    const bool to_seg = *kind == edit::OutputKind::kDicomSeg;
    std::error_code ec;
    const bool interactive = !o.interactive_model.empty();
    for (const std::string* p : {&o.input, &o.labels, &o.ops, &o.interactive_model})
        if (!p->empty() && !std::filesystem::exists(*p, ec))
            return fail(notFound("not found", *p), Stage::kInput);
    // The journal first: a bad line fails before any image is loaded.
    auto lines = edit::readJournal(o.ops);
    if (!lines.isOk()) return fail(lines.status(), Stage::kInput);
    const int prompts = countPrompts(*lines);
    if (o.labels.empty() && !interactive && prompts == 0)
        return fail(invalidArgument("--labels is required (the segmentation to edit); only "
                                    "with --interactive-model or a journal of interactive "
                                    "prompts may it be left out (an empty map)"),
                    Stage::kInput);
    if (const edit::JournalLine* prompt = firstModelOnlyPrompt(*lines); prompt && !interactive)
        return fail(invalidArgument(fmt::format("line {}: {} records no object, so only a rerun "
                                                "of the interactive session's prompts can write "
                                                "it: give its model package with "
                                                "--interactive-model",
                                                prompt->line, edit::opName(prompt->op.kind)),
                                    o.ops),
                    Stage::kInput);
    if (prompts > 0 && !interactive)
        log::info(kComponent,
                  "{}: {} prompt lines: the accepted objects are written as recorded "
                  "(--interactive-model reruns the prompts with the model)",
                  o.ops, prompts);

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
    if (interactive) {
        report["recorded_objects_differ"] = replay->recorded_differs;
        report["warnings"] = replay->input_warnings;
    }
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
