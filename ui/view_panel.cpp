#include "ui/view_panel.h"

#include "ui/mpr_view.h"
#include "ui/view_grid.h"
#include "ui/viewer_state.h"

#include <QHBoxLayout>
#include <QSlider>

namespace voxseg::ui {

ViewPanel makeViewPanel(ViewerState* state, ViewAxis axis, ViewGrid* grid) {
    ViewPanel p;
    p.panel = new QWidget(grid);
    p.view = new MprView(state, axis, p.panel);
    p.slider = new QSlider(Qt::Vertical, p.panel);
    p.slider->setToolTip(QString("%1 slice").arg(viewAxisName(axis)));
    p.slider->setFocusPolicy(Qt::NoFocus);
    auto* row = new QHBoxLayout(p.panel);
    row->setContentsMargins(0, 0, 0, 0);
    row->setSpacing(1);
    row->addWidget(p.view, 1);
    row->addWidget(p.slider);
    QObject::connect(p.slider, &QSlider::valueChanged, state,
                     [state, axis](int v) { state->setSlice(axis, v); });
    QWidget* panel = p.panel;
    QObject::connect(p.view, &MprView::maximizeRequested, grid,
                     [grid, panel] { grid->toggleMaximized(panel); });
    return p;
}

}  // namespace voxseg::ui
