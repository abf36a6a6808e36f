// One view's panel in a views grid (ui/view_grid.h): an MPR view of a ViewerState and its
// vertical slice slider side by side. The slider sets the view's slice (it takes no keyboard
// focus: keys go to the views), a double-click on the view maximises the panel in its grid (or
// restores the layout). The window's own views (MainWindow) and a series' views beside them
// (ui/series_pane.h) are made by it; the caller names the widgets and keeps the slider's range
// and value in step with the state. GUI thread only.
#pragma once

#include "ui/mpr_slice.h"

class QSlider;
class QWidget;

namespace voxseg::ui {

class MprView;
class ViewerState;
class ViewGrid;

struct ViewPanel {
    QWidget* panel = nullptr;  // a child of the grid, holding the view and the slider
    MprView* view = nullptr;
    QSlider* slider = nullptr;
};

ViewPanel makeViewPanel(ViewerState* state, ViewAxis axis, ViewGrid* grid);

}  // namespace voxseg::ui
