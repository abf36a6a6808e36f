// The views area with several series open side by side (a prior study, another sequence): one
// pane per series (ui/series_pane.h), in a splitter: columns in 2x2 (each series its own 2x2),
// rows in 1x3 (each series a row axial | coronal | sagittal). One series is active: its pane
// holds the window's own views, which the label table and the edit, measure and model tools act
// on. "Make active" swaps documents between the active pane and another (ViewerState::
// swapDocument) and swaps the two panes' places, so every series stays where it was on screen
// and only the active mark (and the 3D view) moves. Crosshairs are linked across the series by
// a SeriesLink (ui/series_link.h). GUI thread only.
#pragma once

#include "pipeline/segment.h"
#include "ui/view_grid.h"

#include <QSplitter>

#include <array>
#include <optional>
#include <vector>

namespace voxseg::ui {

class MprView;
class SeriesLink;
class SeriesPane;
class ViewerState;

class SeriesArea : public QSplitter {
    Q_OBJECT

  public:
    // `active`, `grid` and `views`: the window's document and views (the first series).
    SeriesArea(ViewerState* active, ViewGrid* grid, const std::array<MprView*, 3>& views,
               QWidget* parent = nullptr);

    // Series open (with an image), the active one included. (QSplitter::count() counts the
    // panes, an empty first one included.)
    int seriesCount() const;
    // Panes in screen order (left to right, or top to bottom); the active pane is one of them.
    int paneCount() const { return static_cast<int>(panes_.size()); }
    SeriesPane* pane(int index) const { return panes_.at(static_cast<size_t>(index)); }
    int activeIndex() const;
    SeriesPane* activePane() const { return panes_.at(static_cast<size_t>(activeIndex())); }
    // Every MPR view of every pane.
    std::vector<MprView*> allViews() const;
    SeriesLink* link() const { return link_; }

    // Opens `study` in a new pane after the others; with linked crosshairs it goes to the
    // active series' patient position.
    SeriesPane* addSeries(pipeline::StudyInput study, const QString& source);
    // Makes the series of pane `index` the active one (see above). The caller first settles
    // unsaved edits of the active series: they end.
    void makeActive(int index);
    // Closes the series of pane `index`; the active one hands over to a neighbour first. The
    // last series is not closed (false).
    bool closeSeries(int index);

    void setLayoutMode(ViewGrid::Layout layout);

  signals:
    // From a pane's header; the window decides (unsaved edits, a running task).
    void activateRequested(int index);
    void closeRequested(int index);
    void seriesChanged();  // opened, closed or made active
    // The voxel under the mouse in a view of any pane, of that pane's series (nullopt: the
    // mouse left a view or is outside the image).
    void viewHovered(ViewerState* series, std::optional<std::array<int64_t, 3>> voxel);

  private:
    int indexOf(const QObject* pane) const;
    void connectPane(SeriesPane* pane);
    void updateHeaders();
    // Every pane an equal share of the area (after opening, closing, Make active and a layout
    // change; the handles still move).
    void equalSizes();

    std::vector<SeriesPane*> panes_;
    SeriesLink* link_;
    ViewGrid::Layout layout_ = ViewGrid::Layout::k1x3;
};

}  // namespace voxseg::ui
