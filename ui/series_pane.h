// One open series in the views area (ui/series_area.h): a header (the series' title, whether it
// is the active one, "Make active" and "Close") over its axial, coronal and sagittal views.
// The active series' pane wraps the window's own views grid (the views the edit and measure
// tools, the label table and the 3D view act on); a pane beside it owns its ViewerState and
// views (crosshair, scrolling, window/level, zoom and pan, its label map's overlay; no edit
// tools) and, in 2x2, a summary of the series where the active one has its 3D view. The header
// is shown only while several series are open. GUI thread only.
#pragma once

#include "ui/mpr_slice.h"
#include "ui/view_grid.h"

#include <QWidget>

#include <array>

class QLabel;
class QPushButton;
class QSlider;

namespace voxseg::ui {

class MprView;
class ViewerState;

class SeriesPane : public QWidget {
    Q_OBJECT

  public:
    // The active series' pane around the window's grid and views (not owned state).
    SeriesPane(ViewerState* state, ViewGrid* grid, const std::array<MprView*, 3>& views,
               QWidget* parent = nullptr);
    // A pane beside: its own ViewerState (empty until setStudy) and views.
    explicit SeriesPane(QWidget* parent = nullptr);

    ViewerState* state() const { return state_; }
    ViewGrid* grid() const { return grid_; }
    MprView* view(ViewAxis axis) const { return views_[static_cast<int>(axis)]; }
    const std::array<MprView*, 3>& views() const { return views_; }
    // Whether this pane holds the window's own views (the active series' document).
    bool ownsWindowViews() const { return !own_; }

    void setActive(bool active);
    bool isActive() const { return active_; }
    void setHeaderShown(bool shown);
    // A remark after the title (e.g. another frame of reference than the active series').
    void setNote(const QString& note);
    QLabel* titleLabel() const { return title_; }
    QPushButton* activateButton() const { return activate_; }
    QPushButton* closeButton() const { return close_; }

  signals:
    void activateRequested();
    void closeRequested();

  private:
    void buildHeader();
    void buildViews();
    void updateHeader();
    void updateSummary();

    ViewerState* state_;
    bool own_;
    ViewGrid* grid_ = nullptr;
    std::array<MprView*, 3> views_{};
    std::array<QSlider*, 3> sliders_{};
    QWidget* header_ = nullptr;
    QLabel* title_ = nullptr;
    QPushButton* activate_ = nullptr;
    QPushButton* close_ = nullptr;
    QLabel* summary_ = nullptr;  // the 2x2 layout's fourth pane (beside only)
    QString note_;
    bool active_ = false;
};

}  // namespace voxseg::ui
