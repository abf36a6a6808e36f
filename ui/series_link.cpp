#include "ui/series_link.h"

#include "ui/viewer_state.h"

#include <algorithm>

namespace voxseg::ui {

SeriesLink::SeriesLink(QObject* parent) : QObject(parent) {}

SeriesLink::Member* SeriesLink::find(ViewerState* state) {
    for (Member& m : members_)
        if (m.state == state) return &m;
    return nullptr;
}

void SeriesLink::add(ViewerState* state) {
    if (!state || find(state)) return;
    members_.push_back({state, state->cursor(), state->image().base()});
    connect(state, &ViewerState::cursorChanged, this, [this, state] { onCursorChanged(state); });
}

void SeriesLink::remove(ViewerState* state) {
    if (!state) return;
    disconnect(state, nullptr, this, nullptr);
    members_.erase(std::remove_if(members_.begin(), members_.end(),
                                  [&](const Member& m) { return !m.state || m.state == state; }),
                   members_.end());
}

void SeriesLink::setLinked(bool linked, ViewerState* from) {
    if (linked == linked_) {
        if (linked && from) follow(from);
        return;
    }
    linked_ = linked;
    point_.reset();
    if (linked) {
        if (from) follow(from);
    } else {
        moving_ = true;
        for (Member& m : members_)
            if (m.state) m.state->setCursorOutside(false);
        moving_ = false;
    }
    emit linkedChanged(linked);
}

void SeriesLink::follow(ViewerState* from) {
    Member* m = find(from);
    if (!linked_ || !m || !from->hasImage()) return;
    point_ = voxelCentre(from->image().geometry(), from->cursor());
    m->last = from->cursor();
    moveOthers(*m);
}

void SeriesLink::onCursorChanged(ViewerState* state) {
    if (moving_) return;  // a move of ours
    Member* m = find(state);
    if (!m) return;
    const VoxelIndex before = m->last;
    m->last = state->cursor();
    if (m->image != state->image().base()) {
        // A new image (opened, or swapped in by "Make active"): nothing moved.
        m->image = state->image().base();
        point_.reset();
        return;
    }
    if (!linked_ || !state->hasImage()) return;
    const Geometry& g = state->image().geometry();
    point_ = point_ ? movePatientPoint(g, *point_, before, m->last) : voxelCentre(g, m->last);
    moveOthers(*m);
}

void SeriesLink::moveOthers(const Member& from) {
    moving_ = true;
    for (Member& t : members_) {
        if (&t == &from || !t.state || !t.state->hasImage()) continue;
        const GridLocation at = locatePatientPoint(t.state->image().geometry(), *point_);
        t.state->setCursor(at.voxel);
        t.state->setCursorOutside(!at.inside);
        t.last = t.state->cursor();
        t.image = t.state->image().base();
    }
    moving_ = false;
}

}  // namespace voxseg::ui
