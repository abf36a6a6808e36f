#include "ui/view_grid.h"

#include <QGridLayout>

#include <algorithm>

namespace voxseg::ui {

ViewGrid::ViewGrid(std::function<QWidget*(QWidget*)> make_surface, QWidget* parent)
    : QWidget(parent), make_surface_(std::move(make_surface)), grid_(new QGridLayout(this)) {
    setObjectName("views");
    grid_->setContentsMargins(0, 0, 0, 0);
    grid_->setSpacing(2);
}

void ViewGrid::setPanels(const std::array<QWidget*, 3>& panels) {
    panels_ = panels;
    setLayoutMode(layout_);
}

void ViewGrid::clearGrid() {
    for (QWidget* w : {panels_[0], panels_[1], panels_[2], surface_})
        if (w) grid_->removeWidget(w);
    for (int i = 0; i < 3; ++i) {
        grid_->setColumnStretch(i, 0);
        grid_->setRowStretch(i, 0);
    }
}

void ViewGrid::setLayoutMode(Layout layout) {
    layout_ = layout;
    maximized_ = nullptr;
    clearGrid();
    if (layout == Layout::k1x3) {
        for (int a = 0; a < 3; ++a) {
            grid_->addWidget(panels_[a], 0, a);
            grid_->setColumnStretch(a, 1);
            panels_[a]->show();
        }
        grid_->setRowStretch(0, 1);
        if (surface_) surface_->hide();
    } else {
        if (!surface_) surface_ = make_surface_(this);
        grid_->addWidget(panels_[0], 0, 0);
        grid_->addWidget(panels_[2], 0, 1);
        grid_->addWidget(panels_[1], 1, 0);
        grid_->addWidget(surface_, 1, 1);
        grid_->setColumnStretch(0, 1);
        grid_->setColumnStretch(1, 1);
        grid_->setRowStretch(0, 1);
        grid_->setRowStretch(1, 1);
        for (QWidget* w : panels_) w->show();
        surface_->show();
    }
    emit arrangementChanged();
}

void ViewGrid::maximize(QWidget* pane) {
    if (!pane ||
        (pane != surface_ && std::find(panels_.begin(), panels_.end(), pane) == panels_.end()))
        return;
    clearGrid();
    for (QWidget* w : {panels_[0], panels_[1], panels_[2], surface_})
        if (w && w != pane) w->hide();
    grid_->addWidget(pane, 0, 0);
    grid_->setColumnStretch(0, 1);
    grid_->setRowStretch(0, 1);
    pane->show();
    maximized_ = pane;
    emit arrangementChanged();
}

void ViewGrid::toggleMaximized(QWidget* pane) {
    if (maximized_ && (!pane || pane == maximized_))
        restore();
    else
        maximize(pane);
}

}  // namespace voxseg::ui
