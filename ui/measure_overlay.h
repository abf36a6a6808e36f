// Drawing the measurements (ui/measure_tool.h) over an MprView, and finding the one under the
// mouse. A ruler or ellipse is drawn only in the view and on the slice it was drawn on, with its
// length or statistics beside it; a sphere wherever the view's plane cuts it (its statistics on
// the slice through its centre, in the view it was drawn in). The selected measurement is drawn
// in yellow with its handles. Widget coordinates come from the view's own mapping
// (MprView::widgetPointOfPatient), so zoom, pan and HiDPI need nothing here. GUI thread only.
#pragma once

#include <QPointF>

class QPainter;

namespace voxseg::ui {

class MprView;
class MeasureTool;

void drawMeasurements(QPainter& p, const MprView& view, const MeasureTool& tool);

struct MeasureHit {
    int index = -1;   // the measurement, -1 none
    int handle = -1;  // 0 / 1: its point a / b (ruler ends, ellipse corners, sphere edge), -1 body
};
// The measurement shown in `view` within a few pixels of `widget_point` (handles first).
MeasureHit measurementAt(const MprView& view, const MeasureTool& tool, const QPointF& widget_point);

}  // namespace voxseg::ui
