// The 3D view: label surfaces over a dark background, rotate by dragging, zoom by wheel.
// createSurfaceView() returns an OpenGL view (QOpenGLWidget) when an OpenGL context can be
// created (also Mesa's software rasteriser, LIBGL_ALWAYS_SOFTWARE=1 under Xvfb), else a plain
// widget saying why (QT_QPA_PLATFORM=offscreen has no OpenGL). GUI thread only.
#pragma once

#include <QWidget>

namespace voxseg::ui {

class ViewerState;

QWidget* createSurfaceView(ViewerState* state, QWidget* parent);

}  // namespace voxseg::ui
