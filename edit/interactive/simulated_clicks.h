// A simulated user of promptable segmentation, for benches and tests (and the rule
// tools/eval_interactive.py and tools/train_interactive.py use): the first click is an include
// point at the deepest voxel of the structure (farthest from its border); every later click is at
// the deepest voxel of the largest error component of the current mask, an include point on a
// missed voxel and an exclude point on a wrong one. Distances are Euclidean in voxels to the
// nearest voxel outside the region, the volume's outside counting as outside (scipy's
// distance_transform_edt of the zero-padded mask); components are 6-connected (scipy's
// ndimage.label); ties go to the first voxel in (z, y, x) order. Pure functions, thread-safe.
#pragma once

#include "core/status.h"
#include "edit/interactive/session_state.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace voxseg::edit::interactive {

struct SimulatedClick {
    Index3 voxel{};
    bool include = true;
};

// The deepest voxel of the nonzero voxels of `mask` (shape (z, y, x)); nullopt when it has none.
std::optional<Index3> deepestVoxel(const std::vector<uint8_t>& mask, Index3 shape);

// The next corrective click for `prediction` against `truth` (both nonzero = inside); nullopt
// when they agree everywhere.
std::optional<SimulatedClick> correctiveClick(const std::vector<uint8_t>& prediction,
                                              const std::vector<uint8_t>& truth, Index3 shape);

// 2|A and B| / (|A| + |B|) over nonzero voxels; 1 when both are empty.
double diceScore(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b);

class InteractiveSession;

// The simulated user on `truth` (the session's shape, nonzero = in), from the session's current
// object (reset it first for a new one): the first click at the deepest voxel, then corrective
// clicks, `clicks` in all or fewer when the mask equals the truth. The clicks and the Dice after
// each come back. A structure with no voxel is kInvalidArgument.
struct SimulatedSession {
    std::vector<SimulatedClick> clicks;
    std::vector<double> dice;
};
Result<SimulatedSession> simulateClicks(InteractiveSession& session,
                                        const std::vector<uint8_t>& truth, int clicks);
// The same clicks again as points (another precision of the network, say).
Status replayClicks(InteractiveSession& session, const std::vector<SimulatedClick>& clicks);

}  // namespace voxseg::edit::interactive
