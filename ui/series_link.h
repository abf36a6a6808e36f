// Linked crosshairs across the open series: while linked, moving the crosshair or scrolling a
// slice in one series moves every other to the same patient position (LPS mm), each through its
// own origin, spacing and direction (core/linked_position.h): the nearest voxel, clamped and
// marked outside (ViewerState::cursorOutside: no crosshair there) when the point is beyond that
// image. Unlinked, each series scrolls alone. The point keeps its sub-voxel position along the
// axes a move did not change, so scrolling one series does not snap the others in-plane.
// Watches ViewerState::cursorChanged of each member; GUI thread only.
#pragma once

#include "core/linked_position.h"

#include <QObject>
#include <QPointer>

#include <optional>
#include <vector>

namespace voxseg::ui {

class ViewerState;

class SeriesLink : public QObject {
    Q_OBJECT

  public:
    explicit SeriesLink(QObject* parent = nullptr);

    void add(ViewerState* state);
    void remove(ViewerState* state);
    bool linked() const { return linked_; }
    // On: every other series goes to `from`'s crosshair (when given). Off: the outside marks are
    // cleared (each series shows its own crosshair).
    void setLinked(bool linked, ViewerState* from = nullptr);
    // Moves every other series to `from`'s crosshair (a series just opened beside) when linked.
    void follow(ViewerState* from);
    // The shared patient point (LPS mm) of the last linked move; nullopt before one.
    std::optional<Vec3> point() const { return point_; }

  signals:
    void linkedChanged(bool linked);

  private:
    struct Member {
        QPointer<ViewerState> state;
        VoxelIndex last{0, 0, 0};     // its cursor as last seen
        const void* image = nullptr;  // its image as last seen: a new one is no move
    };
    void onCursorChanged(ViewerState* state);
    void moveOthers(const Member& from);
    Member* find(ViewerState* state);

    std::vector<Member> members_;
    std::optional<Vec3> point_;
    bool linked_ = true;
    bool moving_ = false;
};

}  // namespace voxseg::ui
