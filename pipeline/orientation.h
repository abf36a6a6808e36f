// Reorientation of a volume to a model's orientation by exact axis permutation and flips (no
// interpolation): "native" keeps the stored array order (nnU-Net), a code such as "RAS" or "LPS"
// makes index axis i/j/k point TO those patient directions (nibabel axcodes, the convention of
// Geometry::orientationCode(); MONAI's Orientationd). Every voxel keeps its LPS position; only
// the array order and the direction matrix change, so the inverse mapping restores the original
// array bit for bit. Plain functions on values; thread-safe.
#pragma once

#include "core/geometry.h"
#include "core/status.h"
#include "core/volume.h"

#include <array>
#include <string>

namespace voxseg::pipeline {

// Output index axis a takes input axis source_axis[a], reversed when flip[a].
struct AxisMapping {
    std::array<int, 3> source_axis{0, 1, 2};
    std::array<bool, 3> flip{false, false, false};

    bool isIdentity() const;
    AxisMapping inverse() const;
};

// The mapping that makes `geometry` point to `code` ("native" or "" -> identity). Oblique volumes
// use the permutation whose axes are closest to the code's (largest sum of |cos|). An invalid code
// is an error naming it.
Result<AxisMapping> orientationMapping(const Geometry& geometry, const std::string& code);

// Geometry of the permuted/flipped grid (same physical voxel centres).
Geometry mapGeometry(const Geometry& geometry, const AxisMapping& mapping);

// Permutes/flips the pixels (any pixel type); VolumeInfo is kept.
Volume applyAxisMapping(const Volume& volume, const AxisMapping& mapping);

// orientationMapping + applyAxisMapping; `mapping_out` (optional) receives the mapping for undoing.
Result<Volume> reorient(const Volume& volume, const std::string& code,
                        AxisMapping* mapping_out = nullptr);

}  // namespace voxseg::pipeline
