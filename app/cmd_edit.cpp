// `voxseg edit <image> --labels <label map | SEG | RTSTRUCT> --ops edits.jsonl -o <out>`: replays
// an edit journal (edit/journal.h, docs/viewer.md) onto a segmentation headless, with the same
// code the viewer runs, and writes the result as a label map file or a DICOM SEG.
#include "app/commands.h"
#include "app/series_table.h"
#include "core/atomic_file.h"
#include "core/log.h"
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
                    "RTSTRUCT (read onto the image's grid)")
        ->required();
    cmd->add_option("--ops", o.ops, "Edit journal: one op per line (docs/viewer.md)")->required();
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
    return cmd;
}

ExitCode runEdit(const EditCommandOptions& o, const CommandContext& ctx) {
    auto kind = edit::outputKindFor(o.output);
    if (!kind.isOk()) return fail(kind.status(), Stage::kOutput);
    const bool to_seg = *kind == edit::OutputKind::kDicomSeg;
    std::error_code ec;
    for (const std::string* p : {&o.input, &o.labels, &o.ops})
        if (!std::filesystem::exists(*p, ec)) return fail(notFound("not found", *p), Stage::kInput);
    // The journal first: a bad line fails before any image is loaded.
    auto lines = edit::readJournal(o.ops);
    if (!lines.isOk()) return fail(lines.status(), Stage::kInput);

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
    auto seg = pipeline::readSegmentationFile(o.labels, study->volume.geometry(), series,
                                              progress.sub(0.5, 0.7));
    if (!seg.isOk()) return fail(seg.status(), Stage::kInput);
    for (const auto& w : seg->warnings) log::warning(kComponent, "{}", w);
    auto labels = asEditableLabels(seg->label_map, o.labels);
    if (!labels.isOk()) return fail(labels.status(), Stage::kInput);

    auto editor = edit::LabelEditor::create(study->volume, *labels);
    if (!editor.isOk()) return fail(editor.status(), Stage::kInput);
    auto replay = edit::applyJournalLines(*lines, *editor, o.ops);
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
    const Status written =
        edit::saveEditedSegmentation(editor->labelMap(), o.output, series, seg->segments, save);
    if (!written.isOk()) return fail(written, Stage::kOutput);

    nlohmann::ordered_json report;
    report["image"] = o.input;
    report["labels"] = o.labels;
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
