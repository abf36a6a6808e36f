// The prompts of the viewer's Interactive tool as plain data, Qt-free: what a click or a drag in
// one view gives (a point, a box on the view's slice, a scribble, a closed lasso) in the
// session's voxel coordinates (z, y, x), and how an accepted object becomes edit-library strokes.
// The drawing of a prompt is the session's (edit/interactive/draw_prompts.h); this only turns
// mouse positions into its arguments.
#pragma once

#include "core/status.h"
#include "edit/interactive/draw_prompts.h"
#include "edit/interactive/prompts.h"

#include <cstdint>
#include <vector>

namespace voxseg::ui {

using edit::interactive::Index3;
using edit::interactive::Point3;  // (z, y, x) voxel coordinates

enum class PromptKind { kPoint, kBox, kScribble, kLasso };
const char* promptKindName(PromptKind kind);  // "point", "box", "scribble", "lasso"

// One prompt as the mouse gave it: `points` in voxel coordinates (z, y, x), all on the slice
// `slice_axis` (0 = z, 1 = y, 2 = x) of the view it was drawn in. Point: one point. Box: the
// press and release corners. Scribble: the drag's points. Lasso: the drag's points, closed by
// closedLasso() before it is sent.
struct Prompt {
    PromptKind kind = PromptKind::kPoint;
    bool include = true;
    int slice_axis = 0;
    std::vector<Point3> points;
};

// Every point moved onto the first point's slice (rounded halves to even, as the session rounds):
// a drag is drawn in one slice even when the mouse slips by a fraction of a voxel.
std::vector<Point3> onFirstSlice(const std::vector<Point3>& points, int slice_axis);

// The box of a drag from corner `a` to corner `b` on the slice `slice_axis`: in-plane from the
// lower to the upper corner's voxel, both included ([round(min), round(max) + 1)); one voxel
// thick along the slice axis, so the session takes it as a 2-D box (bbox2d).
edit::interactive::BoxRequest boxOfDrag(const Point3& a, const Point3& b, int slice_axis);

// The lasso's points closed (the first point appended when the last is not on its voxel).
std::vector<Point3> closedLasso(std::vector<Point3> points);

}  // namespace voxseg::ui
