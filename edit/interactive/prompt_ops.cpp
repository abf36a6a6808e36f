#include "edit/interactive/prompt_ops.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

namespace voxseg::edit::interactive {
namespace {

double snap(double v) { return std::nearbyint(v * 1e6) / 1e6; }

std::vector<Vec3> mmOfVoxels(const Geometry& g, const std::vector<Point3>& points) {
    std::vector<Vec3> out;
    out.reserve(points.size());
    for (const Point3& p : points) out.push_back(mmOfVoxel(g, p));
    return out;
}

std::vector<Point3> voxelsOfMm(const Geometry& g, const std::vector<Vec3>& points) {
    std::vector<Point3> out;
    out.reserve(points.size());
    for (const Vec3& p : points) out.push_back(voxelOfMm(g, p));
    return out;
}

EditOp promptOp(OpKind kind, std::vector<Vec3> points, bool include) {
    EditOp op;
    op.kind = kind;
    op.points = std::move(points);
    op.include = include;
    return op;
}

std::string describe(const Point3& p) { return fmt::format("({}, {}, {})", p[0], p[1], p[2]); }

}  // namespace

Vec3 mmOfVoxel(const Geometry& g, const Point3& zyx) {
    return g.indexToPhysical({zyx[2], zyx[1], zyx[0]});
}

Point3 voxelOfMm(const Geometry& g, const Vec3& mm) {
    const Vec3 ijk = g.physicalToIndex(mm);
    return {snap(ijk[2]), snap(ijk[1]), snap(ijk[0])};
}

EditOp pointPromptOp(const Geometry& g, const Point3& point, bool include) {
    return promptOp(OpKind::kPromptPoint, {mmOfVoxel(g, point)}, include);
}

EditOp boxPromptOp(const Geometry& g, const BoxRequest& box, bool include) {
    return promptOp(OpKind::kPromptBox, {mmOfVoxel(g, box.lo), mmOfVoxel(g, box.hi)}, include);
}

EditOp scribblePromptOp(const Geometry& g, const std::vector<Point3>& points, bool include) {
    return promptOp(OpKind::kPromptScribble, mmOfVoxels(g, points), include);
}

EditOp lassoPromptOp(const Geometry& g, const std::vector<Point3>& points, bool include) {
    return promptOp(OpKind::kPromptLasso, mmOfVoxels(g, points), include);
}

EditOp initialSegFromLabelOp(int label, bool run_prediction) {
    EditOp op;
    op.kind = OpKind::kPromptInitialSeg;
    op.label = label;
    op.run_prediction = run_prediction;
    return op;
}

EditOp initialSegFromMaskOp(const std::string& mask_file, bool run_prediction) {
    EditOp op = initialSegFromLabelOp(0, run_prediction);
    op.mask = mask_file;
    return op;
}

EditOp resetPromptOp() {
    EditOp op;
    op.kind = OpKind::kPromptReset;
    return op;
}

EditOp acceptPromptOp(int label, Overwrite overwrite) {
    EditOp op;
    op.kind = OpKind::kPromptAccept;
    op.label = label;
    op.overwrite = overwrite;
    return op;
}

EditOp acceptPromptOp(int label, Overwrite overwrite, const Geometry& g,
                      const std::vector<uint8_t>& object) {
    EditOp op = acceptPromptOp(label, overwrite);
    op.object = recordObject(g, object);
    return op;
}

EditOp sessionPromptOp(const std::string& model, const std::string& network_sha256,
                       const std::string& precision, bool autozoom, bool restart) {
    EditOp op;
    op.kind = OpKind::kPromptSession;
    op.model = model;
    op.network_sha256 = network_sha256;
    op.precision = precision;
    op.autozoom = autozoom;
    op.restart = restart;
    return op;
}

void PromptHistory::keep(uint64_t step_id, std::shared_ptr<InteractiveDelta> delta) {
    if (delta) deltas_[step_id] = std::move(delta);
}

std::shared_ptr<InteractiveDelta> PromptHistory::find(uint64_t step_id) const {
    const auto it = deltas_.find(step_id);
    return it == deltas_.end() ? nullptr : it->second;
}

void PromptHistory::prune(const LabelEditor& editor) {
    for (auto it = deltas_.begin(); it != deltas_.end();)
        it = editor.holdsStep(it->first) ? std::next(it) : deltas_.erase(it);
}

namespace {

// The object cleared: an all-zero initial segmentation when the model takes one (undoable),
// else reset_interactions (older prompts can no longer be reverted in the session).
Result<std::optional<Box>> clearObject(InteractiveSession& session, bool& history_cleared) {
    if (session.spec().supports_initial_label) {
        const std::vector<uint8_t> none(session.target().size(), 0);
        return session.addInitialSegmentation(none, false);
    }
    VOXSEG_RETURN_IF_ERROR(session.resetInteractions());
    history_cleared = true;
    return std::optional<Box>{Box{{0, 0, 0}, session.shape()}};
}

Result<std::optional<Box>> runPrompt(InteractiveSession& session, const Geometry& g,
                                     const EditOp& op, const Volume* labels,
                                     const MaskLoader& load_mask, bool& history_cleared) {
    const Index3 shape = session.shape();
    switch (op.kind) {
        case OpKind::kPromptPoint:
            return session.addPoint(voxelOfMm(g, op.points.at(0)), op.include);
        case OpKind::kPromptBox: {
            const Point3 a = voxelOfMm(g, op.points.at(0)), b = voxelOfMm(g, op.points.at(1));
            BoxRequest box;
            for (int d = 0; d < 3; ++d) {
                box.lo[d] = std::min(a[d], b[d]);
                box.hi[d] = std::max(a[d], b[d]);
                if (box.hi[d] <= -0.5 || box.lo[d] >= static_cast<double>(shape[d]) - 0.5)
                    return invalidArgument(fmt::format(
                        "the box {} - {} (voxels z, y, x) is outside the image ({} x {} x {})",
                        describe(box.lo), describe(box.hi), shape[0], shape[1], shape[2]));
            }
            return session.addBox(box, op.include);
        }
        case OpKind::kPromptScribble:
            return session.addScribble(voxelsOfMm(g, op.points), op.include);
        case OpKind::kPromptLasso:
            return session.addLasso(voxelsOfMm(g, op.points), op.include);
        case OpKind::kPromptInitialSeg: {
            std::vector<uint8_t> mask;
            if (op.mask.empty()) {
                if (!labels)
                    return Status(StatusCode::kFailedPrecondition, "no label map to read here");
                const int64_t n = labels->geometry().voxelCount();
                mask.resize(static_cast<size_t>(n));
                const bool wide = labels->pixelType() == PixelType::kUInt16;
                for (int64_t i = 0; i < n; ++i)
                    mask[static_cast<size_t>(i)] = (wide ? labels->data<uint16_t>()[i]
                                                         : labels->data<uint8_t>()[i]) == op.label;
            } else {
                if (!load_mask)
                    return Status(StatusCode::kFailedPrecondition, "no way to read mask files here",
                                  op.mask);
                VOXSEG_ASSIGN_OR_RETURN(mask, load_mask(op.mask));
            }
            return session.addInitialSegmentation(mask, op.run_prediction);
        }
        case OpKind::kPromptReset:
            return clearObject(session, history_cleared);
        default:
            return invalidArgument(fmt::format("{} is not a session prompt", opName(op.kind)));
    }
}

}  // namespace

Result<SessionStep> runSessionPart(InteractiveSession& session, const Geometry& g, const EditOp& op,
                                   const Volume* labels, const MaskLoader& load_mask) {
    if (!session.hasImage())
        return Status(StatusCode::kFailedPrecondition,
                      fmt::format("{}: the interactive session has no image", opName(op.kind)));
    const Index3 shape = session.shape();
    if (shape[0] != g.size[2] || shape[1] != g.size[1] || shape[2] != g.size[0])
        return invalidArgument(
            fmt::format("{}: the session's image ({} x {} x {}) is not on the label map's grid",
                        opName(op.kind), shape[0], shape[1], shape[2]));
    SessionStep step;
    if (op.kind == OpKind::kPromptAccept) {
        if (op.label < 1) return invalidArgument("prompt_accept: label must be >= 1");
        step.accepted = session.target();
        VOXSEG_ASSIGN_OR_RETURN(step.object_changed, clearObject(session, step.history_cleared));
    } else {
        auto changed = runPrompt(session, g, op, labels, load_mask, step.history_cleared);
        if (!changed.isOk())
            return changed.status().withContext(std::string(opName(op.kind)) + ": ");
        step.object_changed = *changed;
    }
    step.delta = session.takeLastDelta();
    return step;
}

InteractiveEditor::InteractiveEditor(LabelEditor& editor, InteractiveSession& session,
                                     MaskLoader load_mask)
    : editor_(editor), session_(session), load_mask_(std::move(load_mask)) {}

bool InteractiveEditor::objectOpen() const {
    for (uint8_t v : session_.target())
        if (v) return true;
    return false;
}

Result<PromptApplyReport> InteractiveEditor::apply(const EditOp& op) {
    if (op.kind == OpKind::kUndo || op.kind == OpKind::kRedo)
        return undoOrRedo(op.kind == OpKind::kUndo);
    if (isPromptOp(op.kind)) return applyPrompt(op);
    PromptApplyReport report;
    VOXSEG_ASSIGN_OR_RETURN(report.edit, editor_.apply(op));
    history_.prune(editor_);
    return report;
}

Result<PromptApplyReport> InteractiveEditor::undoOrRedo(bool undo) {
    const uint64_t id = undo ? editor_.undoTopId() : editor_.redoTopId();
    PromptApplyReport report;
    VOXSEG_ASSIGN_OR_RETURN(report.edit, undo ? editor_.undo() : editor_.redo());
    const std::shared_ptr<InteractiveDelta> delta = history_.find(id);
    if (!delta) return report;  // no session part
    auto changed = undo ? session_.revert(*delta) : session_.reapply(*delta);
    if (!changed.isOk()) return changed.status();
    report.object_changed = *changed;
    return report;
}

Result<PromptApplyReport> InteractiveEditor::applyPrompt(const EditOp& op) {
    PromptApplyReport report;
    if (op.kind == OpKind::kPromptSession) {  // settings: no step in either history
        if (op.restart) {
            VOXSEG_RETURN_IF_ERROR(session_.resetInteractions());
            history_.clear();
        }
        if (settings_) {
            VOXSEG_RETURN_IF_ERROR(settings_(op));
        } else {
            session_.setAutoZoom(op.autozoom);
        }
        report.edit.kind = op.kind;
        return report;
    }
    const Geometry& g = editor_.geometry();
    // The session first (it rolls itself back on error), then the editor's step.
    VOXSEG_ASSIGN_OR_RETURN(SessionStep s,
                            runSessionPart(session_, g, op, &editor_.labelMap(), load_mask_));
    if (s.history_cleared) history_.clear();
    report.object_changed = s.object_changed;
    EditOp applied = op;
    if (op.kind == OpKind::kPromptAccept) {
        applied.object = recordObject(g, s.accepted);
        if (op.object) {
            if (auto recorded = objectMask(*op.object, g); recorded.isOk()) {
                int64_t differs = 0;
                for (size_t i = 0; i < s.accepted.size(); ++i)
                    differs += (s.accepted[i] != 0) != ((*recorded)[i] != 0);
                report.recorded_differs = differs;
            } else {
                report.recorded_unplaced = recorded.status().message();
            }
        }
    }
    auto step = editor_.apply(applied);
    if (!step.isOk()) {
        if (s.delta) (void)session_.revert(*s.delta);
        return step.status();
    }
    report.edit = *step;
    history_.prune(editor_);
    history_.keep(editor_.lastAppliedId(), std::move(s.delta));
    return report;
}

Result<RebuiltSession> rebuildSession(InteractiveSession& session, const Volume& image,
                                      const Volume& base, const std::vector<JournalLine>& lines,
                                      const std::string& model_identity) {
    size_t from = 0;
    const EditOp* settings = nullptr;
    for (size_t i = 0; i < lines.size(); ++i) {
        if (lines[i].op.kind != OpKind::kPromptSession) continue;
        settings = &lines[i].op;
        if (settings->restart) from = i;
    }
    if (!settings)
        return Status(StatusCode::kFailedPrecondition, "the journal has no prompt_session line");
    if (settings->model != model_identity)
        return Status(
            StatusCode::kFailedPrecondition,
            fmt::format("the journal's session ran model \"{}\", the loaded one is \"{}\"",
                        settings->model, model_identity));
    VOXSEG_ASSIGN_OR_RETURN(LabelEditor scratch, LabelEditor::create(image, base));
    VOXSEG_RETURN_IF_ERROR(session.resetInteractions());
    InteractiveEditor editor(scratch, session);
    std::map<uint64_t, size_t> line_of_step;
    uint64_t last = scratch.lastAppliedId();
    RebuiltSession out;
    for (size_t i = 0; i < lines.size(); ++i) {
        const EditOp& op = lines[i].op;
        const Status applied = i < from ? scratch.apply(op).status() : editor.apply(op).status();
        if (!applied.isOk()) return applied.withContext(fmt::format("line {}: ", lines[i].line));
        if (const uint64_t now = scratch.lastAppliedId(); now != last) {
            line_of_step[now] = i;
            last = now;
        }
        if (op.kind == OpKind::kPromptSession) out.autozoom = op.autozoom;
    }
    for (const auto& [step, delta] : editor.history().deltas())
        if (const auto it = line_of_step.find(step); it != line_of_step.end())
            out.deltas.push_back({it->second, delta});
    return out;
}

}  // namespace voxseg::edit::interactive
