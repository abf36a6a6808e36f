#include "edit/interactive/prompt_ops.h"

#include "edit/canvas.h"

#include <fmt/format.h>

#include <cmath>

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

InteractiveEditor::InteractiveEditor(LabelEditor& editor, InteractiveSession& session,
                                     MaskLoader load_mask)
    : editor_(editor), session_(session), load_mask_(std::move(load_mask)) {}

bool InteractiveEditor::objectOpen() const {
    for (uint8_t v : session_.target())
        if (v) return true;
    return false;
}

void InteractiveEditor::prune() {
    for (auto it = deltas_.begin(); it != deltas_.end();)
        it = editor_.holdsStep(it->first) ? std::next(it) : deltas_.erase(it);
}

Result<PromptApplyReport> InteractiveEditor::apply(const EditOp& op) {
    if (op.kind == OpKind::kUndo || op.kind == OpKind::kRedo)
        return undoOrRedo(op.kind == OpKind::kUndo);
    if (isPromptOp(op.kind)) return applyPrompt(op);
    PromptApplyReport report;
    VOXSEG_ASSIGN_OR_RETURN(report.edit, editor_.apply(op));
    prune();
    return report;
}

Result<PromptApplyReport> InteractiveEditor::undoOrRedo(bool undo) {
    const uint64_t id = undo ? editor_.undoTopId() : editor_.redoTopId();
    PromptApplyReport report;
    VOXSEG_ASSIGN_OR_RETURN(report.edit, undo ? editor_.undo() : editor_.redo());
    const auto it = deltas_.find(id);
    if (it == deltas_.end() || !it->second) return report;  // no session part
    auto changed = undo ? session_.revert(*it->second) : session_.reapply(*it->second);
    if (!changed.isOk()) return changed.status();
    report.object_changed = *changed;
    return report;
}

Result<std::optional<Box>> InteractiveEditor::clearObject() {
    if (session_.spec().supports_initial_label) {
        const std::vector<uint8_t> none(session_.target().size(), 0);
        return session_.addInitialSegmentation(none, false);
    }
    VOXSEG_RETURN_IF_ERROR(session_.resetInteractions());
    // Not undoable in the session: older prompts can no longer be reverted there.
    deltas_.clear();
    return std::optional<Box>{Box{{0, 0, 0}, session_.shape()}};
}

Result<std::optional<Box>> InteractiveEditor::runPrompt(const EditOp& op) {
    const Geometry& g = editor_.geometry();
    const Index3 shape = session_.shape();
    switch (op.kind) {
        case OpKind::kPromptPoint:
            return session_.addPoint(voxelOfMm(g, op.points.at(0)), op.include);
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
            return session_.addBox(box, op.include);
        }
        case OpKind::kPromptScribble:
            return session_.addScribble(voxelsOfMm(g, op.points), op.include);
        case OpKind::kPromptLasso:
            return session_.addLasso(voxelsOfMm(g, op.points), op.include);
        case OpKind::kPromptInitialSeg: {
            std::vector<uint8_t> mask;
            if (op.mask.empty()) {
                const Volume& labels = editor_.labelMap();
                const int64_t n = labels.geometry().voxelCount();
                mask.resize(static_cast<size_t>(n));
                const bool wide = labels.pixelType() == PixelType::kUInt16;
                for (int64_t i = 0; i < n; ++i)
                    mask[static_cast<size_t>(i)] =
                        (wide ? labels.data<uint16_t>()[i] : labels.data<uint8_t>()[i]) == op.label;
            } else {
                if (!load_mask_)
                    return Status(StatusCode::kFailedPrecondition, "no way to read mask files here",
                                  op.mask);
                VOXSEG_ASSIGN_OR_RETURN(mask, load_mask_(op.mask));
            }
            return session_.addInitialSegmentation(mask, op.run_prediction);
        }
        case OpKind::kPromptReset:
            return clearObject();
        default:
            return invalidArgument(fmt::format("{} is not a session prompt", opName(op.kind)));
    }
}

Result<PromptApplyReport> InteractiveEditor::applyPrompt(const EditOp& op) {
    if (!session_.hasImage())
        return Status(StatusCode::kFailedPrecondition,
                      fmt::format("{}: the interactive session has no image", opName(op.kind)));
    const Index3 shape = session_.shape();
    const auto& size = editor_.geometry().size;
    if (shape[0] != size[2] || shape[1] != size[1] || shape[2] != size[0])
        return invalidArgument(
            fmt::format("{}: the session's image ({} x {} x {}) is not on the label map's grid",
                        opName(op.kind), shape[0], shape[1], shape[2]));
    PromptApplyReport report;
    std::array<int64_t, 3> lo{0, 0, 0}, hi{-1, -1, -1};  // the label map's box: none
    const uint8_t* target = session_.target().data();
    if (op.kind == OpKind::kPromptAccept) {
        if (op.label < 1) return invalidArgument("prompt_accept: label must be >= 1");
        if (const std::optional<Box> box = nonzeroBox(session_.target(), shape)) {
            lo = {box->lo[2], box->lo[1], box->lo[0]};
            hi = {box->hi[2] - 1, box->hi[1] - 1, box->hi[0] - 1};
        }
    }
    // The session first (it rolls itself back on error), then the editor's step; its value
    // function reads the target as it was before a reset (accept copies it first).
    std::vector<uint8_t> accepted;
    if (op.kind == OpKind::kPromptAccept) {
        accepted = session_.target();
        target = accepted.data();
        VOXSEG_ASSIGN_OR_RETURN(report.object_changed, clearObject());
    } else {
        auto changed = runPrompt(op);
        if (!changed.isOk())
            return changed.status().withContext(std::string(opName(op.kind)) + ": ");
        report.object_changed = *changed;
    }
    std::shared_ptr<InteractiveDelta> delta = session_.takeLastDelta();
    auto step = editor_.applyComputed(op, lo, hi, [&](int64_t index, int current) {
        return target[index] && detail::mayOverwrite(op.overwrite, current, op.label) ? op.label
                                                                                      : current;
    });
    if (!step.isOk()) {
        if (delta) (void)session_.revert(*delta);
        return step.status();
    }
    report.edit = *step;
    prune();
    if (delta) deltas_[editor_.lastAppliedId()] = std::move(delta);
    return report;
}

}  // namespace voxseg::edit::interactive
