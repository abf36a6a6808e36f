#include "ui/edit_toolbar.h"

#include "ui/edit_controller.h"
#include "ui/viewer_state.h"

#include <QAction>
#include <QActionGroup>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QInputDialog>
#include <QLabel>
#include <QMenu>
#include <QToolButton>

namespace voxseg::ui {
namespace {

constexpr const char* kRangeMinTip = "Lower bound of the intensity range (inclusive)";
constexpr const char* kRangeMaxTip = "Upper bound of the intensity range (inclusive)";

}  // namespace

EditToolbar::EditToolbar(EditController* controller, ViewerState* state,
                         std::function<ViewAxis()> focused_view, QWidget* parent)
    : QToolBar("Edit", parent), edit_(controller), state_(state) {
    setObjectName("edit_toolbar");
    tools_ = new QActionGroup(this);
    tools_->setExclusionPolicy(QActionGroup::ExclusionPolicy::ExclusiveOptional);
    struct ToolSpec {
        EditTool tool;
        const char* text;
        Qt::Key key;
        const char* tip;
    };
    const ToolSpec specs[] = {
        {EditTool::kPaint, "Paint", Qt::Key_1, "paint the active label with the brush"},
        {EditTool::kErase, "Erase", Qt::Key_2, "erase with the brush"},
        {EditTool::kLevelTrace, "Level trace", Qt::Key_3,
         "the region at least as bright as the pixel under the mouse, in the slice, is "
         "previewed; a click paints it, Esc cancels"},
        {EditTool::kGrow, "Grow", Qt::Key_4,
         "the flood fill from the voxel under the mouse within the intensity range (or its "
         "value +- 100) is previewed; a click paints it, Esc cancels"},
        {EditTool::kThreshold, "Threshold", Qt::Key_5,
         "the voxels in the intensity range are previewed in each view's slice; a click paints "
         "them (in the slice, or 3D with Sphere), Esc cancels"},
        {EditTool::kInteractive, "Interactive", Qt::Key_8,
         "promptable segmentation with an interactive model (the Interactive toolbar: model, "
         "point / box / scribble / lasso, include or exclude, next object)"},
    };
    for (const ToolSpec& t : specs) {
        QAction* a = addAction(t.text);
        a->setObjectName(QString("tool_") + editToolName(t.tool));
        a->setCheckable(true);
        a->setShortcut(QKeySequence(t.key));
        a->setToolTip(
            QString("%1 (%2): %3").arg(t.text).arg(QKeySequence(t.key).toString(), t.tip));
        a->setData(static_cast<int>(t.tool));
        tools_->addAction(a);
        tool_actions_ << a;
    }
    connect(tools_, &QActionGroup::triggered, this, [this](QAction* a) {
        edit_->setTool(a->isChecked() ? static_cast<EditTool>(a->data().toInt()) : EditTool::kNone);
    });
    addSeparator();

    fill_between_ = addAction("Fill between", this, [this, focused_view] {
        (void)edit_->fillBetweenSlices(focused_view());
    });
    fill_between_->setObjectName("fill_between_slices");
    fill_between_->setShortcut(QKeySequence(Qt::Key_6));
    fill_between_->setToolTip(
        "Fill between slices (6): interpolate the active label's contours over the slices "
        "between them, in the focused view's plane");
    auto* islands = new QToolButton(this);
    islands->setText("Islands");
    islands->setPopupMode(QToolButton::InstantPopup);
    auto* islands_menu = new QMenu(islands);
    QAction* largest =
        islands_menu->addAction("Keep largest", this, [this] { (void)edit_->keepLargestIsland(); });
    largest->setObjectName("keep_largest_island");
    largest->setShortcut(QKeySequence(Qt::Key_7));
    addAction(largest);  // the shortcut works with the menu closed
    islands_menu->addAction("Remove smaller than...", this, [this] {
        bool ok = false;
        const double ml = QInputDialog::getDouble(
            this, "Remove small islands", "Remove islands below (mL):", 1.0, 0.0, 1e6, 3, &ok);
        if (ok) (void)edit_->removeSmallIslands(ml);
    });
    islands->setMenu(islands_menu);
    addWidget(islands);
    auto* smooth = new QToolButton(this);
    smooth->setText("Smooth");
    smooth->setPopupMode(QToolButton::InstantPopup);
    auto* smooth_menu = new QMenu(smooth);
    const std::pair<edit::OpKind, const char*> smoothers[] = {
        {edit::OpKind::kMedian, "Median"},
        {edit::OpKind::kOpening, "Opening (remove extrusions)"},
        {edit::OpKind::kClosing, "Closing (fill holes)"}};
    for (const auto& [kind, name] : smoothers)
        smooth_menu->addAction(
            name, this, [this, kind = kind] { (void)edit_->smooth(kind, edit_->radiusMm()); });
    smooth_menu->addSeparator();
    smooth_menu->addAction("Grow margin by the radius", this,
                           [this] { (void)edit_->margin(edit_->radiusMm()); });
    smooth_menu->addAction("Shrink margin by the radius", this,
                           [this] { (void)edit_->margin(-edit_->radiusMm()); });
    smooth->setMenu(smooth_menu);
    smooth->setToolTip("Smoothing and margins of the active label (size: the brush radius)");
    addWidget(smooth);
    addSeparator();
    undo_ = addAction("Undo", this, [this] { (void)edit_->undo(); });
    undo_->setObjectName("undo");
    undo_->setShortcut(QKeySequence::Undo);
    redo_ = addAction("Redo", this, [this] { (void)edit_->redo(); });
    redo_->setObjectName("redo");
    redo_->setShortcuts(
        {QKeySequence(Qt::CTRL | Qt::Key_Y), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Z)});
    addSeparator();

    addWidget(new QLabel(" Label ", this));
    label_ = new QComboBox(this);
    label_->setObjectName("edit_label");
    label_->setMinimumContentsLength(10);
    addWidget(label_);
    addWidget(new QLabel(" Radius ", this));
    radius_ = new QDoubleSpinBox(this);
    radius_->setObjectName("brush_radius");
    radius_->setRange(0.1, 200.0);
    radius_->setDecimals(1);
    radius_->setSuffix(" mm");
    radius_->setToolTip("Brush radius in mm (Shift+wheel in a view)");
    addWidget(radius_);
    sphere_ = new QCheckBox("Sphere", this);
    sphere_->setObjectName("brush_sphere");
    sphere_->setToolTip(
        "Brush: a sphere in 3D instead of a disk in the view's plane; threshold "
        "and grow: in 3D instead of the slice");
    addWidget(sphere_);
    addSeparator();
    buildMasking();

    connect(label_, &QComboBox::activated, this, [this](int i) {
        if (!syncing_) edit_->setActiveLabel(label_->itemData(i).toInt());
    });
    connect(radius_, &QDoubleSpinBox::valueChanged, this, [this](double v) {
        if (!syncing_) edit_->setRadiusMm(v);
    });
    connect(sphere_, &QCheckBox::toggled, this, [this](bool on) {
        if (!syncing_) edit_->setSphere(on);
    });
    connect(edit_, &EditController::toolChanged, this, &EditToolbar::syncFromController);
    connect(edit_, &EditController::historyChanged, this, &EditToolbar::syncFromController);
    connect(state_, &ViewerState::labelTableChanged, this, &EditToolbar::rebuildLabels);
    connect(state_, &ViewerState::labelMapChanged, this, &EditToolbar::rebuildLabels);
    connect(state_, &ViewerState::imageChanged, this, &EditToolbar::syncFromController);
    rebuildLabels();
    syncFromController();
}

void EditToolbar::buildMasking() {
    range_on_ = new QCheckBox("Range", this);
    range_on_->setObjectName("mask_range");
    range_on_->setToolTip("Masking: edit only voxels whose intensity is in the range");
    addWidget(range_on_);
    range_min_ = new QDoubleSpinBox(this);
    range_max_ = new QDoubleSpinBox(this);
    for (QDoubleSpinBox* b : {range_min_, range_max_}) {
        b->setRange(-1e6, 1e6);
        b->setDecimals(0);
        // A value counts when it is entered (Enter, leaving the field, the arrows), not at
        // every digit typed: "2" on the way to "250" is not a range.
        b->setKeyboardTracking(false);
        addWidget(b);
    }
    range_min_->setObjectName("mask_min");
    range_max_->setObjectName("mask_max");
    range_min_->setToolTip(kRangeMinTip);
    range_max_->setToolTip(kRangeMaxTip);
    range_min_->setValue(-100);
    range_max_->setValue(300);
    overwrite_ = new QComboBox(this);
    overwrite_->setObjectName("mask_overwrite");
    overwrite_->setToolTip(
        "Masking: which voxels painting may change (default: only background, so other labels "
        "are never painted over)");
    addWidget(overwrite_);
    for (QObject* o : {static_cast<QObject*>(range_on_), static_cast<QObject*>(range_min_),
                       static_cast<QObject*>(range_max_)}) {
        if (auto* c = qobject_cast<QCheckBox*>(o))
            connect(c, &QCheckBox::toggled, this, &EditToolbar::pushMasking);
        else
            connect(qobject_cast<QDoubleSpinBox*>(o), &QDoubleSpinBox::valueChanged, this,
                    &EditToolbar::pushMasking);
    }
    connect(overwrite_, &QComboBox::activated, this, &EditToolbar::pushMasking);
}

QAction* EditToolbar::toolAction(int tool) const {
    for (QAction* a : tool_actions_)
        if (a->data().toInt() == tool) return a;
    return nullptr;
}

void EditToolbar::pushMasking() {
    if (syncing_) return;
    // Lower above upper is refused, and the fields say so (the range in force stays).
    range_valid_ = range_min_->value() <= range_max_->value();
    const QString why = QString("lower %1 is above upper %2: the range is not applied")
                            .arg(range_min_->value())
                            .arg(range_max_->value());
    for (QDoubleSpinBox* b : {range_min_, range_max_})
        b->setStyleSheet(range_valid_ ? QString() : "QDoubleSpinBox { background: #f2b8b5; }");
    range_min_->setToolTip(range_valid_ ? kRangeMinTip : why);
    range_max_->setToolTip(range_valid_ ? kRangeMaxTip : why);
    if (range_on_->isChecked())
        (void)edit_->setRange(std::pair{range_min_->value(), range_max_->value()});
    else
        (void)edit_->setRange(std::nullopt);
    edit::Overwrite o;
    const int v = overwrite_->currentData().toInt();
    o.mode = v == -1  ? edit::Overwrite::Mode::kAll
             : v == 0 ? edit::Overwrite::Mode::kBackground
                      : edit::Overwrite::Mode::kLabel;
    o.label = std::max(v, 0);
    edit_->setOverwrite(o);
}

void EditToolbar::rebuildLabels() {
    syncing_ = true;
    label_->clear();
    // Default: only background (a click never paints over another label).
    const int over = overwrite_->currentData().isValid() ? overwrite_->currentData().toInt() : 0;
    overwrite_->clear();
    overwrite_->addItem("Overwrite all", -1);
    overwrite_->addItem("Only background", 0);
    for (const LabelEntry& e : state_->labels()) {
        const QString name = QString("%1 (%2)").arg(QString::fromStdString(e.name)).arg(e.value);
        label_->addItem(name, e.value);
        overwrite_->addItem("Only " + name, e.value);
    }
    if (label_->findData(edit_->activeLabel()) < 0)
        label_->addItem(QString("label %1 (new)").arg(edit_->activeLabel()), edit_->activeLabel());
    overwrite_->setCurrentIndex(std::max(0, overwrite_->findData(over)));
    syncing_ = false;
    syncFromController();
}

void EditToolbar::syncFromController() {
    syncing_ = true;
    const bool image = state_->hasImage();
    for (QAction* a : tool_actions_) {
        a->setEnabled(image);
        a->setChecked(a->data().toInt() == static_cast<int>(edit_->tool()));
    }
    fill_between_->setEnabled(image);
    undo_->setEnabled(edit_->canUndo());
    redo_->setEnabled(edit_->canRedo());
    int i = label_->findData(edit_->activeLabel());
    if (i < 0) {
        label_->addItem(QString("label %1 (new)").arg(edit_->activeLabel()), edit_->activeLabel());
        i = label_->count() - 1;
    }
    label_->setCurrentIndex(i);
    radius_->setValue(edit_->radiusMm());
    sphere_->setChecked(edit_->sphere());
    syncing_ = false;
}

}  // namespace voxseg::ui
