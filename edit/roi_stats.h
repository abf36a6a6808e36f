// Statistics of the image inside a region of interest drawn by a reader: an ellipse on one slice
// (2-D ROI) or a sphere (3-D ROI), both given in patient geometry (LPS mm), so a tilted or
// anisotropic grid gives the true shape. A voxel belongs to the ROI when its centre lies inside
// (ellipse: on the ROI's slice). The intensities are the Volume's stored values (HU for CT, as
// the loaders rescale them). The viewer's measurement tools (ui/measure_tool.h) are a shell over
// this; the per-label statistics of a segmentation are pipeline/statistics.h's.
// Plain functions; thread-safe (concurrent reads of one Volume).
#pragma once

#include "core/geometry.h"
#include "core/status.h"
#include "core/volume.h"

#include <cstdint>

namespace voxseg::edit {

// An ellipse on the slice `slice` of the index axis `slice_axis` (0 = i, 1 = j, 2 = k): its
// centre (on the slice's plane) and two perpendicular semi-axis vectors in that plane, each from
// the centre to the ellipse's edge. All in LPS mm.
struct EllipseRoi {
    int slice_axis = 2;
    int64_t slice = 0;
    Vec3 centre_mm{0, 0, 0};
    Vec3 semi_axis_u_mm{0, 0, 0};
    Vec3 semi_axis_v_mm{0, 0, 0};
};

struct SphereRoi {
    Vec3 centre_mm{0, 0, 0};
    double radius_mm = 0.0;
};

struct RoiStatistics {
    int64_t voxels = 0;  // voxel centres inside the ROI (and inside the image)
    // Intensity of those voxels; all 0 when voxels == 0. sd: population (ddof = 0), as
    // pipeline/statistics.h's per-label SD.
    double mean = 0.0;
    double sd = 0.0;
    double min = 0.0;
    double max = 0.0;
    // The shape's own size (pi * a * b mm^2 for the ellipse, 4/3 pi r^3 / 1000 mL for the
    // sphere; 0 for the other kind) and the voxels' (count x in-plane pixel area, or count x voxel
    // volume), which differ by the partial voxels at the edge.
    double area_mm2 = 0.0;
    double voxel_area_mm2 = 0.0;
    double volume_ml = 0.0;
    double voxel_volume_ml = 0.0;
};

// Errors: an empty image, a slice axis or slice outside the grid, non-finite or non-perpendicular
// semi-axes (more than 1e-3 of their lengths apart), a negative or non-finite radius.
Result<RoiStatistics> ellipseStatistics(const Volume& image, const EllipseRoi& roi);
Result<RoiStatistics> sphereStatistics(const Volume& image, const SphereRoi& roi);

}  // namespace voxseg::edit
