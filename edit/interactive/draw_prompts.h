// Scribbles and lassos drawn from points: the full-image masks nnInteractive's scribble and lasso
// prompts take (2.6.0 receives masks; its clients draw them: SlicerNNInteractive paints the
// scribble with a brush on one slice and fills the lasso's closed curve on its slice). The viewer
// and the CLI give points in voxel coordinates (z, y, x), fractional allowed, all on one slice:
// one axis has the same coordinate (after rounding) at every point. docs/interactive.md
// describes the rules. Qt-free; plain functions.
#pragma once

#include "core/status.h"
#include "edit/interactive/prompts.h"
#include "edit/interactive/session_state.h"

#include <array>
#include <cstdint>
#include <vector>

namespace voxseg::edit::interactive {

using Point3 = std::array<double, 3>;  // (z, y, x) voxel coordinates

// The axis the points share (0 = z, 1 = y, 2 = x) and its slice index: the first axis along
// which every point rounds (halves to even) to the same in-image index. kInvalidArgument when
// the points do not lie on one slice or that slice is outside the image.
struct SlicePlane {
    int axis = 0;
    int64_t index = 0;
};
Result<SlicePlane> findSlicePlane(const std::vector<Point3>& points, Index3 shape,
                                  const char* what);

// A polyline on one slice, `thickness` voxels wide: every voxel of the slice whose center lies
// within thickness / 2 of a segment (a single point is a dot), and at least the voxel each point
// falls in. kInvalidArgument: no points, points not on one slice, a point outside the image,
// thickness <= 0.
// The mask covers the drawing's box on its slice (MaskPrompt: a click touches only that much).
Result<MaskPrompt> drawScribble(const std::vector<Point3>& points, double thickness, Index3 shape);

// A closed polygon on one slice, filled: every voxel of the slice whose center is inside the
// polygon (even-odd rule) plus the voxels its edges pass through (so a thin lasso still marks
// voxels). Closed means the last point is the first one again (same voxel after rounding);
// kInvalidArgument otherwise ("the lasso does not close"), and for fewer than 3 distinct
// points, points not on one slice or a point outside the image.
Result<MaskPrompt> drawLasso(const std::vector<Point3>& points, Index3 shape);

}  // namespace voxseg::edit::interactive
