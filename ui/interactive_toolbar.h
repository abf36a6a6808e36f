// The Interactive tool's toolbar (issue 38): the model package folder ("Model...", the last one
// remembered), the prompt kind (P point, B box, S scribble, L lasso: each also selects the
// Interactive tool), include/exclude (T toggles, as SlicerNNInteractive), AutoZoom, "Next object"
// (E: the object goes into the active label, the next one into a new label), "Reset object"
// (Alt+R), and the latency of the last prompt with the number of prompts waiting. Everything goes
// to the EditController's InteractiveTool; the bar follows its signals. GUI thread only.
#pragma once

#include <QToolBar>

class QAction;
class QActionGroup;
class QCheckBox;
class QLabel;

namespace voxseg::ui {

class EditController;

class InteractiveToolbar : public QToolBar {
    Q_OBJECT

  public:
    explicit InteractiveToolbar(EditController* controller, QWidget* parent = nullptr);

    QAction* modelAction() const { return model_; }
    QAction* kindAction(int kind) const;  // PromptKind as int
    QAction* includeAction() const { return include_; }
    QAction* nextObjectAction() const { return next_; }
    QAction* resetAction() const { return reset_; }
    QCheckBox* autoZoomBox() const { return autozoom_; }
    QLabel* latencyLabel() const { return latency_; }
    QLabel* modelLabel() const { return model_label_; }
    // Shown while the image lies outside the model's intended input; the findings as tooltip.
    QLabel* inputWarning() const { return input_warning_; }
    bool inputWarningShown() const { return input_action_->isVisible(); }

  private:
    void buildKinds();
    void sync();

    EditController* edit_;
    QAction* model_;
    QActionGroup* kinds_;
    QList<QAction*> kind_actions_;
    QAction* include_;
    QAction* next_;
    QAction* reset_;
    QCheckBox* autozoom_;
    QLabel* model_label_;
    QLabel* input_warning_;
    QAction* input_action_;
    QLabel* latency_;
};

}  // namespace voxseg::ui
