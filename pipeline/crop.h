// Cropping to the nonzero bounding box before inference and pasting results back (nnU-Net's
// crop_to_nonzero): the box holds every voxel that is nonzero in any channel; the nonzero mask
// (holes filled in 3D with itk::BinaryFillholeImageFilter, as nnU-Net does with
// scipy binary_fill_holes) is what the z-score "nonzero" normalisation uses.
// Index boxes are in the volume's (i, j, k) axes. Plain functions; thread-safe.
#pragma once

#include "core/geometry.h"
#include "core/status.h"
#include "core/volume.h"

#include <algorithm>
#include <array>
#include <optional>
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

// Bounding box of the voxels whose value (as int64) `in(value)` accepts, in `volume`'s index
// axes; nullopt when there is none. For label maps and masks (integer pixel types).
template <typename Predicate>
std::optional<CropBox> boxWhere(const Volume& volume, Predicate in) {
    const Geometry& g = volume.geometry();
    std::array<int64_t, 3> lo{g.size}, hi{-1, -1, -1};
    withPixelType(volume.pixelType(), [&](auto tag) {
        using T = decltype(tag);
        const T* p = volume.data<T>();
        for (int64_t k = 0; k < g.size[2]; ++k)
            for (int64_t j = 0; j < g.size[1]; ++j)
                for (int64_t i = 0; i < g.size[0]; ++i)
                    if (in(static_cast<int64_t>(*p++))) {
                        const std::array<int64_t, 3> at{i, j, k};
                        for (size_t a = 0; a < 3; ++a) {
                            lo[a] = std::min(lo[a], at[a]);
                            hi[a] = std::max(hi[a], at[a]);
                        }
                    }
    });
    if (hi[0] < 0) return std::nullopt;
    CropBox box;
    for (size_t a = 0; a < 3; ++a) {
        box.begin[a] = lo[a];
        box.size[a] = hi[a] - lo[a] + 1;
    }
    return box;
}

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
