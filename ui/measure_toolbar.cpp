#include "ui/measure_toolbar.h"

#include <QAction>
#include <QActionGroup>
#include <QLabel>

namespace voxseg::ui {

MeasureToolbar::MeasureToolbar(MeasureTool* tool, QWidget* parent)
    : QToolBar("Measure", parent), tool_(tool) {
    setObjectName("measure_toolbar");
    group_ = new QActionGroup(this);
    group_->setExclusionPolicy(QActionGroup::ExclusionPolicy::ExclusiveOptional);
    struct Spec {
        MeasureKind kind;
        const char* text;
        QKeySequence key;
        const char* tip;
    };
    const Spec specs[] = {
        {MeasureKind::kRuler, "Ruler", QKeySequence(Qt::Key_M),
         "drag in a view to measure a distance in mm (kept on its slice)"},
        {MeasureKind::kEllipse, "Ellipse ROI", QKeySequence(Qt::Key_I),
         "drag an ellipse on a slice: mean, SD, min, max, area and voxel count"},
        {MeasureKind::kSphere, "Sphere ROI", QKeySequence(Qt::SHIFT | Qt::Key_I),
         "drag from the centre to the radius: mean, SD, min, max, volume and voxel count"},
    };
    for (const Spec& s : specs) {
        QAction* a = addAction(s.text);
        a->setObjectName(QString("measure_") + measureKindName(s.kind));
        a->setCheckable(true);
        a->setShortcut(s.key);
        a->setToolTip(
            QString("%1 (%2): %3").arg(s.text, s.key.toString(QKeySequence::NativeText), s.tip));
        a->setData(static_cast<int>(s.kind));
        group_->addAction(a);
        actions_ << a;
    }
    connect(group_, &QActionGroup::triggered, this, [this](QAction* a) {
        tool_->setTool(a->isChecked() ? static_cast<MeasureKind>(a->data().toInt())
                                      : MeasureKind::kNone);
    });
    delete_ = addAction("Delete", tool_, [this] { tool_->removeSelected(); });
    delete_->setObjectName("measure_delete");
    delete_->setShortcut(QKeySequence(Qt::Key_Delete));
    delete_->setToolTip(
        "Delete the selected measurement (Delete; click one with a tool to select it)");
    clear_ = addAction("Clear", tool_, [this] { tool_->clear(); });
    clear_->setObjectName("measure_clear");
    clear_->setToolTip("Delete every measurement");
    reading_ = new QLabel(this);
    reading_->setObjectName("measure_reading");
    reading_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    addWidget(reading_);
    connect(tool_, &MeasureTool::toolChanged, this, &MeasureToolbar::sync);
    connect(tool_, &MeasureTool::changed, this, &MeasureToolbar::sync);
    sync();
}

QAction* MeasureToolbar::toolAction(MeasureKind kind) const {
    for (QAction* a : actions_)
        if (a->data().toInt() == static_cast<int>(kind)) return a;
    return nullptr;
}

void MeasureToolbar::sync() {
    for (QAction* a : actions_) a->setChecked(a->data().toInt() == static_cast<int>(tool_->tool()));
    const int s = tool_->selected();
    delete_->setEnabled(s >= 0);
    clear_->setEnabled(!tool_->measurements().empty());
    reading_->setText(s >= 0 ? QString(" %1 %2: %3")
                                   .arg(measureKindName(tool_->measurements()[s].kind))
                                   .arg(s + 1)
                                   .arg(tool_->describe(s))
                             : QString());
}

}  // namespace voxseg::ui
