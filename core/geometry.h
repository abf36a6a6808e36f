// Geometry of a 3D image grid in voxseg's one coordinate convention:
// LPS patient coordinates in millimetres, ITK conventions.
//
//   physical = origin + direction * diag(spacing) * index
//
// `direction` is row-major 3x3; its COLUMNS are the unit vectors of the i, j, k index axes in LPS
// (ITK's Direction matrix). `origin` is the centre of voxel (0,0,0). NIfTI writers convert to RAS
// (negate x and y) at the file boundary only. Plain value type, ITK-free, thread-compatible.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace voxseg {

using Vec3 = std::array<double, 3>;
using Mat3 = std::array<double, 9>;  // row-major

struct Geometry {
    std::array<int64_t, 3> size{0, 0, 0};  // voxels along i, j, k
    Vec3 spacing{1.0, 1.0, 1.0};           // mm
    Vec3 origin{0.0, 0.0, 0.0};            // mm, LPS, centre of voxel (0,0,0)
    Mat3 direction{1, 0, 0, 0, 1, 0, 0, 0, 1};

    int64_t voxelCount() const { return size[0] * size[1] * size[2]; }
    // Unit vector of index axis `axis` (0=i, 1=j, 2=k) in LPS.
    Vec3 axisDirection(int axis) const {
        return {direction[axis], direction[3 + axis], direction[6 + axis]};
    }
    Vec3 indexToPhysical(const Vec3& index) const;
    Vec3 physicalToIndex(const Vec3& point) const;
    // Spacing finite and > 0, origin and direction finite: what ITK needs to invert the
    // index-to-physical matrix (it aborts on a non-finite one). A damaged header can give less.
    bool isFinite() const;

    // Three letters naming the patient direction each index axis points TO (nibabel/dcm2niix
    // convention, not ITK's "from" codes): an axial stack whose rows run to the patient's left,
    // columns posterior and slices superior is "LPS". Oblique axes get their dominant letter.
    std::string orientationCode() const;
    // Largest angle (degrees) between any index axis and its nearest patient axis.
    double obliquityDegrees() const;

    // Geometry equality within tolerances (mm for origin, relative for spacing, absolute for
    // direction cosines).
    bool approxEqual(const Geometry& other, double origin_tol_mm = 1e-3, double spacing_rel = 1e-5,
                     double direction_tol = 1e-5) const;
};

// The voxels an axis of `size` voxels has in the continuous index span [lo, hi]: first =
// max(0, floor(lo)), last = min(size - 1, ceil(hi)); first > last when the span misses the axis or
// is not a number. Safe for any double (a hostile journal's 1e25 mm): the span is clipped before
// it becomes an integer.
struct VoxelSpan {
    int64_t first = 0;
    int64_t last = -1;
    bool empty() const { return first > last; }
};
VoxelSpan voxelSpan(double lo, double hi, int64_t size);

Mat3 invert(const Mat3& m);
Vec3 multiply(const Mat3& m, const Vec3& v);
Vec3 cross(const Vec3& a, const Vec3& b);
double dot(const Vec3& a, const Vec3& b);
double norm(const Vec3& a);

}  // namespace voxseg
