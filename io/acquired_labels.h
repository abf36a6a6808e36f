// Label maps on the acquired images. A tilted, unevenly spaced or gapped DICOM series is loaded
// onto a regular grid (io/dicom_resample.h); a PACS viewer overlays results on the images as
// they were acquired. labelsOnAcquiredImages() maps a label map on the loaded grid back onto
// every source slice (nearest label at each acquired pixel centre), so DICOM outputs (SEG,
// RTSTRUCT) can reference each source image with its own plane position and orientation.
// labelsOnGrid() is the inverse (nearest acquired pixel for each grid voxel), for results that
// arrive on the acquired images (SEG frames, RTSTRUCT contours) and are shown on the grid.
// For a series that was not resampled both are the identity and share the label map's buffer.
// Plain value types; functions are reentrant.
#pragma once

#include "core/geometry.h"
#include "core/status.h"
#include "core/volume.h"
#include "io/dicom_series.h"

#include <cstdint>
#include <vector>

namespace voxseg::io {

// Where the acquired images of one series lie: all slices share matrix, orientation and pixel
// spacing (a SeriesCandidate guarantees it), each has its own position.
struct AcquiredPlanes {
    int columns = 0;
    int rows = 0;
    Vec3 row_dir{1, 0, 0};         // ImageOrientationPatient, first triplet (along a row)
    Vec3 col_dir{0, 1, 0};         // second triplet (down a column)
    double column_spacing = 1;     // mm between columns (PixelSpacing[1])
    double row_spacing = 1;        // mm between rows (PixelSpacing[0])
    double slice_thickness = 0;    // nominal (median step along the normal), mm
    std::vector<SliceRef> slices;  // plane k = source slice k (SeriesCandidate order)

    static AcquiredPlanes of(const SeriesCandidate& series);
    size_t planeCount() const { return slices.size(); }
    // Patient position (mm, LPS) of pixel (column x, row y) of plane k.
    Vec3 pixelToPhysical(size_t k, double x, double y) const;
};

struct AcquiredLabels {
    AcquiredPlanes planes;
    // columns x rows x planes, uint8 or uint16 as the label map; plane k lies on source slice k.
    // Its Geometry is the series' nominal one (exact only when !resampled): use `planes` for
    // positions.
    Volume labels;
    bool resampled = false;  // false: `labels` is the label map itself (same buffer)

    int64_t planeSize() const { return int64_t{planes.columns} * planes.rows; }
    // Plane k's labels; T must be the volume's type (uint8_t or uint16_t).
    template <typename T>
    const T* plane(size_t k) const {
        const T* base = labels.data<T>();
        return base ? base + static_cast<int64_t>(k) * planeSize() : nullptr;
    }
};

// `label_map` (uint8 or uint16) on the grid `series` was loaded to. Each acquired pixel gets the
// label of the grid voxel nearest to its centre; pixels outside the grid get 0 and are counted
// in the log. threads: 0 = all cores.
Result<AcquiredLabels> labelsOnAcquiredImages(const Volume& label_map,
                                              const SeriesCandidate& series, int threads = 0);

// The inverse: a label map on `grid` whose voxels take the label of the nearest acquired pixel
// (the nearest plane along the slice normal, within one slice thickness; else 0).
Result<Volume> labelsOnGrid(const AcquiredLabels& acquired, const Geometry& grid, int threads = 0);

}  // namespace voxseg::io
