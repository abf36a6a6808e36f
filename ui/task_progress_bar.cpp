#include "ui/task_progress_bar.h"

#include <algorithm>
#include <cmath>

namespace voxseg::ui {
namespace {

constexpr int kSteps = 1000;

}  // namespace

TaskProgressBar::TaskProgressBar(QWidget* parent) : QProgressBar(parent) {
    setObjectName("task_progress");
    setRange(0, kSteps);
    setMinimumWidth(260);
    setMaximumWidth(420);
    setTextVisible(true);
}

void TaskProgressBar::start(const QString& task) {
    task_ = task;
    eta_.reset();
    setValue(0);
    showText(task + "  " + QString::fromStdString(progressText(0, std::nullopt)));
}

void TaskProgressBar::report(double fraction, const QString& stage, double elapsed_s) {
    const std::optional<double> left = eta_.update(fraction, elapsed_s);
    setValue(static_cast<int>(std::lround(std::clamp(fraction, 0.0, 1.0) * kSteps)));
    showText(task_ + (stage.isEmpty() ? "" : ": " + stage) + "  " +
             QString::fromStdString(progressText(fraction, left)));
}

void TaskProgressBar::cancelling() { showText(task_ + ": cancelling..."); }

void TaskProgressBar::showText(const QString& text) {
    text_ = text;
    setToolTip(text);
    update();
}

}  // namespace voxseg::ui
