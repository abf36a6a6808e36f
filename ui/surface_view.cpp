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

namespace voxseg::ui {
namespace {

constexpr const char* kComponent = "viewer.3d";

struct MeshSet {
    std::vector<SurfaceMesh> full, coarse;
    double seconds = 0;
};

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
    connect(
        state_, &ViewerState::labelVoxelsChanged, this,
        [this](const IndexBox&, const std::vector<int>& labels) { onLabelVoxelsChanged(labels); });
    setAttribute(Qt::WA_OpaquePaintEvent);
    connect(state_, &ViewerState::labelDisplayChanged, this, &SurfaceView::redraw);
    connect(state_, &ViewerState::imageChanged, this, [this] { resetCamera(); });
    remesh_timer_ = new QTimer(this);
    remesh_timer_->setSingleShot(true);
    remesh_timer_->setInterval(kRemeshDelayMs);
    connect(remesh_timer_, &QTimer::timeout, this, [this] {
        if (!building_) remeshNextLabel();
    });
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
        upload_pending_ = true;
        stale_ = false;
        redraw();
        return;
    }
    if (isVisible()) requestMeshes();
}

void SurfaceView::onLabelVoxelsChanged(const std::vector<int>& labels) {
    std::vector<int> edited;
    for (int l : labels)
        if (l != 0) edited.push_back(l);
    if (edited.empty()) return;
    if (!isVisible() || stale_) {
        stale_ = true;  // everything again when shown
        return;
    }
    for (int l : edited)
        if (std::find(pending_labels_.begin(), pending_labels_.end(), l) == pending_labels_.end())
            pending_labels_.push_back(l);
    // After the edits pause (a brush stroke sends one per mouse move): one build at a time,
    // labels edited meanwhile are re-meshed when it is done.
    remesh_timer_->start();
}

void SurfaceView::remeshNextLabel() {
    // One label per build, the smallest first: painting a small structure over a large one
    // (a lesion in the lung) shows the small one's surface at once and the large one's after.
    if (pending_labels_.empty()) return;
    auto voxels = [&](int l) {
        const IndexBox b = state_->labelBox(l);
        if (b.empty()) return int64_t{0};
        return (b.hi[0] - b.lo[0] + 1) * (b.hi[1] - b.lo[1] + 1) * (b.hi[2] - b.lo[2] + 1);
    };
    auto next = std::min_element(pending_labels_.begin(), pending_labels_.end(),
                                 [&](int a, int b) { return voxels(a) < voxels(b); });
    const int label = *next;
    pending_labels_.erase(next);
    requestMeshes({label});
}

void SurfaceView::showEvent(QShowEvent* e) {
    QWidget::showEvent(e);
    if (stale_ && state_->hasLabelMap()) requestMeshes();
}

void SurfaceView::requestMeshes(std::vector<int> only) {
    stale_ = false;
    building_ = true;
    if (only.empty()) pending_labels_.clear();
    update();
    token_ = CancelToken();
    const int generation = ++generation_;
    const Volume labels = state_->labelMap();
    const std::vector<pipeline::LabelInfo> infos = state_->labelInfos();
    const Progress progress({}, token_);
    // Re-meshing edited labels scans only where they can be.
    IndexBox search;
    for (int l : only) {
        const IndexBox b = state_->labelBox(l);
        if (b.empty()) continue;
        if (search.empty()) {
            search = b;
            continue;
        }
        for (int a = 0; a < 3; ++a) {
            search.lo[a] = std::min(search.lo[a], b.lo[a]);
            search.hi[a] = std::max(search.hi[a], b.hi[a]);
        }
    }
    using MeshResult = Result<MeshSet>;
    threads_.removeAll(nullptr);
    threads_ << runInBackground<MeshResult>(
        this,
        [labels, infos, progress, only, search]() -> MeshResult {
            const auto t0 = std::chrono::steady_clock::now();
            SurfaceOptions options;
            options.only_labels = only;
            options.search_lo = search.lo;
            options.search_hi = search.hi;
            auto r = buildLabelSurfaces(labels, infos, options, progress);
            if (!r.isOk()) return r.status();
            MeshSet set;
            set.full = std::move(r.value());
            set.coarse = decimateMeshes(set.full, kInteractionTriangles);
            size_t triangles = 0, coarse = 0;
            for (const auto& m : set.full) triangles += m.triangleCount();
            for (const auto& m : set.coarse) coarse += m.triangleCount();
            set.seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            log::info(kComponent, "{} surfaces{}, {} triangles ({} while rotating) in {:.3f} s",
                      set.full.size(), only.empty() ? "" : " (edited labels)", triangles, coarse,
                      set.seconds);
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
            last_build_seconds_ = r.value().seconds;
            const bool had_meshes = !meshes_.empty();
            if (only.empty()) {
                meshes_ = std::move(r.value().full);
                coarse_meshes_ = std::move(r.value().coarse);
            } else {
                // Replace the edited labels' meshes (a label edited away has none now).
                auto edited = [&](const SurfaceMesh& m) {
                    return std::find(only.begin(), only.end(), m.label) != only.end();
                };
                for (auto* set : {&meshes_, &coarse_meshes_})
                    set->erase(std::remove_if(set->begin(), set->end(), edited), set->end());
                for (auto& m : r.value().full) meshes_.push_back(std::move(m));
                for (auto& m : r.value().coarse) coarse_meshes_.push_back(std::move(m));
                for (auto* set : {&meshes_, &coarse_meshes_})
                    std::sort(set->begin(), set->end(),
                              [](const SurfaceMesh& a, const SurfaceMesh& b) {
                                  return a.label < b.label;
                              });
            }
            // Frame the surfaces.
            QVector3D lo(1e30f, 1e30f, 1e30f), hi(-1e30f, -1e30f, -1e30f);
            for (const auto& m : meshes_)
                for (size_t v = 0; v < m.positions.size(); v += 3) {
                    const QVector3D p(m.positions[v], m.positions[v + 1], m.positions[v + 2]);
                    for (int c = 0; c < 3; ++c) {
                        lo[c] = std::min(lo[c], p[c]);
                        hi[c] = std::max(hi[c], p[c]);
                    }
                }
            if (!meshes_.empty() && (only.empty() || !had_meshes)) {
                centre_ = (lo + hi) / 2;
                radius_ = std::max(1.f, (hi - lo).length() / 2);
                distance_ = radius_ * 3.2f;
            }
            upload_pending_ = true;
            redraw();
            emit meshesReady(static_cast<int>(meshes_.size()));
            remeshNextLabel();
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
    upload_pending_ = true;
    return gl_ready_;
}

void SurfaceView::uploadMeshes() {
    releaseGpu();
    for (const auto& [meshes, gpu] :
         {std::pair{&meshes_, &gpu_}, std::pair{&coarse_meshes_, &gpu_coarse_}})
        for (const auto& m : *meshes) {
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
            g->vertices.allocate(interleaved.data(),
                                 static_cast<int>(interleaved.size() * sizeof(float)));
            g->indices.create();
            g->indices.bind();
            g->indices.allocate(m.triangles.data(),
                                static_cast<int>(m.triangles.size() * sizeof(uint32_t)));
            g->index_count = static_cast<int>(m.triangles.size());
            gpu->push_back(std::move(g));
        }
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
