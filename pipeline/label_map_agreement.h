// How closely two label maps of one image agree (issue 40: int8 against fp32 on the held-back
// cases of `voxseg model calibrate`): Dice per label and the share of voxels given the same
// value. edit::compareSegmentations computes the same Dice for the viewer, but edit/ links
// pipeline/ (not the other way round) and it has no voxel agreement; this is the one pass both
// figures need. Plain functions; thread-safe.
#pragma once

#include "core/status.h"
#include "core/volume.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace voxseg::pipeline {

struct LabelDice {
    int label = 0;
    int64_t voxels_reference = 0, voxels_candidate = 0, voxels_both = 0;
    // 2 |R and C| / (|R| + |C|); unset when neither map has the label (nothing to compare).
    std::optional<double> dice;
};

struct LabelMapAgreement {
    std::vector<LabelDice> labels;  // in the order asked for
    int64_t voxels = 0;             // every voxel of the grid
    int64_t same = 0;               // voxels with the same value in both maps
    double voxelAgreement() const {
        return voxels ? static_cast<double>(same) / static_cast<double>(voxels) : 1.0;
    }
};

// Compares `candidate` with `reference` for each value in `labels`. Both must be integer label
// maps of one size (kInvalidArgument naming the sizes otherwise).
Result<LabelMapAgreement> compareLabelMaps(const Volume& reference, const Volume& candidate,
                                           const std::vector<int>& labels);

}  // namespace voxseg::pipeline
