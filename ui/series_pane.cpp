#include "ui/series_pane.h"

#include "ui/mpr_view.h"
#include "ui/view_panel.h"
#include "ui/viewer_state.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSlider>
#include <QVBoxLayout>

namespace voxseg::ui {

SeriesPane::SeriesPane(ViewerState* state, ViewGrid* grid, const std::array<MprView*, 3>& views,
                       QWidget* parent)
    : QWidget(parent), state_(state), own_(false), grid_(grid), views_(views) {
    setObjectName("series_pane_active");
    buildHeader();
    grid_->setParent(this);
    layout()->addWidget(grid_);
    static_cast<QVBoxLayout*>(layout())->setStretch(1, 1);
}

SeriesPane::SeriesPane(QWidget* parent)
    : QWidget(parent), state_(new ViewerState(this)), own_(true) {
    setObjectName("series_pane");
    buildHeader();
    buildViews();
}

void SeriesPane::buildHeader() {
    auto* column = new QVBoxLayout(this);
    column->setContentsMargins(0, 0, 0, 0);
    column->setSpacing(1);
    header_ = new QWidget(this);
    header_->setObjectName("series_header");
    header_->setAutoFillBackground(true);
    auto* row = new QHBoxLayout(header_);
    row->setContentsMargins(4, 1, 2, 1);
    title_ = new QLabel(header_);
    title_->setObjectName("series_title");
    title_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    // A long title or note is cut, not a minimum width: the series share the area equally.
    title_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    activate_ = new QPushButton("Make active", header_);
    activate_->setToolTip(
        "The label table, edit, measure and model tools act on the active series");
    activate_->setFocusPolicy(Qt::NoFocus);
    close_ = new QPushButton("Close", header_);
    close_->setToolTip("Close this series (the others stay open)");
    close_->setFocusPolicy(Qt::NoFocus);
    row->addWidget(title_, 1);
    row->addWidget(activate_);
    row->addWidget(close_);
    column->addWidget(header_);
    header_->hide();
    connect(activate_, &QPushButton::clicked, this, &SeriesPane::activateRequested);
    connect(close_, &QPushButton::clicked, this, &SeriesPane::closeRequested);
    connect(state_, &ViewerState::imageChanged, this, &SeriesPane::updateHeader);
    updateHeader();
}

void SeriesPane::buildViews() {
    summary_ = new QLabel(this);
    summary_->hide();  // shown by the grid in 2x2
    summary_->setObjectName("series_summary");
    summary_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
    summary_->setMargin(8);
    summary_->setWordWrap(true);
    summary_->setStyleSheet("QLabel { background: black; color: rgb(220, 220, 220); }");
    grid_ = new ViewGrid(
        [this](QWidget* parent) {
            summary_->setParent(parent);
            return summary_;
        },
        this);
    grid_->setObjectName("views_beside");
    std::array<QWidget*, 3> panels{};
    for (int a = 0; a < 3; ++a) {
        const auto axis = static_cast<ViewAxis>(a);
        const ViewPanel p = makeViewPanel(state_, axis, grid_);
        p.view->setObjectName(QString("mpr_beside_") + viewAxisName(axis));
        views_[a] = p.view;
        sliders_[a] = p.slider;
        panels[a] = p.panel;
    }
    grid_->setPanels(panels);
    layout()->addWidget(grid_);
    static_cast<QVBoxLayout*>(layout())->setStretch(1, 1);
    auto sync = [this] {
        for (int a = 0; a < 3; ++a) {
            const QSignalBlocker block(sliders_[a]);
            const auto axis = static_cast<ViewAxis>(a);
            const bool image = state_->hasImage();
            sliders_[a]->setRange(0, image ? static_cast<int>(state_->frame(axis).depth - 1) : 0);
            if (image) sliders_[a]->setValue(static_cast<int>(state_->slice(axis)));
        }
        updateSummary();
    };
    connect(state_, &ViewerState::imageChanged, this, sync);
    connect(state_, &ViewerState::cursorChanged, this, sync);
    connect(state_, &ViewerState::labelMapChanged, this, &SeriesPane::updateSummary);
}

void SeriesPane::setActive(bool active) {
    active_ = active;
    updateHeader();
}

void SeriesPane::setHeaderShown(bool shown) { header_->setVisible(shown); }

void SeriesPane::setNote(const QString& note) {
    note_ = note;
    updateHeader();
}

void SeriesPane::updateHeader() {
    QString text = (active_ ? "<b>active:</b> " : "") + state_->title().toHtmlEscaped();
    if (!note_.isEmpty()) text += "  <i>(" + note_.toHtmlEscaped() + ")</i>";
    title_->setText(text);
    title_->setToolTip(note_.isEmpty() ? state_->source() : state_->source() + "\n" + note_);
    activate_->setVisible(!active_);
    QPalette pal = header_->palette();
    pal.setColor(QPalette::Window, active_ ? QColor(60, 110, 170) : QColor(70, 70, 70));
    pal.setColor(QPalette::WindowText, Qt::white);
    header_->setPalette(pal);
    title_->setPalette(pal);
}

void SeriesPane::updateSummary() {
    if (!summary_ || !state_->hasImage()) return;
    const Geometry g = state_->image().geometry();
    const auto c = state_->cursor();
    const Vec3 p = g.indexToPhysical(
        {static_cast<double>(c[0]), static_cast<double>(c[1]), static_cast<double>(c[2])});
    QString text = QString(
                       "<b>%1</b><br>%2 x %3 x %4 voxels, %5 x %6 x %7 mm, %8<br><br>"
                       "crosshair: voxel (%9, %10, %11)<br>LPS (%12, %13, %14) mm")
                       .arg(state_->title().toHtmlEscaped())
                       .arg(g.size[0])
                       .arg(g.size[1])
                       .arg(g.size[2])
                       .arg(g.spacing[0], 0, 'g', 4)
                       .arg(g.spacing[1], 0, 'g', 4)
                       .arg(g.spacing[2], 0, 'g', 4)
                       .arg(QString::fromStdString(g.orientationCode()))
                       .arg(c[0])
                       .arg(c[1])
                       .arg(c[2])
                       .arg(p[0], 0, 'f', 1)
                       .arg(p[1], 0, 'f', 1)
                       .arg(p[2], 0, 'f', 1);
    if (state_->cursorOutside())
        text += "<br><font color='#ff9640'>the linked point is outside this series</font>";
    if (state_->hasLabelMap()) text += QString("<br><br>%1 labels").arg(state_->labels().size());
    summary_->setText(text);
}

}  // namespace voxseg::ui
