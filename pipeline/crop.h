// Cropping to the nonzero bounding box before inference and pasting results back (nnU-Net's
// crop_to_nonzero): the box holds every voxel that is nonzero in any channel; the nonzero mask
// (holes filled in 3D with itk::BinaryFillholeImageFilter, as nnU-Net does with
// scipy binary_fill_holes) is what the z-score "nonzero" normalisation uses.
// Index boxes are in the volume's (i, j, k) axes. Plain functions; thread-safe.
#pragma once

#include "core/geometry.h"
#include "core/status.h"
#include "core/volume.h"

#include <array>
#include <vector>

namespace voxseg::pipeline {

struct CropBox {
    std::array<int64_t, 3> begin{0, 0, 0};
    std::array<int64_t, 3> size{0, 0, 0};

    bool isEmpty() const { return size[0] <= 0 || size[1] <= 0 || size[2] <= 0; }
    bool covers(const Geometry& g) const {
        return begin == std::array<int64_t, 3>{0, 0, 0} && size == g.size;
    }
};

// Bounding box of voxels != 0 in any channel (all channels on one grid). An all-zero input
// gives the whole grid (nothing to crop, like nnU-Net).
Result<CropBox> nonzeroBox(const std::vector<Volume>& channels);

// uint8 mask of voxels != 0 in any channel, holes filled in 3D.
Result<Volume> nonzeroMask(const std::vector<Volume>& channels);

// Geometry of the box inside `geometry` (same spacing/direction, shifted origin).
Geometry croppedGeometry(const Geometry& geometry, const CropBox& box);

// Copies the box out (any pixel type).
Result<Volume> crop(const Volume& volume, const CropBox& box);

// Places `cropped` at `box` inside a new volume on `full`, filled with `fill` elsewhere.
Result<Volume> paste(const Volume& cropped, const Geometry& full, const CropBox& box,
                     double fill = 0.0);

}  // namespace voxseg::pipeline
