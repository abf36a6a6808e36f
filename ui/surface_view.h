// The 3D view: the label map's surfaces (ui/surface_mesh.h, built on a worker thread whenever
// the label map changes and the view is shown), lit by a headlight from both sides, in the
// labels' table colours and visibility. Starts looking at the patient's front (superior up,
// patient left on the right); left drag rotates, wheel zooms, R or double-click resets.
// Rendering is OpenGL into a framebuffer object of the view's own context, read back and drawn
// with QPainter: a QOpenGLWidget would switch the whole top-level window to OpenGL composition,
// and on a software rasteriser (Mesa llvmpipe) that made every 2D slice repaint cost ~55 ms
// instead of ~3 ms (docs/perf-viewer.md). createSurfaceView() returns a SurfaceView when an OpenGL
// context can be created (also llvmpipe, LIBGL_ALWAYS_SOFTWARE=1 under Xvfb), else a plain widget
// saying why (QT_QPA_PLATFORM=offscreen has no OpenGL). GUI thread only.
#pragma once

#include "core/progress.h"
#include "ui/mpr_slice.h"
#include "ui/surface_mesh.h"

#include <QImage>
#include <QMatrix4x4>
#include <QOpenGLBuffer>
#include <QOpenGLFunctions>
#include <QPointer>
#include <QQuaternion>
#include <QThread>
#include <QTimer>
#include <QVector3D>
#include <QWidget>

#include <map>
#include <memory>
#include <vector>

class QOpenGLContext;
class QOffscreenSurface;
class QOpenGLFramebufferObject;
class QOpenGLShaderProgram;

namespace voxseg::ui {

class ViewerState;

// Whether this process can create an OpenGL context; `why` says why not.
bool openGlAvailable(QString* why = nullptr);

QWidget* createSurfaceView(ViewerState* state, QWidget* parent);

class SurfaceView : public QWidget, protected QOpenGLFunctions {
    Q_OBJECT

  public:
    SurfaceView(ViewerState* state, QWidget* parent = nullptr);
    ~SurfaceView() override;

    const std::vector<SurfaceMesh>& meshes() const { return meshes_; }
    // The decimated meshes drawn while the view is rotated or zoomed (decimateMeshes to at most
    // kInteractionTriangles); the full ones are drawn once the mouse is released / the wheel
    // rests.
    static constexpr size_t kInteractionTriangles = 100000;
    // Edited labels are re-meshed once the edits pause this long (not at every stroke step).
    static constexpr int kRemeshDelayMs = 100;
    // Their decimated meshes follow once the view has been idle this long (until then rotating
    // shows the previous ones).
    static constexpr int kCoarseDelayMs = 300;
    const std::vector<SurfaceMesh>& interactionMeshes() const { return coarse_meshes_; }
    bool interacting() const { return interacting_; }
    // Off: draw the full meshes while interacting too (the bench compares both).
    void setDecimateWhileInteracting(bool on) { decimate_while_interacting_ = on; }
    bool building() const { return building_; }
    // Meshes built since the view was made, and for which labels the last build was (empty:
    // all); tests check that an edit re-meshes only its labels. Edited labels are re-meshed
    // together, each only around the voxels that changed where its mesh allows
    // (patchLabelSurface), else whole.
    int meshBuilds() const { return mesh_builds_; }
    const std::vector<int>& lastBuildLabels() const { return last_build_labels_; }
    // How many labels of the last build were patched rather than re-meshed whole.
    int lastBuildPatched() const { return last_build_patched_; }
    // Edits not yet in the meshes (waiting for the pause or for the build in flight).
    bool editsPending() const { return !pending_edits_.empty() || remesh_timer_->isActive(); }
    // Seconds the last build took (worker thread), for the bench.
    double lastBuildSeconds() const { return last_build_seconds_; }
    // Its worker thread's CPU time (what it would take on an idle machine).
    double lastBuildCpuSeconds() const { return last_build_cpu_seconds_; }
    void resetCamera();
    // Renders a frame at the view's size in device pixels (what the next paint shows).
    QImage renderFrame();
    // The OpenGL version and renderer, or why OpenGL failed.
    const QString& glInfo() const { return gl_info_; }

  signals:
    void meshesReady(int count);

  protected:
    void paintEvent(QPaintEvent* event) override;
    void showEvent(QShowEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;

  private:
    struct GpuMesh {
        int label = 0;
        QOpenGLBuffer vertices{QOpenGLBuffer::VertexBuffer};
        QOpenGLBuffer indices{QOpenGLBuffer::IndexBuffer};
        int index_count = 0;
    };
    struct MeshSet;
    struct EditJob;
    void onLabelMapChanged();
    // Every label's surface (a new label map, or shown after changes while hidden).
    void requestMeshes();
    // Runs `work` (label map, progress -> Result<MeshSet>) on a worker thread on a copy of the
    // label map's handle; the result replaces the meshes of `only` (empty: all of them).
    template <typename Work>
    void launchBuild(std::vector<int> only, Work work);
    void applyMeshes(const std::vector<int>& only, MeshSet& set);
    // The worker side of remeshEditedLabels: each label patched, or meshed whole.
    static Result<MeshSet> remeshEdits(const Volume& label_map, std::vector<EditJob>& jobs,
                                       const std::vector<LabelInfo>& infos,
                                       const Progress& progress);
    void refreshCoarseMeshes();
    void onLabelVoxelsChanged(const IndexBox& box, const std::vector<int>& labels);
    void remeshEditedLabels();
    bool initializeGl();
    void uploadMeshes();
    void uploadMesh(const SurfaceMesh& mesh, std::vector<std::unique_ptr<GpuMesh>>& gpu);
    void releaseGpu();
    void redraw();
    void setInteracting(bool on);

    ViewerState* state_;
    std::vector<SurfaceMesh> meshes_;
    std::vector<std::unique_ptr<GpuMesh>> gpu_;
    std::vector<SurfaceMesh> coarse_meshes_;
    std::vector<std::unique_ptr<GpuMesh>> gpu_coarse_;
    bool interacting_ = false;
    bool decimate_while_interacting_ = true;
    QTimer* idle_timer_ = nullptr;  // ends a wheel interaction
    QTimer* remesh_timer_ = nullptr;
    bool upload_pending_ = false;
    bool stale_ = true;
    bool building_ = false;
    int generation_ = 0;
    int mesh_builds_ = 0;
    std::vector<int> last_build_labels_;
    // Per edited label, the index boxes changed since its mesh was built (re-meshed after the
    // pause, or after the build in flight).
    std::map<int, std::vector<IndexBox>> pending_edits_;
    int last_build_patched_ = 0;
    bool frame_deferred_ = false;  // new meshes arrived during an edit burst: drawn after it
    // Meshes to upload again (upload_all_: every one), full and decimated.
    std::vector<int> dirty_full_, dirty_coarse_;
    bool upload_all_ = true;
    // Labels whose decimated mesh is older than their mesh (edited since).
    std::vector<int> coarse_stale_;
    bool coarse_building_ = false;
    QTimer* coarse_timer_ = nullptr;
    double last_build_seconds_ = 0;
    double last_build_cpu_seconds_ = 0;
    CancelToken token_;
    QList<QPointer<QThread>> threads_;
    std::unique_ptr<QOpenGLContext> context_;
    std::unique_ptr<QOffscreenSurface> surface_;
    std::unique_ptr<QOpenGLFramebufferObject> fbo_;
    std::unique_ptr<QOpenGLShaderProgram> program_;
    bool gl_tried_ = false;
    bool gl_ready_ = false;
    QString gl_info_;
    QImage frame_;
    bool frame_dirty_ = true;
    QQuaternion rotation_;
    float distance_ = 500.f;
    float radius_ = 100.f;
    QVector3D centre_;
    QPoint last_mouse_;
};

}  // namespace voxseg::ui
