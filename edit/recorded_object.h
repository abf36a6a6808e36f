// RecordedObject: the object an interactive session accepted, as its journal line
// (prompt_accept's "object") records it, so that the label map replays without the model (crash
// recovery, `voxseg edit` without --interactive-model) and a rerun with the model can be checked
// against what the reviewer saw (docs/edit-journal.md, "Interactive prompts").
//
// A mask is grid-bound, unlike the journal's other ops: the record names its grid (the voxel
// counts and the patient positions of the first and the last voxel centre), and replaying it
// onto another grid is refused. The voxels are run lengths over the label map's linear index
// (i fastest): out, in, out, in, ... (a trailing out run left off). Plain value type.
#pragma once

#include "core/geometry.h"
#include "core/status.h"

#include <array>
#include <cstdint>
#include <vector>

namespace voxseg::edit {

struct RecordedObject {
    std::array<int64_t, 3> size{0, 0, 0};  // the grid's voxels along i, j, k
    Vec3 first_mm{0, 0, 0};                // patient position of voxel (0, 0, 0)
    Vec3 last_mm{0, 0, 0};                 // of voxel (size - 1)
    std::vector<int64_t> runs;             // out, in, out, in, ... (lengths >= 0)

    bool operator==(const RecordedObject&) const = default;
};

// Records `mask` (one byte per voxel of `g`, linear index i fastest, nonzero = in).
RecordedObject recordObject(const Geometry& g, const std::vector<uint8_t>& mask);

// The voxel count the runs cover, checked: a negative run or a sum above the grid's voxels is
// kInvalidArgument.
Result<int64_t> checkRuns(const RecordedObject& object);

// The recorded mask (0/1) on `g`. A different grid (voxel counts, or either corner more than
// 0.001 mm away) is kFailedPrecondition naming both grids: the object cannot be placed.
Result<std::vector<uint8_t>> objectMask(const RecordedObject& object, const Geometry& g);

}  // namespace voxseg::edit
