// The status bar's progress of a background task (scan, load, model run): the task, its stage,
// the percentage and, once it can be told, the time left: "segmenting: sliding window  43 % -
// about 12 s left" (the estimate is core/eta.h's, from the time since start() and the
// fraction). GUI thread only.
#pragma once

#include "core/eta.h"

#include <QProgressBar>

namespace voxseg::ui {

class TaskProgressBar : public QProgressBar {
    Q_OBJECT

  public:
    explicit TaskProgressBar(QWidget* parent = nullptr);

    // A new task named `task` ("segmenting"): 0 %, no estimate yet.
    void start(const QString& task);
    // `fraction` in [0, 1] of the task done at `elapsed_s` seconds after its start, in `stage`
    // ("" keeps only the task's name).
    void report(double fraction, const QString& stage, double elapsed_s);
    // Cancel was requested: says so until the task ends.
    void cancelling();

    // What the bar shows (not a QProgressBar format: a stage's "%p" stays as it is).
    QString text() const override { return text_; }

  private:
    void showText(const QString& text);

    QString task_;
    QString text_;
    EtaEstimator eta_;
};

}  // namespace voxseg::ui
