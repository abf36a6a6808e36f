// Agreement of two segmentations of one image, label by label: Dice, and the volume of each and
// their difference (e.g. a model's segmentation against a reader's, or two models'). For the
// viewer's "Compare with segmentation..." and any front end; tools/eval_model.py's dice() is the
// same formula in Python. Plain functions; thread-safe (concurrent reads of the volumes).
#pragma once

#include "core/status.h"
#include "core/volume.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace voxseg::edit {

struct LabelAgreement {
    int label = 0;
    int64_t voxels_a = 0, voxels_b = 0;
    int64_t voxels_both = 0;  // the label in a and in b
    double dice = 0.0;        // 2 |A and B| / (|A| + |B|); 0 when only one has the label
    double volume_a_ml = 0.0, volume_b_ml = 0.0;
    double volume_difference_ml = 0.0;  // b - a
    // (b - a) / a in percent; unset when a has no voxel of the label.
    std::optional<double> volume_difference_percent;
};

// Every nonzero value found in either map, ascending. `a` and `b` must be integer label maps on
// one grid (size, and origin, spacing and direction within 1e-3 mm / 1e-5): an error naming the
// difference otherwise.
Result<std::vector<LabelAgreement>> compareSegmentations(const Volume& a, const Volume& b);

}  // namespace voxseg::edit
