// The 3D view: the label map's surfaces (ui/surface_mesh.h, built on a worker thread whenever
// the label map changes and the view is shown), lit by a headlight from both sides, in the
// labels' table colours and visibility. Starts looking at the patient's front (superior up,
// patient left on the right); left drag rotates, wheel zooms, R or double-click resets.
// createSurfaceView() returns a SurfaceView (QOpenGLWidget) when an OpenGL context can be created
// (also Mesa's software rasteriser, LIBGL_ALWAYS_SOFTWARE=1 under Xvfb), else a plain widget
// saying why (QT_QPA_PLATFORM=offscreen has no OpenGL). GUI thread only.
#pragma once

#include "core/progress.h"
#include "ui/surface_mesh.h"

#include <QMatrix4x4>
#include <QOpenGLBuffer>
#include <QOpenGLFunctions>
#include <QOpenGLShaderProgram>
#include <QOpenGLWidget>
#include <QPointer>
#include <QQuaternion>
#include <QThread>
#include <QVector3D>

#include <memory>
#include <vector>

namespace voxseg::ui {

class ViewerState;

// Whether this process can create an OpenGL context; `why` says why not.
bool openGlAvailable(QString* why = nullptr);

QWidget* createSurfaceView(ViewerState* state, QWidget* parent);

class SurfaceView : public QOpenGLWidget, protected QOpenGLFunctions {
    Q_OBJECT

  public:
    SurfaceView(ViewerState* state, QWidget* parent = nullptr);
    ~SurfaceView() override;

    const std::vector<SurfaceMesh>& meshes() const { return meshes_; }
    bool building() const { return building_; }
    void resetCamera();

  signals:
    void meshesReady(int count);

  protected:
    void initializeGL() override;
    void paintGL() override;
    void showEvent(QShowEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
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
    void onLabelMapChanged();
    void requestMeshes();
    void uploadMeshes();
    void releaseGpu();

    ViewerState* state_;
    std::vector<SurfaceMesh> meshes_;
    std::vector<std::unique_ptr<GpuMesh>> gpu_;
    bool upload_pending_ = false;
    bool stale_ = true;
    bool building_ = false;
    int generation_ = 0;
    CancelToken token_;
    QList<QPointer<QThread>> threads_;
    QOpenGLShaderProgram program_;
    bool gl_ready_ = false;
    QString gl_error_;
    QQuaternion rotation_;
    float distance_ = 500.f;
    float radius_ = 100.f;
    QVector3D centre_;
    QPoint last_mouse_;
};

}  // namespace voxseg::ui
