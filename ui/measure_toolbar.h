// The Measure toolbar: the ruler (M), ellipse ROI (I) and sphere ROI (Shift+I) tools of
// ui/measure_tool.h, "Delete" (the Delete key: the selected measurement) and "Clear" (all), and
// the selected measurement's reading ("23.4 mm", "mean 41.2 HU, SD 3.1, ..."). The tool keys are
// window shortcuts like the edit tools' (a text field with the focus keeps its letters); the
// toolbar follows the tool's signals. GUI thread only.
#pragma once

#include "ui/measure_tool.h"

#include <QToolBar>

class QAction;
class QActionGroup;
class QLabel;

namespace voxseg::ui {

class MeasureToolbar : public QToolBar {
    Q_OBJECT

  public:
    MeasureToolbar(MeasureTool* tool, QWidget* parent = nullptr);
    QAction* toolAction(MeasureKind kind) const;
    QAction* deleteAction() const { return delete_; }
    QLabel* reading() const { return reading_; }

  private:
    void sync();

    MeasureTool* tool_;
    QActionGroup* group_;
    QList<QAction*> actions_;
    QAction* delete_;
    QAction* clear_;
    QLabel* reading_;
};

}  // namespace voxseg::ui
