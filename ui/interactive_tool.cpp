#include "ui/interactive_tool.h"

#include "core/log.h"
#include "edit/interactive/interactive_model.h"
#include "edit/interactive/interactive_session.h"
#include "edit/interactive/prompt_ops.h"
#include "engine/backend.h"
#include "ui/background_task.h"
#include "ui/viewer_state.h"

#include <QSettings>

#include <fmt/format.h>

#include <chrono>

namespace voxseg::ui {
namespace {

constexpr const char* kComponent = "viewer.interactive";
constexpr const char* kModelKey = "interactive/model_folder";

using edit::interactive::Box;
using edit::interactive::InteractiveDelta;
using edit::interactive::InteractiveModel;
using edit::interactive::InteractiveModelOptions;
using edit::interactive::InteractiveSession;

}  // namespace

struct InteractiveTool::Job {
    enum class Type { kLoad, kOp, kRevert, kReapply, kRestart, kRebuild } type = Type::kOp;
    QString folder;                           // kLoad
    edit::EditOp op;                          // kOp
    std::optional<PromptKind> prompt;         // kOp of a drawn prompt (for the status message)
    std::shared_ptr<InteractiveDelta> delta;  // kRevert, kReapply
    std::vector<edit::JournalLine> lines;     // kRebuild: the restored journal
    Volume base;                              // kRebuild: the label map it started from
    std::shared_ptr<const Volume> image;      // set when the session needs the shown image
    bool autozoom = true;
    int image_generation = 0;  // the shown image when the job started
    int session_epoch = 0;     // the interactive session it was given in (restart() starts one)
};

struct InteractiveTool::JobResult {
    std::shared_ptr<Job> job;
    Status status;
    edit::interactive::SessionStep step;        // kOp; kRevert/kReapply: object_changed
    edit::EditOp op;                            // kOp: the line to journal
    edit::interactive::RebuiltSession rebuilt;  // kRebuild
    double ms = 0;
    std::unique_ptr<InteractiveModel> model;  // kLoad
    engine::DeviceSpec device;                // kLoad: what it was loaded for
    std::unique_ptr<InteractiveSession> session;
    // kLoad: the session its forward reports on (set once the session exists)
    std::shared_ptr<InteractiveSession*> session_ref = std::make_shared<InteractiveSession*>();
};

namespace {

// The model's network calls, each reported to the tool as progressed(done, planned): the calls
// of this prediction so far, of the AutoZoom calls plus the refinement boxes once planned (the
// session's prediction log, written on this same worker thread).
edit::interactive::Forward reportingForward(InteractiveModel& model,
                                            std::shared_ptr<InteractiveSession*> session,
                                            QPointer<InteractiveTool> tool) {
    return [forward = model.forward(), session, tool](const std::vector<float>& input,
                                                      std::vector<uint8_t>& argmax) {
        const Status s = forward(input, argmax);
        if (!s.isOk() || !*session || !tool) return s;
        const edit::interactive::PredictionLog& log = (*session)->lastLog();
        const int done = static_cast<int>(log.forwards.size());
        int planned = 0;
        if (!log.refinement_boxes.empty()) {
            planned = static_cast<int>(log.refinement_boxes.size());
            for (const auto& call : log.forwards) planned += call.zoom > 1.0;
        }
        QMetaObject::invokeMethod(
            tool.data(),
            [tool, done, planned] {
                if (tool) emit tool->progressed(done, planned);
            },
            Qt::QueuedConnection);
        return s;
    };
}

// A job's session part (worker thread).
Status runJob(InteractiveTool::JobResult& r, InteractiveSession& session, const Geometry& g,
              const std::string& model) {
    const auto& job = *r.job;
    if (job.image) VOXSEG_RETURN_IF_ERROR(session.setImage(*job.image));
    session.setAutoZoom(job.autozoom);
    if (job.type == InteractiveTool::Job::Type::kRestart) return session.resetInteractions();
    if (job.type == InteractiveTool::Job::Type::kRebuild) {
        if (!job.image)
            return Status(StatusCode::kFailedPrecondition, "no image to rebuild the session on");
        auto rebuilt =
            edit::interactive::rebuildSession(session, *job.image, job.base, job.lines, model);
        if (!rebuilt.isOk()) {
            (void)session.resetInteractions();  // a new session instead
            return rebuilt.status();
        }
        r.rebuilt = std::move(rebuilt).value();
        return Status::ok();
    }
    if (job.type == InteractiveTool::Job::Type::kOp) {
        VOXSEG_ASSIGN_OR_RETURN(r.step,
                                edit::interactive::runSessionPart(session, g, job.op, nullptr, {}));
        // The journal line, the accepted object recorded here rather than on the GUI thread.
        r.op = job.op.kind == edit::OpKind::kPromptAccept
                   ? edit::interactive::acceptPromptOp(job.op.label, job.op.overwrite, g,
                                                       r.step.accepted)
                   : job.op;
        return Status::ok();
    }
    auto changed = job.type == InteractiveTool::Job::Type::kRevert ? session.revert(*job.delta)
                                                                   : session.reapply(*job.delta);
    if (!changed.isOk()) return changed.status();
    r.step.object_changed = *changed;
    return Status::ok();
}

}  // namespace

InteractiveTool::InteractiveTool(ViewerState* state, QObject* parent)
    : QObject(parent), state_(state) {
    connect(state_, &ViewerState::imageChanged, this, &InteractiveTool::onImageChanged);
}

InteractiveTool::~InteractiveTool() {
    queue_.clear();
    if (thread_) thread_->wait();
}

QString InteractiveTool::rememberedModelFolder() { return QSettings().value(kModelKey).toString(); }

namespace {

Status notReady(const std::string& message) {
    return Status(StatusCode::kFailedPrecondition, message);
}

}  // namespace

void InteractiveTool::setKind(PromptKind kind) { kind_ = kind; }
void InteractiveTool::setInclude(bool include) { include_ = include; }

void InteractiveTool::setPreviewLabel(int label) {
    if (label == preview_label_) return;
    preview_label_ = label;
    rebuildPreview();
}

void InteractiveTool::onImageChanged() {
    image_dirty_ = true;
    ++image_generation_;
    drawing_.reset();
    mask_.clear();
    rebuildPreview();
    checkInput();
}

void InteractiveTool::checkInput() {
    QStringList findings;
    if (model_ && state_->hasImage())
        for (const std::string& f : model_->inputFindings(state_->image())) {
            log::warning(kComponent, "{}", f);
            findings << QString::fromStdString(f);
        }
    if (findings == input_findings_) return;
    input_findings_ = findings;
    emit inputFindingsChanged();
}

void InteractiveTool::loadModel(const QString& folder) {
    auto job = std::make_shared<Job>();
    job->type = Job::Type::kLoad;
    job->folder = folder;
    queue_.push_back(job);
    ++loads_pending_;
    emit pendingChanged(pending());
    startNext();
}

void InteractiveTool::press(int slice_axis, const Point3& voxel, bool exclude) {
    Prompt p;
    p.kind = kind_;
    p.include = include_ != exclude;
    p.slice_axis = slice_axis;
    p.points = {voxel};
    if (kind_ == PromptKind::kPoint) {
        (void)submit(p);
        return;
    }
    drawing_ = std::move(p);
    emit drawingChanged();
}

void InteractiveTool::drag(const Point3& voxel) {
    if (!drawing_) return;
    drawing_->points.push_back(voxel);
    emit drawingChanged();
}

void InteractiveTool::release() {
    if (!drawing_) return;
    Prompt p = std::move(*drawing_);
    drawing_.reset();
    emit drawingChanged();
    (void)submit(p);
}

QString InteractiveTool::precisionName() const {
    return model_ ? QString::fromStdString(engine::precisionName(model_->precision())) : QString();
}

edit::EditOp InteractiveTool::promptOp(const Prompt& p) const {
    namespace ei = edit::interactive;
    const Geometry g = state_->image().geometry();
    switch (p.kind) {
        case PromptKind::kPoint:
            return ei::pointPromptOp(g, p.points.at(0), p.include);
        case PromptKind::kBox:
            return ei::boxPromptOp(g, boxOfDrag(p.points.at(0), p.points.back(), p.slice_axis),
                                   p.include);
        case PromptKind::kScribble:
            return ei::scribblePromptOp(g, onFirstSlice(p.points, p.slice_axis), p.include);
        case PromptKind::kLasso:
            return ei::lassoPromptOp(g, closedLasso(onFirstSlice(p.points, p.slice_axis)),
                                     p.include);
    }
    return {};
}

Status InteractiveTool::submit(const Prompt& prompt) {
    Job job;
    job.type = Job::Type::kOp;
    job.prompt = prompt.kind;
    if (state_->hasImage()) job.op = promptOp(prompt);
    return enqueue(std::move(job));
}

Status InteractiveTool::accept(int label, edit::Overwrite overwrite) {
    Job job;
    job.type = Job::Type::kOp;
    job.op = edit::interactive::acceptPromptOp(label, overwrite);
    return enqueue(std::move(job));
}

Status InteractiveTool::resetObject() {
    Job job;
    job.type = Job::Type::kOp;
    job.op = edit::interactive::resetPromptOp();
    return enqueue(std::move(job));
}

void InteractiveTool::restart() {
    ++session_epoch_;  // prompts still queued belong to the session that ended
    pending_rebuild_.reset();
    journalled_autozoom_.reset();
    restart_pending_ = true;
    if (!hasModel() || !state_->hasImage()) return;  // a new image resets the session anyway
    Job job;
    job.type = Job::Type::kRestart;
    (void)enqueue(std::move(job));
}

void InteractiveTool::rebuildFrom(const QString& journal, Volume base) {
    auto job = std::make_shared<Job>();
    job->type = Job::Type::kRebuild;
    job->base = std::move(base);
    pending_rebuild_ = std::move(job);
    rebuild_journal_ = journal;
    if (hasModel() && !modelPending()) queueRebuild();  // else after the load
}

void InteractiveTool::queueRebuild() {
    auto lines = edit::readJournal(rebuild_journal_.toStdString());
    if (!lines.isOk()) {
        log::warning(kComponent, "the restored journal's interactive object was not rebuilt ({})",
                     lines.status().toString());
        pending_rebuild_.reset();
        return;
    }
    pending_rebuild_->lines = std::move(lines).value();
    queue_.push_front(std::move(pending_rebuild_));
    emit pendingChanged(pending());
    startNext();
}

void InteractiveTool::revert(std::shared_ptr<InteractiveDelta> delta) {
    Job job;
    job.type = Job::Type::kRevert;
    job.delta = std::move(delta);
    (void)enqueue(std::move(job));
}

void InteractiveTool::reapply(std::shared_ptr<InteractiveDelta> delta) {
    Job job;
    job.type = Job::Type::kReapply;
    job.delta = std::move(delta);
    (void)enqueue(std::move(job));
}

Status InteractiveTool::enqueue(Job job) {
    if (!hasModel() && !modelPending()) {
        const Status s = notReady(
            "no interactive model loaded: choose the model package folder (Interactive > "
            "Model...)");
        emit failed(QString::fromStdString(s.message()));
        return s;
    }
    if (!state_->hasImage()) {
        const Status s = notReady("no image: open an image before prompting");
        emit failed(QString::fromStdString(s.message()));
        return s;
    }
    job.autozoom = autozoom_;
    job.session_epoch = session_epoch_;
    queue_.push_back(std::make_shared<Job>(std::move(job)));
    emit pendingChanged(pending());
    startNext();
    return Status::ok();
}

void InteractiveTool::startNext() {
    if (running_ || queue_.empty()) return;
    std::shared_ptr<Job> job = queue_.front();
    queue_.pop_front();
    if (job->type != Job::Type::kLoad && image_dirty_ && state_->hasImage()) {
        job->image = std::make_shared<Volume>(state_->image());
        image_dirty_ = false;
    }
    running_ = true;
    job->image_generation = image_generation_;
    InteractiveSession* session = session_.get();
    const Geometry g = state_->hasImage() ? state_->image().geometry() : Geometry{};
    const std::string model = model_ ? model_->identity() : std::string();
    if (job->type == Job::Type::kRebuild && state_->hasImage() && !job->image)
        job->image = std::make_shared<Volume>(state_->image());  // the grid it rebuilds on
    const QPointer<InteractiveTool> tool(this);
    std::function<JobResult()> work = [job, session, g, model, tool] {
        JobResult r;
        r.job = job;
        const auto t0 = std::chrono::steady_clock::now();
        if (job->type == Job::Type::kLoad) {
            // The GPU when there is one, else the CPU; the precision auto picks there (bf16
            // on CPUs with AMX or AMD's avx512_bf16, a GPU's half precision).
            InteractiveModelOptions options;
            options.device = engine::DeviceSpec::automatic();
            options.precision = engine::Precision::kAuto;
            auto m = InteractiveModel::load(job->folder.toStdString(), options);
            if (!m.isOk() && m.status().code() != StatusCode::kInvalidArgument &&
                m.status().code() != StatusCode::kNotFound) {
                // A device that could not run it: the CPU, saying why.
                options.device = engine::DeviceSpec::cpu();
                auto cpu = InteractiveModel::load(job->folder.toStdString(), options);
                if (cpu.isOk())
                    log::warning(kComponent, "{}: not on the GPU ({}): running on the CPU",
                                 job->folder.toStdString(), m.status().toString());
                m = std::move(cpu);
            }
            if (!m.isOk()) {
                r.status = m.status();
                return r;
            }
            r.device = options.device;
            r.model = std::move(*m);
            r.session = std::make_unique<InteractiveSession>(
                r.model->spec(), reportingForward(*r.model, r.session_ref, tool));
            *r.session_ref = r.session.get();
        } else if (!session) {
            r.status = notReady("no interactive model loaded (its load failed)");
        } else {
            r.status = runJob(r, *session, g, model);
        }
        r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                   .count();
        return r;
    };
    thread_ =
        runInBackground<JobResult>(this, std::move(work), [this](JobResult& r) { finish(r); });
}

void InteractiveTool::finish(JobResult& r) {
    running_ = false;
    const Job& job = *r.job;
    if (job.type == Job::Type::kLoad) --loads_pending_;
    if (!r.status.isOk()) {
        if (job.image) image_dirty_ = true;  // the image did not reach the session
        if (job.type == Job::Type::kRebuild) {
            // Not an error of the user's: the restored journal's open object is just not back.
            log::warning(kComponent,
                         "the restored journal's interactive object was not rebuilt ({}): the "
                         "next prompt starts a new object",
                         r.status.message());
            restart_pending_ = true;
            journalled_autozoom_.reset();
            mask_.clear();
            rebuildPreview();
        } else {
            const QString what =
                job.type == Job::Type::kLoad ? QString("model %1: ").arg(job.folder)
                : job.prompt ? QString("%1 prompt: ").arg(promptKindName(*job.prompt))
                             : QString();
            log::warning(kComponent, "{}{}", what.toStdString(), r.status.toString());
            emit failed(what + QString::fromStdString(r.status.message()));
        }
    } else if (job.type == Job::Type::kLoad) {
        model_ = std::move(r.model);
        model_device_ = r.device;
        session_ = std::move(r.session);
        model_folder_ = job.folder;
        model_description_ = QString::fromStdString(model_->describe());
        journalled_autozoom_.reset();  // the next prompt journals the new session first
        restart_pending_ = true;
        QSettings().setValue(kModelKey, job.folder);
        image_dirty_ = true;
        mask_.clear();
        rebuildPreview();
        emit modelChanged();
        checkInput();
        if (pending_rebuild_) queueRebuild();  // first, on the new session and the shown image
    } else if (job.image_generation != image_generation_) {
        // Another image was opened while it ran: its result belongs to the old one.
    } else if (job.type == Job::Type::kRestart) {
        mask_.clear();
        rebuildPreview();
    } else if (job.type == Job::Type::kRebuild) {
        restart_pending_ = false;  // the journal's session goes on
        journalled_autozoom_ = r.rebuilt.autozoom;
        copyChanged(Box{{0, 0, 0}, session_->shape()});
        log::info(kComponent,
                  "interactive session rebuilt from the restored journal ({} prompt "
                  "steps undoable)",
                  r.rebuilt.deltas.size());
        emit rebuilt(r.rebuilt.deltas);
    } else if (job.type != Job::Type::kOp) {  // undo / redo of a prompt step
        if (r.step.object_changed) copyChanged(*r.step.object_changed);
        emit latencyChanged(r.ms, QString("%1 in %2 ms")
                                      .arg(job.type == Job::Type::kRevert ? "undone" : "redone")
                                      .arg(r.ms, 0, 'f', 0));
    } else {
        finishOp(job, r);
    }
    startNext();
    emit pendingChanged(pending());
}

void InteractiveTool::finishOp(const Job& job, JobResult& r) {
    const edit::OpKind kind = job.op.kind;
    if (job.session_epoch != session_epoch_) {
        // Given before the edit session ended: its journal is closed, and the restart queued
        // behind it clears what it did. Nothing goes into the next journal.
        log::info(kComponent, "a {} given before the edit session ended was not journalled",
                  edit::opName(kind));
        return;
    }
    if (!journalled_autozoom_ || *journalled_autozoom_ != job.autozoom) {
        journalled_autozoom_ = job.autozoom;
        emit stepDone(
            edit::interactive::sessionPromptOp(model_->identity(), model_->networkSha256(),
                                               engine::precisionName(model_->precision()),
                                               job.autozoom, restart_pending_),
            nullptr, restart_pending_);
        restart_pending_ = false;
    }
    if (kind == edit::OpKind::kPromptAccept || kind == edit::OpKind::kPromptReset) {
        const Index3 shape = session_->shape();
        mask_.clear();
        rebuildPreview();
        emit stepDone(r.op, r.step.delta, r.step.history_cleared);
        if (kind == edit::OpKind::kPromptAccept) emit objectAccepted(r.step.accepted, shape);
        return;
    }
    last_ms_ = r.ms;
    if (r.step.object_changed) copyChanged(*r.step.object_changed);
    emit stepDone(r.op, r.step.delta, r.step.history_cleared);
    emit latencyChanged(r.ms, QString("%1 (%2) in %3 ms")
                                  .arg(promptKindName(job.prompt.value_or(PromptKind::kPoint)))
                                  .arg(job.op.include ? "include" : "exclude")
                                  .arg(r.ms, 0, 'f', 0));
}

void InteractiveTool::copyChanged(const Box& box) {
    const Index3 shape = session_->shape();
    const std::vector<uint8_t>& target = session_->target();
    if (shape_ != shape || mask_.size() != target.size()) {
        shape_ = shape;
        mask_.assign(target.size(), 0);
    }
    for (int64_t z = box.lo[0]; z < box.hi[0]; ++z)
        for (int64_t y = box.lo[1]; y < box.hi[1]; ++y) {
            const size_t row = (z * shape[1] + y) * shape[2];
            std::copy(target.begin() + row + box.lo[2], target.begin() + row + box.hi[2],
                      mask_.begin() + row + box.lo[2]);
        }
    rebuildPreview();
}

void InteractiveTool::rebuildPreview() {
    preview_ = edit::EditPreview();
    const int64_t ny = shape_[1], nx = shape_[2];
    for (int64_t v = 0; v < static_cast<int64_t>(mask_.size()); ++v) {
        if (!mask_[v]) continue;
        preview_.voxels.push_back(v);
        preview_.values.push_back(preview_label_);
        const std::array<int64_t, 3> ijk{v % nx, (v / nx) % ny, v / (nx * ny)};
        for (int a = 0; a < 3; ++a) {
            if (preview_.voxels.size() == 1 || ijk[a] < preview_.box_lo[a])
                preview_.box_lo[a] = ijk[a];
            if (preview_.voxels.size() == 1 || ijk[a] > preview_.box_hi[a])
                preview_.box_hi[a] = ijk[a];
        }
    }
    ++generation_;
    emit maskChanged();
}

}  // namespace voxseg::ui
