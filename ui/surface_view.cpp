#include "ui/surface_view.h"

#include <QLabel>

namespace voxseg::ui {

QWidget* createSurfaceView(ViewerState*, QWidget* parent) {
    auto* label = new QLabel("3D view: not available in this build yet", parent);
    label->setObjectName("surface_view");
    label->setAlignment(Qt::AlignCenter);
    label->setStyleSheet("background: black; color: gray;");
    return label;
}

}  // namespace voxseg::ui
