// The edit toolbar: tools as in 3D Slicer's Segment Editor with its keys (1 paint, 2 erase,
// 3 level tracing, 4 grow, 5 threshold, 8 interactive (ui/interactive_toolbar.h); Esc drops the
// tool when no task runs), one-shot operations (6 fill between slices in the focused view's plane,
// 7 keep the largest island, remove small islands, smoothing, margin), undo Ctrl+Z / redo Ctrl+Y,
// the active label, brush radius in mm (also Shift+wheel in a view), sphere/disk, and the masking
// options (intensity range, overwrite policy, "only background" by default; a range with lower >
// upper is marked and not applied). Everything goes to an EditController; the bar follows its
// signals. GUI thread only.
#pragma once

#include "ui/mpr_slice.h"

#include <QToolBar>

#include <functional>

class QAction;
class QActionGroup;
class QCheckBox;
class QComboBox;
class QDoubleSpinBox;

namespace voxseg::ui {

class EditController;
class ViewerState;

class EditToolbar : public QToolBar {
    Q_OBJECT

  public:
    // `focused_view`: the view a plane-bound one-shot op (fill between slices) acts in.
    EditToolbar(EditController* controller, ViewerState* state,
                std::function<ViewAxis()> focused_view, QWidget* parent = nullptr);

    QAction* toolAction(int tool) const;  // EditTool as int
    QAction* undoAction() const { return undo_; }
    QAction* redoAction() const { return redo_; }
    QAction* fillBetweenAction() const { return fill_between_; }
    QComboBox* labelBox() const { return label_; }
    QDoubleSpinBox* radiusBox() const { return radius_; }
    QCheckBox* sphereBox() const { return sphere_; }
    QCheckBox* rangeBox() const { return range_on_; }
    QDoubleSpinBox* rangeMinBox() const { return range_min_; }
    QDoubleSpinBox* rangeMaxBox() const { return range_max_; }
    QComboBox* overwriteBox() const { return overwrite_; }
    // false while the range fields hold lower > upper (marked red; not applied).
    bool rangeValid() const { return range_valid_; }

  private:
    void buildMasking();  // the range fields and the overwrite box
    void syncFromController();
    void rebuildLabels();
    void pushMasking();

    EditController* edit_;
    ViewerState* state_;
    QActionGroup* tools_;
    QList<QAction*> tool_actions_;
    QAction* undo_;
    QAction* redo_;
    QAction* fill_between_;
    QComboBox* label_;
    QDoubleSpinBox* radius_;
    QCheckBox* sphere_;
    QCheckBox* range_on_;
    QDoubleSpinBox* range_min_;
    QDoubleSpinBox* range_max_;
    QComboBox* overwrite_;
    bool syncing_ = false;
    bool range_valid_ = true;
};

}  // namespace voxseg::ui
