#include "ui/surface_view.h"

#include "core/log.h"
#include "ui/background_task.h"
#include "ui/viewer_state.h"

#include <QGuiApplication>
#include <QKeyEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QOffscreenSurface>
#include <QOpenGLContext>
#include <QOpenGLFramebufferObject>
#include <QOpenGLShaderProgram>
#include <QPainter>
#include <QWheelEvent>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <optional>
#include <tuple>

namespace voxseg::ui {

// What a build hands to the GUI thread.
struct SurfaceView::MeshSet {
    std::vector<SurfaceMesh> full, coarse;
    double seconds = 0, cpu_seconds = 0;  // wall and the worker thread's CPU time
    int patched = 0;  // labels patched around their edits rather than meshed whole
    std::string how;  // per edited label: patched or whole, and its time
};

// One edited label of a re-mesh build.
struct SurfaceView::EditJob {
    int label = 0;
    std::vector<IndexBox> boxes;  // changed since its mesh was built
    IndexBox label_box;
    std::optional<SurfaceMesh> mesh;
};

namespace {

constexpr const char* kComponent = "viewer.3d";

double threadCpuSeconds() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Adds an edit's box to those waiting for a label's re-mesh: it joins a box when the two windows
// patchLabelSurface would mesh (the box plus about 13 voxels) are no larger together than
// apart and the joined box stays within 64 voxels per axis, so a stroke becomes a chain of
// boxes along its path, not one box around all of it (a diagonal stroke's box is mostly empty).
void addEditBox(std::vector<IndexBox>& boxes, IndexBox box) {
    constexpr int64_t kWindowMargin = 13, kMaxJoinedExtent = 64;
    auto window = [](IndexBox b) {
        for (int a = 0; a < 3; ++a) {
            b.lo[a] -= kWindowMargin;
            b.hi[a] += kWindowMargin;
        }
        return b.voxels();
    };
    for (bool merged = true; merged;) {
        merged = false;
        for (size_t i = 0; i < boxes.size(); ++i) {
            const IndexBox u = unite(boxes[i], box);
            const bool small = u.hi[0] - u.lo[0] < kMaxJoinedExtent &&
                               u.hi[1] - u.lo[1] < kMaxJoinedExtent &&
                               u.hi[2] - u.lo[2] < kMaxJoinedExtent;
            const bool contained = u.voxels() == boxes[i].voxels();
            if (contained || (small && window(u) <= window(boxes[i]) + window(box))) {
                box = u;
                boxes.erase(boxes.begin() + static_cast<std::ptrdiff_t>(i));
                merged = true;
                break;
            }
        }
    }
    boxes.push_back(box);
    if (boxes.size() > 32) {  // scattered edits: one box (patchLabelSurface says if it pays)
        IndexBox all;
        for (const IndexBox& b : boxes) all = unite(all, b);
        boxes = {all};
    }
}

// The overlay opacity is for a surface seen through: 3D alpha = 2 x opacity, capped at 1, so
// the default 50 % overlay shows opaque surfaces and lower opacities see-through ones.
float surfaceAlpha(double opacity) { return static_cast<float>(std::min(1.0, 2.0 * opacity)); }

const char* kVertexShader = R"(#version 120
attribute vec3 position;
attribute vec3 normal;
uniform mat4 mvp;
uniform mat3 normal_matrix;
varying vec3 v_normal;
void main() {
    v_normal = normal_matrix * normal;
    gl_Position = mvp * vec4(position, 1.0);
}
)";

// Headlight, lit from both sides (marching-cubes normals are not consistently oriented).
const char* kFragmentShader = R"(#version 120
uniform vec3 color;
uniform float alpha;
varying vec3 v_normal;
void main() {
    vec3 n = normalize(v_normal);
    float d = abs(n.z);
    gl_FragColor = vec4(color * (0.3 + 0.7 * d) + vec3(0.2) * pow(d, 32.0), alpha);
}
)";

// LPS -> eye space looking at the patient's front: x = patient left, y = superior, z = anterior.
QMatrix4x4 anteriorView() {
    return QMatrix4x4(1, 0, 0, 0,   //
                      0, 0, 1, 0,   //
                      0, -1, 0, 0,  //
                      0, 0, 0, 1);
}

}  // namespace

bool openGlAvailable(QString* why) {
    const QString platform = QGuiApplication::platformName();
    if (platform == "offscreen" || platform == "minimal") {
        if (why) *why = "no OpenGL on the '" + platform + "' Qt platform";
        return false;
    }
    QOpenGLContext context;
    if (!context.create()) {
        if (why) *why = "no OpenGL context could be created";
        return false;
    }
    QOffscreenSurface surface;
    surface.create();
    if (!context.makeCurrent(&surface)) {
        if (why) *why = "the OpenGL context could not be made current";
        return false;
    }
    context.doneCurrent();
    return true;
}

QWidget* createSurfaceView(ViewerState* state, QWidget* parent) {
    QString why;
    if (openGlAvailable(&why)) return new SurfaceView(state, parent);
    log::info(kComponent, "3D view disabled: {}", why.toStdString());
    auto* label = new QLabel("3D view unavailable: " + why, parent);
    label->setObjectName("surface_view");
    label->setAlignment(Qt::AlignCenter);
    label->setWordWrap(true);
    label->setStyleSheet("background: black; color: gray;");
    return label;
}

SurfaceView::SurfaceView(ViewerState* state, QWidget* parent) : QWidget(parent), state_(state) {
    setObjectName("surface_view");
    setFocusPolicy(Qt::StrongFocus);
    setMinimumSize(120, 120);
    connect(state_, &ViewerState::labelMapChanged, this, &SurfaceView::onLabelMapChanged);
    connect(state_, &ViewerState::labelVoxelsChanged, this,
            [this](const IndexBox& box, const std::vector<int>& labels) {
                onLabelVoxelsChanged(box, labels);
            });
    setAttribute(Qt::WA_OpaquePaintEvent);
    connect(state_, &ViewerState::labelDisplayChanged, this, &SurfaceView::redraw);
    connect(state_, &ViewerState::imageChanged, this, [this] { resetCamera(); });
    remesh_timer_ = new QTimer(this);
    remesh_timer_->setSingleShot(true);
    remesh_timer_->setInterval(kRemeshDelayMs);
    connect(remesh_timer_, &QTimer::timeout, this, [this] {
        if (frame_deferred_) {
            frame_deferred_ = false;
            redraw();
        }
        if (!building_) remeshEditedLabels();
    });
    coarse_timer_ = new QTimer(this);
    coarse_timer_->setSingleShot(true);
    coarse_timer_->setInterval(kCoarseDelayMs);
    connect(coarse_timer_, &QTimer::timeout, this, &SurfaceView::refreshCoarseMeshes);
    idle_timer_ = new QTimer(this);
    idle_timer_->setSingleShot(true);
    idle_timer_->setInterval(250);
    connect(idle_timer_, &QTimer::timeout, this, [this] { setInteracting(false); });
    resetCamera();
}

SurfaceView::~SurfaceView() {
    token_.cancel();
    for (auto& t : threads_)
        if (t) t->wait();
    if (context_ && surface_ && context_->makeCurrent(surface_.get())) {
        releaseGpu();
        fbo_.reset();
        program_.reset();
        context_->doneCurrent();
    }
}

void SurfaceView::redraw() {
    frame_dirty_ = true;
    update();
}

void SurfaceView::releaseGpu() {
    for (auto* set : {&gpu_, &gpu_coarse_}) {
        for (auto& g : *set) {
            g->vertices.destroy();
            g->indices.destroy();
        }
        set->clear();
    }
}

void SurfaceView::setInteracting(bool on) {
    if (on == interacting_) return;
    interacting_ = on;
    redraw();  // full meshes again when the interaction ends
}

void SurfaceView::onLabelMapChanged() {
    stale_ = true;
    token_.cancel();  // a build in flight is for the old label map
    if (!state_->hasLabelMap()) {
        meshes_.clear();
        coarse_meshes_.clear();
        pending_edits_.clear();
        upload_pending_ = upload_all_ = true;
        stale_ = false;
        redraw();
        return;
    }
    if (isVisible()) requestMeshes();
}

void SurfaceView::onLabelVoxelsChanged(const IndexBox& box, const std::vector<int>& labels) {
    if (std::all_of(labels.begin(), labels.end(), [](int l) { return l == 0; })) return;
    if (!isVisible() || stale_) {
        stale_ = true;  // everything again when shown
        return;
    }
    for (int l : labels)
        if (l != 0) addEditBox(pending_edits_[l], box);
    // After the edits pause (a brush stroke sends one per mouse move): one build at a time,
    // labels edited meanwhile are re-meshed when it is done.
    remesh_timer_->start();
}

void SurfaceView::remeshEditedLabels() {
    if (pending_edits_.empty() || building_) return;
    // Every edited label in one build: a label with a mesh is patched around its edits (cost
    // of the edit, not of the label: painting into the lung does not re-mesh the lung), one
    // without (new, or too much changed) is meshed whole on its box.
    std::vector<EditJob> jobs;
    std::vector<int> labels;
    for (auto& entry : pending_edits_) {
        const int label = entry.first;  // not a structured binding: clang 14 cannot capture one
        EditJob job;
        job.label = label;
        job.boxes = std::move(entry.second);
        job.label_box = state_->labelBox(label);
        // Moved, not copied (a lung's mesh is tens of MB): the view draws its uploaded buffers
        // meanwhile, and the build hands the mesh back.
        auto it = std::find_if(meshes_.begin(), meshes_.end(),
                               [&](const SurfaceMesh& m) { return m.label == label; });
        if (it != meshes_.end()) {
            job.mesh = std::move(*it);
            meshes_.erase(it);
        }
        jobs.push_back(std::move(job));
        labels.push_back(label);
    }
    pending_edits_.clear();
    const std::vector<LabelInfo> infos = state_->labelInfos();
    launchBuild(labels, [jobs = std::move(jobs), infos](const Volume& label_map,
                                                        const Progress& progress) mutable {
        return remeshEdits(label_map, jobs, infos, progress);
    });
}

Result<SurfaceView::MeshSet> SurfaceView::remeshEdits(const Volume& label_map,
                                                      std::vector<EditJob>& jobs,
                                                      const std::vector<LabelInfo>& infos,
                                                      const Progress& progress) {
    MeshSet out;
    std::string how;
    for (EditJob& job : jobs) {
        VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());
        const auto t0 = std::chrono::steady_clock::now();
        auto took = [&] {
            return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        };
        if (job.mesh) {
            VOXSEG_ASSIGN_OR_RETURN(const bool patched,
                                    patchLabelSurface(label_map, job.boxes, *job.mesh));
            if (patched) {
                ++out.patched;
                how += fmt::format(" {}: patched at {} boxes, {:.0f} ms;", job.label,
                                   job.boxes.size(), took());
                if (!job.mesh->triangles.empty()) out.full.push_back(std::move(*job.mesh));
                continue;
            }
        }
        if (job.label_box.empty()) continue;  // edited away
        SurfaceOptions options;
        options.only_labels = {job.label};
        options.search_lo = job.label_box.lo;
        options.search_hi = job.label_box.hi;
        VOXSEG_ASSIGN_OR_RETURN(auto whole,
                                buildLabelSurfaces(label_map, infos, options, progress));
        how += fmt::format(" {}: whole{}, {:.0f} ms;", job.label,
                           job.mesh ? " (patch refused)" : "", took());
        for (auto& m : whole) out.full.push_back(std::move(m));
    }
    if (!how.empty()) how.pop_back();
    out.how = how;
    return out;
}

void SurfaceView::showEvent(QShowEvent* e) {
    QWidget::showEvent(e);
    if (stale_ && state_->hasLabelMap()) requestMeshes();
}

void SurfaceView::requestMeshes() {
    stale_ = false;
    pending_edits_.clear();
    const std::vector<LabelInfo> infos = state_->labelInfos();
    launchBuild({}, [infos](const Volume& label_map, const Progress& progress) -> Result<MeshSet> {
        MeshSet set;
        VOXSEG_ASSIGN_OR_RETURN(set.full, buildLabelSurfaces(label_map, infos, {}, progress));
        return set;
    });
}

template <typename Work>
void SurfaceView::launchBuild(std::vector<int> only, Work work) {
    building_ = true;
    update();
    token_ = CancelToken();
    const int generation = ++generation_;
    const Volume labels = state_->labelMap();
    const Progress progress({}, token_);
    using MeshResult = Result<MeshSet>;
    threads_.removeAll(nullptr);
    threads_ << runInBackground<MeshResult>(
        this,
        [labels, progress, only, work = std::move(work)]() mutable -> MeshResult {
            const auto t0 = std::chrono::steady_clock::now();
            const double cpu0 = threadCpuSeconds();
            VOXSEG_ASSIGN_OR_RETURN(MeshSet set, work(labels, progress));
            // After edits the meshes drawn while rotating follow later (refreshCoarseMeshes).
            if (only.empty()) set.coarse = decimateMeshes(set.full, kInteractionTriangles);
            size_t triangles = 0, coarse = 0;
            for (const auto& m : set.full) triangles += m.triangleCount();
            for (const auto& m : set.coarse) coarse += m.triangleCount();
            set.seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            set.cpu_seconds = threadCpuSeconds() - cpu0;
            log::info(kComponent, "{} surfaces{}, {} triangles{} in {:.3f} s{}", set.full.size(),
                      only.empty() ? "" : " (edited labels)", triangles,
                      only.empty() ? fmt::format(" ({} while rotating)", coarse) : std::string(),
                      set.seconds, set.how.empty() ? std::string() : ": label" + set.how);
            return set;
        },
        [this, generation, only](MeshResult& r) {
            if (generation != generation_) return;  // superseded
            building_ = false;
            ++mesh_builds_;
            last_build_labels_ = only;
            if (!r.isOk()) {
                if (r.status().code() != StatusCode::kCancelled)
                    log::warning(kComponent, "surfaces not built: {}", r.status().toString());
                return;
            }
            applyMeshes(only, r.value());
            remeshEditedLabels();
        });
}

void SurfaceView::applyMeshes(const std::vector<int>& only, MeshSet& set) {
    last_build_seconds_ = set.seconds;
    last_build_cpu_seconds_ = set.cpu_seconds;
    last_build_patched_ = set.patched;
    const bool had_meshes = !meshes_.empty();
    if (only.empty()) {
        meshes_ = std::move(set.full);
        coarse_meshes_ = std::move(set.coarse);
        coarse_stale_.clear();
        upload_all_ = true;
    } else {
        // Replace the edited labels' meshes (a label edited away has none now).
        auto edited = [&](const SurfaceMesh& m) {
            return std::find(only.begin(), only.end(), m.label) != only.end();
        };
        meshes_.erase(std::remove_if(meshes_.begin(), meshes_.end(), edited), meshes_.end());
        for (auto& m : set.full) meshes_.push_back(std::move(m));
        std::sort(meshes_.begin(), meshes_.end(),
                  [](const SurfaceMesh& a, const SurfaceMesh& b) { return a.label < b.label; });
        dirty_full_.insert(dirty_full_.end(), only.begin(), only.end());
        coarse_stale_.insert(coarse_stale_.end(), only.begin(), only.end());
        coarse_timer_->start();
    }
    // Frame the surfaces (a new label map, or the first surfaces).
    if (!meshes_.empty() && (only.empty() || !had_meshes)) {
        QVector3D lo(1e30f, 1e30f, 1e30f), hi(-1e30f, -1e30f, -1e30f);
        for (const auto& m : meshes_)
            for (size_t v = 0; v < m.positions.size(); v += 3)
                for (int c = 0; c < 3; ++c) {
                    lo[c] = std::min(lo[c], m.positions[v + c]);
                    hi[c] = std::max(hi[c], m.positions[v + c]);
                }
        centre_ = (lo + hi) / 2;
        radius_ = std::max(1.f, (hi - lo).length() / 2);
        distance_ = radius_ * 3.2f;
    }
    upload_pending_ = true;
    // While edits keep coming (a burst of undos, a stroke), the 2D views come first: a full 3D
    // frame on a software rasteriser holds the GUI thread for about 90 ms, so it waits for
    // the pause that ends the burst.
    if (remesh_timer_->isActive())
        frame_deferred_ = true;
    else
        redraw();
    emit meshesReady(static_cast<int>(meshes_.size()));
}

void SurfaceView::refreshCoarseMeshes() {
    if (coarse_stale_.empty()) return;
    if (building_ || coarse_building_) {
        coarse_timer_->start();  // after the build in flight
        return;
    }
    std::vector<int> labels = std::move(coarse_stale_);
    coarse_stale_.clear();
    std::sort(labels.begin(), labels.end());
    labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
    std::vector<SurfaceMesh> full;
    for (const auto& m : meshes_)
        if (std::binary_search(labels.begin(), labels.end(), m.label)) full.push_back(m);
    coarse_building_ = true;
    const int generation = generation_;
    threads_.removeAll(nullptr);
    threads_ << runInBackground<std::vector<SurfaceMesh>>(
        this, [full = std::move(full)] { return decimateMeshes(full, kInteractionTriangles); },
        [this, generation, labels](std::vector<SurfaceMesh>& coarse) {
            coarse_building_ = false;
            if (generation != generation_) {  // a new label map's build has its own
                refreshCoarseMeshes();
                return;
            }
            auto edited = [&](const SurfaceMesh& m) {
                return std::binary_search(labels.begin(), labels.end(), m.label);
            };
            coarse_meshes_.erase(
                std::remove_if(coarse_meshes_.begin(), coarse_meshes_.end(), edited),
                coarse_meshes_.end());
            for (auto& m : coarse) coarse_meshes_.push_back(std::move(m));
            dirty_coarse_.insert(dirty_coarse_.end(), labels.begin(), labels.end());
            upload_pending_ = true;
            if (interacting_) redraw();
            refreshCoarseMeshes();
        });
}

void SurfaceView::resetCamera() {
    // Slightly from the patient's left and above, so depth shows at first sight.
    rotation_ =
        QQuaternion::fromAxisAndAngle(1, 0, 0, 15) * QQuaternion::fromAxisAndAngle(0, 1, 0, -25);
    distance_ = radius_ * 3.2f;
    redraw();
}

bool SurfaceView::initializeGl() {
    if (gl_tried_) return gl_ready_;
    gl_tried_ = true;
    context_ = std::make_unique<QOpenGLContext>();
    surface_ = std::make_unique<QOffscreenSurface>();
    if (!context_->create()) {
        gl_info_ = "no OpenGL context could be created";
    } else {
        surface_->setFormat(context_->format());
        surface_->create();
        if (!context_->makeCurrent(surface_.get())) gl_info_ = "OpenGL context not current";
    }
    if (!gl_info_.isEmpty()) {
        log::warning(kComponent, "3D view: {}", gl_info_.toStdString());
        return false;
    }
    initializeOpenGLFunctions();
    program_ = std::make_unique<QOpenGLShaderProgram>();
    gl_ready_ = program_->addShaderFromSourceCode(QOpenGLShader::Vertex, kVertexShader) &&
                program_->addShaderFromSourceCode(QOpenGLShader::Fragment, kFragmentShader) &&
                program_->link();
    if (!gl_ready_) {
        gl_info_ = "shaders failed: " + program_->log();
        log::warning(kComponent, "3D view: {}", gl_info_.toStdString());
    } else {
        const char* version = reinterpret_cast<const char*>(glGetString(GL_VERSION));
        const char* renderer = reinterpret_cast<const char*>(glGetString(GL_RENDERER));
        gl_info_ =
            QString("OpenGL %1 (%2)").arg(version ? version : "?", renderer ? renderer : "?");
        log::info(kComponent, "{}", gl_info_.toStdString());
    }
    upload_pending_ = upload_all_ = true;
    return gl_ready_;
}

void SurfaceView::uploadMesh(const SurfaceMesh& m, std::vector<std::unique_ptr<GpuMesh>>& gpu) {
    auto g = std::make_unique<GpuMesh>();
    g->label = m.label;
    std::vector<float> interleaved;
    interleaved.reserve(m.positions.size() * 2);
    for (size_t v = 0; v < m.positions.size(); v += 3) {
        interleaved.insert(interleaved.end(), &m.positions[v], &m.positions[v] + 3);
        interleaved.insert(interleaved.end(), &m.normals[v], &m.normals[v] + 3);
    }
    g->vertices.create();
    g->vertices.bind();
    g->vertices.allocate(interleaved.data(), static_cast<int>(interleaved.size() * sizeof(float)));
    g->indices.create();
    g->indices.bind();
    g->indices.allocate(m.triangles.data(),
                        static_cast<int>(m.triangles.size() * sizeof(uint32_t)));
    g->index_count = static_cast<int>(m.triangles.size());
    gpu.push_back(std::move(g));
}

void SurfaceView::uploadMeshes() {
    // Everything after a new label map or context; after edits only the edited labels.
    if (upload_all_) releaseGpu();
    for (const auto& [meshes, gpu, labels] :
         {std::tuple{&meshes_, &gpu_, &dirty_full_},
          std::tuple{&coarse_meshes_, &gpu_coarse_, &dirty_coarse_}}) {
        auto dirty = [&, labels = labels](int label) {
            return upload_all_ || std::find(labels->begin(), labels->end(), label) != labels->end();
        };
        for (auto& g : *gpu)
            if (dirty(g->label)) {
                g->vertices.destroy();
                g->indices.destroy();
                g.reset();
            }
        gpu->erase(std::remove(gpu->begin(), gpu->end(), nullptr), gpu->end());
        for (const auto& m : *meshes)
            if (dirty(m.label)) uploadMesh(m, *gpu);
    }
    dirty_full_.clear();
    dirty_coarse_.clear();
    upload_all_ = false;
    upload_pending_ = false;
}

QImage SurfaceView::renderFrame() {
    const qreal dpr = devicePixelRatioF();
    const QSize size(std::max(1, static_cast<int>(width() * dpr)),
                     std::max(1, static_cast<int>(height() * dpr)));
    if (!initializeGl() || !context_->makeCurrent(surface_.get())) {
        QImage blank(size, QImage::Format_RGB32);
        blank.fill(QColor(15, 18, 23));
        return blank;
    }
    if (!fbo_ || fbo_->size() != size) {
        fbo_ = std::make_unique<QOpenGLFramebufferObject>(
            size, QOpenGLFramebufferObject::CombinedDepthStencil);
    }
    fbo_->bind();
    if (upload_pending_) uploadMeshes();
    glViewport(0, 0, size.width(), size.height());
    glClearColor(0.06f, 0.07f, 0.09f, 1.f);
    glClear(GL_COLOR_BUFFER_BIT | GL_DEPTH_BUFFER_BIT);
    glEnable(GL_DEPTH_TEST);
    glDisable(GL_CULL_FACE);
    QMatrix4x4 projection;
    const float aspect = static_cast<float>(size.width()) / static_cast<float>(size.height());
    projection.perspective(30.f, aspect, std::max(0.1f, distance_ - 2 * radius_),
                           distance_ + 2 * radius_);
    QMatrix4x4 view;
    view.translate(0, 0, -distance_);
    view.rotate(rotation_);
    QMatrix4x4 to_centre;
    to_centre.translate(-centre_);
    const QMatrix4x4 model_view = view * anteriorView() * to_centre;
    program_->bind();
    program_->setUniformValue("mvp", projection * model_view);
    program_->setUniformValue("normal_matrix", model_view.normalMatrix());
    const int position = program_->attributeLocation("position");
    const int normal = program_->attributeLocation("normal");
    program_->enableAttributeArray(position);
    program_->enableAttributeArray(normal);
    const auto& entries = state_->labels();
    const bool coarse = interacting_ && decimate_while_interacting_ && !gpu_coarse_.empty();
    // Opaque surfaces first, then the see-through ones blended without depth writes.
    for (const bool blended : {false, true}) {
        if (blended) {
            glEnable(GL_BLEND);
            glBlendFunc(GL_SRC_ALPHA, GL_ONE_MINUS_SRC_ALPHA);
            glDepthMask(GL_FALSE);
        }
        for (const auto& g : coarse ? gpu_coarse_ : gpu_) {
            auto it = std::find_if(entries.begin(), entries.end(),
                                   [&](const LabelEntry& e) { return e.value == g->label; });
            if (it != entries.end() && !it->visible) continue;
            const float alpha = it != entries.end() ? surfaceAlpha(it->opacity) : 1.f;
            if (alpha <= 0.f || (alpha < 1.f) != blended) continue;
            const auto c = it != entries.end() ? it->color : std::array<uint8_t, 3>{200, 200, 200};
            program_->setUniformValue("color", QVector3D(c[0], c[1], c[2]) / 255.f);
            program_->setUniformValue("alpha", alpha);
            g->vertices.bind();
            g->indices.bind();
            program_->setAttributeBuffer(position, GL_FLOAT, 0, 3, 6 * sizeof(float));
            program_->setAttributeBuffer(normal, GL_FLOAT, 3 * sizeof(float), 3, 6 * sizeof(float));
            glDrawElements(GL_TRIANGLES, g->index_count, GL_UNSIGNED_INT, nullptr);
            g->indices.release();
            g->vertices.release();
        }
    }
    glDepthMask(GL_TRUE);
    glDisable(GL_BLEND);
    program_->disableAttributeArray(position);
    program_->disableAttributeArray(normal);
    program_->release();
    glDisable(GL_DEPTH_TEST);
    glFinish();
    QImage image = fbo_->toImage();
    fbo_->release();
    context_->doneCurrent();
    image.setDevicePixelRatio(dpr);
    return image;
}

void SurfaceView::paintEvent(QPaintEvent*) {
    const qreal dpr = devicePixelRatioF();
    if (frame_dirty_ ||
        frame_.size() != QSize(static_cast<int>(width() * dpr), static_cast<int>(height() * dpr))) {
        frame_ = renderFrame();
        frame_dirty_ = false;
    }
    QPainter p(this);
    p.drawImage(QPointF(0, 0), frame_);
    p.setPen(QColor(220, 220, 220));
    const QRect r = rect().adjusted(6, 6, -6, -6);
    p.drawText(r, Qt::AlignLeft | Qt::AlignTop, "3D");
    QString status;
    if (!gl_ready_)
        status = "3D view unavailable: " + gl_info_;
    else if (building_)
        status = "building surfaces...";
    else if (!state_->hasLabelMap())
        status = "no label map";
    if (!status.isEmpty()) p.drawText(r, Qt::AlignCenter | Qt::TextWordWrap, status);
}

void SurfaceView::mousePressEvent(QMouseEvent* e) {
    last_mouse_ = e->position().toPoint();
    if (e->button() == Qt::LeftButton) setInteracting(true);
}

void SurfaceView::mouseReleaseEvent(QMouseEvent* e) {
    if (e->button() == Qt::LeftButton) setInteracting(false);
}

void SurfaceView::mouseMoveEvent(QMouseEvent* e) {
    if (!(e->buttons() & Qt::LeftButton)) return;
    const QPoint d = e->position().toPoint() - last_mouse_;
    last_mouse_ = e->position().toPoint();
    if (d.isNull()) return;
    const QVector3D axis = QVector3D(d.y(), d.x(), 0).normalized();
    const float angle = std::hypot(d.x(), d.y()) * 0.5f;
    rotation_ = QQuaternion::fromAxisAndAngle(axis, angle) * rotation_;
    redraw();
}

void SurfaceView::mouseDoubleClickEvent(QMouseEvent*) { resetCamera(); }

void SurfaceView::wheelEvent(QWheelEvent* e) {
    const float steps = e->angleDelta().y() / 120.f;
    distance_ = std::clamp(distance_ * std::pow(0.88f, steps), radius_ * 0.5f, radius_ * 20.f);
    setInteracting(true);
    idle_timer_->start();
    redraw();
    e->accept();
}

void SurfaceView::keyPressEvent(QKeyEvent* e) {
    if (e->key() == Qt::Key_R)
        resetCamera();
    else
        QWidget::keyPressEvent(e);
}

}  // namespace voxseg::ui
