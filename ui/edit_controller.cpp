#include "ui/edit_controller.h"

#include "core/log.h"
#include "ui/background_task.h"
#include "ui/interactive_tool.h"
#include "ui/viewer_state.h"

#include <QFileInfo>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace voxseg::ui {
namespace {

constexpr const char* kComponent = "viewer.edit";

}  // namespace

const char* editToolName(EditTool tool) {
    switch (tool) {
        case EditTool::kNone:
            return "none";
        case EditTool::kPaint:
            return "paint";
        case EditTool::kErase:
            return "erase";
        case EditTool::kLevelTrace:
            return "level trace";
        case EditTool::kGrow:
            return "grow";
        case EditTool::kThreshold:
            return "threshold";
        case EditTool::kInteractive:
            return "interactive";
    }
    return "none";
}

edit::Plane planeOfView(ViewAxis view) {
    switch (view) {
        case ViewAxis::kAxial:
            return edit::Plane::kAxial;
        case ViewAxis::kCoronal:
            return edit::Plane::kCoronal;
        case ViewAxis::kSagittal:
            return edit::Plane::kSagittal;
    }
    return edit::Plane::kAxial;
}

EditController::EditController(ViewerState* state, QObject* parent)
    : QObject(parent), state_(state), stats_timer_(new QTimer(this)) {
    stats_timer_->setSingleShot(true);
    stats_timer_->setInterval(kStatisticsDelayMs);
    connect(stats_timer_, &QTimer::timeout, this, &EditController::startStatistics);
    // A new image or label map ends the session (its edits are kept for recovery unless they
    // were saved: the window asks before replacing unsaved edits).
    auto end = [this] {
        if (!ending_ && session_) endSession(dirty());
    };
    connect(state_, &ViewerState::imageChanged, this, end);
    connect(state_, &ViewerState::labelMapChanged, this, end);
    connect(state_, &ViewerState::labelTableChanged, this, [this] {
        if (!ending_) saveSegmentsToRecovery();
    });
    // The preview follows the tool, label, masking (toolChanged), the slices (threshold) and
    // a new image or label map.
    connect(this, &EditController::toolChanged, this, &EditController::updatePreview);
    connect(state_, &ViewerState::cursorChanged, this, [this] {
        if (tool_ == EditTool::kThreshold) updatePreview();
    });
    auto reset = [this] {
        previewer_.invalidate();
        empty_labels_ = Volume();
        preview_voxel_.reset();
        updatePreview();
    };
    connect(state_, &ViewerState::imageChanged, this, reset);
    connect(state_, &ViewerState::labelMapChanged, this, reset);
    connectInteractive();
}

void EditController::connectInteractive() {
    interactive_ = new InteractiveTool(state_, this);
    interactive_->setPreviewLabel(label_);
    connect(this, &EditController::toolChanged, this,
            [this] { interactive_->setPreviewLabel(label_); });
    connect(interactive_, &InteractiveTool::maskChanged, this, [this] {
        emit historyChanged();  // undo: the object's last prompt
        if (tool_ != EditTool::kInteractive) return;
        ++preview_generation_;
        emit previewChanged();
    });
    connect(interactive_, &InteractiveTool::failed, this, &EditController::editFailed);
    connect(interactive_, &InteractiveTool::drawingChanged, this, &EditController::brushChanged);
    connect(interactive_, &InteractiveTool::latencyChanged, this,
            [this](double, const QString& message) { emit reported(message); });
    connect(interactive_, &InteractiveTool::stepDone, this, &EditController::applyPromptStep);
    connect(interactive_, &InteractiveTool::rebuilt, this, [this](const auto& deltas) {
        if (!session_) return;
        for (const auto& [line, delta] : deltas)
            if (const uint64_t step = session_->stepOfLine(line)) prompt_history_.keep(step, delta);
        prompt_history_.prune(session_->editor());
        emit historyChanged();
    });
    // A new session (another model or image) cannot revert the old one's prompts.
    connect(interactive_, &InteractiveTool::modelChanged, this,
            [this] { prompt_history_.clear(); });
    connect(state_, &ViewerState::imageChanged, this, [this] { prompt_history_.clear(); });
}

void EditController::applyPromptStep(const edit::EditOp& op,
                                     std::shared_ptr<edit::interactive::InteractiveDelta> delta,
                                     bool history_cleared) {
    if (history_cleared) prompt_history_.clear();
    if (!run([&] { return session_->apply(op); }).isOk()) {
        if (delta) interactive_->revert(std::move(delta));  // the session as the label map
        return;
    }
    if (op.kind == edit::OpKind::kPromptSession) return;  // settings: no step
    prompt_history_.prune(session_->editor());
    prompt_history_.keep(session_->editor().lastAppliedId(), std::move(delta));
    if (op.kind == edit::OpKind::kPromptAccept && op.object && !op.object->runs.empty()) {
        // The next object goes into a new label.
        int next = label_;
        for (const LabelEntry& e : state_->labels()) next = std::max(next, e.value);
        setActiveLabel(next + 1);
    }
}

const edit::EditPreview* EditController::preview() const {
    if (tool_ == EditTool::kInteractive) return interactive_->preview();
    return preview_ && !preview_->empty() ? &*preview_ : nullptr;
}

Point3 EditController::voxelOf(const Vec3& p) const {
    const Vec3 ijk = state_->image().geometry().physicalToIndex(p);
    return {ijk[2], ijk[1], ijk[0]};
}

Status EditController::nextObject() {
    if (interactive_->pending() == 0 && !interactive_->hasObject()) {
        const Status s(StatusCode::kFailedPrecondition,
                       "next object: the current object is empty (nothing to write)");
        emit editFailed(QString::fromStdString(s.message()));
        return s;
    }
    return interactive_->accept(label_, overwrite_);
}

EditController::~EditController() {
    for (auto& t : threads_)
        if (t) t->wait();
}

void EditController::startStatistics() {
    if (stroking() || stats_running_) {
        stats_timer_->start();  // after the stroke / the running computation
        return;
    }
    if (!state_->hasLabelMap()) return;
    stats_running_ = true;
    const int64_t edits = edits_;
    const Volume copy = cloneVolume(state_->labelMap());  // edits go on meanwhile
    const Volume image = state_->image();
    const auto infos = state_->labelInfos();
    using Summary = Result<ViewerState::LabelSummary>;
    threads_.removeAll(nullptr);
    threads_ << runInBackground<Summary>(
        this, [copy, image, infos] { return ViewerState::summarizeLabels(copy, image, infos); },
        [this, edits](Summary& r) {
            stats_running_ = false;
            if (!r.isOk()) {
                log::warning(kComponent, "statistics not recomputed: {}", r.status().toString());
                return;
            }
            if (edits != edits_ || state_->labelMap().empty()) {
                stats_timer_->start();  // overtaken by an edit
                return;
            }
            ending_ = true;
            state_->applyLabelSummary(std::move(r.value()));
            ending_ = false;
            saveSegmentsToRecovery();
        });
}

bool EditController::statisticsPending() const {
    return stats_timer_->isActive() || stats_running_;
}

void EditController::setTool(EditTool tool) {
    if (stroking()) release();
    if (tool == tool_) return;
    tool_ = tool;
    emit toolChanged();
    emit brushChanged();
}

void EditController::setActiveLabel(int value) {
    if (value < 1 || value == label_) return;
    label_ = value;
    emit toolChanged();
}

void EditController::setRadiusMm(double mm) {
    mm = std::clamp(mm, 0.1, 200.0);
    if (mm == radius_mm_) return;
    radius_mm_ = mm;
    emit toolChanged();
    emit brushChanged();
}

void EditController::setSphere(bool on) {
    if (on == sphere_) return;
    sphere_ = on;
    emit toolChanged();
    emit brushChanged();
}

void EditController::setOverwrite(edit::Overwrite o) {
    overwrite_ = o;
    emit toolChanged();
}

Status EditController::setRange(std::optional<std::pair<double, double>> range) {
    if (range && range->first > range->second) {
        const Status s(StatusCode::kInvalidArgument,
                       fmt::format("intensity range: the lower bound {} is above the upper bound "
                                   "{}; the range stays {}",
                                   range->first, range->second,
                                   range_ ? fmt::format("{}..{}", range_->first, range_->second)
                                          : std::string("off")));
        emit editFailed(QString::fromStdString(s.message()));
        return s;
    }
    if (range == range_) return Status::ok();
    range_ = range;
    emit toolChanged();
    return Status::ok();
}

edit::EditOp EditController::baseOp(edit::OpKind kind) const {
    edit::EditOp op;
    op.kind = kind;
    op.label = label_;
    op.overwrite = overwrite_;
    if (range_) {
        op.min = range_->first;
        op.max = range_->second;
    }
    return op;
}

std::string EditController::sourceKey() const {
    const QString s = state_->source();
    return (s.isEmpty() ? s : QFileInfo(s).absoluteFilePath()).toStdString();
}

std::string EditController::seriesUid() const {
    return state_->study().series ? state_->study().series->series_uid : std::string();
}

Status EditController::ensureSession() {
    if (session_) return Status::ok();
    if (!state_->hasImage()) return Status(StatusCode::kFailedPrecondition, "open an image first");
    Volume labels;
    if (state_->hasLabelMap()) {
        VOXSEG_ASSIGN_OR_RETURN(labels,
                                edit::asEditableLabels(state_->labelMap(), "the shown label map"));
    } else {
        labels = Volume::allocate<uint8_t>(state_->image().geometry());
    }
    edit::SessionOptions o;
    o.recovery_root = recovery_root_.toStdString();
    o.source = sourceKey();
    o.series_uid = seriesUid();
    VOXSEG_ASSIGN_OR_RETURN(
        auto session, edit::EditSession::start(state_->image(), labels, state_->segmentMetas(), o));
    session_.emplace(std::move(session));
    prompt_history_.clear();
    ending_ = true;
    state_->beginEditing(session_->labelMap());
    ending_ = false;
    log::info(kComponent, "editing started (journal: {})",
              session_->folder().empty() ? "none" : session_->folder());
    return Status::ok();
}

Status EditController::run(const std::function<Result<edit::ApplyReport>()>& op) {
    Status s = ensureSession();
    if (s.isOk()) {
        auto r = op();
        if (r.isOk()) {
            ending_ = true;
            state_->labelVoxelsEdited(*r);
            ending_ = false;
            if (r->changedAnything()) {
                ++edits_;
                stats_timer_->start();
                previewer_.invalidate();
                preview_voxel_.reset();
                updatePreview();
            }
        } else {
            s = r.status();
        }
    }
    if (!s.isOk()) {
        log::warning(kComponent, "{}", s.toString());
        emit editFailed(QString::fromStdString(s.toString()));
    }
    emit historyChanged();
    return s;
}

bool EditController::press(ViewAxis view, const Vec3& p, bool exclude) {
    if (tool_ == EditTool::kNone || !state_->hasImage()) return false;
    using edit::OpKind;
    switch (tool_) {
        case EditTool::kInteractive:
            stroke_view_ = view;
            interactive_->press(2 - state_->frame(view).axis_n, voxelOf(p), exclude);
            break;
        case EditTool::kPaint:
        case EditTool::kErase: {
            edit::EditOp op = baseOp(tool_ == EditTool::kPaint ? OpKind::kPaint : OpKind::kErase);
            if (tool_ == EditTool::kErase) {
                // Erase takes the active label only under "only label X"; else every label.
                op.label = overwrite_.mode == edit::Overwrite::Mode::kLabel ? overwrite_.label : 0;
                op.overwrite = {};
            }
            op.shape = sphere_ ? edit::Shape::kSphere : edit::Shape::kDisk;
            op.plane = planeOfView(view);
            op.radius_mm = radius_mm_;
            op.points = {p};
            stroke_view_ = view;
            (void)run([&] { return session_->beginStroke(op); });
            break;
        }
        case EditTool::kLevelTrace:
        case EditTool::kGrow:
        case EditTool::kThreshold: {
            auto op = clickOp(view, p);
            if (!op.isOk()) {
                emit editFailed(QString::fromStdString(op.status().message()));
                return true;
            }
            if (op.value()) (void)run([&] { return session_->apply(**op); });
            break;
        }
        case EditTool::kNone:
            return false;
    }
    return true;
}

Result<std::optional<edit::EditOp>> EditController::clickOp(ViewAxis view, const Vec3& p) const {
    using edit::OpKind;
    std::optional<edit::EditOp> none;
    edit::EditOp op;
    switch (tool_) {
        case EditTool::kLevelTrace:
            op = baseOp(OpKind::kLevelTrace);
            op.min.reset();
            op.max.reset();
            break;
        case EditTool::kGrow:
            op = baseOp(OpKind::kFloodFill);
            if (!range_) {
                const Vec3 idx = state_->image().geometry().physicalToIndex(p);
                const std::array<int64_t, 3> v{std::llround(idx[0]), std::llround(idx[1]),
                                               std::llround(idx[2])};
                if (!state_->inside(v)) return none;
                const double value = state_->imageValue(v);
                op.min = value - grow_tolerance_;
                op.max = value + grow_tolerance_;
            }
            op.in_slice = !sphere_;
            break;
        case EditTool::kThreshold:
            if (!range_)
                return Status(StatusCode::kFailedPrecondition,
                              "threshold: set an intensity range (masking) first");
            op = baseOp(OpKind::kThreshold);
            op.in_slice = !sphere_;
            break;
        default:
            return none;
    }
    op.plane = planeOfView(view);
    op.points = {p};
    return std::optional<edit::EditOp>(op);
}

const Volume* EditController::previewLabels() {
    if (session_) return &session_->labelMap();
    if (state_->hasLabelMap()) {
        const PixelType t = state_->labelMap().pixelType();
        return t == PixelType::kUInt8 || t == PixelType::kUInt16 ? &state_->labelMap() : nullptr;
    }
    if (empty_labels_.empty())
        empty_labels_ = Volume::allocate<uint8_t>(state_->image().geometry());
    return &empty_labels_;
}

void EditController::updatePreview() {
    const bool click_tool =
        tool_ == EditTool::kThreshold || tool_ == EditTool::kGrow || tool_ == EditTool::kLevelTrace;
    const bool had = preview_.has_value();
    preview_.reset();
    const Volume* labels = click_tool && state_->hasImage() ? previewLabels() : nullptr;
    std::vector<edit::EditOp> ops;
    if (labels && tool_ == EditTool::kThreshold && range_) {
        // Each view's slice through the crosshair (the 3D threshold's cut there too).
        const auto c = state_->cursor();
        const Vec3 point = state_->image().geometry().indexToPhysical(
            {static_cast<double>(c[0]), static_cast<double>(c[1]), static_cast<double>(c[2])});
        for (ViewAxis v : {ViewAxis::kAxial, ViewAxis::kCoronal, ViewAxis::kSagittal}) {
            auto op = clickOp(v, point);
            if (!op.isOk() || !op.value()) continue;
            op.value()->in_slice = true;
            ops.push_back(**op);
        }
    } else if (labels && tool_ != EditTool::kThreshold && brush_centre_) {
        auto op = clickOp(brush_view_, *brush_centre_);
        if (op.isOk() && op.value()) ops.push_back(**op);
    }
    std::vector<uint64_t> seen;  // voxels already in the preview (one bit each)
    for (const edit::EditOp& op : ops) {
        auto r = previewer_.preview(state_->image(), *labels, op);
        if (!r.isOk()) continue;  // e.g. the mouse left the image: nothing to show
        if (!preview_ || preview_->empty()) {
            preview_ = std::move(*r);
            continue;
        }
        // Union of the views' slices: their crossing lines are in both.
        if (seen.empty()) {
            seen.assign(static_cast<size_t>((state_->image().geometry().voxelCount() + 63) / 64),
                        0);
            for (int64_t v : preview_->voxels)
                seen[static_cast<size_t>(v >> 6)] |= uint64_t{1} << (v & 63);
        }
        for (size_t n = 0; n < r->voxels.size(); ++n) {
            const int64_t v = r->voxels[n];
            uint64_t& word = seen[static_cast<size_t>(v >> 6)];
            const uint64_t bit = uint64_t{1} << (v & 63);
            if (word & bit) continue;
            word |= bit;
            preview_->voxels.push_back(v);
            preview_->values.push_back(r->values[n]);
        }
        for (int a = 0; a < 3 && !r->empty(); ++a) {
            preview_->box_lo[a] = std::min(preview_->box_lo[a], r->box_lo[a]);
            preview_->box_hi[a] = std::max(preview_->box_hi[a], r->box_hi[a]);
        }
    }
    if (!had && !preview_) return;
    ++preview_generation_;
    emit previewChanged();
}

void EditController::cancelPreview() {
    preview_voxel_.reset();
    if (!preview_) return;
    preview_.reset();
    ++preview_generation_;
    emit previewChanged();
}

void EditController::drag(ViewAxis view, const Vec3& p) {
    hover(view, p);
    if (tool_ == EditTool::kInteractive) {
        if (view == stroke_view_) interactive_->drag(voxelOf(p));
        return;
    }
    if (!stroking() || view != stroke_view_) return;
    (void)run([&] { return session_->extendStroke(p); });
}

void EditController::release() {
    if (tool_ == EditTool::kInteractive) interactive_->release();
    if (!stroking()) return;
    Status s = session_->endStroke();
    if (!s.isOk()) emit editFailed(QString::fromStdString(s.toString()));
    emit historyChanged();
}

void EditController::hover(ViewAxis view, std::optional<Vec3> p) {
    if (p == brush_centre_ && view == brush_view_) return;
    brush_centre_ = p;
    brush_view_ = view;
    if (tool_ == EditTool::kPaint || tool_ == EditTool::kErase) emit brushChanged();
    if (tool_ != EditTool::kGrow && tool_ != EditTool::kLevelTrace) return;
    // Grow and level trace preview the region from the voxel under the mouse (recomputed only
    // when that voxel changes).
    std::optional<std::array<int64_t, 3>> voxel;
    if (p && state_->hasImage()) {
        const Vec3 idx = state_->image().geometry().physicalToIndex(*p);
        voxel = {std::llround(idx[0]), std::llround(idx[1]), std::llround(idx[2])};
    }
    if (voxel == preview_voxel_) return;  // (a commit or a new tool recomputes it anyway)
    preview_voxel_ = voxel;
    updatePreview();
}

Status EditController::apply(const edit::EditOp& op) {
    return run([&] { return session_->apply(op); });
}

Status EditController::fillBetweenSlices(ViewAxis view) {
    edit::EditOp op = baseOp(edit::OpKind::kFillBetweenSlices);
    op.min.reset();
    op.max.reset();
    op.overwrite = {};
    op.plane = planeOfView(view);
    return apply(op);
}

Status EditController::keepLargestIsland() {
    edit::EditOp op;
    op.kind = edit::OpKind::kIslands;
    op.island_mode = edit::IslandMode::kKeepLargest;
    op.label = label_;
    op.connectivity = 26;
    return islands(op, "Keep largest island");
}

Status EditController::removeSmallIslands(double min_ml) {
    edit::EditOp op;
    op.kind = edit::OpKind::kIslands;
    op.island_mode = edit::IslandMode::kRemoveSmall;
    op.min_ml = min_ml;
    op.label = label_;
    op.connectivity = 26;
    return islands(op, QString("Remove islands under %1 mL").arg(min_ml));
}

Status EditController::islands(const edit::EditOp& op, const QString& what) {
    // What it removes, counted before it runs: the removed voxels and their components (each a
    // whole island of the label).
    int64_t removed = 0, count = 0;
    if (ensureSession().isOk()) {
        auto p = previewer_.preview(state_->image(), session_->labelMap(), op);
        if (p.isOk()) {
            removed = static_cast<int64_t>(p->voxels.size());
            count =
                edit::countComponents(p->voxels, state_->image().geometry().size, op.connectivity);
        }
    }
    VOXSEG_RETURN_IF_ERROR(apply(op));
    const Vec3 sp = state_->image().geometry().spacing;
    const double ml = static_cast<double>(removed) * sp[0] * sp[1] * sp[2] / 1000.0;
    const QString label =
        QString("%1 (%2)").arg(QString::fromStdString(state_->labelName(op.label))).arg(op.label);
    last_report_ = removed == 0 ? QString("%1 of %2: nothing removed").arg(what, label)
                                : QString("%1 of %2: removed %3 island%4, %5 voxels, %6 mL")
                                      .arg(what, label)
                                      .arg(count)
                                      .arg(count == 1 ? "" : "s")
                                      .arg(removed)
                                      .arg(ml, 0, 'f', ml < 10 ? 3 : 1);
    log::info(kComponent, "{}", last_report_.toStdString());
    emit reported(last_report_);
    return Status::ok();
}

Status EditController::smooth(edit::OpKind kind, double radius_mm) {
    edit::EditOp op;
    op.kind = kind;
    op.label = label_;
    op.radius_mm = radius_mm;
    return apply(op);
}

Status EditController::margin(double mm) {
    edit::EditOp op;
    op.kind = edit::OpKind::kMargin;
    op.label = label_;
    op.margin_mm = mm;
    op.overwrite = overwrite_;
    return apply(op);
}

Status EditController::clearLabel(int value) {
    edit::EditOp op;
    op.kind = edit::OpKind::kLogical;
    op.logical = edit::LogicalOp::kClear;
    op.label = value;
    return apply(op);
}

bool EditController::canUndo() const { return session_ && session_->editor().canUndo(); }

Status EditController::undoOrRedo(bool undo) {
    if (undo && stroking()) release();
    if (!(undo ? canUndo() : canRedo()))
        return Status(StatusCode::kFailedPrecondition,
                      undo ? "nothing to undo" : "nothing to redo");
    if (interactive_->pending() > 0) {
        // The running prompt's step is not in the history yet: undo would skip it.
        const Status s(StatusCode::kFailedPrecondition,
                       std::string(undo ? "undo" : "redo") +
                           ": an interactive prompt is still running; try again when it finished");
        emit editFailed(QString::fromStdString(s.message()));
        return s;
    }
    const edit::LabelEditor& e = session_->editor();
    const uint64_t id = undo ? e.undoTopId() : e.redoTopId();
    const Status s = run([&] { return undo ? session_->undo() : session_->redo(); });
    if (!s.isOk()) return s;
    // A prompt step: its session part too (queued on the tool's worker).
    if (auto delta = prompt_history_.find(id))
        undo ? interactive_->revert(std::move(delta)) : interactive_->reapply(std::move(delta));
    return s;
}

Status EditController::undo() { return undoOrRedo(true); }

Status EditController::redo() { return undoOrRedo(false); }

void EditController::markSaved() {
    if (session_) session_->markSaved();
    emit historyChanged();
}

QString EditController::journalPath() const {
    if (!session_ || session_->folder().empty()) return {};
    return QString::fromStdString(session_->folder() + "/edits.jsonl");
}

void EditController::endSession(bool keep_recovery) {
    if (!session_) return;
    if (session_->inStroke()) (void)session_->endStroke();
    if (!keep_recovery) {
        Status s = session_->discardRecovery();
        if (!s.isOk()) log::warning(kComponent, "{}", s.toString());
    }
    session_.reset();
    prompt_history_.clear();
    interactive_->restart();  // the next journal starts with a new interactive session
    stats_timer_->stop();
    emit historyChanged();
}

void EditController::saveSegmentsToRecovery() {
    if (!session_) return;
    Status s = session_->saveSegments(state_->segmentMetas());
    if (!s.isOk())
        log::warning(kComponent, "segment metadata not saved for recovery: {}", s.toString());
}

std::optional<edit::RecoveryInfo> EditController::pendingRecovery() const {
    if (!state_->hasImage() || recovery_root_.isEmpty()) return std::nullopt;
    return edit::findRecovery(recovery_root_.toStdString(), sourceKey(), seriesUid());
}

Status EditController::restore(const edit::RecoveryInfo& info) {
    if (session_) endSession(false);
    edit::SessionOptions o;
    o.recovery_root = recovery_root_.toStdString();
    o.source = sourceKey();
    o.series_uid = seriesUid();
    VOXSEG_ASSIGN_OR_RETURN(auto session, edit::EditSession::restore(state_->image(), info, o));
    // The restored map replaces what is shown (as loading a segmentation does), then the
    // session takes over its voxels.
    ending_ = true;
    Status s = state_->setLabelMap(session.labelMap(), {});
    if (s.isOk()) {
        session_.emplace(std::move(session));
        prompt_history_.clear();
        // The journal's interactive object and its undo come back once a model is loaded.
        interactive_->rebuildFrom(journalPath(), session_->base());
        state_->beginEditing(session_->labelMap());
        state_->applySegmentMetas(info.segments);
        state_->refreshStatistics();
    }
    ending_ = false;
    emit historyChanged();
    return s;
}

void EditController::flushStatistics() {
    if (!statisticsPending()) return;
    stats_timer_->stop();
    ++edits_;  // a computation still running is stale now
    state_->refreshStatistics();
}

}  // namespace voxseg::ui
