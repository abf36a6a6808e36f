#include "ui/series_area.h"

#include "core/log.h"
#include "ui/mpr_view.h"
#include "ui/series_link.h"
#include "ui/series_pane.h"
#include "ui/viewer_state.h"

#include <QPushButton>
#include <QTimer>

#include <algorithm>

namespace voxseg::ui {

SeriesArea::SeriesArea(ViewerState* active, ViewGrid* grid, const std::array<MprView*, 3>& views,
                       QWidget* parent)
    : QSplitter(Qt::Horizontal, parent), link_(new SeriesLink(this)) {
    setObjectName("series_area");
    setChildrenCollapsible(false);
    setHandleWidth(4);
    auto* pane = new SeriesPane(active, grid, views, this);
    pane->setActive(true);
    panes_.push_back(pane);
    addWidget(pane);
    connectPane(pane);
    link_->add(active);
    // Another series opened over the active one: its frame of reference may differ.
    connect(active, &ViewerState::imageChanged, this, &SeriesArea::updateHeaders);
    updateHeaders();
}

int SeriesArea::seriesCount() const {
    return static_cast<int>(std::count_if(panes_.begin(), panes_.end(),
                                          [](SeriesPane* p) { return p->state()->hasImage(); }));
}

int SeriesArea::activeIndex() const {
    for (size_t i = 0; i < panes_.size(); ++i)
        if (panes_[i]->ownsWindowViews()) return static_cast<int>(i);
    return 0;
}

int SeriesArea::indexOf(const QObject* pane) const {
    for (size_t i = 0; i < panes_.size(); ++i)
        if (panes_[i] == pane) return static_cast<int>(i);
    return -1;
}

std::vector<MprView*> SeriesArea::allViews() const {
    std::vector<MprView*> out;
    for (SeriesPane* p : panes_)
        for (MprView* v : p->views()) out.push_back(v);
    return out;
}

void SeriesArea::connectPane(SeriesPane* pane) {
    connect(pane, &SeriesPane::activateRequested, this, [this, pane] {
        if (const int i = indexOf(pane); i >= 0) emit activateRequested(i);
    });
    connect(pane, &SeriesPane::closeRequested, this, [this, pane] {
        if (const int i = indexOf(pane); i >= 0) emit closeRequested(i);
    });
    // A pane keeps its views and its ViewerState (Make active swaps documents, not panes'
    // states), so the series a view shows is its pane's.
    for (MprView* v : pane->views())
        connect(v, &MprView::hovered, this,
                [this, pane](std::optional<std::array<int64_t, 3>> voxel) {
                    emit viewHovered(pane->state(), voxel);
                });
}

SeriesPane* SeriesArea::addSeries(pipeline::StudyInput study, const QString& source) {
    auto* pane = new SeriesPane(this);
    pane->state()->setStudy(std::move(study), source);
    pane->grid()->setLayoutMode(layout_);
    panes_.push_back(pane);
    addWidget(pane);
    connectPane(pane);
    link_->add(pane->state());
    link_->follow(activePane()->state());
    updateHeaders();
    equalSizes();
    emit seriesChanged();
    return pane;
}

void SeriesArea::makeActive(int index) {
    const int active = activeIndex();
    if (index < 0 || index >= paneCount() || index == active) return;
    SeriesPane* a = panes_[static_cast<size_t>(active)];
    SeriesPane* b = panes_[static_cast<size_t>(index)];
    a->state()->swapDocument(*b->state());
    // The window's views now show b's series: they take b's place on screen, and b (with the
    // previously active series) takes theirs.
    insertWidget(index, a);
    insertWidget(active, b);
    std::swap(panes_[static_cast<size_t>(active)], panes_[static_cast<size_t>(index)]);
    updateHeaders();
    equalSizes();
    log::info("viewer", "series {} of {} is active", index + 1, paneCount());
    emit seriesChanged();
}

bool SeriesArea::closeSeries(int index) {
    if (index < 0 || index >= paneCount() || paneCount() < 2) return false;
    if (index == activeIndex()) makeActive(index + 1 < paneCount() ? index + 1 : index - 1);
    SeriesPane* closing = panes_[static_cast<size_t>(index)];
    link_->remove(closing->state());
    panes_.erase(panes_.begin() + index);
    closing->hide();
    closing->setParent(nullptr);
    closing->deleteLater();
    updateHeaders();
    equalSizes();
    emit seriesChanged();
    return true;
}

void SeriesArea::setLayoutMode(ViewGrid::Layout layout) {
    layout_ = layout;
    // 2x2: each series a column; 1x3: each series a row of three views.
    setOrientation(layout == ViewGrid::Layout::k2x2 ? Qt::Horizontal : Qt::Vertical);
    for (SeriesPane* p : panes_)
        if (!p->ownsWindowViews()) p->grid()->setLayoutMode(layout);
    equalSizes();
}

void SeriesArea::equalSizes() {
    // Equal shares of the area, once a new pane is shown and laid out (its size is 0 before).
    for (int i = 0; i < paneCount(); ++i) setStretchFactor(i, 1);
    auto equal = [this] {
        for (SeriesPane* p : panes_) p->show();
        const int n = static_cast<int>(panes_.size());
        const int total = orientation() == Qt::Horizontal ? width() : height();
        setSizes(QList<int>(n, std::max(1, total / std::max(1, n))));
    };
    equal();
    QTimer::singleShot(0, this, equal);
}

void SeriesArea::updateHeaders() {
    const bool several = panes_.size() > 1;
    // Linking is by scanner mm: series of another frame of reference (a prior study) are not
    // registered to the active one, and the header says so.
    auto frame = [](const SeriesPane* p) {
        const auto& series = p->state()->study().series;
        return series ? series->frame_of_reference_uid : std::string();
    };
    const std::string active_frame = frame(activePane());
    for (SeriesPane* p : panes_) {
        const std::string f = frame(p);
        p->setNote(!p->ownsWindowViews() && !f.empty() && !active_frame.empty() && f != active_frame
                       ? "other frame of reference: linked by scanner mm, not registered"
                       : QString());
        p->setActive(p->ownsWindowViews());
        p->setHeaderShown(several);
        p->closeButton()->setVisible(several);
    }
}

}  // namespace voxseg::ui
