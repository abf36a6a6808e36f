#include "ui/interactive_tool.h"

#include "core/log.h"
#include "edit/interactive/interactive_model.h"
#include "edit/interactive/interactive_session.h"
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
using edit::interactive::InteractiveModel;
using edit::interactive::InteractiveSession;

}  // namespace

struct InteractiveTool::Job {
    enum class Type { kLoad, kPrompt, kAccept, kReset, kUndo } type = Type::kPrompt;
    QString folder;                       // kLoad
    Prompt prompt;                        // kPrompt
    std::shared_ptr<const Volume> image;  // set when the session needs the shown image
    bool autozoom = true;
    int image_generation = 0;  // the shown image when the job started
};

struct InteractiveTool::JobResult {
    std::shared_ptr<Job> job;
    Status status;
    std::optional<Box> changed;
    double ms = 0;
    std::unique_ptr<InteractiveModel> model;  // kLoad
    std::unique_ptr<InteractiveSession> session;
    std::vector<uint8_t> accepted;  // kAccept: the object
};

namespace {

using Result_t = Result<std::optional<Box>>;

// One prompt on the session (worker thread).
Result_t runPrompt(InteractiveSession& s, const Prompt& p) {
    switch (p.kind) {
        case PromptKind::kPoint:
            return s.addPoint(p.points.at(0), p.include);
        case PromptKind::kBox:
            return s.addBox(boxOfDrag(p.points.at(0), p.points.back(), p.slice_axis), p.include);
        case PromptKind::kScribble:
            return s.addScribble(onFirstSlice(p.points, p.slice_axis), p.include);
        case PromptKind::kLasso:
            return s.addLasso(closedLasso(onFirstSlice(p.points, p.slice_axis)), p.include);
    }
    return invalidArgument("unknown prompt");
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

Status InteractiveTool::submit(const Prompt& prompt) {
    Job job;
    job.type = Job::Type::kPrompt;
    job.prompt = prompt;
    return enqueue(std::move(job));
}

Status InteractiveTool::accept() {
    Job job;
    job.type = Job::Type::kAccept;
    return enqueue(std::move(job));
}

Status InteractiveTool::resetObject() {
    Job job;
    job.type = Job::Type::kReset;
    return enqueue(std::move(job));
}

Status InteractiveTool::undoPrompt() {
    Job job;
    job.type = Job::Type::kUndo;
    return enqueue(std::move(job));
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
    std::function<JobResult()> work = [job, session] {
        JobResult r;
        r.job = job;
        const auto t0 = std::chrono::steady_clock::now();
        if (job->type == Job::Type::kLoad) {
            auto m = InteractiveModel::load(job->folder.toStdString(), {});
            if (!m.isOk()) {
                r.status = m.status();
                return r;
            }
            r.model = std::move(*m);
            r.session = std::make_unique<InteractiveSession>(r.model->spec(), r.model->forward());
        } else if (!session) {
            r.status = notReady("no interactive model loaded (its load failed)");
            return r;
        } else {
            if (job->image) r.status = session->setImage(*job->image);
            session->setAutoZoom(job->autozoom);
            if (r.status.isOk() && job->type == Job::Type::kPrompt) {
                auto c = runPrompt(*session, job->prompt);
                if (c.isOk())
                    r.changed = *c;
                else
                    r.status = c.status();
            } else if (r.status.isOk() && job->type == Job::Type::kAccept) {
                r.accepted = session->target();
                r.status = session->resetInteractions();
            } else if (r.status.isOk() && job->type == Job::Type::kUndo) {
                const edit::interactive::UndoResult u = session->undo();
                if (!u.undone)
                    r.status = notReady(
                        "nothing to undo in the current object (one prompt back, as "
                        "nnInteractive)");
                r.changed = u.changed;
            } else if (r.status.isOk() && job->type == Job::Type::kReset) {
                r.status = session->resetInteractions();
            }
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
        const QString what = job.type == Job::Type::kLoad ? QString("model %1: ").arg(job.folder)
                             : job.type == Job::Type::kPrompt
                                 ? QString("%1 prompt: ").arg(promptKindName(job.prompt.kind))
                                 : QString();
        log::warning(kComponent, "{}{}", what.toStdString(), r.status.toString());
        emit failed(what + QString::fromStdString(r.status.message()));
    } else if (job.type == Job::Type::kLoad) {
        model_ = std::move(r.model);
        session_ = std::move(r.session);
        model_folder_ = job.folder;
        model_description_ = QString::fromStdString(model_->describe());
        QSettings().setValue(kModelKey, job.folder);
        image_dirty_ = true;
        mask_.clear();
        rebuildPreview();
        emit modelChanged();
    } else if (job.type != Job::Type::kLoad && job.image_generation != image_generation_) {
        // Another image was opened while it ran: its result belongs to the old one.
    } else if (job.type == Job::Type::kUndo) {
        if (r.changed) copyChanged(*r.changed);
        emit latencyChanged(r.ms, QString("undid the last prompt in %1 ms").arg(r.ms, 0, 'f', 0));
    } else if (job.type == Job::Type::kPrompt) {
        last_ms_ = r.ms;
        if (r.changed) copyChanged(*r.changed);
        emit latencyChanged(r.ms, QString("%1 (%2) in %3 ms")
                                      .arg(promptKindName(job.prompt.kind))
                                      .arg(job.prompt.include ? "include" : "exclude")
                                      .arg(r.ms, 0, 'f', 0));
    } else {
        const Index3 shape = session_->shape();
        mask_.clear();
        rebuildPreview();
        if (job.type == Job::Type::kAccept) emit objectAccepted(r.accepted, shape);
    }
    startNext();
    emit pendingChanged(pending());
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
